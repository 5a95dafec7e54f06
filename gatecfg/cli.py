"""Command-line wiring: argument parsing only; each verb lives in `gatecfg.commands.<verb>`.

The shared options and argument types are in `cli_args`; the analytics (`cli_analytics`) and re-key
(`cli_rekey`) commands add their own subparsers. `main` is the boundary that turns errors into exit codes."""

from __future__ import annotations

import argparse
import io
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gatecfg import __version__
from gatecfg.cli_analytics import add_analytics
from gatecfg.cli_args import (
    DEBUG_HELP,
    Handler,
    Parser,
    add,
    check_store_write,
    db_option,
    gates_option,
    meta_option,
    override_option,
    positive,
    probability,
    run_meta,
    series_labels,
    series_option,
    step,
    whole_number,
)
from gatecfg.cli_rekey import add_rekey
from gatecfg.cli_setup import add_setup
from gatecfg.errors import EXIT_BROKEN_PIPE, EXIT_BUG, GatecfgError, InputError, StoreError, format_problems
from gatecfg.escape import terminal
from gatecfg.extras import require
from gatecfg.report import FORMATS, Output
from gatecfg.settings import db_url, gates_root

if TYPE_CHECKING:
    from gatecfg.analysis.replayer import Shift

SCHEMA_NAMES = ("base", "gatefile")  # gatecfg.commands.schema.SCHEMAS, named without importing pydantic


