"""Evaluate as history grows: the same new run evaluated against PostgreSQL stores of different sizes, seeded
by `bench.py --pg-database NAME --runs N`, in one process with the samples interleaved (store after store,
round after round), so that the machine's load falls on every store alike.

Per store it prints the medians of: evaluate in process (the text report included), Store.baselines, and
two bare fetches of the same baseline rows, each one statement through the DBAPI cursor:

* the ranked fetch (bench.py's reference): ranking every qualifying run of the 40 coordinates;
* the newest-runs fetch: the window's runs found by a LATERAL walk of the newest runs, as gatecfg reads
  them since schema revision 0004, their points joined by primary key.

Both run with sequential scans and hash joins off: the plan gatecfg's reads keep to whatever the estimates.

    python benchmarks/evaluate_growth.py --pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        --database wt15_bench80m:2000 --database wt15b_bench8m:200 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench

from gatecfg.evaluation import Request
from gatecfg.store import Store

# The window's runs as gatecfg finds them on PostgreSQL (see gatecfg/store/baselines.py, _newest_runs).
NEWEST_FETCH = """
SELECT c.pk, mp.step, mp.value
FROM coordinates c
CROSS JOIN LATERAL (
  SELECT rc.run_pk FROM runs r JOIN run_coordinates rc ON rc.run_pk = r.pk AND rc.coordinate_pk = c.pk
  WHERE r.series_key = c.series_key AND COALESCE(r.trust_override, r.gate_trusted) IS TRUE
    AND r.run_id <> %s
  ORDER BY r.created_at DESC, r.pk DESC LIMIT %s
) newest
JOIN metric_points mp ON mp.coordinate_pk = c.pk AND mp.run_pk = newest.run_pk
WHERE c.coordinate = ANY(%s) AND mp.value BETWEEN %s AND %s
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", required=True, help="PostgreSQL server URL")
    parser.add_argument(
        "--database",
        action="append",
        required=True,
        metavar="NAME:RUNS",
        help="a store seeded by bench.py with RUNS nightlies (repeat the option for each store)",
    )
    parser.add_argument("--gates", type=int, default=40)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved samples per figure (default 5)")
    args = parser.parse_args()
    stores = [(name, int(runs)) for name, _, runs in (item.partition(":") for item in args.database)]
    with tempfile.TemporaryDirectory(prefix="gatecfg-growth-") as work:
        scale = bench.Scale(stores[0][1], args.gates, args.steps, args.window, 1, 1, 1)
        gates, record = bench._write_inputs(Path(work), scale)
        hashes = [spec.coordinate for spec in bench._specs(gates, bench.TEST)]
        samples: dict[tuple[str, str], list[float]] = {}
        figures: list[tuple[str, Callable[[], object]]] = []
        closers = []
        for name, runs in stores:
            url = bench._pg_url(args.pg, name)
            store = Store.open(url)
            closers.append(store)
            request = Request(gates=gates, test=bench.TEST, records=[record], db=url, run_id="bench-evaluate")
            ranked = _fetch(url, _ranked_sql(url, len(hashes)), [*hashes, "bench-evaluate", args.window])
            newest = _fetch(url, NEWEST_FETCH, ["bench-evaluate", args.window, hashes])
            figures += [
                (f"{name}|evaluate", bench._evaluation(request, args.gates * args.steps)),
                (
                    f"{name}|Store.baselines",
                    lambda store=store: store.baselines(
                        hashes, window=args.window, exclude_run_id="bench-evaluate"
                    ),
                ),
                (f"{name}|bare fetch, ranked (index path)", ranked),
                (f"{name}|bare fetch, newest runs", newest),
            ]
            print(f"{name}: {runs} runs, {runs * args.gates * args.steps:,} values", flush=True)
        for _, measure in figures:
            measure()  # warm: imports, caches, the page cache
        for _ in range(args.rounds):
            for label, measure in figures:
                began = time.perf_counter()
                measure()
                samples.setdefault((label.split("|")[0], label.split("|")[1]), []).append(
                    time.perf_counter() - began
                )
        for store in closers:
            store.close()
    print(f"\nmedians of {args.rounds} interleaved samples, wall seconds")
    medians = {key: statistics.median(values) for key, values in samples.items()}
    for name, _ in stores:
        evaluate = medians[(name, "evaluate")]
        for figure in (
            "evaluate",
            "Store.baselines",
            "bare fetch, ranked (index path)",
            "bare fetch, newest runs",
        ):
            value = medians[(name, figure)]
            print(f"  {name:<16} {figure:<34} {value:7.3f} s   evaluate / this {evaluate / value:5.2f}x")
    base = medians[(stores[-1][0], "evaluate")]
    for name, _ in stores[:-1]:
        print(f"  evaluate at {name} / at {stores[-1][0]}: {medians[(name, 'evaluate')] / base:.2f}x")


def _ranked_sql(url: str, n_hashes: int) -> str:
    return bench._driver_sql(url, bench.BARE_FETCH, hashes=", ".join("?" * n_hashes))


def _fetch(url: str, sql: str, params: list[object]) -> Callable[[], int]:
    """One statement, every row through the cursor, kept on the indexes as gatecfg's reads are (planned
    freely, both hash-join a sequential scan of every point: 12.6 s at 80M values)."""
    engine = bench.sa.create_engine(url)
    raw = engine.raw_connection()

    def fetch() -> int:
        cursor = raw.cursor()
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_hashjoin = off")
        cursor.execute(sql, [*params, -bench.FINITE_MAX, bench.FINITE_MAX])
        rows = len(cursor.fetchall())
        cursor.close()
        raw.rollback()
        return rows

    return fetch


if __name__ == "__main__":
    sys.exit(main())
