"""Faults in the history store: a writer killed mid-write, a connection cut mid-evaluation, PostgreSQL
down, a read-only or locked SQLite file. Each one exits 3 with a message that says what went wrong (or,
for the killed writer, leaves nothing behind), no partial run is ever stored, and the next run succeeds.

PostgreSQL faults go through a TCP proxy that the test cuts: the shared server itself is never stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import run_cli, score_gates, subprocess_env

import gatecfg
from gatecfg.store import Store

TEST = "tests/e2e/test_faults_ci.py"
STEPS = 40
GATES = f"""\
test: {TEST}
gates:
  train/loss:
    steps: all
    constraint: {{rel_up: 0.5, abs_floor_up: 0.1}}
  eval/score:
    steps: last
    constraint: {{rel_down: 0.1}}
"""
POINTS_PER_RUN = STEPS + 1
# A killed or stalled process must fail the test, not hang the CI job.
PROCESS_TIMEOUT_S = 120

# Runs the real entry point, pausing for good once the run's points are inserted and not yet committed
# (as its write transaction is about to commit, whichever bulk path wrote the points): the moment a
# SIGKILL does the most damage.
PAUSE_MID_WRITE = """
import sys, time
import sqlalchemy as sa
from gatecfg.cli import main

def pause(conn):
    if conn.exec_driver_sql("SELECT count(*) FROM metric_points").scalar():
        print("points inserted", flush=True)
        time.sleep(600)

sa.event.listen(sa.engine.Engine, "commit", pause)
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A gates root and a record of one run."""
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "faults.yaml").write_text(GATES, encoding="utf-8")
    rows = [{"_step": step, "train/loss": 2.0 - step / 100} for step in range(STEPS)]
    rows.append({"_step": STEPS, "eval/score": 0.8})
    record = tmp_path / "record.jsonl"
    record.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return gates, record


def _evaluate(gates: Path, record: Path, db: str, run_id: str, *, write: bool = True) -> tuple[int, str, Any]:
    args = ["evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
            "--run-id", run_id, "--format", "json"]  # fmt: skip
    result = run_cli(*args, *(["--write"] if write else []))
    return result.code, result.err, json.loads(result.out) if result.out else {}


def _counts(db: str, run_id: str) -> tuple[int, int, int, int]:
    """(runs with this id, run_coordinates rows, points, coordinates) in the store, read directly."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return (
                conn.execute(
                    sa.text("SELECT count(*) FROM runs WHERE run_id = :id"), {"id": run_id}
                ).scalar_one(),
                conn.execute(sa.text("SELECT count(*) FROM run_coordinates")).scalar_one(),
                conn.execute(sa.text("SELECT count(*) FROM metric_points")).scalar_one(),
                conn.execute(sa.text("SELECT count(*) FROM coordinates")).scalar_one(),
            )
    finally:
        engine.dispose()


# --- a writer killed mid-write -------------------------------------------------------------------------


def test_a_writer_killed_mid_write_leaves_no_partial_run_and_the_next_run_succeeds(
    tree: tuple[Path, Path], store: Store, store_url: str
) -> None:
    gates, record = tree
    argv = [sys.executable, "-c", PAUSE_MID_WRITE, "evaluate", "--gates", str(gates), "--test", TEST,
            "--record", str(record), "--db", store_url, "--write", "--run-id", "killed"]  # fmt: skip
    writer = subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line == b"points inserted\n", writer.stderr.read().decode() if writer.stderr else line
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == -signal.SIGKILL

    assert _counts(store_url, "killed") == (0, 0, 0, 0)
    code, err, report = _evaluate(gates, record, store_url, "killed")
    assert code == 0, err
    assert report["run"]["written"] is True
    assert _counts(store_url, "killed") == (1, 2, POINTS_PER_RUN, 2)


# --- PostgreSQL: the connection cut mid-evaluation, the server down ------------------------------------


class Proxy:
    """A TCP proxy to PostgreSQL. `cut_on`: drop every connection, both ways, as soon as the client sends
    a message holding these bytes, without forwarding it: the network failing at that statement."""

    def __init__(self, upstream: tuple[str, int], cut_on: bytes | None = None) -> None:
        self.upstream = upstream
        self.cut_on = cut_on
        self.cuts = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        tail = b""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                self._cut()
                return
            # The marker may straddle two reads.
            if from_client and self.cut_on is not None and self.cut_on in tail + data:
                self.cuts += 1
                self._cut()
                return
            tail = data[-len(self.cut_on or b"") :]
            try:
                target.sendall(data)
            except OSError:
                return

    def _cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        # shutdown first: close alone leaves the port listening while accept() blocks in the thread.
        with suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._cut()


@contextmanager
def _proxy(db: str, cut_on: bytes | None = None) -> Iterator[tuple[Proxy, str]]:
    url = sa.make_url(db)
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432), cut_on)
    try:
        yield proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    finally:
        proxy.close()


@pytest.fixture
def pg(postgresql_url: str) -> str:
    with Store.open(postgresql_url, check_schema=False) as store:
        store.upgrade()
    return postgresql_url


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("cut_on", "action"),
    [
        (b"metric_points", "cannot read baselines from the history store"),
        (b"COPY metric_points", "cannot write run 'cut' to the history store"),
    ],
    ids=["reading-baselines", "writing-points"],
)
def test_a_connection_dropped_mid_evaluation_exits_3_and_the_next_run_succeeds(
    tree: tuple[Path, Path], pg: str, cut_on: bytes, action: str
) -> None:
    gates, record = tree
    assert _evaluate(gates, record, pg, "nightly")[0] == 0  # a baseline to read
    with _proxy(pg, cut_on) as (proxy, through_proxy):
        code, err, report = _evaluate(gates, record, through_proxy, "cut")
    assert proxy.cuts == 1
    assert code == 3, err
    assert report == {}
    assert f": error: {action}: " in err
    assert "Traceback" not in err
    assert _counts(pg, "cut") == (0, 2, POINTS_PER_RUN, 2)

    with _proxy(pg) as (_, through_proxy):
        code, err, report = _evaluate(gates, record, through_proxy, "cut")
    assert code == 0, err
    assert _counts(pg, "cut") == (1, 4, 2 * POINTS_PER_RUN, 2)


