"""`gatecfg report`: its arguments and the call into `gatecfg.commands.report`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import SubParsers, add, db_option, gate_test_option, gates_option
from gatecfg.extras import require
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "report",
        "Write a static HTML report: tests, gates, latest status, one plot per gate.",
        "gatecfg report --html site/gatecfg --test tests/e2e/test_foo_ci.py",
        run,
    )
    p.add_argument("--html", required=True, type=Path, metavar="DIR", help="output folder (index.html)")
    gate_test_option(p, "only this test (default: every test with a gate file)")
    p.add_argument(
        "--png", action="store_true", help="PNG plots in files beside the pages (default: inline SVG)"
    )
    gates_option(p)
    db_option(p)


def run(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg report")
    from gatecfg.commands.report import report
    from gatecfg.outputs import check_outputs, project_reads

    # The report's one fixed name; its pages go into a folder of their own beside it.
    check_outputs([("--html", args.html / "index.html")], project_reads(db=args.db, gates=args.gates))

    return report(gates=args.gates, db=db_url(args.db), out=args.html, test=args.test, png=args.png)
