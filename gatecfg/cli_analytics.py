"""The history analytics commands' parsers and handlers: regimes, rebaseline, import, report, compare."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import (
    SubParsers,
    add,
    allowance,
    check_store_write,
    db_option,
    gates_option,
    override_option,
    positive,
    series_labels,
    series_option,
    step,
)
from gatecfg.extras import require
from gatecfg.settings import db_url


def add_analytics(sub: SubParsers) -> None:
    """regimes, rebaseline, import, report, compare: the history analytics commands."""
    p = add(
        sub,
        "regimes",
        "Find the level shifts (regimes) of a gate's nightly series and the commit that opened each.",
        "gatecfg regimes --test tests/e2e/test_foo_ci.py --metric eval/all/avg_score --format json",
        _regimes,
    )
    p.add_argument("--test", required=True, metavar="T", help="the `test:` of a gate file")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--metric", metavar="M", help="one gate's metric")
    which.add_argument(
        "--all",
        action="store_true",
        dest="scan_all",
        help="every gate and step of the test; lists the shifts that coincide across metrics at one commit",
    )
    p.add_argument("--step", type=step, metavar="S", help="a step (or `last`), for a gate stored at several")
    p.add_argument("--format", choices=["text", "json"], default="text")
    gates_option(p)
    db_option(p)
    series_option(p)

    p = add(
        sub,
        "rebaseline",
        "Propose absolute limits from the current regime (with --write, edit the gate file in place).",
        "gatecfg rebaseline --test tests/e2e/test_foo_ci.py --metric eval/all/avg_score --last 20 --write",
        _rebaseline,
    )
    p.add_argument("--test", required=True, metavar="T", help="the `test:` of a gate file")
    p.add_argument("--metric", metavar="M", help="one gate (default: every gate with limits or a band)")
    since = p.add_mutually_exclusive_group()
    since.add_argument(
        "--since", metavar="REV|DATE", help="the regime starts at the first run of this commit, or this date"
    )
    since.add_argument("--last", type=positive, metavar="N", help="the regime is the newest N runs")
    p.add_argument(
        "--method",
        choices=["minmax", "quantile"],
        default="minmax",
        help="minmax: the regime's min/max; quantile: its 5th/95th percentiles (default: minmax)",
    )
    p.add_argument(
        "--allowance",
        type=allowance,
        default=0.05,
        metavar="A",
        help="widen each limit by this fraction of its magnitude (default: 0.05)",
    )
    p.add_argument("--write", action="store_true", help="edit the gate file in place; only numbers change")
    p.add_argument("--format", choices=["text", "json"], default="text")
    gates_option(p)
    db_option(p)
    series_option(p)

    p = add(
        sub,
        "import",
        "Backfill a test's history from a CSV or JSON Lines export (one transaction).",
        "gatecfg import --test tests/e2e/test_foo_ci.py exports/nightlies.csv",
        _import,
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a .csv export (header: run_id,date,commit[,trusted],METRIC or METRIC@STEP...) or a .jsonl "
        'one ({"run_id", "date", "commit", "metrics": {METRIC: value | [[step, value], ...]}} a line); '
        "or a folder, a quoted glob or several files of `evaluate --record` records: one run per file, in "
        "name order, dated by name (see --name-pattern)",
    )
    p.add_argument("--test", required=True, metavar="T", help="the `test:` of a gate file")
    p.add_argument(
        "--name-pattern",
        metavar="REGEX",
        help="record files: a regular expression the file name (without suffix) matches in full, with "
        "named groups run_id, date, commit (default: DATE[_COMMIT][_...], e.g. 2024-05-01_3f2a9c1.jsonl; "
        "the run id is the name without suffix)",
    )
    p.add_argument(
        "--start",
        metavar="DATE",
        help="record files whose names hold no date: the first is dated DATE, each next one a day later",
    )
    p.add_argument(
        "--trust-all",
        action="store_true",
        help="a history known to be clean: every run trusted (its export's `trusted` aside), none judged out "
        "of its baseline. Default: each run is judged and stored as a nightly `evaluate --write` would have "
        "(its failures kept out of their gates' baselines, shifts followed as the policy says)",
    )
    gates_option(p)
    db_option(p)
    series_option(p)
    override_option(p)

    p = add(
        sub,
        "report",
        "Write a static HTML report: tests, gates, latest status, one plot per gate.",
        "gatecfg report --html site/gatecfg --test tests/e2e/test_foo_ci.py",
        _report,
    )
    p.add_argument("--html", required=True, type=Path, metavar="DIR", help="output folder (index.html)")
    p.add_argument("--test", metavar="T", help="only this test (default: every test with a gate file)")
    p.add_argument(
        "--png", action="store_true", help="PNG plots in files beside the pages (default: inline SVG)"
    )
    gates_option(p)
    db_option(p)

    p = add(
        sub,
        "compare",
        "Compare two stored runs of a test (or a record with a stored run): per gate, both values, the "
        "change, and the change in spread.",
        "gatecfg compare nightly-0411 nightly-0412 --steps",
        _compare,
    )
    p.add_argument("run_a", metavar="RUN_A", help="a stored run id (`a`)")
    other = p.add_mutually_exclusive_group(required=True)
    other.add_argument("run_b", nargs="?", metavar="RUN_B", help="another stored run id of the test (`b`)")
    other.add_argument(
        "--record",
        action="append",
        type=Path,
        metavar="FILE",
        help="instead of RUN_B: a metrics record (repeatable), selected as evaluate selects it",
    )
    p.add_argument(
        "--steps",
        action="store_true",
        help="text: also a row per step under each gate (JSON always lists them)",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    gates_option(p)
    db_option(p)


def _compare(args: argparse.Namespace) -> int:
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


def _regimes(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg regimes")
    from gatecfg.commands.regimes import regimes

    return regimes(
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        step=args.step,
        scan_all=args.scan_all,
        labels=series_labels(args.series),
        fmt_=args.format,
    )


def _rebaseline(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg rebaseline")
    from gatecfg.commands.rebaseline import rebaseline

    return rebaseline(
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        since=args.since,
        last=args.last,
        method=args.method,
        allowance=args.allowance,
        write=args.write,
        labels=series_labels(args.series),
        fmt_=args.format,
    )


def _import(args: argparse.Namespace) -> int:
    from gatecfg.commands.import_ import import_command

    check_store_write(args, where="gatecfg import", action="import runs into history", test=args.test)

    return import_command(
        gates=args.gates,
        db=db_url(args.db),
        test=args.test,
        paths=args.paths,
        labels=series_labels(args.series),
        name_pattern=args.name_pattern,
        start=args.start,
        trust_all=args.trust_all,
    )


def _report(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg report")
    from gatecfg.commands.report import report
    from gatecfg.outputs import check_outputs, project_reads

    # The report's one fixed name; its pages go into a folder of their own beside it.
    check_outputs([("--html", args.html / "index.html")], project_reads(db=args.db, gates=args.gates))

    return report(gates=args.gates, db=db_url(args.db), out=args.html, test=args.test, png=args.png)
