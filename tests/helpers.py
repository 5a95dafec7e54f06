"""Test helpers shared by every test module (on sys.path through pytest's `pythonpath`)."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from gatecfg.cli import main
from gatecfg.errors import EXIT_BUG

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


class GatecfgBugError(AssertionError):
    """The CLI's boundary caught an unexpected exception (exit 70): a test that meets one fails."""


def run_cli(*args: str | Path) -> CliResult:
    """Run the real entry point in-process. `main` turns an unexpected exception into exit 70 with a
    one-line message; here it is raised with its traceback instead, so that it fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--debug", *(str(a) for a in args)])
    if code == EXIT_BUG:
        raise GatecfgBugError(f"gatecfg {' '.join(map(str, args))} crashed:\n{err.getvalue()}")
    return CliResult(code, out.getvalue(), err.getvalue())


def flat(text: str) -> str:
    """`text` with every run of blanks and line breaks made one space: a report wrapped to the terminal
    reads the same words as the line it wraps."""
    return " ".join(text.split())


def subprocess_env() -> dict[str, str]:
    """The environment for a `python -m gatecfg` child: this checkout first on the path (not whatever
    gatecfg is installed), and no CI or GATECFG_ variable that would change what a run stores."""
    ignored = ("GITHUB_", "CI_", "BUILDKITE", "GATECFG_", "CIRCLE", "TRAVIS", "BITBUCKET_", "TF_BUILD")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(ignored) and key not in ("CI", "JENKINS_URL", "BUILD_NUMBER")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def count(url: str, sql: str) -> int:
    """The one number a SQL query returns, read through a short-lived engine on the store at `url`."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql)).scalar_one())
    finally:
        engine.dispose()


@contextlib.contextmanager
def executed_statements(keep: Callable[[str], bool] = lambda statement: True) -> Iterator[list[str]]:
    """The statements SQLAlchemy sends to any database while the block runs (those `keep` accepts)."""
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if keep(statement):
            statements.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
