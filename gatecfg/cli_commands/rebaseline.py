"""`gatecfg rebaseline`: its arguments and the call into `gatecfg.commands.rebaseline`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    allowance,
    db_option,
    format_option,
    gate_test_option,
    gates_option,
    metric_option,
    positive,
    series_labels,
    series_option,
    write_option,
)
from gatecfg.extras import require
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "rebaseline",
        "Propose absolute limits from the current regime (with --write, edit the gate file in place).",
        "gatecfg rebaseline --test tests/e2e/test_foo_ci.py --metric eval/all/avg_score --last 20 --write",
        run,
    )
    gate_test_option(p, "the `test:` of a gate file", required=True)
    metric_option(p, "one gate (default: every gate with limits or a band)")
    since = p.add_mutually_exclusive_group()
    since.add_argument(
        "--since", metavar="REV|DATE", help="the regime starts at the first run of this commit, or this date"
    )
    since.add_argument("--last", type=positive, metavar="N", help="the regime is the newest N runs")
    p.add_argument(
        "--method",
        choices=["minmax", "quantile"],
        default="minmax",
        help="minmax: the regime's min/max; quantile: its 5th/95th percentiles (default: minmax)",
    )
    p.add_argument(
        "--allowance",
        type=allowance,
        default=0.05,
        metavar="A",
        help="widen each limit by this fraction of its magnitude (default: 0.05)",
    )
    write_option(p, "edit the gate file in place; only numbers change")
    format_option(p)
    gates_option(p)
    db_option(p)
    series_option(p)


def run(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg rebaseline")
    from gatecfg.commands.rebaseline import rebaseline

    return rebaseline(
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        since=args.since,
        last=args.last,
        method=args.method,
        allowance=args.allowance,
        write=args.write,
        labels=series_labels(args.series),
        fmt_=args.format,
    )
