"""Times the history store at nightly scale: 40 gates x 1,000 steps per run, 200 stored runs.

    python benchmarks/bench_store.py [--db URL] [--runs 200]

Without --db it uses a fresh SQLite file in a temporary folder. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gatecfg.store import CoordinateSpec, RunInfo, Store, StoredPoint

GATES = 40
STEPS = 1000
SERIES = '{"labels":{},"test":"tests/e2e/bench.py"}'


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", help="store URL (default: a new SQLite file)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--window", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.db or f"sqlite:///{Path(folder) / 'history.db'}"
        bench(url, args.runs, args.window)


def bench(url: str, n_runs: int, window: int) -> None:
    rng = random.Random(0)
    specs = [
        CoordinateSpec(f"{gate:012x}", SERIES, "tests/e2e/bench.py", f"train/metric_{gate}", '"all"', "null")
        for gate in range(GATES)
    ]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    write_seconds: list[float] = []
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
        for n in range(n_runs):
            run = RunInfo(
                f"run-{n}",
                "tests/e2e/bench.py",
                SERIES,
                {},
                f"{n:040x}",
                "main",
                str(n),
                "1",
                None,
                start + timedelta(days=n),
                rng.random() > 0.1,
                "bench",
            )
            points = {
                spec: [StoredPoint(step, rng.gauss(1.0, 0.1), "pass", 1.0, 0.5, 1.5) for step in range(STEPS)]
                for spec in specs
            }
            began = time.perf_counter()
            assert store.write_run(run, points)
            write_seconds.append(time.perf_counter() - began)
        hashes = [spec.coordinate for spec in specs]
        for baseline in ("trusted", "nightly"):
            timings = []
            for _ in range(3):
                wall, cpu = time.perf_counter(), time.process_time()
                found = store.baselines(hashes, window=window, baseline=baseline)
                timings.append((time.perf_counter() - wall, time.process_time() - cpu))
            n_values = sum(len(values) for values in found.values())
            wall, cpu = min(timings)
            print(
                f"baselines({baseline}, window={window}), best of 3: {wall:.3f} s wall, {cpu:.3f} s CPU "
                f"in this process, for {len(found)} (coordinate, step) pairs, {n_values} values"
            )
    print(
        f"write_run of {GATES * STEPS} points: first {write_seconds[0]:.3f} s, "
        f"median {statistics.median(write_seconds):.3f} s, last {write_seconds[-1]:.3f} s, "
        f"max {max(write_seconds):.3f} s over {n_runs} runs"
    )


if __name__ == "__main__":
    main()
