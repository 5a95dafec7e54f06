"""`gatecfg backtest`: its arguments and the call into `gatecfg.commands.backtest`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gatecfg.cli_args import (
    SubParsers,
    add,
    base_option,
    db_option,
    format_option,
    gate_test_option,
    gates_option,
    metric_option,
    steps_option,
)
from gatecfg.extras import require
from gatecfg.settings import db_url

if TYPE_CHECKING:
    from gatecfg.analysis.replayer import Shift


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "backtest",
        "Replay stored nightlies under the gates (or proposed ones): failures, false alarms, flips.",
        "gatecfg backtest --test tests/e2e/test_foo_ci.py --base origin/main --format json",
        run,
    )
    gate_test_option(p, "only this test (default: all)")
    metric_option(p, "only this metric")
    gates_option(p)
    base_option(
        p,
        "also replay the gates as they were at this git revision and list the runs that flip "
        "(default: flips against the verdicts recorded at evaluation)",
    )
    p.add_argument(
        "--inject",
        metavar="SHIFT",
        type=_shift,
        help="also judge each night with a synthetic regression injected (never stored): `2sigma` (each "
        "step moved by 2 standard deviations of its window, in the gate's harmful direction), `-3sigma`, "
        "`10%%` (of the window's mean); a sign picks the direction (`--inject=-3sigma`); reports each gate's "
        "detection rate beside its false-alarm rate",
    )
    db_option(p)
    format_option(p)
    steps_option(
        p,
        "text: also a row per step of an all-steps gate that failed or flipped (default: a row per gate; "
        "JSON always lists them)",
    )


def _shift(text: str) -> Shift:
    from gatecfg.analysis.replayer import Shift

    try:
        return Shift.parse(text)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def run(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg backtest")
    from gatecfg.commands.backtest import backtest_command

    return backtest_command(
        db=db_url(args.db),
        gates=args.gates,
        base=args.base,
        test=args.test,
        metric=args.metric,
        fmt_name=args.format,
        inject=args.inject,
        per_step=args.steps,
    )
