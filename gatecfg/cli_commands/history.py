"""`gatecfg history`: its arguments and the call into `gatecfg.commands.history`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import SubParsers, add, db_option, series_labels, series_option, step, whole_number
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "history",
        "List stored values newest first, with trust and the band each value was judged against.",
        "gatecfg history --test tests/e2e/test_foo_ci.py --metric rollout/raw_reward --step 1",
        run,
    )
    p.add_argument("--test", required=True, metavar="T")
    p.add_argument("--metric", required=True, metavar="M")
    p.add_argument("--step", type=step, metavar="S", help="one step (`last` or -1 for `last`)")
    series_option(p)
    p.add_argument(
        "--limit", type=whole_number(0), default=100, help="newest N values (default 100; 0 for all)"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    db_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.history import history

    return history(
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        step=args.step,
        labels=series_labels(args.series) or None,
        limit=args.limit or None,
        fmt_name=args.format,
    )
