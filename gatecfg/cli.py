"""Command-line wiring: argument parsing only; each verb lives in `gatecfg.commands.<verb>`."""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, urlencode

from gatecfg import __version__
from gatecfg.errors import EXIT_BROKEN_PIPE, EXIT_BUG, GatecfgError, InputError, StoreError, format_problems
from gatecfg.escape import terminal
from gatecfg.extras import require
from gatecfg.report import FORMATS, Output

if TYPE_CHECKING:
    from gatecfg.analysis.backtest import Shift

Handler = Callable[[argparse.Namespace], int]
DEFAULT_DB = "sqlite:///.gatecfg/history.db"
SCHEMA_NAMES = ("base", "gatefile")  # gatecfg.commands.schema.SCHEMAS, named without importing pydantic
DEBUG_HELP = "on an internal error, print the traceback (also GATECFG_DEBUG=1)"


class _Parser(argparse.ArgumentParser):
    """Argument errors exit 2 with a usage line, like every other invalid input."""

    def error(self, message: str) -> Any:  # argparse's signature is NoReturn; we raise instead
        raise InputError.at("gatecfg", f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def _labels(values: Sequence[str] | None) -> dict[str, str]:
    from gatecfg.provenance import check_name  # here: `gatecfg --help` imports no pydantic

    labels: dict[str, str] = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError.at("--series", f"`{item}` is not KEY=VALUE", hint="e.g. --series hardware=h100")
        if key == "test":
            raise InputError.at("--series", "`test` is not a label: the test is always part of the series")
        key, value = key.strip(), value.strip()
        if key in labels:
            raise InputError.at(
                "--series",
                f"`{key}` is given twice (`{key}={labels[key]}` and `{key}={value}`)",
                hint="give each label once: a run belongs to one series",
            )
        check_name(key, "--series")
        if value:  # an empty value is a label too
            check_name(value, "--series")
        labels[key] = value
    return labels


def _add(
    sub: argparse._SubParsersAction[_Parser], name: str, summary: str, example: str, handler: Handler
) -> _Parser:
    parser = sub.add_parser(
        name,
        help=summary,
        description=f"{summary}\n\nexample:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    # Also after the command (`gatecfg lint --debug`); SUPPRESS keeps a global `--debug` from being reset.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def _gates_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gates", type=Path, default=Path("gates"), metavar="DIR", help="gates root (default: gates/)"
    )


def _series_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--series",
        action="append",
        metavar="KEY=VALUE",
        help="a label that separates histories, e.g. hardware=h100 (repeatable)",
    )


