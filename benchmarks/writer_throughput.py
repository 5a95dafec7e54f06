"""Concurrent `evaluate --write` beside a bare client doing the same reads and writes, and the plans of
gatecfg's baseline read on PostgreSQL as the values table grows (issue 41, item 4).

    # a store of 3M values (40 gates x 1,000 steps x 75 nightlies), kept for the runs below
    DB=postgresql+psycopg://postgres@127.0.0.1:5432/scale_bench
    python benchmarks/writer_throughput.py seed --db $DB --values 3000000
    # the plans of every statement a baseline read runs, with the statistics as they are, then after ANALYZE
    python benchmarks/writer_throughput.py plans --db $DB
    # 16 processes x 10 runs each: gatecfg.evaluate(write=True), then the bare client, then counts
    python benchmarks/writer_throughput.py writers --db $DB --writers 16 --runs 10

`seed` grows a store to `--values` values (it may be run again with more: plans with statistics gathered
at the smaller size are the stale case), autovacuum off on its tables so that the statistics are what
the runs below leave them. `plans` captures the statements one `Store.baselines` call of the evaluated test
runs (SQLAlchemy's cursor events) and prints `EXPLAIN` of each with its parameters: a plan must seek the
primary keys (Index Scan, Index Only Scan, Nested Loop), never scan the values table (Seq Scan, Parallel
Seq Scan or Bitmap Heap Scan on metric_points). `writers` runs `--writers` processes, each evaluating
`--runs` nightlies of the evaluated test with `write=True` in one process (the API, its engine reused), then
as many processes of the bare client, each run one transaction through psycopg or sqlite3 alone: the
window's runs found as gatecfg finds them (the newest runs of each coordinate, a LATERAL walk on
PostgreSQL), their points, then the run, its run coordinates and its points (COPY on PostgreSQL). It prints
runs per second, the median and p95 latency of a run, and checks that every run and value is stored
exactly once. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench
import numpy as np
import sqlalchemy as sa

from gatecfg.store import Store
from gatecfg.store.writes import steps_digest


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("step", choices=["seed", "plans", "writers"])
    parser.add_argument("--db", required=True, help="store URL (PostgreSQL or a SQLite file)")
    parser.add_argument("--values", type=int, default=3_000_000, help="seed: grow the store to this")
    parser.add_argument("--gates", type=int, default=40)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--writers", type=int, default=16, help="writers: concurrent processes")
    parser.add_argument("--runs", type=int, default=10, help="writers: runs per process")
    parser.add_argument("--only", choices=["gatecfg", "bare"], help="writers: one client only")
    parser.add_argument(
        "--no-analyze", action="store_true", help="plans: only with the statistics as they are"
    )
    parser.add_argument("--work", type=Path, help="folder for the gate files and record (default: temp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatecfg-writers-") as temp:
        work = args.work or Path(temp)
        scale = bench.Scale(0, args.gates, args.steps, args.window, 1, 1, 1)
        gates, record = bench._write_inputs(work, scale)
        if args.step == "seed":
            seed(args.db, gates, scale, args.values)
        elif args.step == "plans":
            plans(args.db, gates, scale, analyze=not args.no_analyze)
        else:
            writers(args.db, gates, record, scale, args.writers, args.runs, args.only)


# ------------------------------------------------------------------------------------------------ seed

TABLES = ("runs", "coordinates", "run_coordinates", "metric_points")


def seed(url: str, gates: Path, scale: bench.Scale, values: int) -> None:
    """Grow the store to `values` values of the evaluated test: nightlies as bench.py seeds them (every 10th
    untrusted), written by Store.write_runs (the import's path) in batches."""
    specs = bench._specs(gates, bench.TEST)
    per_run = scale.gates * scale.steps
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                for table in TABLES:
                    conn.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            have = conn.execute(sa.text("SELECT count(*) FROM runs WHERE run_id LIKE 'seed-%'")).scalar_one()
        engine.dispose()
        want = values // per_run
        rng = np.random.default_rng(have)
        steps = list(range(scale.steps))
        began = time.perf_counter()
        for start in range(have, want, 25):
            items = []
            for n in range(start, min(start + 25, want)):
                info = bench._run_info(f"seed-{n}", bench.TEST, n, trusted=n % 10 != 9)
                items.append(
                    (
                        info,
                        {
                            spec: [
                                bench.StoredPoint(step, float(v), "pass", 1.0, 0.5, 1.5)
                                for step, v in zip(steps, rng.normal(1.0, 0.05, scale.steps), strict=True)
                            ]
                            for spec in specs
                        },
                    )
                )
            store.write_runs(items)
            print(f"  {min(start + 25, want)} runs, {time.perf_counter() - began:.0f} s", flush=True)
    print(f"seeded: {want} runs, {want * per_run:,} values")


# ----------------------------------------------------------------------------------------------- plans

# Reading metric_points otherwise than by its primary key's (coordinate_pk, run_pk) prefix.
SCANS = ("Seq Scan on metric_points",)


def plans(url: str, gates: Path, scale: bench.Scale, *, analyze: bool) -> None:
    """EXPLAIN of each statement one Store.baselines call runs, with the statistics as they are, then the
    same after ANALYZE."""
    hashes = [spec.coordinate for spec in bench._specs(gates, bench.TEST)]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM metric_points")).scalar_one()
        analyzed = conn.execute(
            sa.text("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'metric_points'")
        ).scalar_one_or_none()
        estimate = conn.execute(
            sa.text("SELECT reltuples FROM pg_class WHERE relname = 'metric_points'")
        ).scalar_one()
    print(f"metric_points: {rows:,} rows; last ANALYZE {analyzed}; reltuples {estimate:,.0f}")
    for when in ("statistics as they are", "after ANALYZE")[: 1 + analyze]:
        if when == "after ANALYZE":
            with engine.begin() as conn:
                for table in TABLES:
                    conn.exec_driver_sql(f"ANALYZE {table}")
        print(f"\n## {when}")
        _explain_baselines(url, hashes, scale.window)
    engine.dispose()


def _explain_baselines(url: str, hashes: Sequence[str], window: int) -> None:
    statements: list[tuple[str, Any]] = []
    with Store.open(url) as store:
        engine = store._engine

        def capture(*event: Any) -> None:  # conn, cursor, statement, parameters, context, many
            statement, parameters = event[2], event[3]
            if statement.lstrip().upper().startswith("SELECT") and "set_config" not in statement:
                statements.append((statement, parameters))

        sa.event.listen(engine, "before_cursor_execute", capture)
        began = time.perf_counter()
        found = store.baselines(hashes, window=window, exclude_run_id="bench-plans")
        took = time.perf_counter() - began
        sa.event.remove(engine, "before_cursor_execute", capture)
        n_values = sum(len(w.steps) for w in found.windows.values())
        print(f"Store.baselines: {len(statements)} SELECT statements, {took:.3f} s, {n_values} step windows")
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            for n, (statement, parameters) in enumerate(statements, 1):
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + statement, parameters)
                plan = [line for (line,) in cursor.fetchall()]
                bad = [line.strip() for line in plan if any(scan in line for scan in SCANS)]
                access = [line.strip() for line in plan if " on metric_points" in line or "pk_metric" in line]
                first = " ".join(statement.split())[:90]
                verdict = "SCANS THE VALUES TABLE" if bad else "keys only"
                print(f"\n### statement {n}: {verdict}: {'; '.join(access) or 'no values read'}")
                print(f"    {first} ...")
                for line in plan:
                    print(f"    {line}")
            raw.rollback()
        finally:
            raw.close()


