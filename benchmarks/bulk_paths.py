"""The bulk paths alone: `gatecfg import` and `gatecfg backtest --metric`, as `benchmarks/bench.py` measures
them, without the rest of its figures (issue 15; results in benchmarks/results/performance.md).

    python benchmarks/bulk_paths.py --workdir /tmp/bulk8m                     # SQLite, 8M values
    GATECFG_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        python benchmarks/bulk_paths.py --workdir /tmp/bulk8m --stores postgresql

For each store: the import of the whole history as a measured process (wall, CPU, peak RSS), as a ratio
to the bare write of as many points (the driver alone into an empty store's metric_points in one
transaction: 100-row INSERTs on SQLite, one binary COPY on PostgreSQL) and beside the import of a tenth of
it (how peak RSS grows); then `backtest --metric` of one gate beside the bare read of the test's values.
The export is written once per work folder and reused. PostgreSQL runs in a database `bulk_paths_<runs>`
(`--pg-prefix`) on the `--pg` server, dropped first and kept after (for further measurements); the bare
write's scratch database is dropped.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", choices=["sqlite", "postgresql"], nargs="+", default=["sqlite"])
    parser.add_argument("--pg", default=os.environ.get("GATECFG_TEST_PG_URL"), help="PostgreSQL server URL")
    parser.add_argument("--runs", type=int, default=200, help="stored nightlies (default 200: 8M values)")
    parser.add_argument("--workdir", type=Path, required=True, help="the export and SQLite store go here")
    parser.add_argument(
        "--pg-prefix",
        default="bulk_paths",
        help="PostgreSQL: name the kept database PREFIX_<runs> and the scratch ones PREFIX_<random>",
    )
    args = parser.parse_args()
    bench.PG_PREFIX = args.pg_prefix
    scale = bench.Scale(args.runs, 40, 1000, 20, 1, 1, 1)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    gates, _ = bench._write_inputs(work, scale)
    for store in args.stores:
        values = scale.runs * scale.gates * scale.steps
        print(f"\n== {store}, {values:,} values, load average {os.getloadavg()[0]:.1f}")
        figures = bench.Figures(store)
        if store == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{work / 'history.db'}{suffix}").unlink(missing_ok=True)
            url = f"sqlite:///{work / 'history.db'}"
        else:
            if not args.pg:
                parser.error("PostgreSQL needs --pg URL or GATECFG_TEST_PG_URL")
            name = f"{args.pg_prefix}_{scale.runs}"
            server = sa.create_engine(args.pg, isolation_level="AUTOCOMMIT")
            with server.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
            server.dispose()
            url = bench._pg_url(args.pg, name)
            bench._process(["db", "upgrade", "--db", url], work)
        bench._bench_import(url, gates, scale, figures)
        bench._analyze(url)
        bench._bench_backtest(url, gates, scale, figures)
        print(f"   load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
