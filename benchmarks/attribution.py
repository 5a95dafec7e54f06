"""Attribution: when a block of steps moves, which steps does the budget rule mark `fail`?

    python benchmarks/attribution.py [--nights 300] [--steps 20,100] [--shift 3] [--block 0.2]
        [--families gaussian,ar1] [--seed 0] [--json]

A budget gate whose block, trend or mean statistic fires used to mark every step that statistic covers
as failing, so the "first failing step" every report names was often one that never moved. Since
attribution (gatecfg/budget.py, ATTRIBUTION) it marks only the steps beyond their own noise among them,
plus a lone step that exploded. This measures both codes on the same nights:

* `outside %`: the share of runs that mark at least one step OUTSIDE the moved block as `fail` (the
  target: at most 5%);
* `detect %`: the share of runs in which the gate fails at all (attribution must keep it within 2
  points of the code before it);
* `moved marked %`: among detected runs, the mean share of the block's steps marked `fail`.

Simulated: for each noise family of benchmarks/gate_quality.py and step count, a stream of clean nights;
every night after the first WINDOW is judged against the WINDOW before it with a contiguous block of
`--block` of the steps, at a random position, shifted `--shift` sigma in the family's harmful direction
(sigma: the step's clean night-to-night standard deviation, from gate_quality's SIGMA_NIGHTS nights).

Real: the `lm loss` curves of /work/shared/real/megatron-goldens (one golden file's versions with the
same steps are its nights: 50 files of 6-9 versions at 11-100 steps): each version in turn is tonight,
judged against the file's other versions (newest first; older and newer alike, so 5-8 past nights, not a
replay), with a block shifted up by `--shift` times that step's spread across the other versions, at
REAL_POSITIONS random positions. No version is a clean night: each is a deliberate refresh, which may
move any step, and the rule fails about one version in six unshifted, marking the steps that version
moved. There is no ground truth for which steps a refresh moved, so three rows:

* `every version as tonight`: a step outside the block marked `fail` counts, also one the version itself
  moved (the rule marks it when the version is judged unshifted too). An upper bound on wrong blame, not
  a rate of it: most of it is the refreshes' own changes.
* `every version, marks the shift made`: a step outside the block counts only if the same version judged
  unshifted did not mark it: the blame the shifted block brought onto steps outside it, over every
  version, none left out.
* `versions the rule passes unshifted`: only the tonights the rule sees no change in; there every step
  outside the block that fails is one the shift made fail. (A selection: the versions that moved are left
  out.)

The second and third rows are the false-attribution rate on real curves; `detect %` of every row is the
share of shifted tonights whose gate fails.

"Before" is gatecfg/budget.py as it was just before attribution (`--before REV`; by default the parent of
the commit that introduced `ATTRIBUTION`, found with `git log -S`: the same rule, its lone step included,
without attribution), loaded from `git show` as a module of its own (it imports nothing from gatecfg);
"after" the checked-out one.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_quality import FAMILIES, REPO, SIGMA_NIGHTS, WINDOW, Family

from gatecfg import budget as after

Array = np.ndarray
ALPHA = 0.01
REAL = Path("/work/shared/real/megatron-goldens/versions.jsonl.gz")
REAL_POSITIONS = 5  # block positions per real tonight
Judge = Callable[[Array, Array], tuple[bool, Array]]  # (values, history) -> (fired, failing)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout


def before_attribution() -> str:
    """The revision just before the commit that introduced attribution to gatecfg/budget.py."""
    found = git("log", "-S", "ATTRIBUTION = ", "--format=%H", "--", "gatecfg/budget.py").split()
    return f"{found[-1]}^"


def before_module(revision: str) -> ModuleType:
    """budget.py at `revision` as a module of its own."""
    source = git("show", f"{revision}:gatecfg/budget.py")
    path = Path(tempfile.mkdtemp()) / "budget_main.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("budget_main", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["budget_main"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def judges(before: ModuleType, direction: str, trials: int | None) -> dict[str, Judge]:
    def make(module: ModuleType) -> Judge:
        def judge(values: Array, history: Array) -> tuple[bool, Array]:
            d = module.decide(values, history, direction=direction, alpha=ALPHA, trials=trials)
            return bool(d.failing.any()), np.asarray(d.failing, bool)

        return judge

    return {"before": make(before), "after": make(after)}


class Tally:
    def __init__(self) -> None:
        self.runs = self.detected = self.outside = 0
        self.marked = 0.0

    def add(self, fired: bool, failing: Array, block: Array, already: Array | None = None) -> None:
        """One shifted run; `already`: steps marked without the shift, which do not count as outside."""
        self.runs += 1
        outside = failing & ~block
        self.outside += bool((outside if already is None else outside & ~already).any())
        if fired:
            self.detected += 1
            self.marked += float(failing[block].mean())

    def row(self) -> dict[str, float]:
        return {
            "runs": self.runs,
            "outside": self.outside / max(self.runs, 1),
            "detect": self.detected / max(self.runs, 1),
            "moved_marked": self.marked / max(self.detected, 1),
        }


def _block(rng: np.random.Generator, m: int, share: float) -> Array:
    width = max(2, math.ceil(share * m))
    start = int(rng.integers(0, m - width + 1))
    block = np.zeros(m, bool)
    block[start : start + width] = True
    return block


def simulated(
    family: Family, m: int, nights: int, *, shift: float, share: float, seed: int, before: ModuleType
) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng([seed, m, FAMILIES.index(family)])
    sigma = (family.sigma_from or family.sample)(rng, SIGMA_NIGHTS, m).std(axis=0, ddof=1)
    stream = family.sample(rng, nights + WINDOW, m)
    sign = 1.0 if family.harmful == "up" else -1.0
    rules = judges(before, family.harmful, family.trials)
    tallies = {name: Tally() for name in rules}
    for i in range(nights):
        history = np.ascontiguousarray(stream[i : i + WINDOW][::-1].T)
        block = _block(rng, m, share)
        values = stream[i + WINDOW] + sign * shift * sigma * block
        for name, judge in rules.items():
            tallies[name].add(*judge(values, history), block)
    return {name: t.row() for name, t in tallies.items()}


def real_groups() -> Iterator[tuple[str, Array]]:
    """Per golden file and step set with at least MIN_NIGHTS + 1 versions: versions x steps, oldest first."""
    groups: dict[tuple[str, tuple[int, ...]], list[tuple[int, list[float]]]] = {}
    with gzip.open(REAL, "rt") as lines:
        for line in lines:
            row = json.loads(line)
            curve = row["metrics"].get("lm loss")
            if not curve:
                continue
            steps = tuple(int(s) for s, _ in curve)
            groups.setdefault((row["file"], steps), []).append((row["time"], [float(v) for _, v in curve]))
    for (file, _), versions in sorted(groups.items()):
        values = np.array([v for _, v in sorted(versions)], np.float64)
        if len(values) > after.MIN_NIGHTS and np.isfinite(values).all():
            yield file, values


Rows = dict[str, dict[str, float]]


def real(shift: float, share: float, seed: int, before: ModuleType) -> tuple[Rows, Rows, Rows]:
    """Every tonight's tallies; every tonight's counting only the marks the shift made (outside steps the
    unshifted tonight did not mark); and those of the tonights each rule passes unshifted."""
    rng = np.random.default_rng(seed)
    rules = judges(before, "up", None)
    tallies = {name: Tally() for name in rules}
    made = {name: Tally() for name in rules}
    quiet = {name: Tally() for name in rules}
    for _, versions in real_groups():
        m = versions.shape[1]
        for j in range(len(versions)):
            others = np.delete(versions, j, axis=0)[::-1]  # newest first
            history = np.ascontiguousarray(others.T)
            spread = np.maximum(others.std(axis=0, ddof=1), 1e-6 * np.abs(others).mean(axis=0))
            blocks = [_block(rng, m, share) for _ in range(REAL_POSITIONS)]
            for name, judge in rules.items():
                try:
                    unshifted, marked = judge(versions[j], history)
                    for block in blocks:
                        fired, failing = judge(versions[j] + shift * spread * block, history)
                        tallies[name].add(fired, failing, block)
                        made[name].add(fired, failing, block, already=marked)
                        if not unshifted:
                            quiet[name].add(fired, failing, block)
                except after.UnusableWindowError:
                    continue
    every, shifted, passing = ({name: t.row() for name, t in rows.items()} for rows in (tallies, made, quiet))
    return every, shifted, passing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=300, help="shifted nights per simulated cell")
    parser.add_argument("--steps", default="20,100", help="step counts, comma-separated")
    parser.add_argument("--shift", type=float, default=3.0, help="the block's shift, in sigmas")
    parser.add_argument("--block", type=float, default=0.2, help="the block's share of the steps")
    parser.add_argument("--families", default=",".join(f.name for f in FAMILIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-real", action="store_true", help="skip the megatron-goldens curves")
    parser.add_argument(
        "--before", metavar="REV", help="the budget.py compared with (default: before attribution)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    revision = args.before or before_attribution()
    before = before_module(revision)
    started = time.perf_counter()
    cells: list[tuple[str, str, dict[str, dict[str, float]]]] = []
    for name in args.families.split(","):
        family = next(f for f in FAMILIES if f.name == name)
        for m in map(int, args.steps.split(",")):
            found = simulated(
                family, m, args.nights, shift=args.shift, share=args.block, seed=args.seed, before=before
            )
            cells.append((name, str(m), found))
    if not args.no_real and REAL.exists():
        every, made, quiet = real(args.shift, args.block, args.seed, before)
        cells.append(("megatron-goldens lm loss, every version as tonight", "11-100", every))
        cells.append(("megatron-goldens lm loss, every version, marks the shift made", "11-100", made))
        cells.append(("megatron-goldens lm loss, versions the rule passes unshifted", "11-100", quiet))
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps([{"family": f, "steps": s, **r} for f, s, r in cells], indent=1))
        return 0
    print(
        f"attribution: a block of {args.block:.0%} of the steps shifted {args.shift:g} sigma, "
        f"{args.nights} nights per simulated cell, window {WINDOW}, false_alarm {ALPHA}, seed {args.seed}; "
        f"before: budget.py at {git('rev-parse', '--short', revision).strip()}; {elapsed:.0f} s"
    )
    print()
    print(
        "| family | steps | runs (after) | outside % before | outside % after | detect % before "
        "| detect % after | moved marked % before | moved marked % after |"
    )
    print("|---" * 9 + "|")
    for family, steps, rows in cells:
        b, a = rows["before"], rows["after"]
        print(
            f"| {family} | {steps} | {a['runs']} | {100 * b['outside']:.1f} | {100 * a['outside']:.1f} | "
            f"{100 * b['detect']:.1f} | {100 * a['detect']:.1f} | {100 * b['moved_marked']:.1f} | "
            f"{100 * a['moved_marked']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
