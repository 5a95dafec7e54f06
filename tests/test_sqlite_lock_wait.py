"""The SQLite lock wait honours the URL's `?timeout=` (gatecfg.store.engine): one monotonic deadline per
connection for the pragmas' retries, so that a store another program holds exclusively fails the
command (exit 3) after about the timeout, not after a fixed 30 s retry loop of busy waits."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import subprocess_env

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


def test_an_exclusively_locked_store_fails_the_write_within_a_few_seconds_of_its_timeout(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (gates / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    store = tmp_path / "h.db"
    argv = [sys.executable, "-m", "gatecfg", "evaluate", "--gates", str(gates), "--test", TEST]
    argv += ["--record", str(tmp_path / "r.jsonl"), "--write"]
    first = subprocess.run(
        [*argv, "--db", f"sqlite:///{store}"], check=False, env=subprocess_env(), capture_output=True
    )
    assert first.returncode == 0, first.stderr
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE runs SET branch = 'held'")
        holder.execute("COMMIT")  # the exclusive lock outlives the transaction
        started = time.monotonic()
        locked = subprocess.run(
            [*argv, "--db", f"sqlite:///{store}?timeout=0.2"],
            check=False,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
    finally:
        holder.close()
    assert locked.returncode == 3, locked.stderr
    assert "database is locked" in locked.stderr
    # The bound, with a wide margin for a loaded runner: the fixed loop took 92 s.
    assert elapsed < 15.0
