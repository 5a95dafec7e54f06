"""The SQLite lock wait honours the URL's `?timeout=` (gatecfg.store.engine): one monotonic deadline per
connection for the pragmas' retries, so that a store another program holds exclusively fails the
command (exit 3) after about the timeout, not after a fixed 30 s retry loop of busy waits. Proved by
counting attempts and waits on a fake clock or through the driver's parameters, never by a wall clock."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import run_cli

from gatecfg.store import engine

TEST = "tests/t_ci.py"


class _LockedCursor:
    """A cursor on a file another connection holds: each attempt waits out the driver's busy timeout
    (on the fake clock) and then answers "database is locked"."""

    def __init__(self, clock: list[float], busy: float) -> None:
        self.clock, self.busy, self.attempts = clock, busy, 0

    def execute(self, _statement: str) -> None:
        self.attempts += 1
        self.clock[0] += self.busy
        raise sqlite3.OperationalError("database is locked")


def test_the_pragma_retries_stop_at_the_deadline_counting_the_time_each_attempt_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(engine.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(engine.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    cursor = _LockedCursor(clock, busy=0.2)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        engine._sqlite_pragma(cursor, "PRAGMA journal_mode = WAL", 0.2)  # type: ignore[arg-type]
    # One attempt waits the whole 0.2 s: no second one. Counting only the pauses retried ~300 times.
    assert cursor.attempts == 1
    assert clock[0] == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("query", "seconds"),
    [("", engine.SQLITE_BUSY_TIMEOUT_S), ("?timeout=0.2", 0.2), ("?timeout=5&timeout=0.5", 0.5)],
    ids=["default", "given", "repeated-last-wins"],
)
def test_the_lock_wait_is_the_urls_timeout(query: str, seconds: float) -> None:
    assert engine.lock_wait(sa.make_url(f"sqlite:///h.db{query}")) == seconds


class _CountedCursor:
    """A cursor that counts the statements sent through it."""

    def __init__(self, cursor: sqlite3.Cursor, sent: list[str]) -> None:
        self.cursor, self.sent = cursor, sent

    def execute(self, statement: str) -> sqlite3.Cursor:
        self.sent.append(statement)
        return self.cursor.execute(statement)


def test_an_exclusively_locked_store_fails_the_write_after_one_wait_of_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted, not timed: the driver's busy wait and the pragmas' deadline are both the URL's 0.2 s, and
    # only one statement ever waits. The fixed 30 s retry loop (92 s to exit 3) made about 150 attempts.
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (gates / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    store = tmp_path / "h.db"
    argv = ["evaluate", "--gates", gates, "--test", TEST, "--record", tmp_path / "r.jsonl", "--write"]
    first = run_cli(*argv, "--db", f"sqlite:///{store}")
    assert first.code == 0, first.err

    driver_waits: list[object] = []  # each connection's busy timeout, as the driver is given it
    pragma_waits: list[float] = []  # each connection's deadline for its pragmas' retries
    attempts: list[str] = []  # the pragmas sent, retries included
    failures: list[str] = []  # the statements that met the lock, each after one busy timeout at most

    def do_connect(_dialect: object, _record: object, _args: object, params: dict[str, object]) -> None:
        driver_waits.append(params.get("timeout"))

    def handle_error(context: sa.engine.ExceptionContext) -> None:
        failures.append(str(context.original_exception))

    connect, pragma = engine._sqlite_connect, engine._sqlite_pragma

    def counted_connect(conn: sqlite3.Connection, pragmas: Sequence[str], wait: float) -> None:
        pragma_waits.append(wait)
        connect(conn, pragmas, wait)

    def counted_pragma(cursor: sqlite3.Cursor, statement: str, deadline: float) -> None:
        pragma(_CountedCursor(cursor, attempts), statement, deadline)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_sqlite_connect", counted_connect)
    monkeypatch.setattr(engine, "_sqlite_pragma", counted_pragma)
    holder = sqlite3.connect(store, isolation_level=None)
    sa.event.listen(sa.engine.Engine, "do_connect", do_connect)
    sa.event.listen(sa.engine.Engine, "handle_error", handle_error)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE runs SET branch = 'held'")
        holder.execute("COMMIT")  # the exclusive lock outlives the transaction
        locked = run_cli(*argv, "--db", f"sqlite:///{store}?timeout=0.2")
    finally:
        sa.event.remove(sa.engine.Engine, "handle_error", handle_error)
        sa.event.remove(sa.engine.Engine, "do_connect", do_connect)
        holder.close()
    assert locked.code == 3, locked.err
    assert "database is locked" in locked.err
    assert driver_waits == [0.2]
    assert pragma_waits == [0.2]
    # One attempt waits out the driver's 0.2 s; had the driver answered at once, the pauses (5 ms
    # doubling) reach the deadline within 7 attempts, however slow the machine.
    assert 1 <= len(attempts) <= 7
    assert attempts[0] == "PRAGMA journal_mode = WAL"
    assert failures == ["database is locked"]
