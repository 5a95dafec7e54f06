"""`gatecfg prune`: its arguments and the call into `gatecfg.commands.prune`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    MAX_COUNT,
    SubParsers,
    add,
    check_store_write,
    db_option,
    dry_run_option,
    gates_option,
    override_option,
    whole_number,
)
from gatecfg.errors import InputError
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "prune",
        "List stored history nothing reads any more: coordinates no gate declares (--orphaned), or each "
        "coordinate's values older than its newest N trusted ones (--keep N); delete them with --yes.",
        "gatecfg prune --orphaned --dry-run\n  gatecfg prune --keep 100 --yes",
        run,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--orphaned", action="store_true", help="coordinates no declaration uses")
    what.add_argument(
        "--keep",
        type=whole_number(-MAX_COUNT),  # bounded; the command words what is too small
        metavar="N",
        help="per coordinate, keep the newest N trusted values at each step (N >= every declared window)",
    )
    dry_run_option(p, "only list them")
    p.add_argument("--yes", action="store_true", help="delete them (one transaction)")
    gates_option(p)
    db_option(p)
    override_option(p)


def run(args: argparse.Namespace) -> int:
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
