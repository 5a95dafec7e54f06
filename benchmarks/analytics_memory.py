"""Peak memory of the analytics over a whole test, as the test grows in gates (issue 41 item 1).

    python benchmarks/analytics_memory.py [--gates 10 40] [--steps 200] [--runs 100] [--workdir DIR]

For each number of gates it seeds a SQLite store with `gatecfg import` of RUNS nightlies of one test of
that many gates x STEPS steps (bench.py's inputs and export), then runs `gatecfg regimes --all` and
`gatecfg backtest` over the whole test as processes and prints their wall and CPU seconds and peak RSS.
Both hold one gate's history at a time, so their peak memory should stay flat as the gates grow while
their time grows in proportion. A few minutes at the defaults (4,000 coordinates at 40 gates). Not part
of the test suite.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench import TEST, Scale, _process, _write_export, _write_inputs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gates", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--workdir", type=Path, help="keep the stores here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.workdir or Path(scratch)
        for gates in args.gates:
            scale = Scale(args.runs, gates, args.steps, 20, 0, 0, 1)
            work = root / f"{gates}x{args.steps}x{args.runs}"
            work.mkdir(parents=True, exist_ok=True)
            tree, _ = _write_inputs(work, scale)
            db = f"sqlite:///{work / 'history.db'}"
            if not (work / "history.db").exists():
                export = _write_export(work / "export.jsonl", scale, scale.runs)
                seeded = _process(
                    ["import", "--test", TEST, "--gates", str(tree), "--db", db, str(export)], work
                )
                print(f"{gates} gates: import {seeded}")
            values = args.runs * gates * args.steps
            for argv in (["regimes", "--all"], ["backtest"]):
                measured = _process([*argv, "--test", TEST, "--gates", str(tree), "--db", db], work)
                print(f"{gates} gates, {values:,} values: {' '.join(argv):14} {measured}")


if __name__ == "__main__":
    main()
