"""How long `gatecfg alerts` takes on a fleet's store (issue 37: under 2 s at 500 tests x 40 metrics x
1,000 steps, on SQLite and PostgreSQL).

    python benchmarks/alerts.py [--tests 500] [--metrics 40] [--steps 1000] [--nights 3] [--red 30]
        [--pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres] [--repeat 3]

Builds a store of `--nights` clean nightlies of every test (bulk-written, every gate passed), then one
red night on which `--red` tests fail every gate (a container bump), and times `Store.alerts` plus the
grouping (what `gatecfg alerts` does before it prints), best of `--repeat`. What `alerts` reads grows
with the runs (tests x nights), the gates of each series' newest run (tests x metrics) and, for the
failing gates only, the points of their first and newest failing run (red tests x metrics x steps): it
never reads a clean gate's points. Building 500 x 40 x 1,000 x nights points takes long on a shared
machine, so the figures quote the build too; `--steps` smaller measures the rest, and the red tests'
points are then the part that grows with steps.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from gatecfg.alerts import group
from gatecfg.keys import coordinate_hash, series_key
from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store
from gatecfg.store.writes import Points

START = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
STEPS_KEY = '"all"'
CONSTRAINT = '{"rel_down":0.1,"rel_up":0.1}'


def runs(tests: int, metrics: int, steps: int, nights: int, red: int) -> Iterator[tuple[RunInfo, Points]]:
    rng = random.Random(37)
    for n in range(nights + 1):
        for t in range(tests):
            test = f"tests/e2e/test_{t:03d}.py"
            series = series_key(test, {})
            failing = n == nights and t < red
            run = RunInfo(
                run_id=f"n{n:03d}-t{t:03d}",
                test=test,
                series_key=series,
                labels={},
                commit=f"c{n:03d}",
                branch=None,
                ci_run_id=None,
                ci_run_attempt=None,
                url=None,
                created_at=START + timedelta(days=n),
                gate_trusted=not failing,
                written_by="benchmark",
                meta={"image": "26.04" if failing else "26.03"},
            )
            points: dict[CoordinateSpec, PointColumns] = {}
            for m in range(metrics):
                metric = f"train/metric_{m:02d}"
                spec = CoordinateSpec(
                    coordinate_hash(series, metric, STEPS_KEY, CONSTRAINT),
                    series,
                    test,
                    metric,
                    STEPS_KEY,
                    CONSTRAINT,
                )
                level = 1.3 if failing else 1.0
                values = [level * (1.0 + 0.01 * rng.gauss(0.0, 1.0)) for _ in range(steps)]
                refs: list[float | None] = [1.0] * steps
                none: list[float | None] = [None] * steps
                statuses = ["fail" if failing else "pass"] * steps
                points[spec] = PointColumns(
                    list(range(steps)), values, statuses, refs, none, none, none, not failing
                )  # type: ignore[arg-type]
            yield run, points


def build(url: str, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    with Store.open(url, create=True, check_schema=False) as store:
        store.upgrade()
        store.write_runs(runs(args.tests, args.metrics, args.steps, args.nights, args.red))
    return time.perf_counter() - started


def measure(url: str, repeat: int) -> tuple[float, int, int]:
    best = float("inf")
    with Store.open(url) as store:
        for _ in range(repeat):
            started = time.perf_counter()
            found = store.alerts()
            groups = group(found.gates, found.history, found.width)
            best = min(best, time.perf_counter() - started)
    return best, len(groups), sum(len(g.gates) for g in groups)


def fresh_pg(server: str) -> str:
    name = f"gatecfg_bench_alerts_{random.randrange(1 << 30):08x}"
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine.dispose()
    return sa.make_url(server).set(database=name).render_as_string(hide_password=False)


def drop_pg(server: str, url: str) -> None:
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{sa.make_url(url).database}" WITH (FORCE)')
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=40)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=3, help="clean nightlies before the red one")
    parser.add_argument("--red", type=int, default=30, help="tests failing every gate on the red night")
    parser.add_argument("--pg", metavar="URL", help="also on PostgreSQL: a server URL (a database is made)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    points = args.tests * args.metrics * args.steps * (args.nights + 1)
    print(
        f"{args.tests} tests x {args.metrics} metrics x {args.steps} steps, {args.nights} clean nights + 1 "
        f"red ({args.red} tests failing every gate): {points:,} points"
    )
    with tempfile.TemporaryDirectory() as work:
        stores = [("sqlite", f"sqlite:///{Path(work) / 'history.db'}")]
        if args.pg:
            stores.append(("postgresql", fresh_pg(args.pg)))
        try:
            for name, url in stores:
                built = build(url, args)
                seconds, n_groups, n_gates = measure(url, args.repeat)
                print(
                    f"{name}: built in {built:.0f} s; alerts in {seconds:.2f} s "
                    f"({n_groups} alert(s), {n_gates} gates)"
                )
        finally:
            if args.pg:
                drop_pg(args.pg, stores[-1][1])


if __name__ == "__main__":
    main()
