"""Failures on code that did not change (issue 36, item 2): how many of the shipped policy's alerts on
SAP HANA's real CI timings fall on a run that measured the same build as a stored run of the series that
passed, and what `same_code: warn` (such a failure reported, not failing the job) costs in detection.

    python benchmarks/same_code.py                     # 20 series, 1,500 runs each
    python benchmarks/same_code.py --series 0 --runs 0 # every series, every run (many minutes)

Each series is replayed as nightly `evaluate --write`s (`gatecfg.analysis.replayer`, the replay `backtest`
runs, which `tests/test_one_baseline.py` holds equal to the live path) under the project's gates/base.yaml
with `constraint: {budget: up}`. A run's build is its code (`--meta build=...` or `--commit` in a CI job).
Detection: a slowdown of x1.10 or x1.25 injected from the first run of a build on (one seeded build per
series and size); caught within N runs when a run among the first N of the slowdown fails the job.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from one_baseline import METRIC, MFU, REAL, TEST, Series, evenly, sap, write_gates

from gatecfg.analysis.replayer import StoredRun, replay
from gatecfg.keys import series_key
from gatecfg.resolve import ResolvedTest, load_tree
from gatecfg.store import ValueColumns

WITHIN = (1, 3, 10)


@dataclass(frozen=True)
class Night:
    failed: bool
    same_code: bool  # the build of a stored run of the series on which the gate passed


def nights(test: ResolvedTest, series: Series, values: Sequence[float]) -> list[Night]:
    runs = [
        StoredRun(
            run_id=f"n{i:05d}",
            commit=series.commits[i],
            series_key="s",
            labels={},
            trust_override=None,
            gate_trusted=True,
            values={
                (METRIC, '"last"'): ValueColumns(np.array([-1]), np.array([value]), None),
                (MFU, '"last"'): ValueColumns(np.array([-1]), np.array([0.5]), None),
            },
        )
        for i, value in enumerate(values)
    ]
    replayed = replay(test, series_key(TEST, {}), runs, test.policy, keep={METRIC})
    passed: set[str] = set()
    found = []
    for run, night in zip(runs, replayed.runs, strict=True):
        status = night.results[METRIC].status
        found.append(Night(status == "fail", run.commit in passed))
        if status == "pass":
            passed.add(run.commit or "")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=20, help="series, evenly taken (0: all; default 20)")
    parser.add_argument("--runs", type=int, default=1500, help="runs per series (0: all; default 1,500)")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--real", type=Path, default=REAL)
    args = parser.parse_args(argv)
    found = sap(args.real / "sap-hana-dev" / "series.csv.gz")
    chosen = found if args.series <= 0 else evenly(found, args.series)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        test = load_tree(write_gates(Path(folder))).test(TEST)
    runs = alerts = same = 0
    caught: dict[tuple[float, str, int], int] = {}
    tried: dict[float, int] = {}
    for series in chosen:
        values = series.values if args.runs <= 0 else series.values[: args.runs]
        clean = nights(test, series, values)
        runs += len(clean)
        alerts += sum(n.failed for n in clean)
        same += sum(n.failed and n.same_code for n in clean)
        commits = series.commits[: len(values)]
        starts = [i for i in range(40, len(values) - 10) if commits[i] != commits[i - 1]]
        if not starts:
            continue
        start = rng.choice(starts)
        for size in (1.10, 1.25):
            injected = [v * size if i >= start else v for i, v in enumerate(values)]
            after = nights(test, series, injected)[start:]
            tried[size] = tried.get(size, 0) + 1
            for policy in ("fail", "warn"):
                pages = [n.failed and not (policy == "warn" and n.same_code) for n in after]
                for n in WITHIN:
                    caught[(size, policy, n)] = caught.get((size, policy, n), 0) + any(pages[:n])
    print(f"SAP HANA dev half: {len(chosen)} series, {runs:,} runs, shipped policy, budget: up")
    print("| same_code | alerts per 1,000 runs | share on same code as a passing run |")
    print("|---|---|---|")
    print(f"| fail | {1000 * alerts / runs:.1f} | {same / max(alerts, 1):.0%} |")
    print(f"| warn | {1000 * (alerts - same) / runs:.1f} | 0% (reported, not failing) |")
    print()
    print("| slowdown | same_code | caught within 1 run | 3 runs | 10 runs |")
    print("|---|---|---|---|---|")
    for size in (1.10, 1.25):
        for policy in ("fail", "warn"):
            cells = " | ".join(
                f"{caught.get((size, policy, n), 0) / max(tried.get(size, 1), 1):.0%}" for n in WITHIN
            )
            print(f"| x{size:.2f} | {policy} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
