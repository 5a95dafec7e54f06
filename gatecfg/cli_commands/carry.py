"""`gatecfg carry`: its arguments and the call into `gatecfg.commands.carry`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    base_option,
    check_store_write,
    commit_option,
    db_option,
    dry_run_option,
    gate_test_option,
    gates_option,
    metric_option,
    override_option,
    reason_option,
    series_labels,
    series_option,
)
from gatecfg.errors import InputError
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "carry",
        "After a constraint-only re-key, let the new keys' baselines read the old keys' history.",
        "gatecfg carry --base origin/main --metric rollout/raw_reward --reason 'rel_down 0.2 -> 0.25'",
        run,
    )
    base_option(p, "git revision the gates are compared with, e.g. origin/main")
    gate_test_option(p, "only this test's gates")
    metric_option(p, "only this metric")
    reason_option(p, "why the old history still holds (recorded; required)", metavar="TEXT")
    p.add_argument(
        "--undo", action="store_true", help="undo the carries these options select (they stay on record)"
    )
    commit_option(p, "the commit recorded with the carry (default: git HEAD)")
    dry_run_option(p, "list what would be carried (or undone), record nothing")
    gates_option(p)
    db_option(p)
    series_option(p)
    override_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.carry import carry_command, undo_command

    labels = series_labels(args.series)
    if not args.dry_run:
        verb = "undo carries" if args.undo else "carry history to new keys"
        check_store_write(args, where="gatecfg carry", action=verb, test=args.test)
    if args.undo:
        return undo_command(
            base=args.base,
            gates=args.gates,
            db=db_url(args.db),
            test=args.test,
            metric=args.metric,
            labels=labels,
            reason=args.reason,
            dry_run=args.dry_run,
        )
    missing = [flag for flag, value in (("--base", args.base), ("--reason", args.reason)) if not value]
    if missing:
        raise InputError.at(
            "gatecfg carry",
            f"carry needs {' and '.join(missing)}",
            hint="e.g. gatecfg carry --base origin/main --reason 'only the band changed'",
        )
    return carry_command(
        base=args.base,
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        labels=labels,
        reason=args.reason,
        commit=args.commit,
        dry_run=args.dry_run,
    )
