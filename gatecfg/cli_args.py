"""The pieces every `gatecfg` subcommand's parser is built from: the parser class, the shared options
(--gates, --db, --series) and the argument types. No command is imported here: `gatecfg --help` stays
light."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from gatecfg.errors import InputError
from gatecfg.settings import DEFAULT_DB, DEFAULT_GATES

Handler = Callable[[argparse.Namespace], int]
DEBUG_HELP = "on an internal error, print the traceback (also GATECFG_DEBUG=1)"


class Parser(argparse.ArgumentParser):
    """Argument errors exit 2 with a usage line, like every other invalid input."""

    def error(self, message: str) -> Any:  # argparse's signature is NoReturn; we raise instead
        raise InputError.at("gatecfg", f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


# A string: argparse's action class is generic only to type checkers.
SubParsers: TypeAlias = "argparse._SubParsersAction[Parser]"


def series_labels(values: Sequence[str] | None) -> dict[str, str]:
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


def add(
    sub: argparse._SubParsersAction[Parser], name: str, summary: str, example: str, handler: Handler
) -> Parser:
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


def gates_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gates", type=Path, default=DEFAULT_GATES, metavar="DIR", help="gates root (default: gates/)"
    )


def series_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--series",
        action="append",
        metavar="KEY=VALUE",
        help="a label that separates histories, e.g. hardware=h100 (repeatable)",
    )


def db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        help="history store: sqlite:///path or postgresql+psycopg://... "
        f"(default: $GATECFG_DB_URL, else {DEFAULT_DB})",
    )


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability between 0 and 1, e.g. 0.05")
    return value


def step(text: str) -> int:
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


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def allowance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1), e.g. 0.05 for 5%")
    return value
