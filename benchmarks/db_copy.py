"""Times `gatecfg db copy` of a SQLite store of 800,000 values (20 runs x 40 gates x 1,000 steps) into a
scratch PostgreSQL database, created and dropped here, and checks every table's count.

    python benchmarks/db_copy.py [--server postgresql+psycopg://postgres@127.0.0.1:5432/test] [--runs 20]

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store, transfer

GATES = 40
STEPS = 1000
TEST = "tests/e2e/bench.py"
SERIES = '{"labels":{},"test":"tests/e2e/bench.py"}'
TABLES = [table.name for table in transfer.TABLES]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        source = f"sqlite:///{Path(folder) / 'history.db'}"
        seed(source, args.runs)
        name = f"gatecfg_copy_{uuid.uuid4().hex[:12]}"
        server = sa.create_engine(args.server, isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        target = sa.make_url(args.server).set(database=name).render_as_string(hide_password=False)
        try:
            began = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "gatecfg", "db", "copy", "--from", source, "--to", target],
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = time.perf_counter() - began
            print(done.stdout + done.stderr, end="")
            assert done.returncode == 0
            found = {url: counts(url) for url in (source, target)}
            print(f"gatecfg db copy (whole process): {seconds:.1f} s; counts source {found[source]}")
            print(f"counts target {found[target]}; equal: {found[source] == found[target]}")
        finally:
            with server.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            server.dispose()


def seed(url: str, n_runs: int) -> None:
    rng = random.Random(0)
    specs = [
        CoordinateSpec(f"{gate:012x}", SERIES, TEST, f"train/metric_{gate}", '"all"', "null")
        for gate in range(GATES)
    ]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    runs = []
    for n in range(n_runs):
        run = RunInfo(
            f"run-{n}", TEST, SERIES, {}, f"{n:040x}", "main", str(n), "1", None, start + timedelta(days=n),
            True, "bench",
        )  # fmt: skip
        points = {
            spec: PointColumns(
                list(range(STEPS)),
                [rng.gauss(1.0, 0.1) for _ in range(STEPS)],
                ["pass"] * STEPS,
                [1.0] * STEPS,
                [0.5] * STEPS,
                [1.5] * STEPS,
                [0.1] * STEPS,
            )
            for spec in specs
        }
        runs.append((run, points))
    with Store.open(url, create=True) as store:
        store.write_runs(runs)


def counts(url: str) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: int(conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar_one()) for t in TABLES}
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
