"""Faults against every command that writes the history store, from the outside, as an attacker or bad luck
would bring them: the process SIGKILLed at several points of its write, a full disk, a read-only store, a
store from a newer gatecfg, two `db upgrade` at once. Whatever happens, nothing is half-written: the store
holds what it held before or the command's whole result, and the next command works.

A kill point is "before the N-th SQL statement" or "before the transaction's commit", counted by a
SQLAlchemy event hook in a forked child (a fork starts in milliseconds, where a fresh interpreter takes a
second or two: the whole catalogue of kill points runs in seconds). The load case, 32 concurrent
`evaluate --write` on both stores, is benchmarks/concurrent_writers.py; tests/test_concurrency.py runs 16.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from helpers import run_cli
from test_store import migrations_config

from gatecfg.cli import main
from gatecfg.store.facts import SCHEMA_REVISION

TEST = "t.py"
STEPS = 20
BASE = """\
version: 1
defaults:
  m/loss:
    steps: all
    constraint: {rel_up: 0.5, abs_floor_up: 0.1}
  m/score:
    steps: last
    constraint: {rel_down: 0.1}
  m/old:
    steps: last
    constraint: null
policy:
  window: 20
  accept_shift_after: 3
"""
GATE = f"test: {TEST}\ngates:\n  m/loss:\n    enforce: true\n  m/score:\n    limits: {{min: 0.5}}\n"
# A column that says when a row was written differs between two runs of one command: compared as set or not.
VOLATILE = ("_at", "written_by")


def _record(path: Path, loss: float, score: float = 0.8, *, old: bool = False) -> Path:
    rows: list[dict[str, Any]] = [{"_step": s, "m/loss": loss + s / 1000} for s in range(STEPS)]
    rows.append({"_step": STEPS, "m/score": score, **({"m/old": 1.0} if old else {})})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _ok(*args: str | Path) -> str:
    result = run_cli(*args)
    assert result.code in (0, 1), result.err
    return result.out


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with gates/, records and h.db: ten nightlies, one of them failing (untrusted), a shift
    accepted after three nights at a new level, and a coordinate no gate declares any more (m/old)."""
    root = tmp_path_factory.mktemp("snapshot")
    with contextlib.chdir(root):
        (root / "gates").mkdir()
        (root / "gates" / "base.yaml").write_text(BASE, encoding="utf-8")
        (root / "old").mkdir()
        (root / "old" / "base.yaml").write_text(BASE, encoding="utf-8")
        (root / "old" / "t.yaml").write_text(GATE + "  m/old:\n", encoding="utf-8")
        (root / "gates" / "t.yaml").write_text(GATE, encoding="utf-8")
        db = "sqlite:///h.db"
        evaluate = ("evaluate", "--test", TEST, "--db", db, "--write", "--format", "json")
        _ok(*evaluate, "--gates", "old", "--record", _record(root / "r.jsonl", 2.0, old=True),
            "--run-id", "n0", "--date", "2024-01-01")  # fmt: skip
        levels = [2.0] * 5 + [2.0] + [4.0] * 4  # night 6 fails its score limit; nights 7-10 shift the loss
        for night, level in enumerate(levels, start=1):
            score = 0.3 if night == 6 else 0.8
            _ok(*evaluate, "--gates", "gates", "--record", _record(root / "r.jsonl", level, score),
                "--run-id", f"n{night}", "--date", f"2024-01-{night + 1:02d}")  # fmt: skip
        _record(root / "tonight.jsonl", 4.0)
        rows = ["run_id,date,commit,m/score"] + [f"i{k},2024-01-2{k}T00:00:00,c{k},0.8" for k in range(3)]
        (root / "nights.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    shifts = json.loads(run_cli("shifts", "--db", f"sqlite:///{root / 'h.db'}", "--format", "json").out)
    assert len(shifts) >= 1, shifts
    return root


@pytest.fixture
def here(snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the snapshot as the working directory."""
    root = tmp_path / "work"
    shutil.copytree(snapshot, root, symlinks=True)
    monkeypatch.chdir(root)
    return root


# --------------------------------------------------------------------------------------- the store's state


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, sorted, a volatile column (when a row was written) reduced to whether it is set;
    and the schema. Read with sqlite3, which also rolls back a killed writer's hot journal."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found: dict[str, list[tuple[Any, ...]]] = {
            "schema": sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall(), key=str)
        }
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')  # names from sqlite_master itself
            names = [d[0] for d in cursor.description]
            rows = [
                tuple(v is not None if n.endswith(VOLATILE) else v for n, v in zip(names, row, strict=True))
                for row in cursor
            ]
            found[table] = sorted(rows, key=repr)
        return found
    finally:
        conn.close()


def pg_dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """`dump` of a PostgreSQL store: every table's rows, sorted, volatile columns reduced to set or not,
    serial keys left out (a sequence is not rolled back with its transaction)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = {}
            for table in sa.inspect(conn).get_table_names():
                result = conn.execute(sa.text(f'SELECT * FROM "{table}"'))  # names from the catalog
                names = list(result.keys())
                found[table] = sorted(
                    (
                        tuple(
                            v is not None if n.endswith(VOLATILE) else v
                            for n, v in zip(names, row, strict=True)
                            if not n.endswith("pk")
                        )
                        for row in result
                    ),
                    key=repr,
                )
            return found
    finally:
        engine.dispose()


def _no_rows(found: dict[str, list[tuple[Any, ...]]]) -> bool:
    return all(not rows for table, rows in found.items() if table not in ("schema", "alembic_version"))


# ---------------------------------------------------------------------------------------------- kill points


@dataclass(frozen=True)
class Point:
    """Where the child dies: before its `statement`-th SQL statement, or before its `commit`-th commit."""

    statement: int = 0
    commit: int = 0

    def __str__(self) -> str:
        return f"statement {self.statement}" if self.statement else f"commit {self.commit}"


@contextlib.contextmanager
def _counting() -> Iterator[dict[str, int]]:
    """Count the SQL statements and commits of every engine while the block runs."""
    counts = {"statement": 0, "commit": 0}

    def statement(*_: object) -> None:
        counts["statement"] += 1

    def commit(*_: object) -> None:
        counts["commit"] += 1

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", statement)
    sa.event.listen(sa.engine.Engine, "commit", commit)
    try:
        yield counts
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", statement)
        sa.event.remove(sa.engine.Engine, "commit", commit)


def killed(argv: list[str], point: Point, *, also: Callable[[], None] | None = None) -> int:
    """Run `gatecfg argv` in a forked child that SIGKILLs itself at `point`; the signal that ended it
    (minus its exit code when it ended before reaching the point)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 99
        try:
            if also is not None:
                also()
            reached = {"statement": 0, "commit": 0}

            def die(kind: str) -> Callable[..., None]:
                def check(*_: object) -> None:
                    reached[kind] += 1
                    if reached[kind] == getattr(point, kind):
                        os.kill(os.getpid(), signal.SIGKILL)

                return check

            on_statement, on_commit = die("statement"), die("commit")
            sa.event.listen(sa.engine.Engine, "before_cursor_execute", on_statement)
            sa.event.listen(sa.engine.Engine, "commit", on_commit)
            with (
                open(os.devnull, "w") as null,
                contextlib.redirect_stdout(null),
                contextlib.redirect_stderr(null),
            ):
                code = main(argv)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)


def points(counts: dict[str, int]) -> list[Point]:
    """The middle statement, the last one, and the last commit (everything written, nothing committed)."""
    last = counts["statement"]
    chosen = sorted({max(1, last // 2), last})
    return [Point(statement=n) for n in chosen] + [Point(commit=counts["commit"])] * bool(counts["commit"])


# The store-writing commands, each against the snapshot's h.db (run from a copy of the snapshot).
WRITERS: dict[str, list[str]] = {
    "evaluate-write": ["evaluate", "--test", TEST, "--record", "tonight.jsonl", "--db", "sqlite:///h.db",
                       "--write", "--run-id", "tonight", "--date", "2024-02-01"],
    "import": ["import", "--test", TEST, "--db", "sqlite:///h.db", "nights.csv"],
    "trust": ["trust", "--run-id", "n6", "--reason", "the runner was flaky", "--db", "sqlite:///h.db"],
    "untrust": ["untrust", "--run-id", "n2", "--reason", "a bad node", "--db", "sqlite:///h.db"],
    "shifts-undo": ["shifts", "--undo", "1", "--reason", "the slowdown is a bug", "--db", "sqlite:///h.db"],
    "prune": ["prune", "--orphaned", "--yes", "--db", "sqlite:///h.db"],
    "db-copy": ["db", "copy", "--from", "sqlite:///h.db", "--to", "sqlite:///copy.db"],
}  # fmt: skip


def _complete(here: Path, argv: list[str], target: str) -> tuple[int, dict[str, int], dict[str, Any]]:
    """The command run whole on a copy of the store: its exit code, statement counts and resulting dump."""
    spare = here / "spare"
    spare.mkdir()
    shutil.copy(here / "h.db", spare / "h.db")
    with contextlib.chdir(spare), _counting() as counts:
        for name in ("gates", "nights.csv", "tonight.jsonl"):
            os.symlink(here / name, spare / name)
        code = run_cli(*argv).code
    assert code in (0, 1)
    result = dump(spare / target)
    shutil.rmtree(spare)
    return code, dict(counts), result


class TestSigkillDuringEveryWritingCommand:
    @pytest.mark.parametrize("name", sorted(WRITERS))
    def test_a_writer_killed_anywhere_leaves_the_store_whole_and_the_next_run_works(
        self, here: Path, name: str
    ) -> None:
        argv = WRITERS[name]
        target = "copy.db" if name == "db-copy" else "h.db"
        code, counts, after = _complete(here, argv, target)
        before = dump(here / "h.db")
        pristine = here / "pristine.db"
        shutil.copy(here / "h.db", pristine)
        tried = points(counts)
        assert len(tried) >= 3, counts
        for point in tried:
            shutil.copy(pristine, here / "h.db")
            for leftover in here.glob("copy.db*"):
                leftover.unlink()
            assert killed(argv, point) == signal.SIGKILL, f"{name} ended before {point}"
            copied: dict[str, list[tuple[Any, ...]]] = {}
            if name == "db-copy":
                assert dump(here / "h.db") == before
                # Nothing, the schema alone (migrated in a transaction of its own), or every row.
                copied = dump(here / "copy.db") if (here / "copy.db").exists() else {"schema": []}
                assert copied == after or _no_rows(copied), f"{name} killed at {point} left a partial copy"
            else:
                assert dump(here / "h.db") in (before, after), (
                    f"{name} killed at {point} left a partial write"
                )
            # A copy killed after its commit is whole: copying again needs --replace, as into any full store.
            whole = name == "db-copy" and copied == after
            again = run_cli(*argv, *(["--replace"] if whole else []))
            assert again.code == code, f"after a kill at {point}: {again.err}"
            assert dump(here / target) == after, f"{name}: the run after a kill at {point} differs"

    @pytest.mark.postgres
    @pytest.mark.parametrize("name", ["evaluate-write", "import"])
    def test_a_postgresql_writer_killed_anywhere_leaves_the_store_whole_and_the_next_run_works(
        self, here: Path, postgresql_url: str, name: str
    ) -> None:
        argv = [postgresql_url if a == "sqlite:///h.db" else a for a in WRITERS[name]]
        restore = ["db", "copy", "--replace", "--from", "sqlite:///h.db", "--to", postgresql_url]
        assert run_cli(*restore).code == 0
        before = pg_dump(postgresql_url)
        with _counting() as counts:
            code = run_cli(*argv).code
        after = pg_dump(postgresql_url)
        for point in points(counts):
            assert run_cli(*restore).code == 0
            assert killed(argv, point) == signal.SIGKILL, f"{name} ended before {point}"
            assert pg_dump(postgresql_url) in (before, after), (
                f"{name} killed at {point} left a partial write"
            )
            assert run_cli(*argv).code == code
            assert pg_dump(postgresql_url) == after

    def test_a_migration_killed_midway_leaves_the_old_schema_and_the_next_upgrade_works(
        self, here: Path
    ) -> None:
        url = "sqlite:///h.db"
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            config = migrations_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0004")
        engine.dispose()
        old = dump(here / "h.db")
        argv = ["db", "upgrade", "--db", url]
        code, counts, head = _complete(here, argv, "h.db")
        pristine = here / "old.db"
        shutil.copy(here / "h.db", pristine)
        for point in points(counts):
            shutil.copy(pristine, here / "h.db")
            assert killed(argv, point) == signal.SIGKILL
            assert dump(here / "h.db") in (old, head), (
                f"db upgrade killed at {point} left a half-migrated schema"
            )
            assert run_cli(*argv).code == code == 0
            assert dump(here / "h.db") == head

    def test_rebaseline_killed_as_it_replaces_the_gate_file_leaves_the_old_file(self, here: Path) -> None:
        argv = ["rebaseline", "--test", TEST, "--metric", "m/score", "--write", "--db", "sqlite:///h.db"]
        before = (here / "gates" / "t.yaml").read_text(encoding="utf-8")

        def kill_on_replace() -> None:
            os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[assignment]

        assert killed(argv, Point(), also=kill_on_replace) == signal.SIGKILL
        assert (here / "gates" / "t.yaml").read_text(encoding="utf-8") == before
        assert (
            run_cli("lint", "--gates", "gates").code == 0
        )  # the temporary file left beside it is no gate file
        result = run_cli(*argv)
        assert result.code == 0, result.err
        assert "limits:" in (here / "gates" / "t.yaml").read_text(encoding="utf-8")


# ------------------------------------------------------------------------- a full disk, a read-only store


@contextlib.contextmanager
def _full_after(pages: int) -> Iterator[None]:
    """Every SQLite connection opened in the block may grow its file to `pages` pages and no further: a
    disk that fills up (SQLite's max_page_count; the error is SQLITE_FULL, as from a full disk)."""

    def limit(dbapi: Any, _: object) -> None:
        dbapi.execute(f"PRAGMA max_page_count = {pages}")

    sa.event.listen(sa.engine.Engine, "connect", limit)
    try:
        yield
    finally:
        sa.event.remove(sa.engine.Engine, "connect", limit)


def _pages(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])
    finally:
        conn.close()


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("  hint: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


class TestFullDisk:
    @pytest.mark.parametrize(
        "argv",
        [
            ["evaluate", "--test", "big.py", "--record", "big.jsonl", "--db", "sqlite:///h.db", "--write",
             "--run-id", "big"],
            ["import", "--test", "big.py", "--db", "sqlite:///h.db", "big.csv"],
        ],
        ids=["evaluate-write", "import"],
    )  # fmt: skip
    def test_a_full_disk_exits_3_on_one_line_and_stores_nothing(self, here: Path, argv: list[str]) -> None:
        # A record and an export far larger than the pages left.
        (here / "gates" / "big.yaml").write_text(
            "test: big.py\ngates:\n  m/wide:\n    steps: all\n    constraint: {rel_up: 1}\n", encoding="utf-8"
        )
        wide = [{"_step": s, "m/wide": 1.0 + s, "m/score": 0.8} for s in range(20000)]
        (here / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wide), encoding="utf-8")
        header = "run_id,date,commit," + ",".join(f"m/wide@{s}" for s in range(2000))
        body = [f"b{k},2024-02-{k + 1:02d}T00:00:00,c{k}," + ",".join(["1.5"] * 2000) for k in range(10)]
        (here / "big.csv").write_text("\n".join([header, *body]) + "\n", encoding="utf-8")
        before = dump(here / "h.db")

        with _full_after(_pages(here / "h.db") + 2):
            result = run_cli(*argv)

        assert result.code == 3, result.err
        line = _one_line_error(result.err)
        assert line.startswith("sqlite:///h.db: error: cannot "), line
        assert "full" in line, line
        assert dump(here / "h.db") == before
        assert run_cli(*argv).code in (0, 1)  # room again: the same command stores it


def _read_only(path: Path) -> contextlib.AbstractContextManager[None]:
    """The file immutable (root writes through any mode; chattr +i stops it), else read-only by mode."""

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        mode = path.stat().st_mode
        path.chmod(0o444)
        immutable = os.access(path, os.W_OK)
        if immutable and (shutil.which("chattr") is None or os.system(f"chattr +i '{path}' 2>/dev/null")):
            path.chmod(mode)
            pytest.skip("cannot make a file read-only for this user (root without chattr +i)")
        try:
            yield
        finally:
            if immutable:
                os.system(f"chattr -i '{path}'")
            path.chmod(mode)

    return block()


class TestReadOnlyStore:
    @pytest.mark.parametrize("name", sorted(set(WRITERS) - {"db-copy"}))
    def test_every_writing_command_on_a_read_only_sqlite_file_exits_3_on_one_line(
        self, here: Path, name: str
    ) -> None:
        before = dump(here / "h.db")
        with _read_only(here / "h.db"):
            result = run_cli(*WRITERS[name])
        assert result.code == 3, (result.code, result.err)
        assert "readonly database" in _one_line_error(result.err)
        assert dump(here / "h.db") == before

    @pytest.mark.postgres
    @pytest.mark.parametrize("name", ["evaluate-write", "import", "trust", "untrust", "prune"])
    def test_every_writing_command_in_a_read_only_postgresql_transaction_exits_3_on_one_line(
        self, here: Path, postgresql_url: str, name: str
    ) -> None:
        assert run_cli("db", "copy", "--from", "sqlite:///h.db", "--to", postgresql_url).code == 0
        read_only = f"{postgresql_url}?options=-c%20default_transaction_read_only%3Don"
        argv = [read_only if a == "sqlite:///h.db" else a for a in WRITERS[name]]
        result = run_cli(*argv)
        assert result.code == 3, (result.code, result.err)
        assert "read-only transaction" in _one_line_error(result.err)


# -------------------------------------------------------------------- a newer store, two upgrades at once


class TestStoreFromANewerGatecfg:
    @pytest.mark.parametrize(
        "argv",
        [
            ["evaluate", "--test", TEST, "--record", "tonight.jsonl", "--db", "sqlite:///h.db"],
            WRITERS["evaluate-write"],
            WRITERS["import"],
            WRITERS["trust"],
            ["history", "--test", TEST, "--metric", "m/score", "--db", "sqlite:///h.db"],
            ["compare", "n1", "n2", "--db", "sqlite:///h.db"],
            ["db", "upgrade", "--db", "sqlite:///h.db"],
            WRITERS["db-copy"],
        ],
        ids=lambda a: "-".join(a[:2]) if a[0] == "db" else a[0] + ("-write" if "--write" in a else ""),
    )
    def test_every_command_refuses_it_naming_the_revision_with_exit_3(
        self, here: Path, argv: list[str]
    ) -> None:
        conn = sqlite3.connect(here / "h.db")
        with conn:
            conn.execute("UPDATE alembic_version SET version_num = '0042_from_the_future'")
        conn.close()
        before = dump(here / "h.db")
        result = run_cli(*argv)
        assert result.code == 3, (result.code, result.err)
        line = _one_line_error(result.err)
        assert "0042_from_the_future" in line, line
        assert dump(here / "h.db") == before
        assert not (here / "copy.db").exists() or dump(here / "copy.db") == {"schema": []}


def _upgrade_in_child(url: str) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 99
        try:
            with (
                open(os.devnull, "w") as null,
                contextlib.redirect_stdout(null),
                contextlib.redirect_stderr(null),
            ):
                code = main(["db", "upgrade", "--db", url])
        finally:
            os._exit(code)
    return pid


def _concurrent_upgrades(url: str, count: int = 2) -> list[int]:
    children = [_upgrade_in_child(url) for _ in range(count)]
    codes = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        codes.append(os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
    return codes


class TestTwoUpgradesAtOnce:
    def test_two_upgrades_of_a_new_sqlite_file_both_exit_0_and_the_schema_is_head(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'h.db'}"
        assert _concurrent_upgrades(url) == [0, 0]
        fresh = tmp_path / "fresh.db"
        assert run_cli("db", "upgrade", "--db", f"sqlite:///{fresh}").code == 0
        assert dump(tmp_path / "h.db") == dump(fresh)

    @pytest.mark.postgres
    def test_two_upgrades_of_a_new_postgresql_database_both_exit_0_and_the_schema_is_head(
        self, postgresql_url: str
    ) -> None:
        assert _concurrent_upgrades(postgresql_url) == [0, 0]
        engine = sa.create_engine(postgresql_url)
        try:
            with engine.connect() as conn:
                assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all() == [
                    SCHEMA_REVISION
                ]
                tables = set(sa.inspect(conn).get_table_names())
        finally:
            engine.dispose()
        assert {"runs", "coordinates", "metric_points", "run_coordinates", "shifts", "carries"} <= tables
