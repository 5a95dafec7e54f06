"""`gatecfg diff`: its arguments and the call into `gatecfg.commands.diff`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    base_option,
    db_option,
    format_option,
    gates_option,
    series_labels,
    series_option,
)
from gatecfg.settings import optional_db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "diff",
        "Before merge: the gates whose keys the working tree's edits move (cold baselines), and why.",
        "gatecfg diff --base origin/main --format github",
        run,
    )
    base_option(p, "git revision to compare with, e.g. origin/main", required=True)
    gates_option(p)
    db_option(p, "also count the stored values each re-key orphans (default: $GATECFG_DB_URL, if set)")
    series_option(p)
    format_option(p, ["text", "json", "github"])
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
