"""The re-key commands' parsers and handlers: diff, carry, prune."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    MAX_COUNT,
    SubParsers,
    add,
    check_store_write,
    db_option,
    gates_option,
    override_option,
    series_labels,
    series_option,
    whole_number,
)
from gatecfg.errors import InputError
from gatecfg.settings import db_url, optional_db_url


def add_rekey(sub: SubParsers) -> None:
    """diff, carry, prune: re-keys before merge, carried history, orphaned coordinates."""
    p = add(
        sub,
        "diff",
        "Before merge: the gates whose keys the working tree's edits move (cold baselines), and why.",
        "gatecfg diff --base origin/main --format github",
        _diff,
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

    p = add(
        sub,
        "carry",
        "After a constraint-only re-key, let the new keys' baselines read the old keys' history.",
        "gatecfg carry --base origin/main --metric rollout/raw_reward --reason 'rel_down 0.2 -> 0.25'",
        _carry,
    )
    p.add_argument("--base", metavar="REV", help="git revision the gates are compared with, e.g. origin/main")
    p.add_argument("--test", metavar="T", help="only this test's gates")
    p.add_argument("--metric", metavar="M", help="only this metric")
    p.add_argument("--reason", metavar="TEXT", help="why the old history still holds (recorded; required)")
    p.add_argument(
        "--undo", action="store_true", help="undo the carries these options select (they stay on record)"
    )
    p.add_argument("--commit", help="the commit recorded with the carry (default: git HEAD)")
    p.add_argument(
        "--dry-run", action="store_true", help="list what would be carried (or undone), record nothing"
    )
    gates_option(p)
    db_option(p)
    series_option(p)
    override_option(p)

    p = add(
        sub,
        "prune",
        "List stored history nothing reads any more: coordinates no gate declares (--orphaned), or each "
        "coordinate's values older than its newest N trusted ones (--keep N); delete them with --yes.",
        "gatecfg prune --orphaned --dry-run\n  gatecfg prune --keep 100 --yes",
        _prune,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--orphaned", action="store_true", help="coordinates no declaration uses")
    what.add_argument(
        "--keep",
        type=whole_number(-MAX_COUNT),  # bounded; the command words what is too small
        metavar="N",
        help="per coordinate, keep the newest N trusted values at each step (N >= every declared window)",
    )
    p.add_argument("--dry-run", action="store_true", help="only list them")
    p.add_argument("--yes", action="store_true", help="delete them (one transaction)")
    gates_option(p)
    db_option(p)
    override_option(p)


def _diff(args: argparse.Namespace) -> int:
    from gatecfg.commands.diff import diff_command

    return diff_command(
        base=args.base,
        gates=args.gates,
        db=optional_db_url(args.db),
        labels=series_labels(args.series),
        fmt_name=args.format,
        fail_on_rekey=args.fail_on_rekey,
    )


def _carry(args: argparse.Namespace) -> int:
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


def _prune(args: argparse.Namespace) -> int:
    from gatecfg.commands.prune import keep_command, prune_command

    if args.yes and not args.dry_run:
        check_store_write(args, where="--yes", action="delete stored history")

    if args.keep is not None:
        if args.keep < 1:
            raise InputError.at("gatecfg prune", f"--keep must be at least 1, got {args.keep}")
        return keep_command(
            gates=args.gates, db=db_url(args.db), keep=args.keep, dry_run=args.dry_run, yes=args.yes
        )
    return prune_command(gates=args.gates, db=db_url(args.db), dry_run=args.dry_run, yes=args.yes)
