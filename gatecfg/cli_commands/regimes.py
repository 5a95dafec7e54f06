"""`gatecfg regimes`: its arguments and the call into `gatecfg.commands.regimes`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    db_option,
    format_option,
    gate_test_option,
    gates_option,
    metric_option,
    series_labels,
    series_option,
    step_option,
)
from gatecfg.extras import require
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "regimes",
        "Find the level shifts (regimes) of a gate's nightly series and the commit that opened each.",
        "gatecfg regimes --test tests/e2e/test_foo_ci.py --metric eval/all/avg_score --format json",
        run,
    )
    gate_test_option(p, "the `test:` of a gate file", required=True)
    which = p.add_mutually_exclusive_group(required=True)
    metric_option(which, "one gate's metric")
    which.add_argument(
        "--all",
        action="store_true",
        dest="scan_all",
        help="every gate and step of the test; lists the shifts that coincide across metrics at one commit",
    )
    step_option(p, "a step (or `last`), for a gate stored at several")
    format_option(p)
    gates_option(p)
    db_option(p)
    series_option(p)


def run(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg regimes")
    from gatecfg.commands.regimes import regimes

    return regimes(
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        step=args.step,
        scan_all=args.scan_all,
        labels=series_labels(args.series),
        fmt_=args.format,
    )
