"""`gatecfg resolve`: its arguments and the call into `gatecfg.commands.resolve`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import (
    SubParsers,
    add,
    format_option,
    gate_test_option,
    gates_option,
    series_labels,
    series_option,
)


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "resolve",
        "Show what each gate resolves to, its keys, and the file:line of every literal.",
        "gatecfg resolve --test tests/e2e/test_foo_ci.py --format json",
        run,
    )
    gates_option(p)
    gate_test_option(p, "only this test (default: all)")
    series_option(p)
    format_option(p)


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.resolve import resolve

    return resolve(gates=args.gates, test=args.test, labels=series_labels(args.series), fmt=args.format)
