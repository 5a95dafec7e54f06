"""`gatecfg diff`: its arguments and the call into `gatecfg.commands.diff`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import SubParsers, add, gates_option, series_labels, series_option
from gatecfg.settings import optional_db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "diff",
        "Before merge: the gates whose keys the working tree's edits move (cold baselines), and why.",
        "gatecfg diff --base origin/main --format github",
        run,
    )
    p.add_argument(
        "--base", required=True, metavar="REV", help="git revision to compare with, e.g. origin/main"
    )
    gates_option(p)
    p.add_argument(
        "--db",
        metavar="URL",
        help="also count the stored values each re-key orphans (default: $GATECFG_DB_URL, if set)",
    )
    series_option(p)
    p.add_argument("--format", choices=["text", "json", "github"], default="text")
    p.add_argument(
        "--fail-on-rekey", action="store_true", help="exit 1 when a gate re-keys without carried history"
    )


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.diff import diff_command

    return diff_command(
        base=args.base,
        gates=args.gates,
        db=optional_db_url(args.db),
        labels=series_labels(args.series),
        fmt_name=args.format,
        fail_on_rekey=args.fail_on_rekey,
    )
