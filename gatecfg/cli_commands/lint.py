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
    report_files,
    report_option,
    series_labels,
    series_option,
)
from gatecfg.extras import require
from gatecfg.settings import db_url

FORMATS = ("text", "github", "json")


def register(sub: SubParsers) -> None:
    p = add(sub, "lint", "Check gate files against the schema and the rules.", "gatecfg lint gates/", run)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (default: --gates)")
    gates_option(p)
    format_option(p, FORMATS)
    report_option(p, "json=problems.json")
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
    from gatecfg.outputs import checked_reports, project_reads

    reports = checked_reports(report_files(args.report, FORMATS), project_reads(db=args.db, gates=args.gates))
    if args.max_false_alarm is None:
        return lint(args.paths, gates=args.gates, fmt=args.format, reports=reports)
    require("analytics", "gatecfg lint --max-false-alarm")
    return lint(
        args.paths,
        gates=args.gates,
        fmt=args.format,
        reports=reports,
        db=db_url(args.db),
        max_false_alarm=args.max_false_alarm,
        labels=series_labels(args.series),
    )
