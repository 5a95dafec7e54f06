"""`gatecfg demo`: its arguments and the call into `gatecfg.commands.demo`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import SubParsers, add


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "demo",
        "A tour: seed a SQLite history from bundled nightlies, then evaluate a regressed PR run.",
        "gatecfg demo",
        run,
    )
    p.add_argument(
        "--db-file",
        type=Path,
        default=Path(".gatecfg/demo.db"),
        help="default: .gatecfg/demo.db (recreated; the demo's gates and records are unpacked beside it)",
    )


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.demo import demo
    from gatecfg.outputs import check_outputs, project_reads

    # The demo recreates its file: never the project's own history.
    check_outputs([("--db-file", args.db_file)], project_reads())
    return demo(db_file=args.db_file)
