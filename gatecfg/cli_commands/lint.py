"""`gatecfg lint`: its arguments and the call into `gatecfg.commands.lint`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import (
    SubParsers,
    add,
    db_option,
    format_option,
    gates_option,
    probability,
    series_labels,
    series_option,
)
from gatecfg.extras import require
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(sub, "lint", "Check gate files against the schema and the rules.", "gatecfg lint gates/", run)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (default: --gates)")
    gates_option(p)
    format_option(p, ["text", "github", "json"])
    p.add_argument(
        "--max-false-alarm",
        type=probability,
        metavar="P",
        help="also warn on gates whose estimated false-alarm rate per night, from the history in --db, "
        "is above P (e.g. 0.05); warnings keep the exit code 0",
    )
    db_option(p)
    series_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.lint import lint

    if args.max_false_alarm is None:
        return lint(args.paths, gates=args.gates, fmt=args.format)
    require("analytics", "gatecfg lint --max-false-alarm")
    return lint(
        args.paths,
        gates=args.gates,
        fmt=args.format,
        db=db_url(args.db),
        max_false_alarm=args.max_false_alarm,
        labels=series_labels(args.series),
    )
