"""The 1% promise on real noise (issue 36, "Done means"): the shipped policy replayed nightly on the real
dev halves, side by side with the peers' rules at their defaults and at gatecfg's alert rate.

    python benchmarks/promise.py                         # 20 series per half, up to 2,000 runs each
    python benchmarks/promise.py --series 0 --runs 0     # every series, every run (a long while)

Sources: SAP HANA's CI performance tests (`sap-hana-dev`, a run's build is its code) and Django's asv
timings (`django-asv`, a new commit every night). Each source is split into two halves by series (even
and odd positions in name order); nothing here is fitted, and both halves are printed side by side so
that a constant tuned to one would show on the other.

gatecfg: one `steps: last`, `{budget: up}` gate under the project's gates/base.yaml, every run replayed
as its nightly `evaluate --write` (`gatecfg.analysis.replayer`, the replay `backtest` runs; equal to the
live path by tests/test_one_baseline.py). An alert is a failing gate; a page is an alert that fails the
job (`same_code: warn` reports a failure on the code of a run that passed, without failing the job).
Peers judge the runs before tonight as they are: Bencher's t-test (0.99, 20 and 60 runs), a z-score over
3 (20 and 100 runs), asv's ratio 1.1 to the previous run, github-action-benchmark's 2.0 to the previous
run. "Unchanged code": the run measured the build of the run just before it, and that run did not alert.
Detection: x1.10 and x1.25 from a seeded run on (a run that starts a build, for SAP), caught within N runs
when one of the first N runs alerts (gatecfg: pages). Matched: each peer's threshold moved to gatecfg's
page rate on the same half.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from one_baseline import METRIC, MFU, REAL, TEST, Series, asv, evenly, sap, write_gates
from real_baselines import Peer

from gatecfg.analysis.replayer import Replayer, RunReplay, StoredRun
from gatecfg.keys import series_key
from gatecfg.resolve import ResolvedTest, load_tree
from gatecfg.store import ValueColumns

WITHIN = (1, 3, 10)
SIZES = (1.10, 1.25)
WARM = 60  # runs of a series before alerts count and injections may start
PEERS: dict[str, Peer] = {
    "bencher-t 0.99/20": Peer("t", 0.99, 20),
    "bencher-t 0.99/60": Peer("t", 0.99, 60),
    "z>3/20": Peer("z", 3.0, 20),
    "z>3/100": Peer("z", 3.0, 100),
    "asv 1.1 prev": Peer("prev", 1.1, 1),
    "gab 2.0 prev": Peer("prev", 2.0, 1),
}


@dataclass
class Half:
    runs: int = 0
    alerts: int = 0
    pages: int = 0
    unchanged: int = 0  # alerts on unchanged code
    tried: dict[float, int] = field(default_factory=dict)
    caught: dict[tuple[float, int], int] = field(default_factory=dict)
    # Peers: per rule, clean scores (for the matched threshold) and per injection its scores.
    clean: dict[str, list[float]] = field(default_factory=dict)
    same: dict[str, list[bool]] = field(default_factory=dict)  # each clean score's run: same build
    injected: dict[str, list[tuple[float, list[float]]]] = field(default_factory=dict)


def stored(i: int, commit: str, value: float) -> StoredRun:
    return StoredRun(
        run_id=f"n{i:06d}",
        commit=commit,
        series_key="s",
        labels={},
        trust_override=None,
        gate_trusted=True,
        values={
            (METRIC, '"last"'): ValueColumns(np.array([-1]), np.array([value]), None),
            (MFU, '"last"'): ValueColumns(np.array([-1]), np.array([0.5]), None),
        },
    )


def replay_series(test: ResolvedTest, series: Series, starts: Sequence[int], half: Half) -> None:
    """The clean replay of one series, and from each start (a copy of the replay there) the injections."""
    values, commits = series.values, series.commits
    replayer = Replayer(test, series_key(TEST, {}), test.policy, keep={METRIC})
    previous_alert = False
    for i, value in enumerate(values):
        if i in starts:
            for size in SIZES:
                fork = copy.deepcopy(replayer)
                pages = []
                for j in range(i, min(i + max(WITHIN), len(values))):
                    night = fork.judge(stored(j, commits[j], values[j] * size))
                    pages.append(_page(night))
                half.tried[size] = half.tried.get(size, 0) + 1
                for n in WITHIN:
                    half.caught[(size, n)] = half.caught.get((size, n), 0) + any(pages[:n])
        night = replayer.judge(stored(i, commits[i], value))
        alert = night.results[METRIC].status == "fail"
        if i >= WARM:
            half.runs += 1
            half.alerts += alert
            half.pages += _page(night)
            half.unchanged += alert and commits[i] == commits[i - 1] and not previous_alert
        previous_alert = alert


def _page(night: RunReplay) -> bool:
    verdicts = night.results[METRIC]
    return verdicts.status == "fail" and verdicts.coordinate not in night.following.excused()


def peer_series(series: Series, starts: Sequence[int], half: Half) -> None:
    values = np.array(series.values, np.float64)
    for name, peer in PEERS.items():
        scores = [peer.score(values[:i], values[i]) for i in range(WARM, len(values))]
        half.clean.setdefault(name, []).extend(scores)
        # The previous run's alert at the rule's default (score > 1) decides "unchanged code" there.
        same = [
            series.commits[i] == series.commits[i - 1] and not (i > WARM and scores[i - WARM - 1] > 1)
            for i in range(WARM, len(values))
        ]
        half.same.setdefault(name, []).extend(same)
        for start in starts:
            for size in SIZES:
                shifted = values.copy()
                shifted[start:] *= size
                end = min(start + max(WITHIN), len(values))
                found = [peer.score(shifted[:j], shifted[j]) for j in range(start, end)]
                half.injected.setdefault(name, []).append((size, found))


def matched(scores: Sequence[float], rate: float) -> float:
    """The score threshold at which a peer alerts on `rate` of the clean runs (at most)."""
    finite = np.sort(np.nan_to_num(np.asarray(scores, np.float64), nan=-np.inf))
    k = int(np.floor(rate * len(finite)))
    return float(finite[len(finite) - k - 1]) if k < len(finite) else -np.inf


def peer_row(name: str, half: Half, threshold: float) -> tuple[float, float, dict[tuple[float, int], float]]:
    scores = np.nan_to_num(np.asarray(half.clean[name], np.float64), nan=-np.inf)
    alerts = scores > threshold
    same = np.asarray(half.same[name], bool)
    caught: dict[tuple[float, int], float] = {}
    for size in SIZES:
        found = [s for z, s in half.injected[name] if z == size]
        for n in WITHIN:
            hits = sum(any(x > threshold for x in s[:n] if np.isfinite(x)) for s in found)
            caught[(size, n)] = hits / max(len(found), 1)
    return 1000 * alerts.mean(), float((alerts & same).sum() / max(alerts.sum(), 1)), caught


def cells(caught: dict[tuple[float, int], float]) -> str:
    return " | ".join(f"{100 * caught[(size, n)]:.0f}%" for size in SIZES for n in WITHIN)


def report(source: str, halves: dict[str, Half]) -> None:
    head = " | ".join(f"x{size:.2f} in {n}" for size in SIZES for n in WITHIN)
    print(f"\n### {source}\n")
    print(f"| half | rule | alerts / 1,000 runs | on unchanged code | {head} |")
    print("|---|---|---|---|" + "---|" * len(SIZES) * len(WITHIN))
    for name, half in halves.items():
        ours = {key: half.caught.get(key, 0) / max(half.tried.get(key[0], 1), 1) for key in half.caught}
        rate = half.pages / max(half.runs, 1)
        print(
            f"| {name} | **gatecfg, shipped policy** | {1000 * half.alerts / max(half.runs, 1):.1f} "
            f"({1000 * rate:.1f} paging) | {half.unchanged / max(half.alerts, 1):.0%} | {cells(ours)} |"
        )
        best = dict.fromkeys(ours, 0.0)
        for peer in PEERS:
            per_1000, same, caught = peer_row(peer, half, 1.0)
            print(f"| {name} | {peer} | {per_1000:.1f} | {same:.0%} | {cells(caught)} |")
        for peer in PEERS:
            per_1000, same, caught = peer_row(peer, half, matched(half.clean[peer], rate))
            best = {key: max(best[key], caught[key]) for key in best}
            print(f"| {name} | {peer}, matched | {per_1000:.1f} | {same:.0%} | {cells(caught)} |")
        wins = sum(ours[key] >= best[key] for key in best)
        print(f"| {name} | gatecfg >= best matched peer | | | {wins} of {len(best)} cells |")


def run(source: str, found: list[Series], args: argparse.Namespace, test: ResolvedTest) -> dict[str, Half]:
    rng = random.Random(args.seed)
    halves = {"A (even)": Half(), "B (odd)": Half()}
    for k, whole in enumerate(found):
        half = halves["A (even)" if k % 2 == 0 else "B (odd)"]
        series = whole
        if args.runs > 0:
            series = Series(whole.name, whole.commits[: args.runs], whole.values[: args.runs])
        n = len(series.values)
        candidates = [
            i
            for i in range(WARM + 1, n - max(WITHIN))
            if source == "asv" or series.commits[i] != series.commits[i - 1]
        ]
        starts = sorted(rng.sample(candidates, min(args.injections, len(candidates))))
        replay_series(test, series, starts, half)
        peer_series(series, starts, half)
        print(f"  {source} {k + 1}/{len(found)} {series.name}: {n} runs", file=sys.stderr, flush=True)
    return halves


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=20, help="series per half, evenly taken (0: all)")
    parser.add_argument("--runs", type=int, default=2000, help="runs per series (0: all)")
    parser.add_argument("--injections", type=int, default=3, help="seeded starts per series and size")
    parser.add_argument("--source", choices=("sap", "asv", "both"), default="both")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--real", type=Path, default=REAL)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        test = load_tree(write_gates(Path(folder))).test(TEST)
    sources = {
        "sap": lambda: sap(args.real / "sap-hana-dev" / "series.csv.gz"),
        "asv": lambda: asv(args.real / "django-asv" / "series.csv.gz"),
    }
    for source in ("sap", "asv") if args.source == "both" else (args.source,):
        found = sources[source]()
        chosen = found if args.series <= 0 else evenly(found, 2 * args.series)
        report(source, run(source, chosen, args, test))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
