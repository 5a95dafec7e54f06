"""`gatecfg alerts` and its `ack`, `undo` and `decisions`: their arguments and the calls into
`gatecfg.commands.alerts` (docs/alerts.md)."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    check_store_write,
    db_option,
    format_option,
    gate_test_option,
    gates_option,
    override_option,
    reason_option,
)
from gatecfg.errors import InputError
from gatecfg.settings import db_url

# `gatecfg.alerts.VERDICTS` and `commands.alerts.MEANS`, spelled here so that `--help` imports neither.
VERDICTS = ("intended", "environment", "false-alarm", "regression")
VERDICT_HELP = (
    "intended: the change was meant, every gate of the alert takes the new level; environment: the image, "
    "driver or hardware moved, every gate takes the new level; false-alarm: noise, the failed values "
    "rejoin their baselines; regression: the gates keep failing until the level returns, then the "
    "alert closes by itself"
)


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "alerts",
        "The open alerts of the store (or of one test), one per cause: the commit or environment change "
        "that began them; triage each once (`alerts ack`).",
        "gatecfg alerts --stats\n"
        '  gatecfg alerts ack 3f2a9c1e --as environment --reason "image 26.04 rollout"',
        run,
    )
    gate_test_option(p, "only this test's alerts")
    p.add_argument("--stats", action="store_true", help="also what people said, per gate and per test")
    format_option(p, ("text", "json", "markdown"))
    db_option(p)
    actions = p.add_subparsers(title="triage", metavar="ACTION", parser_class=type(p))
    q = add(
        actions,
        "ack",
        "Decide about one alert, once for all its gates; stored with who, when and why, undone by "
        "`alerts undo`.",
        'gatecfg alerts ack 3f2a9c1e --as regression --reason "router bug" --link https://github.com/o/r/issues/812',
        run_ack,
    )
    q.add_argument(
        "alert",
        metavar="ALERT",
        help="the alert's id as `gatecfg alerts` prints it (or 4+ of its first characters)",
    )
    q.add_argument("--as", dest="verdict", choices=VERDICTS, required=True, help=VERDICT_HELP)
    reason_option(q, "why, in a sentence (required): kept in the audit table")
    q.add_argument("--link", metavar="URL", help="the issue or pull request that says more")
    db_option(q, inherited=True)
    gates_option(q)
    override_option(q)
    q = add(
        actions,
        "undo",
        "Undo an alert decision: every value it moved holds again what it held before.",
        'gatecfg alerts undo 4 --reason "acked the wrong alert"',
        run_undo,
    )
    q.add_argument(
        "decision", type=int, metavar="N", help="the decision's number (`gatecfg alerts decisions`)"
    )
    reason_option(q, "kept with the undo")
    db_option(q, inherited=True)
    gates_option(q)
    override_option(q)
    q = add(
        actions,
        "decisions",
        "The audit table: every alert decision with who, when and why, newest first.",
        "gatecfg alerts decisions --undone",
        run_decisions,
    )
    q.add_argument("--undone", action="store_true", help="undone decisions too")
    format_option(q)
    db_option(q, inherited=True)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.alerts import alerts

    return alerts(db=db_url(args.db), test=args.test, stats=args.stats, fmt=args.format)


def run_ack(args: argparse.Namespace) -> int:
    from gatecfg.commands.alerts import ack

    if args.reason is None:
        raise InputError.at("--reason", "is required: say why in a sentence, the audit table keeps it")
    check_store_write(args, where="alerts ack", action="triage an alert")
    return ack(db=db_url(args.db), alert=args.alert, verdict=args.verdict, reason=args.reason, link=args.link)


def run_undo(args: argparse.Namespace) -> int:
    from gatecfg.commands.alerts import undo

    check_store_write(args, where="alerts undo", action="undo an alert decision")
    return undo(db=db_url(args.db), decision=args.decision, reason=args.reason)


def run_decisions(args: argparse.Namespace) -> int:
    from gatecfg.commands.alerts import decisions

    return decisions(db=db_url(args.db), everything=args.undone, fmt=args.format)
