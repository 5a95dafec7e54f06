"""One engine per store URL and process (gatecfg/store/engine.py, `shared_engine`): reused by every open
of the same URL, never by another URL or options, never across a fork's connections; what a repeated
`gatecfg.evaluate(write=True)` makes anew (benchmarks/api_calls.py measures its cost)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import default
from test_evaluate_cli import TEST, write_gates

import gatecfg
from gatecfg.store import Store
from gatecfg.store.engine import parse_url, shared_engine


def test_every_open_of_a_url_gets_its_one_engine_which_close_leaves_usable(store_url: str) -> None:
    with Store.open(store_url, check_schema=False) as first:
        first.upgrade()
    with Store.open(store_url) as second:
        assert second._engine is first._engine
        assert second.revision() is not None


def test_a_url_with_other_options_gets_another_engine(store_url: str) -> None:
    option = "timeout=2" if store_url.startswith("sqlite") else "connect_timeout=7"
    plain, _ = shared_engine(parse_url(store_url))
    with_option, kept = shared_engine(parse_url(f"{store_url}?{option}"))
    assert kept
    assert with_option is not plain
    assert with_option.url.query == dict([option.split("=")])


def test_an_in_memory_sqlite_store_is_never_kept() -> None:
    first, kept = shared_engine(parse_url("sqlite://"))
    second, _ = shared_engine(parse_url("sqlite:///:memory:"))
    assert not kept
    assert first is not second
    first.dispose()
    second.dispose()


def _backend_pid(url: str) -> int:
    with Store.open(url) as store, store._engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def _child(url: str, queue: multiprocessing.Queue[int]) -> None:
    queue.put(_backend_pid(url))


@pytest.mark.postgres
def test_a_forked_child_opens_its_own_connections_and_leaves_the_parents_pooled(postgresql_url: str) -> None:
    url = postgresql_url
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
    parent = _backend_pid(url)
    assert _backend_pid(url) == parent  # pooled: the same server session

    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[int] = context.Queue()
    child = context.Process(target=_child, args=(url, queue))
    child.start()
    child.join(timeout=60)

    assert child.exitcode == 0
    assert queue.get(timeout=5) != parent
    assert _backend_pid(url) == parent  # the child neither used nor closed the parent's session


@contextmanager
def _made_anew() -> Iterator[dict[str, int]]:
    """Engines' new DBAPI connections and statements compiled rather than found in a cache, process-wide,
    while the block runs."""
    seen = {"connections": 0, "compiled": 0}

    def connected(*_: object) -> None:
        seen["connections"] += 1

    def executed(*event: object) -> None:
        if getattr(event[4], "cache_hit", None) is default.CACHE_MISS:
            seen["compiled"] += 1

    sa.event.listen(sa.pool.Pool, "connect", connected)
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", executed)
    try:
        yield seen
    finally:
        sa.event.remove(sa.pool.Pool, "connect", connected)
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", executed)


def test_a_repeated_api_write_compiles_nothing_and_on_postgresql_opens_no_connection(
    tmp_path: Path, db: str
) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n")
    points = {"rollout/raw_reward": [(0, 0.5), (1, 0.6)]}
    for night in range(3):
        gatecfg.evaluate(TEST, points, gates=gates, db=db, write=True, run_id=f"n{night}", commit="abc")

    with _made_anew() as seen:
        report = gatecfg.evaluate(TEST, points, gates=gates, db=db, write=True, run_id="n3", commit="abc")

    assert report.run.written
    assert seen["compiled"] == 0
    # A SQLite file is opened for each use (nothing holds it open between calls): the schema check and
    # the write; PostgreSQL's connection stays pooled.
    assert seen["connections"] == (2 if db.startswith("sqlite") else 0)


def test_a_relative_sqlite_url_names_the_file_in_each_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        with Store.open("sqlite:///h.db", create=True) as store:
            assert store.revision() is not None
        assert (folder / "h.db").is_file()