# --------------------------------------------------------------------------------------------- writers


def writers(  # noqa: PLR0917 (a benchmark's steps take the parsed arguments)
    url: str,
    gates: Path,
    record: Path,
    scale: bench.Scale,
    n_writers: int,
    runs: int,
    only: str | None,
) -> None:
    prefix = f"w{uuid.uuid4().hex[:8]}"
    print(
        f"{n_writers} writers x {runs} runs of {scale.gates * scale.steps:,} values, window {scale.window}; "
        f"load average {os.getloadavg()[0]:.1f}; {_count(url, 'seed-%')[0]} stored seed runs"
    )
    print("| client | runs/s | median s | p95 s | wall s |")
    print("|---|---|---|---|---|")
    for client in ("gatecfg", "bare"):
        if only not in (None, client):
            continue
        tag = f"{prefix}-{client}"
        jobs = [(client, url, str(gates), str(record), tag, k, runs, scale.window) for k in range(n_writers)]
        began = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(n_writers) as pool:
            latencies = [x for part in pool.starmap(_writer, jobs) for x in part]
        wall = time.perf_counter() - began
        stored_runs, stored_values = _count(url, f"{tag}-%")
        want = n_writers * runs
        exact = stored_runs == want and stored_values == want * scale.gates * scale.steps
        p95 = float(np.percentile(latencies, 95))
        print(
            f"| {client} | {want / wall:.3f} | {statistics.median(latencies):.2f} | {p95:.2f} "
            f"| {wall:.1f} |  stored {stored_runs} runs, {stored_values:,} values: "
            f"{'exact' if exact else 'WRONG'}",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def _count(url: str, pattern: str) -> tuple[int, int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT count(DISTINCT r.pk), count(mp.run_pk) FROM runs r "
                "LEFT JOIN metric_points mp ON mp.run_pk = r.pk WHERE r.run_id LIKE :pattern"
            ),
            {"pattern": pattern},
        ).one()
    engine.dispose()
    return int(found[0]), int(found[1])


