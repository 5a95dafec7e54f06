"""One history, one verdict, on real series (issue 35): each series replayed night by night through
`gatecfg.evaluate(..., write=True)` (the live nightly path) into a SQLite store of its own, then
`backtest`'s replay of the stored runs and `gatecfg import` of the same runs into a fresh store; the
failing nights of the three are compared, per dataset.

    python benchmarks/one_baseline.py                      # 6 series of each dataset, 300 nights each
    python benchmarks/one_baseline.py --series 20 --nights 0  # more series, every night (minutes)

Datasets (../shared/real, see its README): django-asv (asv timings of Django's benchmarks on shared
runners) and sap-hana-dev (SAP HANA's CI performance tests). Each series is one gate under the project's
own gates/base.yaml, as a team would declare a timing: `steps: last`, `constraint: {budget: up}` (lower is
better), the base file's policy (window, `accept_shift_after`, trusted baseline). The series are taken
evenly from the dataset's sorted names, not picked. Prints, per dataset, the nights, the failing nights
of each path and the nights on which any two disagree (the target: 0).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gatecfg
from gatecfg.analysis.backtest import backtest
from gatecfg.analysis.replayer import replay, stored_runs
from gatecfg.commands.import_ import import_command
from gatecfg.keys import series_key
from gatecfg.resolve import load_tree
from gatecfg.store import Store

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "real"
TEST = "tests/e2e/test_timing_ci.py"
METRIC = "perf/seconds"
MFU = "perf/actor_train_mfu"  # the base file's rule asks every gated test for MFU beside it
FAILING = ("fail", "error")


@dataclass(frozen=True)
class Series:
    name: str
    commits: tuple[str, ...]
    values: tuple[float, ...]


def asv(path: Path) -> list[Series]:
    rows: dict[str, list[tuple[int, str, float]]] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            key = f"{row['benchmark']} [{row['env']}]"
            rows.setdefault(key, []).append((int(row["date_ms"]), row["commit"], float(row["seconds"])))
    return [_series(name, sorted(nights)) for name, nights in sorted(rows.items())]


def sap(path: Path) -> list[Series]:
    rows: dict[str, list[tuple[int, str, float]]] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            rows.setdefault(row["series"], []).append((int(row["index"]), row["build"], float(row["value"])))
    return [_series(name, sorted(runs)) for name, runs in sorted(rows.items())]


def _series(name: str, ordered: Sequence[tuple[int, str, float]]) -> Series:
    return Series(name, tuple(c for _, c, _ in ordered), tuple(v for *_, v in ordered))


def evenly(items: Sequence[Series], count: int) -> list[Series]:
    if count >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / max(1, count - 1))] for i in range(count)]


def write_gates(root: Path) -> Path:
    gates = root / "gates"
    gates.mkdir()
    shutil.copy(REPO / "gates" / "base.yaml", gates / "base.yaml")
    (gates / "timing.yaml").write_text(
        f"test: {TEST}\ngates:\n  {METRIC}:\n    steps: last\n    constraint: {{budget: up}}\n"
        f"  {MFU}:\n    steps: last\n    constraint: null\n",
        encoding="utf-8",
    )
    return gates


@dataclass
class Tally:
    series: int = 0
    nights: int = 0
    live: int = 0
    backtest: int = 0
    imported: int = 0
    differ_backtest: int = 0
    differ_import: int = 0
    seconds: float = 0.0


def compare(
    series: Series, gates: Path, work: Path, nights: int
) -> tuple[int, set[str], set[str], int, set[str]]:
    """(nights, the live failing run ids, the replay's, backtest's failure count, the imported ones)."""
    values = series.values if nights <= 0 else series.values[:nights]
    db = f"sqlite:///{work / 'live.db'}"
    live: set[str] = set()
    for i, value in enumerate(values):
        run_id = f"n{i:05d}"
        report = gatecfg.evaluate(
            TEST,
            {METRIC: [(0, value)], MFU: [(0, 0.5)]},
            gates=gates,
            db=db,
            write=True,
            run_id=run_id,
            commit=series.commits[i],
        )
        if any(r.gate.metric == METRIC and r.status in FAILING for r in report.results):
            live.add(run_id)
    resolved = load_tree(gates).test(TEST)
    with Store.open(db) as store:
        runs = stored_runs(store, TEST, [METRIC, MFU], statuses=())
        created = {row.run.run_id: row.run.created_at for row in store.runs(test=TEST)}
    [row] = [r for r in backtest(resolved, runs, against=None, metric=METRIC) if r.step in (None, -1)]
    replayed = replay(resolved, series_key(TEST, {}), runs, resolved.policy, keep={METRIC})
    failing = {r.run.run_id for r in replayed.runs if r.results[METRIC].status in FAILING}
    export = work / "export.jsonl"
    with export.open("w", encoding="utf-8") as f:
        for i, value in enumerate(values):
            run_id = f"n{i:05d}"
            f.write(
                json.dumps(
                    {
                        "run_id": run_id,
                        "date": created[run_id].isoformat(),
                        "commit": series.commits[i],
                        "metrics": {METRIC: value, MFU: 0.5},
                    }
                )
                + "\n"
            )
    imported_db = f"sqlite:///{work / 'imported.db'}"
    import_command(gates=gates, db=imported_db, test=TEST, paths=[export], labels={})
    with Store.open(imported_db) as store:
        imported = {h.run_id for h in store.history(test=TEST, metric=METRIC) if h.point.status in FAILING}
    return len(values), live, failing, row.tally.failures + row.tally.errors, imported


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=6, help="series per dataset (default 6)")
    parser.add_argument("--nights", type=int, default=300, help="nights per series; 0: all (default 300)")
    parser.add_argument("--real", type=Path, default=REAL, help="the folder of real histories")
    args = parser.parse_args(argv)
    datasets = {
        "django-asv": asv(args.real / "django-asv" / "series.csv.gz"),
        "sap-hana-dev": sap(args.real / "sap-hana-dev" / "series.csv.gz"),
    }
    print("| dataset | series | nights | failing: evaluate --write | backtest | import | differ |")
    print("|---|---|---|---|---|---|---|")
    worst = 0
    for name, found in datasets.items():
        tally = Tally()
        started = time.perf_counter()
        for series in evenly(found, args.series):
            with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
                work = Path(folder)
                nights, live, failing, counted, imported = compare(
                    series, write_gates(work), work, args.nights
                )
            tally.series += 1
            tally.nights += nights
            tally.live += len(live)
            tally.backtest += counted
            tally.imported += len(imported)
            tally.differ_backtest += len(live ^ failing) + abs(counted - len(live))
            tally.differ_import += len(live ^ imported)
        tally.seconds = time.perf_counter() - started
        differ = tally.differ_backtest + tally.differ_import
        worst = max(worst, differ)
        print(
            f"| {name} | {tally.series} | {tally.nights:,} | {tally.live} | {tally.backtest} "
            f"| {tally.imported} | {differ} ({tally.seconds:.0f} s) |"
        )
    return 1 if worst else 0


if __name__ == "__main__":
    raise SystemExit(main())
