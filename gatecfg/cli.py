"""The `gatecfg` command: the root parser, with each command's arguments registered by its module in
`gatecfg.cli_commands` (its body is in `gatecfg.commands.<verb>`), and `main`, the boundary that turns
errors into exit codes. The shared options and argument types are in `cli_args`."""

from __future__ import annotations

import argparse
import io
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from gatecfg import __version__
from gatecfg.cli_args import ARGUMENTS, Handler, Parser, debug_option
from gatecfg.cli_commands import (
    alerts,
    backtest,
    carry,
    compare,
    completion,
    db,
    demo,
    diff,
    evaluate,
    history,
    import_,
    init,
    lint,
    prune,
    rebaseline,
    regimes,
    report,
    resolve,
    schema,
    shifts,
    trust,
)
from gatecfg.errors import EXIT_BROKEN_PIPE, EXIT_BUG, GatecfgError, InputError, StoreError, format_problems
from gatecfg.escape import terminal
from gatecfg.extras import missing_extra
from gatecfg.settings import gates_root

# In the order `gatecfg --help` lists them; `trust` registers `untrust` and `trust`.
COMMANDS = (
    lint,
    resolve,
    schema,
    evaluate,
    trust,
    shifts,
    alerts,
    history,
    backtest,
    demo,
    regimes,
    rebaseline,
    import_,
    report,
    compare,
    diff,
    carry,
    prune,
    init,
    completion,
    db,
)


def build_parser() -> Parser:
    parser = Parser(
        prog="gatecfg",
        description="Declarative history gates for nightly ML training runs.",
        epilog="`gatecfg COMMAND --help` explains a command with an example; `gatecfg demo` is a 1-minute "
        "tour. exit codes: 0 ok, 1 an enforced gate failed, 2 invalid gate files/record/arguments, "
        "3 history store missing or unreachable, 70 a bug in gatecfg.",
    )
    parser.add_argument("--version", action="version", version=f"gatecfg {__version__}")
    debug_option(parser)
    parser.set_defaults(root=parser)  # the whole parser, which `gatecfg completion` describes
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    return parser


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
        return _run(handler, args)
    except GatecfgError as exc:
        problems = exc.worded(ARGUMENTS)
        if fmt == "github":
            # A store's location is its (masked) URL, no file in the repository to annotate.
            print(format_problems(problems, "github", in_file=not isinstance(exc, StoreError)))
        print(format_problems(problems, "text"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gatecfg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:  # the boundary: anything else is a bug, not a verdict on the run
        return _bug(exc, debug=debug)


def _run(handler: Handler, args: argparse.Namespace) -> int:
    """The command, with an ImportError of a module an extra provides (`gatecfg[store]` where only the
    core is installed, as in the pre-commit hook's environment) worded as the extra to install."""
    try:
        return handler(args)
    except ImportError as exc:
        needed = missing_extra(exc, "gatecfg " + handler.__module__.rsplit(".", 1)[-1].rstrip("_"))
        if needed is None:
            raise
        raise needed from None


def run() -> NoReturn:
    """The `gatecfg` command (and `python -m gatecfg`): `main`, then the process ends as soon as its output
    is out, without the interpreter's teardown (freeing every module's objects one by one, when the OS frees
    them at once). Measured on a small `evaluate --format json` of a SQLite history: 0.305 s of CPU against
    0.333 s through `sys.exit` (9%), 0.08 s of wall; benchmarks/bench.py's process figures end the same way.
    Files and stores are closed by then; the standard streams are flushed here, and one that cannot be (a
    closed pipe) gets Python's usual exit. tests/test_light_imports.py checks that all output comes out."""
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
