"""`gatecfg evaluate`: its arguments and the call into `gatecfg.api.evaluate` and
`gatecfg.commands.evaluate` (the report's outputs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import (
    SubParsers,
    add,
    commit_option,
    db_option,
    format_option,
    gate_test_option,
    gates_option,
    meta_option,
    override_option,
    record_option,
    run_id_option,
    run_meta,
    series_labels,
    series_option,
    write_option,
)
from gatecfg.errors import InputError
from gatecfg.report import FORMATS, Output
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "evaluate",
        "Judge a run's metrics against stored history; the exit code gates the CI job.",
        "gatecfg evaluate --test tests/e2e/test_foo_ci.py --record metrics.jsonl --write",
        run,
    )
    gate_test_option(p, "the `test:` of a gate file", required=True)
    record_option(p, "JSON Lines (repeatable)", required=True)
    p.add_argument(
        "--confirm-with",
        action="append",
        type=Path,
        metavar="FILE",
        help="the record of a second run of the same code (repeatable, as --record): a gate fails the job "
        "only where both runs fail it (one slow run is not a regression)",
    )
    write_option(p, "store the run into history (nightlies only); the first one creates a SQLite store")
    p.add_argument(
        "--date",
        metavar="ISO8601",
        help="with --write: store the run at this past time, not now (a backfill; no zone means UTC); "
        "the baseline is still the store's newest runs, so backfill in date order",
    )
    p.add_argument(
        "--require-history",
        action="store_true",
        help="exit 1 when the store holds no run of this series (default: a notice, every gate cold)",
    )
    override_option(p, stored="REASON is stored with the run")
    gates_option(p)
    db_option(p)
    series_option(p)
    meta_option(p)
    run_id_option(p, "unique id of this evaluation (default: from CI, else generated)")
    commit_option(p, "default: GITHUB_SHA / CI_COMMIT_SHA / ...")
    p.add_argument("--branch", help="default: GITHUB_REF_NAME / CI_COMMIT_REF_NAME / ...")
    p.add_argument("--url", help="link to the CI run (default: built from the CI environment)")
    format_option(p, FORMATS, "report format (default: text)")
    p.add_argument("--output", type=Path, metavar="FILE", help="write the --format report here, not stdout")
    p.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FMT=FILE",
        help="also write another format to a file, e.g. junit=gatecfg.xml (repeatable)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="text report: also the steps that need attention and every gate, as tables",
    )


def _outputs(args: argparse.Namespace) -> list[Output]:
    outputs = [Output(args.format, args.output)]
    for item in args.report:
        fmt, sep, path = item.partition("=")
        if not sep or fmt not in FORMATS or not path:
            raise InputError.at(
                "--report", f"`{item}` is not FORMAT=FILE", hint=f"formats: {', '.join(FORMATS)}"
            )
        outputs.append(Output(fmt, Path(path)))
    return outputs


def run(args: argparse.Namespace) -> int:
    from gatecfg.api import evaluate
    from gatecfg.commands.evaluate import open_outputs, print_report
    from gatecfg.dates import run_date
    from gatecfg.outputs import Reads, check_outputs, settings_file
    from gatecfg.write_policy import check_override

    # Checked here, so that a bad reason is named by its flag rather than by the API's `write_override`.
    check_override(args.override_write_policy, write=args.write)
    date = (
        None if args.date is None else run_date(args.date, write=args.write, where="--date", needs="--write")
    )
    outputs = _outputs(args)
    records = [*args.record, *(args.confirm_with or [])]
    reads = Reads(store=db_url(args.db), records=records, gates=args.gates, settings=settings_file())
    files = [("--output" if index == 0 else "--report", o.path) for index, o in enumerate(outputs)]
    check_outputs([(flag, path) for flag, path in files if path is not None], reads)
    summary = open_outputs(outputs, reads)
    report = evaluate(
        args.test,
        args.record,
        gates=args.gates,
        db=args.db,
        write=args.write,
        run_id=args.run_id,
        commit=args.commit,
        series=series_labels(args.series),
        branch=args.branch,
        url=args.url,
        require_history=args.require_history,
        write_override=args.override_write_policy,
        meta=run_meta(args.meta),
        confirm_with=args.confirm_with,
        date=date,
    )
    return print_report(report, outputs, summary, verbose=args.verbose)