def build_parser() -> _Parser:
    parser = _Parser(
        prog="gatecfg",
        description="Declarative history gates for nightly ML training runs.",
        epilog="`gatecfg COMMAND --help` explains a command with an example; `gatecfg demo` is a 1-minute "
        "tour. exit codes: 0 ok, 1 an enforced gate failed, 2 invalid gate files/record/arguments, "
        "3 history store missing or unreachable, 70 a bug in gatecfg.",
    )
    parser.add_argument("--version", action="version", version=f"gatecfg {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    p = _add(sub, "lint", "Check gate files against the schema and the rules.", "gatecfg lint gates/", _lint)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (default: --gates)")
    _gates_option(p)
    p.add_argument("--format", choices=["text", "github", "json"], default="text")
    p.add_argument(
        "--max-false-alarm",
        type=_probability,
        metavar="P",
        help="also warn on gates whose estimated false-alarm rate per night, from the history in --db, "
        "is above P (e.g. 0.05); warnings keep the exit code 0",
    )
    _db_option(p)
    _series_option(p)

    p = _add(
        sub,
        "resolve",
        "Show what each gate resolves to, its keys, and the file:line of every literal.",
        "gatecfg resolve --test tests/e2e/test_foo_ci.py --format json",
        _resolve,
    )
    _gates_option(p)
    p.add_argument("--test", metavar="T", help="only this test (default: all)")
    _series_option(p)
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = _add(
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
    p.add_argument("--dir", type=Path, default=Path("schema"), help="output folder (default: schema/)")
    p = _add(
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
        "--write",
        action="store_true",
        help="store the run into history (nightlies only); the first one creates a SQLite store",
    )
    p.add_argument(
        "--require-history",
        action="store_true",
        help="exit 1 when the store holds no run of this series (default: a notice, every gate cold)",
    )
    p.add_argument(
        "--override-write-policy",
        metavar="REASON",
        help="write although policy.write refuses this job (a backfill); REASON is stored with the run",
    )
    _gates_option(p)
    _db_option(p)
    _series_option(p)
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
    for verb, trusted in (("untrust", False), ("trust", True)):
        p = _add(
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
        p.add_argument("--reason", help="kept with the run, shown by `gatecfg history`")
        _db_option(p)

    p = _add(
        sub,
        "history",
        "List stored values newest first, with trust and the band each value was judged against.",
        "gatecfg history --test tests/e2e/test_foo_ci.py --metric rollout/raw_reward --step 1",
        _history,
    )
    p.add_argument("--test", required=True, metavar="T")
    p.add_argument("--metric", required=True, metavar="M")
    p.add_argument("--step", type=_step, metavar="S", help="one step (`last` or -1 for `last`)")
    _series_option(p)
    p.add_argument("--limit", type=int, default=100, help="newest N values (default 100; 0 for all)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _db_option(p)

    p = _add(
        sub,
        "backtest",
        "Replay stored nightlies under the gates (or proposed ones): failures, false alarms, flips.",
        "gatecfg backtest --test tests/e2e/test_foo_ci.py --base origin/main --format json",
        _backtest,
    )
    p.add_argument("--test", metavar="T", help="only this test (default: all)")
    p.add_argument("--metric", metavar="M", help="only this metric")
    _gates_option(p)
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
    _db_option(p)
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = _add(
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

    p = _add(sub, "db", "Manage the history store.", "gatecfg db upgrade --db postgresql+psycopg://...", _db)
    p.add_argument("action", choices=["upgrade"], help="upgrade: apply the store's migrations")
    _db_option(p)
    _analytics(sub)
    _rekey_commands(sub)
    return parser


def _trust(args: argparse.Namespace) -> int:
    from gatecfg.commands.trust import set_trust

    return set_trust(
        db=db_url(args.db),
        trusted=args.trusted,
        run_id=args.run_id,
        commit=args.commit,
        ci_run_id=args.ci_run_id,
        reason=args.reason,
    )


def _history(args: argparse.Namespace) -> int:
    from gatecfg.commands.history import history

    return history(
        db=db_url(args.db),
        test=args.test,
        metric=args.metric,
        step=args.step,
        labels=_labels(args.series) if args.series else None,
        limit=args.limit or None,
        fmt_name=args.format,
    )


def _demo(args: argparse.Namespace) -> int:
    from gatecfg.commands.demo import demo

    return demo(db_file=args.db_file)


def _db(args: argparse.Namespace) -> int:
    from gatecfg.commands.db import upgrade

    return upgrade(db=db_url(args.db))


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        help="history store: sqlite:///path or postgresql+psycopg://... "
        f"(default: $GATECFG_DB_URL, else {DEFAULT_DB})",
    )


def db_url(value: str | None) -> str:
    """--db, else $GATECFG_DB_URL, else the embedded SQLite file; a libpq keyword DSN (`host=... dbname=...`)
    means that PostgreSQL database, and any other bare path a SQLite file."""
    url = value or os.environ.get("GATECFG_DB_URL") or DEFAULT_DB
    if "://" in url:
        return url
    if _LIBPQ_DSN.match(url):
        return _libpq_url(url)
    return f"sqlite:///{url}"


# A libpq connection string starts with one of its keywords and `=`: never read as a SQLite file name
# (which printed the password in the hint, and created a file named after it).
_LIBPQ_DSN = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|connect_timeout|"
    r"application_name|options|target_session_attrs)\s*=",
    re.IGNORECASE,
)
_LIBPQ_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _libpq_url(dsn: str) -> str:
    """The postgresql+psycopg URL of a libpq keyword DSN, parsed by libpq itself (through psycopg)."""
    shown = _LIBPQ_PASSWORD.sub(r"\1***", dsn)
    hint = "or write it as a URL: postgresql+psycopg://user:password@host:5432/dbname"
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise InputError.at(
            "--db",
            f"`{shown}` is a PostgreSQL keyword DSN, and the `postgres` extra is not installed",
            hint=f"pip install 'gatecfg[postgres]', {hint}",
        ) from None
    try:
        parts = conninfo_to_dict(dsn)
    except PsycopgError:
        # Neither psycopg's message nor the text is shown: around the mistake may be the password.
        raise InputError.at(
            "--db",
            "the value starts like a PostgreSQL keyword DSN (`host=... dbname=...`) but does not parse as "
            "one (not shown: it may hold a password)",
            hint="quote a value with spaces as key='a b', " + hint,
        ) from None
    if "hostaddr" in parts and "host" not in parts:
        parts["host"] = parts.pop("hostaddr")
    user, password = parts.pop("user", None), parts.pop("password", None)
    host, port, dbname = parts.pop("host", None), parts.pop("port", None), parts.pop("dbname", None)
    auth = quote(str(user), safe="") if user is not None else ""
    if password is not None:
        auth += ":" + quote(str(password), safe="")
    netloc = (auth + "@" if auth else "") + (str(host) if host is not None else "")
    netloc += f":{port}" if port is not None else ""
    query = urlencode({key: str(value) for key, value in parts.items()})
    return f"postgresql+psycopg://{netloc}/{quote(str(dbname or ''), safe='')}" + (
        f"?{query}" if query else ""
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


def _evaluate(args: argparse.Namespace) -> int:
    from gatecfg.api import evaluate
    from gatecfg.commands.evaluate import open_outputs, print_report

    outputs = _outputs(args)
    summary = open_outputs(outputs)
    report = evaluate(
        args.test,
        args.record,
        gates=args.gates,
        db=args.db,
        write=args.write,
        run_id=args.run_id,
        commit=args.commit,
        series=_labels(args.series),
        branch=args.branch,
        url=args.url,
        require_history=args.require_history,
        write_override=args.override_write_policy,
    )
    return print_report(report, outputs, summary)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability between 0 and 1, e.g. 0.05")
    return value


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
        labels=_labels(args.series),
    )


def _shift(text: str) -> Shift:
    from gatecfg.analysis.backtest import Shift

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
    )


def _resolve(args: argparse.Namespace) -> int:
    from gatecfg.commands.resolve import resolve

    return resolve(gates=args.gates, test=args.test, labels=_labels(args.series), fmt=args.format)


def _schema(args: argparse.Namespace) -> int:
    from gatecfg.commands.schema import print_schema, schema

    if args.print_name is not None:
        return print_schema(args.print_name)
    return schema(directory=args.dir, check=args.check)


def _analytics(sub: argparse._SubParsersAction[_Parser]) -> None:
    """regimes, rebaseline, import, report: the history analytics commands."""
    p = _add(
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
    p.add_argument("--step", type=_step, metavar="S", help="a step (or `last`), for a gate stored at several")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _gates_option(p)
    _db_option(p)
    _series_option(p)

    p = _add(
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
    since.add_argument("--last", type=_positive, metavar="N", help="the regime is the newest N runs")
    p.add_argument(
        "--method",
        choices=["minmax", "quantile"],
        default="minmax",
        help="minmax: the regime's min/max; quantile: its 5th/95th percentiles (default: minmax)",
    )
    p.add_argument(
        "--allowance",
        type=_allowance,
        default=0.05,
        metavar="A",
        help="widen each limit by this fraction of its magnitude (default: 0.05)",
    )
    p.add_argument("--write", action="store_true", help="edit the gate file in place; only numbers change")
    p.add_argument("--format", choices=["text", "json"], default="text")
    _gates_option(p)
    _db_option(p)
    _series_option(p)

    p = _add(
        sub,
        "import",
        "Backfill a test's history from a CSV or JSON Lines export (one transaction).",
        "gatecfg import --test tests/e2e/test_foo_ci.py exports/nightlies.csv",
        _import,
    )
    p.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="a .csv export (header: run_id,date,commit[,trusted],METRIC or METRIC@STEP...) or a .jsonl "
        'one ({"run_id", "date", "commit", "metrics": {METRIC: value | [[step, value], ...]}} a line)',
    )
    p.add_argument("--test", required=True, metavar="T", help="the `test:` of a gate file")
    _gates_option(p)
    _db_option(p)
    _series_option(p)

    p = _add(
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
    _gates_option(p)
    _db_option(p)


def _step(text: str) -> int:
    from gatecfg.models import MAX_STEP  # here: `gatecfg --help` imports no pydantic

    if text == "last":
        return -1
    try:
        step = int(text)
    except ValueError:
        step = -2
    if not -1 <= step <= MAX_STEP:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a step: write `last` or a whole number from 0 to {MAX_STEP}"
        )
    return step


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def _allowance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1), e.g. 0.05 for 5%")
    return value


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
        labels=_labels(args.series),
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
        labels=_labels(args.series),
        fmt_=args.format,
    )