@pytest.mark.postgres
def test_postgresql_down_exits_3_with_a_connect_message_and_the_next_run_succeeds(
    tree: tuple[Path, Path], pg: str
) -> None:
    gates, record = tree
    with _proxy(pg) as (proxy, through_proxy):
        pass  # closed again: nothing listens on its port any more, as when the server is down
    code, err, report = _evaluate(gates, record, through_proxy, "down")
    assert code == 3
    assert report == {}
    assert f"127.0.0.1:{proxy.port}" in err
    assert ": error: cannot connect to the history store: " in err
    assert "hint: is the database server up and the URL right?" in err

    code, err, _ = _evaluate(gates, record, pg, "down")
    assert code == 0, err
    assert _counts(pg, "down") == (1, 2, POINTS_PER_RUN, 2)


# --- SQLite: read-only and locked files ----------------------------------------------------------------


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """The file read-only for this process: by its mode, or for root (who ignores modes) immutable."""
    mode = path.stat().st_mode
    path.chmod(0o444)
    immutable = False
    try:
        if os.access(path, os.W_OK):
            chattr = shutil.which("chattr")
            if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
                pytest.skip("cannot make a file read-only for this user (root without chattr +i)")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


def test_a_read_only_sqlite_file_refuses_the_write_with_exit_3_and_still_serves_reads(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    gates, record = tree
    path = tmp_path / "history.db"
    db = f"sqlite:///{path}"
    assert _evaluate(gates, record, db, "first")[0] == 0
    with _read_only(path):
        code, err, report = _evaluate(gates, record, db, "refused")
        assert code == 3
        assert report == {}
        assert f"{db}: error: cannot write run 'refused' to the history store: " in err
        assert "readonly database" in err
        code, err, report = _evaluate(gates, record, db, "read", write=False)
        assert code == 0, err
        assert report["verdicts"][0]["n"] == 1
    code, err, _ = _evaluate(gates, record, db, "refused")
    assert code == 0, err
    assert _counts(db, "refused")[0] == 1


@pytest.mark.parametrize("exclusive", [False, True], ids=["writer-holds-the-lock", "exclusive-lock"])
def test_a_locked_sqlite_file_exits_3_after_its_timeout_and_the_next_run_succeeds(
    tree: tuple[Path, Path], tmp_path: Path, exclusive: bool
) -> None:
    gates, record = tree
    path = tmp_path / "history.db"
    assert _evaluate(gates, record, f"sqlite:///{path}", "first")[0] == 0
    # `?timeout=` shortens the 30 s a writer otherwise waits for the lock.
    db = f"sqlite:///{path}?timeout=0.2"
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        if exclusive:  # another program that keeps the whole file, readers included, out
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE runs SET branch = 'held' WHERE run_id = 'first'")
        if exclusive:
            holder.execute("COMMIT")  # the exclusive lock outlives the transaction
        code, err, report = _evaluate(gates, record, db, "locked")
    finally:
        holder.close()
    assert code == 3
    assert report == {}
    assert "database is locked" in err
    assert ": error: cannot " in err
    assert "Traceback" not in err
    code, err, _ = _evaluate(gates, record, db, "locked")
    assert code == 0, err
    assert _counts(f"sqlite:///{path}", "locked") == (1, 4, 2 * POINTS_PER_RUN, 2)


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder this process cannot write: a read-only tmpfs mount as root (root writes through any mode
    bits), its mode bits otherwise. The store is copied in first by `put`."""
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "none", str(folder)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("root cannot mount a tmpfs here to make a read-only folder")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def _make_read_only(folder: Path) -> None:
    import subprocess

    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        folder.chmod(0o555)


def test_a_store_on_a_read_only_folder_serves_a_plain_evaluate(
    tmp_path: Path, read_only_folder: Path
) -> None:
    import shutil

    gates = score_gates(tmp_path, "  min_history: 1\n")
    db = tmp_path / "h.db"
    for night, score in enumerate([0.5, 0.52, 0.48]):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, score)]}, gates=gates, db=str(db), write=True,
                         run_id=f"n{night}")  # fmt: skip
    shutil.copy(db, read_only_folder / "h.db")
    _make_read_only(read_only_folder)
    (tmp_path / "bad.jsonl").write_text('{"_step": 0, "eval/score": 0.1}\n')
    stored = f"sqlite:///{read_only_folder / 'h.db'}"
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--db", stored, "--format", "json"]
    good = run_cli(*argv, "--record", tmp_path / "r.jsonl")
    assert good.code == 0, good.err
    [verdict] = json.loads(good.out)["verdicts"]
    assert (verdict["status"], verdict["n"]) == ("pass", 3)  # judged against the stored nights, not cold
    bad = run_cli(*argv, "--record", tmp_path / "bad.jsonl")
    assert json.loads(bad.out)["verdicts"][0]["status"] == "fail"
    written = run_cli(*argv, "--record", tmp_path / "r.jsonl", "--write")
    assert written.code == 3  # a write still needs a writable store, and says so
    assert sorted(p.name for p in read_only_folder.iterdir()) == ["h.db"]