def build_parser() -> Parser:
    parser = Parser(
        prog="gatecfg",
        description="Declarative history gates for nightly ML training runs.",
        epilog="`gatecfg COMMAND --help` explains a command with an example; `gatecfg demo` is a 1-minute "
        "tour. exit codes: 0 ok, 1 an enforced gate failed, 2 invalid gate files/record/arguments, "
        "3 history store missing or unreachable, 70 a bug in gatecfg.",
    )
    parser.add_argument("--version", action="version", version=f"gatecfg {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)

    p = add(sub, "lint", "Check gate files against the schema and the rules.", "gatecfg lint gates/", _lint)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (default: --gates)")
    gates_option(p)
    p.add_argument("--format", choices=["text", "github", "json"], default="text")
    p.add_argument(
        "--max-false-alarm",
        type=probability,
        metavar="P",
        help="also warn on gates whose estimated false-alarm rate per night, from the history in --db, "
        "is above P (e.g. 0.05); warnings keep the exit code 0",
    )
    db_option(p)
    series_option(p)

    p = add(
        sub,
        "resolve",
        "Show what each gate resolves to, its keys, and the file:line of every literal.",
        "gatecfg resolve --test tests/e2e/test_foo_ci.py --format json",
        _resolve,
    )
    gates_option(p)
    p.add_argument("--test", metavar="T", help="only this test (default: all)")
    series_option(p)
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = add(
        sub,
        "schema",
        "Write the JSON Schema files under schema/ from the models (or --check they are current).",
        "gatecfg schema --check",
        _schema,
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 if the files are stale, write nothing")
    what.add_argument(
        "--print",
        dest="print_name",
        choices=SCHEMA_NAMES,
        metavar="NAME",
        help="write one schema to stdout, for an editor or check-jsonschema: `base` (base.yaml files) or "
        "`gatefile` (gate files)",
    )
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="output folder (default: schema/, in gatecfg's own checkout only: elsewhere give --dir or "
        "--print)",
    )
    p = add(
        sub,
        "evaluate",
        "Judge a run's metrics against stored history; the exit code gates the CI job.",
        "gatecfg evaluate --test tests/e2e/test_foo_ci.py --record metrics.jsonl --write",
        _evaluate,
    )
    p.add_argument("--test", required=True, metavar="T", help="the `test:` of a gate file")
    p.add_argument(
        "--record", required=True, action="append", type=Path, metavar="FILE", help="JSON Lines (repeatable)"
    )
    p.add_argument(
        "--confirm-with",
        action="append",
        type=Path,
        metavar="FILE",
        help="the record of a second run of the same code (repeatable, as --record): a gate fails the job "
        "only where both runs fail it (one slow run is not a regression)",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="store the run into history (nightlies only); the first one creates a SQLite store",
    )
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
    p.add_argument("--run-id", help="unique id of this evaluation (default: from CI, else generated)")
    p.add_argument("--commit", help="default: GITHUB_SHA / CI_COMMIT_SHA / ...")
    p.add_argument("--branch", help="default: GITHUB_REF_NAME / CI_COMMIT_REF_NAME / ...")
    p.add_argument("--url", help="link to the CI run (default: built from the CI environment)")
    p.add_argument("--format", choices=FORMATS, default="text", help="report format (default: text)")
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
    for verb, trusted in (("untrust", False), ("trust", True)):
        p = add(
            sub,
            verb,
            f"Mark stored runs as {'trusted' if trusted else 'untrusted'} "
            f"({'they form baselines again' if trusted else 'kept out of baselines'}); deletes nothing.",
            f"gatecfg {verb} --commit 3f2a9c1 --reason 'flaky runner'",
            _trust,
        )
        p.set_defaults(trusted=trusted)
        chosen = p.add_mutually_exclusive_group(required=True)
        chosen.add_argument("--run-id", help="one run")
        chosen.add_argument("--commit", help="every run of a commit")
        chosen.add_argument("--ci-run-id", help="every run of a CI run (all tests, all attempts)")
        p.add_argument(
            "--metric",
            help="only this metric's values of those runs (its gate's baseline); the run's other gates "
            "keep their trust",
        )
        p.add_argument("--reason", help="kept with the run, shown by `gatecfg history`")
        db_option(p)
        override_option(p)

    p = add(
        sub,
        "shifts",
        "List the sustained shifts evaluate followed as new baselines (policy.accept_shift_after); undo one.",
        "gatecfg shifts --undo 3 --reason 'the slowdown is a bug, being fixed'",
        _shifts,
    )
    p.add_argument("--test", metavar="T", help="only this test")
    p.add_argument("--all", action="store_true", dest="everything", help="undone shifts too")
    p.add_argument(
        "--undo",
        type=positive,
        metavar="N",
        help="undo shift N: its gate's baseline reads the runs before it again, its failing runs leave it",
    )
    p.add_argument("--reason", help="kept with the undo, shown by `gatecfg shifts --all`")
    p.add_argument("--format", choices=["text", "json"], default="text")
    db_option(p)
    override_option(p)

    p = add(
        sub,
        "history",
        "List stored values newest first, with trust and the band each value was judged against.",
        "gatecfg history --test tests/e2e/test_foo_ci.py --metric rollout/raw_reward --step 1",
        _history,
    )
    p.add_argument("--test", required=True, metavar="T")
    p.add_argument("--metric", required=True, metavar="M")
    p.add_argument("--step", type=step, metavar="S", help="one step (`last` or -1 for `last`)")
    series_option(p)
    p.add_argument(
        "--limit", type=whole_number(0), default=100, help="newest N values (default 100; 0 for all)"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    db_option(p)

    p = add(
        sub,
        "backtest",
        "Replay stored nightlies under the gates (or proposed ones): failures, false alarms, flips.",
        "gatecfg backtest --test tests/e2e/test_foo_ci.py --base origin/main --format json",
        _backtest,
    )
    p.add_argument("--test", metavar="T", help="only this test (default: all)")
    p.add_argument("--metric", metavar="M", help="only this metric")
    gates_option(p)
    p.add_argument(
        "--base",
        metavar="REV",
        help="also replay the gates as they were at this git revision and list the runs that flip "
        "(default: flips against the verdicts recorded at evaluation)",
    )
    p.add_argument(
        "--inject",
        metavar="SHIFT",
        type=_shift,
        help="also judge each night with a synthetic regression injected (never stored): `2sigma` (each "
        "step moved by 2 standard deviations of its window, in the gate's harmful direction), `-3sigma`, "
        "`10%%` (of the window's mean); a sign picks the direction (`--inject=-3sigma`); reports each gate's "
        "detection rate beside its false-alarm rate",
    )
    db_option(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--steps",
        action="store_true",
        help="text: also a row per step of an all-steps gate that failed or flipped (default: a row per "
        "gate; JSON always lists them)",
    )

    p = add(
        sub,
        "demo",
        "A tour: seed a SQLite history from bundled nightlies, then evaluate a regressed PR run.",
        "gatecfg demo",
        _demo,
    )
    p.add_argument(
        "--db-file",
        type=Path,
        default=Path(".gatecfg/demo.db"),
        help="default: .gatecfg/demo.db (recreated; the demo's gates and records are unpacked beside it)",
    )

    add_analytics(sub)
    add_rekey(sub)
    add_setup(sub, parser)
    return parser


def _trust(args: argparse.Namespace) -> int:
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


def _shifts(args: argparse.Namespace) -> int:
    from gatecfg.commands.shifts import shifts

    if args.undo is not None:
        check_store_write(args, where="--undo", action="undo an accepted shift")
    return shifts(
        db=db_url(args.db),
        test=args.test,
        everything=args.everything,
        undo=args.undo,
        reason=args.reason,
        fmt=args.format,
    )


def _history(args: argparse.Namespace) -> int:
    from gatecfg.commands.history import history

    return history(
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        step=args.step,
        labels=series_labels(args.series) or None,
        limit=args.limit or None,
        fmt_name=args.format,
    )


def _demo(args: argparse.Namespace) -> int:
    from gatecfg.commands.demo import demo
    from gatecfg.outputs import check_outputs, project_reads

    # The demo recreates its file: never the project's own history.
    check_outputs([("--db-file", args.db_file)], project_reads())
    return demo(db_file=args.db_file)


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


def _evaluate(args: argparse.Namespace) -> int:
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


def _lint(args: argparse.Namespace) -> int:
    from gatecfg.commands.lint import lint

    if args.max_false_alarm is None:
        return lint(args.paths, gates=args.gates, fmt=args.format)
    require("analytics", "gatecfg lint --max-false-alarm")
    return lint(
        args.paths,
        gates=args.gates,
        fmt=args.format,
        db=db_url(args.db),
        max_false_alarm=args.max_false_alarm,
        labels=series_labels(args.series),
    )


def _shift(text: str) -> Shift:
    from gatecfg.analysis.replayer import Shift

    try:
        return Shift.parse(text)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def _backtest(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg backtest")
    from gatecfg.commands.backtest import backtest_command

    return backtest_command(
        db=db_url(args.db),
        gates=args.gates,
        base=args.base,
        test=args.test,
        metric=args.metric,
        fmt_name=args.format,
        inject=args.inject,
        per_step=args.steps,
    )


def _resolve(args: argparse.Namespace) -> int:
    from gatecfg.commands.resolve import resolve

    return resolve(gates=args.gates, test=args.test, labels=series_labels(args.series), fmt=args.format)


def _schema(args: argparse.Namespace) -> int:
    from gatecfg.commands.schema import print_schema, schema

    if args.print_name is not None:
        return print_schema(args.print_name)
    if args.dir is not None and not args.check:
        from gatecfg.outputs import check_outputs, project_reads

        files = [("--dir", args.dir / f"{name}.schema.json") for name in SCHEMA_NAMES]
        check_outputs(files, project_reads())
    return schema(directory=args.dir, check=args.check)


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # A stream that cannot encode a metric's name (PYTHONIOENCODING=ascii, a C locale) writes it as
        # an escape rather than failing the job.
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")
    fmt = "text"
    debug = os.environ.get("GATECFG_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        args = build_parser().parse_args(argv)
        fmt = getattr(args, "format", "text")
        debug = debug or getattr(args, "debug", False)
        if "gates" in vars(args):  # every command's gates root, resolved once (settings' precedence)
            args.gates = gates_root(args.gates)
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            build_parser().print_help(sys.stderr)
            raise InputError.at("gatecfg", "choose a command", hint="`gatecfg COMMAND --help` explains one")
        return handler(args)
    except GatecfgError as exc:
        if fmt == "github":
            # A store's location is its (masked) URL, no file in the repository to annotate.
            print(format_problems(exc.problems, "github", in_file=not isinstance(exc, StoreError)))
        print(format_problems(exc.problems, "text"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gatecfg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:  # the boundary: anything else is a bug, not a verdict on the run
        return _bug(exc, debug=debug)


def run() -> NoReturn:
    """The `gatecfg` command (and `python -m gatecfg`): `main`, then the process ends as soon as its output
    is out. A CI step's process would otherwise spend a tenth of `gatecfg evaluate`'s CPU, after the
    verdict, on the interpreter's teardown: freeing every module's objects one by one (numpy's, pydantic's)
    when the OS frees them at once. Every file a command writes is closed by then, stores included; the
    standard streams are flushed here, and a stream that cannot be (a closed pipe) gets Python's usual
    exit, which reports it."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def _reader_gone() -> int:
    """The program reading gatecfg's output closed it early (`gatecfg history ... | head`): no bug and no
    message, the exit status a shell shows for a program that SIGPIPE ended (128 + 13), never 0, since the
    output was not all read. What is left to write goes to /dev/null, so the final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def _bug(exc: Exception, *, debug: bool) -> int:
    """One line that says it is a bug (exit 70, not 1: 1 means an enforced gate failed), and how to
    report it; the traceback only with --debug or GATECFG_DEBUG=1."""
    if debug:
        traceback.print_exc(file=sys.stderr)
    what = terminal(f"{type(exc).__name__}: {exc}")[:300]
    print(
        f"gatecfg: error: internal error (a bug in gatecfg {__version__}, exit {EXIT_BUG}): {what}\n"
        "  hint: please open an issue in the gatecfg repository with the command line"
        + ("" if debug else " and the traceback that `--debug` (or GATECFG_DEBUG=1) prints"),
        file=sys.stderr,
    )
    return EXIT_BUG