def _writer(  # noqa: PLR0917 (Pool.starmap's arguments)
    client: str, url: str, gates: str, record: str, tag: str, k: int, runs: int, window: int
) -> list[float]:
    """One writer process: `runs` nightlies, the latency of each."""
    sys.path.insert(0, str(bench.REPO))
    if client == "gatecfg":
        import gatecfg

        def once(run_id: str) -> None:
            report = gatecfg.evaluate(bench.TEST, record, gates=gates, db=url, write=True, run_id=run_id)
            if not report.run.written:
                raise RuntimeError(f"{run_id} was not written")

        return _timed(once, tag, k, runs)
    bare = Bare(url, gates, record, window)
    try:
        return _timed(bare.run, tag, k, runs)
    finally:
        bare.close()


def _timed(once: Any, tag: str, k: int, runs: int) -> list[float]:
    latencies = []
    for n in range(runs):
        began = time.perf_counter()
        once(f"{tag}-{k}-{n}")
        latencies.append(time.perf_counter() - began)
    return latencies


class Bare:
    """The bare client: the driver alone, the record parsed once (gatecfg parses it per run)."""

    def __init__(self, url: str, gates: str, record: str, window: int) -> None:
        self.postgres = sa.make_url(url).get_backend_name() == "postgresql"
        specs = bench._specs(Path(gates), bench.TEST)
        self.hashes = [spec.coordinate for spec in specs]
        self.window = window
        rows = [__import__("json").loads(line) for line in Path(record).read_text().splitlines()]
        self.points = {
            spec.coordinate: ([int(r["_step"]) for r in rows], [float(r[spec.metric]) for r in rows])
            for spec in specs
        }
        if self.postgres:
            import psycopg

            self.conn: Any = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))
        else:
            import sqlite3

            self.conn = sqlite3.connect(url.split(":///", 1)[1], timeout=60, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        self.conn.close()

    def run(self, run_id: str) -> None:
        mark = "%s" if self.postgres else "?"
        cursor = self.conn.cursor()
        if not self.postgres:
            cursor.execute("BEGIN IMMEDIATE")
        marks = ", ".join([mark] * len(self.hashes))
        cursor.execute(
            (BARE_WALK_PG if self.postgres else BARE_WALK_SQLITE).format(hashes=marks).replace("?", mark),
            [run_id, self.window, *self.hashes] if self.postgres else [*self.hashes, run_id, self.window],
        )
        pairs = cursor.fetchall()
        if not pairs:
            pass
        elif self.postgres:
            cursor.execute(
                "SELECT mp.value FROM unnest(%s::int[], %s::int[]) AS c(coordinate_pk, run_pk) "
                "CROSS JOIN LATERAL (SELECT value FROM metric_points m "
                "WHERE m.coordinate_pk = c.coordinate_pk AND m.run_pk = c.run_pk ORDER BY step) mp",
                [[p[0] for p in pairs], [p[1] for p in pairs]],
            )
        else:
            cursor.execute(
                "SELECT value FROM metric_points WHERE (coordinate_pk, run_pk) IN (VALUES "
                + ", ".join(["(?, ?)"] * len(pairs))
                + ") ORDER BY coordinate_pk, run_pk, step",
                [x for p in pairs for x in p[:2]],
            )
        n_values = len(cursor.fetchall()) if pairs else 0
        if n_values != len(pairs) * len(next(iter(self.points.values()))[0]):
            raise RuntimeError(f"{n_values} baseline values for {len(pairs)} runs")
        cursor.execute(
            "INSERT INTO runs (run_id, test, series_key, labels, created_at, written_by, gate_trusted) "
            f"VALUES ({', '.join([mark] * 7)}) RETURNING pk",
            [run_id, bench.TEST, bench.series_key(bench.TEST, {}), "{}", _now(), "bare", True],
        )
        (run_pk,) = cursor.fetchone()
        cursor.execute(f"SELECT coordinate, pk FROM coordinates WHERE coordinate IN ({marks})", self.hashes)
        coordinate_pks = dict(cursor.fetchall())
        cursor.executemany(
            "INSERT INTO run_coordinates (coordinate_pk, run_pk, n_values, steps_digest, gate_trusted) "
            f"VALUES ({', '.join([mark] * 5)})",
            [
                (coordinate_pks[c], run_pk, len(steps), steps_digest(steps, values), True)
                for c, (steps, values) in self.points.items()
            ],
        )
        rows = [
            (coordinate_pks[c], run_pk, step, value, "pass", 1.0, 0.5, 1.5, None)
            for c, (steps, values) in self.points.items()
            for step, value in zip(steps, values, strict=True)
        ]
        if self.postgres:
            with cursor.copy(
                "COPY metric_points (coordinate_pk, run_pk, step, value, status, ref, lo, hi, sd) FROM STDIN"
            ) as copy:
                for row in rows:
                    copy.write_row(row)
            self.conn.commit()
        else:
            cursor.executemany(f"INSERT INTO metric_points VALUES ({', '.join('?' * 9)})", rows)
            cursor.execute("COMMIT")
        cursor.close()


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


# The window's runs of each coordinate, newest first, as gatecfg walks them (its facts aside: the bare
# client takes the trusted ones), with the series key the run is written under.
BARE_WALK_PG = """
SELECT c.pk, newest.run_pk, c.series_key
FROM coordinates c
CROSS JOIN LATERAL (
  SELECT rc.run_pk FROM runs r JOIN run_coordinates rc ON rc.run_pk = r.pk AND rc.coordinate_pk = c.pk
  WHERE r.series_key = c.series_key AND COALESCE(r.trust_override, r.gate_trusted) IS TRUE
    AND r.run_id <> ?
  ORDER BY r.created_at DESC, r.pk DESC LIMIT ?
) newest
WHERE c.coordinate IN ({hashes})
ORDER BY c.pk, newest.run_pk
"""
BARE_WALK_SQLITE = """
SELECT c.pk, rc.run_pk, c.series_key
FROM coordinates c JOIN run_coordinates rc ON rc.coordinate_pk = c.pk
WHERE c.coordinate IN ({hashes}) AND rc.run_pk IN (
  SELECT r.pk FROM runs r JOIN run_coordinates x ON x.run_pk = r.pk AND x.coordinate_pk = c.pk
  WHERE r.series_key = c.series_key AND COALESCE(r.trust_override, r.gate_trusted) = 1 AND r.run_id <> ?
  ORDER BY r.created_at DESC, r.pk DESC LIMIT ?
)
ORDER BY c.pk, rc.run_pk
"""


if __name__ == "__main__":
    main()
