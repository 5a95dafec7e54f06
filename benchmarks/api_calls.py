"""What one `gatecfg.evaluate(write=True)` costs a process that calls it again and again (a harness that
evaluates its runs in process), beside the bare client doing the same reads and write (issue 41, item 2).

    python benchmarks/api_calls.py                          # a SQLite file in a temporary folder
    python benchmarks/api_calls.py --db postgresql+psycopg://postgres@127.0.0.1:5432/scale_api

Per call it counts what is made anew (engines, DBAPI connections, statements SQLAlchemy compiled rather
than found in its cache) and times the call: the best and the median of `--calls` calls after `--warm`
ones, beside the bare client (benchmarks/writer_throughput.py's: the driver alone, one transaction). The
counts are the comparison to trust on a busy machine; the times are wall seconds. Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench
import sqlalchemy as sa
from sqlalchemy.engine import default
from writer_throughput import Bare

import gatecfg
from gatecfg.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", help="store URL (default: a new SQLite file)")
    parser.add_argument("--gates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--warm", type=int, default=25, help="calls first, so that baselines are full")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatecfg-api-") as temp:
        work = Path(temp)
        url = args.db or f"sqlite:///{work / 'history.db'}"
        with Store.open(url, check_schema=False) as store:
            store.upgrade()
        scale = bench.Scale(0, args.gates, args.steps, args.window, 1, 1, 1)
        gates, record = bench._write_inputs(work, scale)
        counts = _Counts()
        n = iter(range(10**9))
        tag = uuid.uuid4().hex[:8]

        def api() -> None:
            run_id = f"api-{tag}-{next(n)}"
            report = gatecfg.evaluate(bench.TEST, record, gates=gates, db=url, write=True, run_id=run_id)
            assert report.run.written

        for _ in range(args.warm):
            api()
        counts.reset()
        api_times = _times(api, args.calls)
        per_call = {name: value / args.calls for name, value in counts.seen.items()}
        bare = Bare(url, str(gates), str(record), args.window)
        try:
            bare_times = _times(lambda: bare.run(f"bare-{tag}-{next(n)}"), args.calls)
        finally:
            bare.close()
    shape = f"{args.gates} gates x {args.steps} steps, window {args.window}"
    print(f"{shape}: {args.calls} calls, {args.warm} first")
    print("| client | best ms | median ms | engines / call | connections / call | compiled / call |")
    print("|---|---|---|---|---|---|")
    print(
        f"| gatecfg.evaluate(write=True) | {min(api_times) * 1e3:.1f} "
        f"| {statistics.median(api_times) * 1e3:.1f} "
        f"| {per_call['engines']:.2f} | {per_call['connections']:.2f} | {per_call['compiled']:.2f} |"
    )
    print(
        f"| bare client | {min(bare_times) * 1e3:.1f} | {statistics.median(bare_times) * 1e3:.1f} "
        "| 0 | 0 | 0 |"
    )


class _Counts:
    """Engines created, DBAPI connections opened and statements compiled (cache misses), process-wide."""

    def __init__(self) -> None:
        self.seen = {"engines": 0, "connections": 0, "compiled": 0}
        sa.event.listen(sa.engine.Engine, "engine_connect", self._any)  # keeps the class-level events alive
        sa.event.listen(sa.pool.Pool, "connect", lambda *_: self._add("connections"))
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._compiled)
        original = sa.engine.create.create_engine

        def counted(*given: Any, **options: Any) -> sa.Engine:
            self._add("engines")
            return original(*given, **options)

        sa.create_engine = counted  # gatecfg.store.engine calls sa.create_engine

    def _any(self, *_: Any) -> None:
        pass

    def _add(self, name: str) -> None:
        self.seen[name] += 1

    def _compiled(self, *event: Any) -> None:
        context = event[4]
        if getattr(context, "cache_hit", None) is default.CACHE_MISS:
            self._add("compiled")

    def reset(self) -> None:
        self.seen = dict.fromkeys(self.seen, 0)


def _times(call: Callable[[], None], calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return times


if __name__ == "__main__":
    main()
