"""`gatecfg trust` and `gatecfg untrust`: their arguments and the call into `gatecfg.commands.trust`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    check_store_write,
    commit_option,
    db_option,
    metric_option,
    override_option,
    reason_option,
    run_id_option,
)
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    for verb, trusted in (("untrust", False), ("trust", True)):
        p = add(
            sub,
            verb,
            f"Mark stored runs as {'trusted' if trusted else 'untrusted'} "
            f"({'they form baselines again' if trusted else 'kept out of baselines'}); deletes nothing.",
            f"gatecfg {verb} --commit 3f2a9c1 --reason 'flaky runner'",
            run,
        )
        p.set_defaults(trusted=trusted)
        chosen = p.add_mutually_exclusive_group(required=True)
        run_id_option(chosen, "one run")
        commit_option(chosen, "every run of a commit")
        chosen.add_argument("--ci-run-id", help="every run of a CI run (all tests, all attempts)")
        metric_option(
            p,
            "only this metric's values of those runs (its gate's baseline); the run's other gates keep their "
            "trust",
            metavar=None,
        )
        reason_option(p, "kept with the run, shown by `gatecfg history`")
        db_option(p)
        override_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.trust import set_trust

    verb = "trust" if args.trusted else "untrust"
    check_store_write(args, where=f"gatecfg {verb}", action=f"{verb} stored runs")
    return set_trust(
        db=db_url(args.db),
        trusted=args.trusted,
        run_id=args.run_id,
        commit=args.commit,
        ci_run_id=args.ci_run_id,
        metric=args.metric,
        reason=args.reason,
    )