def _import(args: argparse.Namespace) -> int:
    from gatecfg.commands.import_ import import_command

    return import_command(
        gates=args.gates, db=db_url(args.db), test=args.test, path=args.file, labels=_labels(args.series)
    )


def _report(args: argparse.Namespace) -> int:
    require("analytics", "gatecfg report")
    from gatecfg.commands.report import report

    return report(gates=args.gates, db=db_url(args.db), out=args.html, test=args.test, png=args.png)


def _rekey_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """diff, carry, prune: re-keys before merge, carried history, orphaned coordinates."""
    p = _add(
        sub,
        "diff",
        "Before merge: the gates whose keys the working tree's edits move (cold baselines), and why.",
        "gatecfg diff --base origin/main --format github",
        _diff,
    )
    p.add_argument(
        "--base", required=True, metavar="REV", help="git revision to compare with, e.g. origin/main"
    )
    _gates_option(p)
    p.add_argument(
        "--db",
        metavar="URL",
        help="also count the stored values each re-key orphans (default: $GATECFG_DB_URL, if set)",
    )
    _series_option(p)
    p.add_argument("--format", choices=["text", "json", "github"], default="text")
    p.add_argument(
        "--fail-on-rekey", action="store_true", help="exit 1 when a gate re-keys without carried history"
    )

    p = _add(
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
    _gates_option(p)
    _db_option(p)
    _series_option(p)

    p = _add(
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
        type=int,
        metavar="N",
        help="per coordinate, keep the newest N trusted values at each step (N >= every declared window)",
    )
    p.add_argument("--dry-run", action="store_true", help="only list them")
    p.add_argument("--yes", action="store_true", help="delete them (one transaction)")
    _gates_option(p)
    _db_option(p)


def _diff(args: argparse.Namespace) -> int:
    from gatecfg.commands.diff import diff_command

    db = args.db or os.environ.get("GATECFG_DB_URL")
    return diff_command(
        base=args.base,
        gates=args.gates,
        db=db_url(db) if db else None,
        labels=_labels(args.series),
        fmt_name=args.format,
        fail_on_rekey=args.fail_on_rekey,
    )


def _carry(args: argparse.Namespace) -> int:
    from gatecfg.commands.carry import carry_command, undo_command

    labels = _labels(args.series)
    if args.undo:
        return undo_command(
            base=args.base,
            gates=args.gates,
            db=db_url(args.db),
            test=args.test,
            metric=args.metric,
            labels=labels,
            reason=args.reason,
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
    )


def _prune(args: argparse.Namespace) -> int:
    from gatecfg.commands.prune import keep_command, prune_command

    if args.keep is not None:
        if args.keep < 1:
            raise InputError.at("gatecfg prune", f"--keep must be at least 1, got {args.keep}")
        return keep_command(
            gates=args.gates, db=db_url(args.db), keep=args.keep, dry_run=args.dry_run, yes=args.yes
        )
    return prune_command(gates=args.gates, db=db_url(args.db), dry_run=args.dry_run, yes=args.yes)


def main(argv: Sequence[str] | None = None) -> int:
    fmt = "text"
    debug = os.environ.get("GATECFG_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        args = build_parser().parse_args(argv)
        fmt = getattr(args, "format", "text")
        debug = debug or getattr(args, "debug", False)
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
