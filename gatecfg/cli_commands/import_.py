"""`gatecfg import`: its arguments and the call into `gatecfg.commands.import_`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import (
    SubParsers,
    add,
    check_store_write,
    db_option,
    gate_test_option,
    gates_option,
    override_option,
    series_labels,
    series_option,
)
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "import",
        "Backfill a test's history from a CSV or JSON Lines export (one transaction).",
        "gatecfg import --test tests/e2e/test_foo_ci.py exports/nightlies.csv",
        run,
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
    gate_test_option(p, "the `test:` of a gate file", required=True)
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


def run(args: argparse.Namespace) -> int:
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
