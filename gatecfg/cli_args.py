"""The pieces every `gatecfg` subcommand's parser is built from: the parser class, the options more than
one command takes (each spelled here once; a command adds its own words as `help`) and the argument types.
No command is imported here: `gatecfg --help` stays light."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from gatecfg import settings
from gatecfg.errors import InputError

Handler = Callable[[argparse.Namespace], int]
DEBUG_HELP = "on an internal error, print the traceback (also GATECFG_DEBUG=1)"


class Parser(argparse.ArgumentParser):
    """Argument errors exit 2 with a usage line, like every other invalid input."""

    def error(self, message: str) -> Any:  # argparse's signature is NoReturn; we raise instead
        raise InputError.at("gatecfg", f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


# A string: argparse's action class is generic only to type checkers.
SubParsers: TypeAlias = "argparse._SubParsersAction[Parser]"
# A parser or one of its (mutually exclusive) groups: where an option is added.
Options: TypeAlias = argparse._ActionsContainer


def series_labels(values: Sequence[str] | None) -> dict[str, str]:
    """The labels of `--series KEY=VALUE...`, else the default ones (settings: $GATECFG_SERIES, the
    settings file's `series`), each checked as a label."""
    from gatecfg.provenance import check_label, key_values  # here: `gatecfg --help` imports no pydantic

    if not values:
        defaults = settings.series_labels(None)
        for key, value in defaults.items():
            if key == "test":
                raise InputError.at("series", "`test` is not a label: the test is always part of the series")
            check_label(key, value, key_at="series", value_at="series")
        return defaults
    return key_values(
        values,
        flag="--series",
        example="hardware=h100",
        once="give each label once: a run belongs to one series",
        reserved={"test": "`test` is not a label: the test is always part of the series"},
    )


def run_meta(values: Sequence[str] | None) -> dict[str, str]:
    from gatecfg.provenance import key_values

    return key_values(values, flag="--meta", example="image=26.04", once="give each key once")


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
    debug_option(parser, default=argparse.SUPPRESS)
    return parser


def debug_option(options: Options, *, default: object = False) -> None:
    options.add_argument("--debug", action="store_true", default=default, help=DEBUG_HELP)


def gate_test_option(
    options: Options, help: str | None = None, *, required: bool = False, default: str | None = None
) -> None:
    """`--test T`: the `test:` of a gate file."""
    options.add_argument("--test", required=required, default=default, metavar="T", help=help)


def metric_option(
    options: Options, help: str | None = None, *, required: bool = False, metavar: str | None = "M"
) -> None:
    options.add_argument("--metric", required=required, metavar=metavar, help=help)


def step_option(options: Options, help: str) -> None:
    options.add_argument("--step", type=step, metavar="S", help=help)


def format_option(
    options: Options, choices: Sequence[str] = ("text", "json"), help: str | None = None
) -> None:
    options.add_argument("--format", choices=list(choices), default="text", help=help)


def base_option(options: Options, help: str, *, required: bool = False) -> None:
    """`--base REV`: the git revision the gate files are compared with."""
    options.add_argument("--base", required=required, metavar="REV", help=help)


def commit_option(options: Options, help: str) -> None:
    options.add_argument("--commit", help=help)


def run_id_option(options: Options, help: str) -> None:
    options.add_argument("--run-id", help=help)


def record_option(options: Options, help: str, *, required: bool = False) -> None:
    """`--record FILE`, repeatable: a metrics record (JSON Lines)."""
    options.add_argument("--record", required=required, action="append", type=Path, metavar="FILE", help=help)


def reason_option(options: Options, help: str, *, metavar: str | None = None) -> None:
    """`--reason`: why, kept on record with what the command changes."""
    options.add_argument("--reason", metavar=metavar, help=help)


def write_option(options: Options, help: str) -> None:
    """`--write`: change what the command otherwise only shows (the store, a gate file)."""
    options.add_argument("--write", action="store_true", help=help)


def dry_run_option(options: Options, help: str) -> None:
    options.add_argument("--dry-run", action="store_true", help=help)


def steps_option(options: Options, help: str) -> None:
    """`--steps`: the text report also lists the steps (JSON always does)."""
    options.add_argument("--steps", action="store_true", help=help)


def gates_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gates",
        type=Path,
        metavar="DIR",
        help=f"gates root (default: ${settings.GATES_ENV}, else `gates` in .gatecfg.toml or "
        f"[tool.gatecfg], else {settings.DEFAULT_GATES}/)",
    )


def series_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--series",
        action="append",
        metavar="KEY=VALUE",
        help="a label that separates histories, e.g. hardware=h100 (repeatable; default: "
        f"${settings.SERIES_ENV}, else `series` in .gatecfg.toml or [tool.gatecfg])",
    )


def meta_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help="what the run carries beyond its identity, stored with it and named when a gate fails, e.g. "
        "image=26.04 or cuda=12.8 (repeatable; the CI's runner and image are added)",
    )


def override_option(parser: argparse.ArgumentParser, *, stored: str = "") -> None:
    """`--override-write-policy`: every command that changes the history store takes it."""
    parser.add_argument(
        "--override-write-policy",
        metavar="REASON",
        help="change the store although policy.write refuses this job (a backfill, a repair by hand)"
        + (f"; {stored}" if stored else "; REASON is printed"),
    )


def check_store_write(args: argparse.Namespace, *, where: str, action: str, test: str | None = None) -> None:
    """The write policy in front of a command that changes the history store (`write_policy.check_write`,
    as `evaluate --write`): the policies of `test`, else of every test under the gates root."""
    from gatecfg.write_policy import check_override, check_write, policies

    override = check_override(args.override_write_policy, write=True)
    gates = settings.gates_root(getattr(args, "gates", None))
    check_write(lambda: policies(gates, test), override, where=where, action=action)
    if override is not None:
        print(f"gatecfg: {where}: written under --override-write-policy: {override}", file=sys.stderr)


def db_option(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        help=help
        or "history store: sqlite:///path or postgresql+psycopg://... "
        f"(default: ${settings.DB_ENV}, else `db` in .gatecfg.toml or [tool.gatecfg], else "
        f"{settings.DEFAULT_DB})",
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


# The largest count or id an option takes: PostgreSQL's INTEGER, which a LIMIT and the stores' ids fit in
# (a larger one overflowed in the driver, exit 70).
MAX_COUNT = 2**31 - 1


def whole_number(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to MAX_COUNT."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not a number, or more digits than Python converts
            value = low - 1
        if not low <= value <= MAX_COUNT:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number from {low} to {MAX_COUNT}")
        return value

    return parse


positive = whole_number(1)


def allowance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1), e.g. 0.05 for 5%")
    return value
