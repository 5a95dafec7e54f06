"""Command-line wiring: argument parsing only; each verb lives in `gatecfg.commands.<verb>`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gatecfg import __version__
from gatecfg.errors import EXIT_INPUT, GatecfgError, InputError, format_problems

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """Argument errors exit 2 with a usage line, like every other invalid input."""

    def error(self, message: str) -> Any:  # argparse's signature is NoReturn; we raise instead
        raise InputError.at("gatecfg", f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def _labels(values: Sequence[str] | None) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError.at("--series", f"`{item}` is not KEY=VALUE", hint="e.g. --series hardware=h100")
        if key == "test":
            raise InputError.at("--series", "`test` is not a label: the test is always part of the series")
        labels[key.strip()] = value.strip()
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
        epilog="docs: docs/index.md. exit codes: 0 ok, 1 an enforced gate failed, "
        "2 invalid gate files/record/arguments, 3 history store unreachable.",
    )
    parser.add_argument("--version", action="version", version=f"gatecfg {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    p = _add(sub, "lint", "Check gate files against the schema and the rules.", "gatecfg lint gates/", _lint)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (default: --gates)")
    _gates_option(p)
    p.add_argument("--format", choices=["text", "github", "json"], default="text")

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
    p.add_argument("--check", action="store_true", help="exit 1 if the files are stale, write nothing")
    p.add_argument("--dir", type=Path, default=Path("schema"), help="output folder (default: schema/)")
    return parser


def _lint(args: argparse.Namespace) -> int:
    from gatecfg.commands.lint import lint

    return lint(args.paths, gates=args.gates, fmt=args.format)


def _resolve(args: argparse.Namespace) -> int:
    from gatecfg.commands.resolve import resolve

    return resolve(gates=args.gates, test=args.test, labels=_labels(args.series), fmt=args.format)


def _schema(args: argparse.Namespace) -> int:
    from gatecfg.commands.schema import schema

    return schema(directory=args.dir, check=args.check)


def main(argv: Sequence[str] | None = None) -> int:
    fmt = "text"
    try:
        args = build_parser().parse_args(argv)
        fmt = getattr(args, "format", "text")
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            build_parser().print_help(sys.stderr)
            return EXIT_INPUT
        return handler(args)
    except GatecfgError as exc:
        if fmt == "github":
            print(format_problems(exc.problems, "github"))
        print(format_problems(exc.problems, "text"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gatecfg: interrupted", file=sys.stderr)
        return 130
