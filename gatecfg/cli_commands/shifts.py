"""`gatecfg shifts`: its arguments and the call into `gatecfg.commands.shifts`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    check_store_write,
    db_option,
    format_option,
    gate_test_option,
    override_option,
    positive,
    reason_option,
)
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "shifts",
        "List the sustained shifts evaluate followed as new baselines (policy.accept_shift_after); undo one.",
        "gatecfg shifts --undo 3 --reason 'the slowdown is a bug, being fixed'",
        run,
    )
    gate_test_option(p, "only this test")
    p.add_argument("--all", action="store_true", dest="everything", help="undone shifts too")
    p.add_argument(
        "--undo",
        type=positive,
        metavar="N",
        help="undo shift N: its gate's baseline reads the runs before it again, its failing runs leave it",
    )
    reason_option(p, "kept with the undo, shown by `gatecfg shifts --all`")
    format_option(p)
    db_option(p)
    override_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.shifts import shifts

    if args.undo is not None:
        check_store_write(args, where="--undo", action="undo an accepted shift")
    return shifts(
        db=db_url(args.db),
        test=args.test,
        everything=args.everything,
        undo=args.undo,
        reason=args.reason,
        fmt=args.format,
    )
