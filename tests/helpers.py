"""Test helpers shared by every test module (on sys.path through pytest's `pythonpath`)."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest
import sqlalchemy as sa

from gatecfg.cli import main
from gatecfg.errors import EXIT_BUG
from gatecfg.records import Record
from gatecfg.records.builder import _Builder
from gatecfg.store.rows import STATUSES, ValueColumns

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


def parse_record_text(text: str, path: str) -> Record:
    """A record read from `text` as `--record` reads a JSON Lines file; `path` only locates points and
    errors."""
    builder = _Builder()
    builder.add_text(text, path)
    return builder.build()


def status_names(column: ValueColumns) -> list[str]:
    """The status of each value of a column read from the store, by name."""
    return [STATUSES[code] for code in column.status_codes().tolist()]


def table(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> pytest.MarkDecorator:
    """Parametrize over a table whose rows start with their id."""
    return pytest.mark.parametrize(names, [row[1:] for row in rows], ids=[row[0] for row in rows])


def score_gates(root: Path, policy: str = "") -> Path:
    """`root/gates`: one gate, `eval/score` (last step, `rel_down: 0.1`) of the test `tests/t_ci.py`, with
    `policy` appended to base.yaml's `policy:` (window 5); and a record of that test, `root/r.jsonl`."""
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        "version: 1\ndefaults:\n  eval/score:\n    steps: last\n    constraint: {rel_down: 0.1}\n"
        f"policy:\n  window: 5\n{policy}"
    )
    (gates / "t.yaml").write_text("test: tests/t_ci.py\ngates:\n  eval/score:\n")
    (root / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    return gates


def write_score_record(tmp_path: Path, record: str | Path) -> CliResult:
    """`evaluate --write` of `record` against `score_gates(tmp_path)` (made on first use) into
    `tmp_path/h.db`."""
    gates = tmp_path / "gates"
    if not gates.exists():
        score_gates(tmp_path)
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", record]
    return run_cli(*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}", "--write")


def special_file(kind: str, path: Path) -> str:
    """Make at `path` a file of `kind` that no reader may read as a regular file (or that is too large to),
    and return the name to give the reader (`/dev/zero` itself for "dev-zero")."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "fifo-with-a-writer":
        os.mkfifo(path)
        # A writer that holds the pipe open and never closes it: a reader that blocked would hang here.
        os.open(path, os.O_RDWR | os.O_NONBLOCK)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "dev-zero":
        return "/dev/zero"
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse-2gib":
        with open(path, "wb") as handle:
            handle.truncate(2 * 1024**3)
    return str(path)


def event_file(folder: Path, tensors: list[object], tail: bytes = b"") -> Path:
    """A TensorBoard event file in the new `folder`, written by tensorboard's own writer: one scalar
    `eval/score` per step from `tensors`, then the raw bytes `tail`."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    folder.mkdir()
    writer = EventFileWriter(str(folder))
    scalars = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    for step, value in enumerate(tensors):
        tensor = tensor_util.make_tensor_proto(value)
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="eval/score", metadata=scalars, tensor=tensor)]
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()
    [path] = folder.iterdir()
    with open(path, "ab") as handle:
        handle.write(tail)
    return path


class LineBudgetExceededError(AssertionError):
    """The code under test ran more Python lines than its budget: raised inside it, so that a regression
    to a quadratic path fails at once instead of running for minutes."""


@contextlib.contextmanager
def lines_run(*modules: ModuleType, budget: int = 10**9) -> Iterator[list[int]]:
    """Count the Python lines executed in the block by the code of `modules` (a package counts with every
    module under it: `gatecfg`, `ruamel.yaml`; a plain module alone: `csv`): a measure of work that,
    unlike a clock, does not depend on the machine or its load. Past `budget` lines,
    LineBudgetExceededError is raised where the code runs."""
    counted = [0]
    where = tuple(
        os.path.join(module.__path__[0], "") if hasattr(module, "__path__") else str(module.__file__)
        for module in modules
    )

    def local(frame: FrameType, event: str, _arg: object) -> Any:
        if event == "line":
            counted[0] += 1
            if counted[0] > budget:
                raise LineBudgetExceededError(f"more than {budget:,} lines run")
        return local

    def calls(frame: FrameType, event: str, _arg: object) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(where):
            return local
        return None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        yield counted
    finally:
        sys.settrace(previous)
