"""Located problems, the exceptions that carry them, and their one output format.

Every problem gatecfg reports about user input reads

    path:line:col: error: dotted.path: message
      hint: what to write instead

so that it can be grepped, clicked in an editor and turned into a GitHub annotation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Self

from gatecfg.escape import github_data, github_property, terminal

Severity = Literal["error", "warning"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_INPUT = 2
EXIT_STORE = 3
# An exception gatecfg did not expect: a bug, never a verdict (sysexits.h's EX_SOFTWARE).
EXIT_BUG = 70
# The reader of gatecfg's output closed it early: what a shell reports for a program SIGPIPE ends (128 + 13).
EXIT_BROKEN_PIPE = 141


@dataclass(frozen=True, order=True)
class Location:
    """A place in a file; line and col are 1-based, either may be unknown."""

    path: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        parts = [self.path]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)


@dataclass(frozen=True)
class Problem:
    location: Location
    message: str
    dotted: str = ""
    hint: str | None = None
    severity: Severity = "error"
    # The input the problem is about, in neutral terms (`run_id`): the core does not know whether a flag,
    # a keyword argument or a pytest option gave it; each entry point names it (`GatecfgError.worded`).
    argument: str | None = None

    def text(self) -> str:
        """One line per problem (and one per hint): names inside it cannot start a line of their own."""
        head = f"{terminal(str(self.location))}: {self.severity}: "
        if self.dotted:
            head += f"{terminal(self.dotted)}: "
        head += terminal(self.message, lines=True)
        if self.hint:
            head += f"\n  hint: {terminal(self.hint, lines=True)}"
        return head

    def github(self, *, in_file: bool = True) -> str:
        """A GitHub Actions workflow command that annotates the line in the PR. A problem that is not in a
        file (`in_file=False`: the store's, whose location is its URL) is a plain annotation that names
        its location in the message, never as a file to open."""
        props = []
        if in_file:
            props.append(f"file={github_property(self.location.path)}")
            if self.location.line is not None:
                props.append(f"line={self.location.line}")
            if self.location.col is not None:
                props.append(f"col={self.location.col}")
        props.append("title=gatecfg")
        body = f"{self.dotted}: {self.message}" if self.dotted else self.message
        if not in_file:
            body = f"{self.location}: {body}"
        if self.hint:
            body += f"\nhint: {self.hint}"
        return f"::{self.severity} {','.join(props)}::{github_data(body)}"

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.location.path,
            "line": self.location.line,
            "col": self.location.col,
            "severity": self.severity,
            "dotted": self.dotted,
            "message": self.message,
            "hint": self.hint,
        }


def format_problems(problems: Iterable[Problem], fmt: str, *, in_file: bool = True) -> str:
    """Render problems as `text`, `github` or `json` (one JSON array); `in_file` as for `Problem.github`."""
    items = sorted(problems, key=lambda p: (p.location, p.dotted, p.message))
    if fmt == "json":
        return json.dumps([p.as_json() for p in items], indent=2)
    if fmt == "github":
        return "\n".join(p.github(in_file=in_file) for p in items)
    return "\n".join(p.text() for p in items)


class GatecfgError(Exception):
    """An error meant for the user: printed as located problems, never as a traceback."""

    exit_code = EXIT_INPUT

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(p.text() for p in self.problems))

    @classmethod
    def at(cls, location: Location | str, message: str, *, dotted: str = "", hint: str | None = None) -> Self:
        loc = location if isinstance(location, Location) else Location(location)
        return cls([Problem(loc, message, dotted=dotted, hint=hint)])

    @classmethod
    def about(cls, argument: str, message: str, *, hint: str | None = None) -> Self:
        """An error about the input `argument` (a neutral name, `run_id`), located at that name until an
        entry point words it."""
        return cls([Problem(Location(argument), message, hint=hint, argument=argument)])

    def worded(self, names: Mapping[str, str]) -> list[Problem]:
        """The problems with each input named as an entry point names it (`{"run_id": "--run-id"}`)."""
        return [
            p
            if p.argument is None or p.argument not in names
            else replace(p, location=Location(names[p.argument]))
            for p in self.problems
        ]


class InputError(GatecfgError):
    """Invalid gate files, records or arguments: exit code 2."""

    exit_code = EXIT_INPUT

    # Where the first problem is, for code that catches the error (the CLI prints every problem).
    @property
    def file(self) -> str:
        return self.problems[0].location.path

    @property
    def line(self) -> int | None:
        return self.problems[0].location.line

    @property
    def column(self) -> int | None:
        return self.problems[0].location.col


class GateFileError(InputError):
    """Invalid gate or base files, or no gate file for the test: exit code 2."""


class RecordError(InputError):
    """An invalid metrics record (JSON Lines, TensorBoard, W&B, MLflow): exit code 2; `line` is the line,
    or the record's number in a binary or JSON-array file."""


class StoreError(GatecfgError):
    """The history store could not be reached, read or written: exit code 3."""

    exit_code = EXIT_STORE
