"""`gatecfg compare`: its arguments and the call into `gatecfg.commands.compare`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    db_option,
    format_option,
    gates_option,
    record_option,
    steps_option,
)
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "compare",
        "Compare two stored runs of a test (or a record with a stored run): per gate, both values, the "
        "change, and the change in spread.",
        "gatecfg compare nightly-0411 nightly-0412 --steps",
        run,
    )
    p.add_argument("run_a", metavar="RUN_A", help="a stored run id (`a`)")
    other = p.add_mutually_exclusive_group(required=True)
    other.add_argument("run_b", nargs="?", metavar="RUN_B", help="another stored run id of the test (`b`)")
    record_option(other, "instead of RUN_B: a metrics record (repeatable), selected as evaluate selects it")
    steps_option(p, "text: also a row per step under each gate (JSON always lists them)")
    format_option(p)
    gates_option(p)
    db_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.compare import compare

    return compare(
        gates=args.gates,
        db=db_url(args.db),
        run_a=args.run_a,
        run_b=args.run_b,
        records=args.record or [],
        per_step=args.steps,
        fmt_name=args.format,
    )
