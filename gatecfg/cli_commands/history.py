"""`gatecfg history`: its arguments and the call into `gatecfg.commands.history`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    db_option,
    format_option,
    gate_test_option,
    metric_option,
    series_labels,
    series_option,
    step_option,
    whole_number,
)
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "history",
        "List stored values newest first, with trust and the band each value was judged against.",
        "gatecfg history --test tests/e2e/test_foo_ci.py --metric rollout/raw_reward --step 1",
        run,
    )
    gate_test_option(p, required=True)
    metric_option(p, required=True)
    step_option(p, "one step (`last` or -1 for `last`)")
    series_option(p)
    p.add_argument(
        "--limit", type=whole_number(0), default=100, help="newest N values (default 100; 0 for all)"
    )
    format_option(p)
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
