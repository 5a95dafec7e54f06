"""Engines for the history store: URL checks, SQLite pragmas and locking, driver errors as StoreError."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from gatecfg.errors import InputError, StoreError
from gatecfg.escape import invisible_characters, mask_url, terminal
from gatecfg.extras import require
from gatecfg.store import url_options
from gatecfg.store.facts import SQLITE_BUSY_TIMEOUT_S

URL_HINT = "write sqlite:///path/to/history.db or postgresql+psycopg://user@host:5432/dbname"
CONNECT_HINT = "is the database server up and the URL right? check --db / GATECFG_DB_URL"
SQLITE_CONNECT_HINT = (
    "check that the file and its folder exist and that this user may write both "
    "(SQLite keeps -wal and -shm files beside it); check --db / GATECFG_DB_URL"
)

# Marks connections that will write, so that SQLite takes its write lock at BEGIN rather than at the
# first INSERT: a deferred transaction that upgrades to a writer fails at once under contention instead
# of waiting out busy_timeout.
WRITE = "gatecfg_write"

# How long a connection waits for another writer's lock before the command fails (exit 3). A SQLite URL's
# own `?timeout=SECONDS`, which the driver applies, wins: a CI job may rather fail fast than queue.
SQLITE_BUSY_TIMEOUT = f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000:.0f}"
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = NORMAL",
)

# A host that does not answer would otherwise hold the CI job for the OS TCP timeout (minutes).
PG_CONNECT_TIMEOUT_S = 10


def parse_url(raw: str) -> URL:
    """The URL of a supported store; `postgresql://` means the psycopg 3 driver. Everything the drivers
    would choke on later (a port that is no number, a NUL, a SQLite `timeout` that is no number) is an
    error here, naming the URL with its credentials masked."""
    shown = mask_url(raw)
    try:
        url = sa.make_url(raw)
        _ = url.port  # SQLAlchemy converts the port lazily in some versions
    except (ArgumentError, ValueError):
        raise InputError.at(
            "--db", f"the history store URL does not parse: `{shown}`", hint=URL_HINT
        ) from None
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise InputError.at(
            redact(url), f"unsupported history store driver {url.drivername!r}", hint=URL_HINT
        )
    # A control character (a NUL, a newline, a bidi override), written or %-encoded, would name a store
    # file no one can type or see, and forge lines where the URL is printed.
    found = invisible_characters(raw + unquote(raw))
    if found:
        shown_raw = mask_url(terminal(raw))
        raise InputError.at(
            "--db",
            f"the history store URL `{shown_raw}` holds the control character {', '.join(found)}",
            hint=URL_HINT,
        )
    url = url_options.checked(url, shown)
    timeout = url.query.get("timeout")
    if url.get_backend_name() == "sqlite" and timeout is not None:
        try:
            seconds = float(timeout if isinstance(timeout, str) else timeout[-1])
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds < float("inf"):
            raise InputError.at(
                "--db",
                f"`?timeout=` in `{shown}` is not a number of seconds",
                hint="e.g. sqlite:///history.db?timeout=5",
            )
    return url


def redact(url: URL) -> str:
    """The URL as messages and reports show it: every credential masked (`escape.mask_url`)."""
    return mask_url(url.render_as_string(hide_password=False))


def create_engine(url: URL) -> Engine:
    """A new engine for the store at `url`, which the caller disposes (`shared_engine` keeps one)."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return _postgresql_engine(url)


# Engines kept per process, by URL (options and credentials included, so that a URL with other options
# or another role never gets this one's connections), least recently used first.
class _Shared:
    def __init__(self) -> None:
        self.engines: OrderedDict[str, Engine] = OrderedDict()
        self.lock = threading.Lock()


_SHARED = _Shared()
# A process that opens more stores than this (a test session, a service walking a fleet's stores) closes
# the pooled connections of the one it used least recently.
MAX_SHARED_ENGINES = 8


def shared_engine(url: URL) -> tuple[Engine, bool]:
    """The engine this process keeps for `url`, made on first use, and whether it is kept (else the
    caller disposes it): one engine per store and process, so that a harness calling `gatecfg.evaluate`
    night after night pays for its engine, its connection and its compiled statements once, not per call.

    PostgreSQL keeps its connections pooled (each checked before use, `pool_pre_ping`). A SQLite file
    opens a new connection each time (no pool: nothing holds the file open between calls, and a file
    deleted and made again is the new one), which costs a fraction of a millisecond; the engine is kept
    for its compiled statements. An in-memory SQLite store is never kept: each open is a new, empty
    store, as it always was. A forked child starts with the engines but not the connections
    (`_after_fork`)."""
    sqlite = url.get_backend_name() == "sqlite"
    if sqlite and (url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"):
        return create_engine(url), False
    key = url.render_as_string(hide_password=False)
    if sqlite and not os.path.isabs(url.database or ""):
        # A relative path names another file in another working directory (SQLAlchemy makes it absolute
        # once, when it makes the engine).
        key = f"{os.getcwd()}\0{key}"
    with _SHARED.lock:
        engine = _SHARED.engines.get(key)
        if engine is not None:
            _SHARED.engines.move_to_end(key)
    if engine is not None:
        if sqlite:
            _sqlite_folder(url)  # a folder removed since is made again, as on the first open
        return engine, True
    engine = _sqlite_engine(url, pooled=False) if sqlite else create_engine(url)
    with _SHARED.lock:
        kept = _SHARED.engines.setdefault(key, engine)
        _SHARED.engines.move_to_end(key)
        surplus = len(_SHARED.engines) - MAX_SHARED_ENGINES
        evicted = [_SHARED.engines.popitem(last=False)[1] for _ in range(surplus)]
    for old in evicted:
        old.dispose()
    if kept is not engine:  # another thread made one first
        engine.dispose()
    return kept, True


def _after_fork() -> None:
    """In a forked child: the parent's pooled connections stay the parent's (closing or using them here
    would break its sessions), so each kept engine starts a new, empty pool (SQLAlchemy's recipe for
    os.fork, `Engine.dispose(close=False)`)."""
    _SHARED.lock = threading.Lock()  # a thread of the parent may have held it at the fork
    for engine in _SHARED.engines.values():
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork)


def lock_wait(url: URL) -> float:
    """Seconds a connection waits for another's lock on a SQLite store: the URL's `?timeout=` (the last
    one, as the driver takes it; `parse_url` checked it is a number), else SQLITE_BUSY_TIMEOUT_S."""
    timeout = url.query.get("timeout")
    if timeout is None:
        return SQLITE_BUSY_TIMEOUT_S
    return float(timeout if isinstance(timeout, str) else timeout[-1])


def _sqlite_folder(url: URL) -> None:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        hint = "choose a path this user can create, e.g. --db sqlite:///path/to/history.db"
        with store_errors(redact(url), "create the history store's folder", hint=hint):
            Path(database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_engine(url: URL, *, pooled: bool = True) -> Engine:
    _sqlite_folder(url)
    engine = sa.create_engine(url) if pooled else sa.create_engine(url, poolclass=sa.pool.NullPool)
    # First, so that the pragmas after it wait for a concurrent writer too.
    pragmas = SQLITE_PRAGMAS if "timeout" in url.query else (SQLITE_BUSY_TIMEOUT, *SQLITE_PRAGMAS)
    wait = lock_wait(url)

    def connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        _sqlite_connect(dbapi_connection, pragmas, wait)

    sa.event.listen(engine, "connect", connect)
    sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: sqlite3.Connection, pragmas: Sequence[str], wait: float) -> None:
    # The sqlite3 module's own transaction handling skips BEGIN before DDL and SELECT; SQLAlchemy's
    # documented recipe turns it off and emits BEGIN itself (see _sqlite_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    deadline = time.monotonic() + wait
    for pragma in pragmas:
        _sqlite_pragma(cursor, pragma, deadline)
    cursor.close()


def _sqlite_pragma(cursor: sqlite3.Cursor, pragma: str, deadline: float) -> None:
    """One pragma, retried while the file is locked, until the connection's lock wait is over (a
    monotonic deadline: each attempt itself waits out the driver's busy timeout, so counting only the
    pauses waited many times the timeout). Switching a new file to WAL takes an exclusive lock, and SQLite
    answers "database is locked" at once there instead of calling its busy handler: six first opens of one
    new file failed one time in thirty without this."""
    pause = 0.005
    while True:
        try:
            cursor.execute(pragma)
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if "locked" not in str(exc) or left <= 0:
                raise
        time.sleep(min(pause, left))
        pause = min(pause * 2.0, 0.1)


def _sqlite_begin(connection: Connection) -> None:
    writes = connection.get_execution_options().get(WRITE, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def _postgresql_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    # No server-side prepared statements: behind a pooler in transaction mode (PgBouncer, the way hundreds
    # of CI runners share one server) a statement psycopg prepared on one server connection is unknown on
    # the next. A CI process runs each statement a few times at most, so preparing would gain nothing.
    connect_args["prepare_threshold"] = None
    # A missing driver is a missing extra (exit 2, as for `analytics`), not an unreachable store.
    require("postgres", f"a PostgreSQL store ({redact(url)})")
    return sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args)


@contextmanager
def store_errors(
    where: str, action: str, *, hint: str, also: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Turn a driver, SQLAlchemy or OS failure (or one of `also`, such as Alembic's) into a one-line
    StoreError naming the store."""
    caught: tuple[type[Exception], ...] = (SQLAlchemyError, OSError, *also)
    try:
        yield
    except caught as exc:
        raise StoreError.at(where, f"cannot {action}: {_reason(exc)}", hint=hint) from exc


def _reason(exc: BaseException) -> str:
    # SQLAlchemy's own text appends the statement and its parameters; the driver's first line is the news.
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[0] if lines else type(cause).__name__


def driver_rows(
    conn: Connection, statement: sa.Select[Any], parameters: Mapping[str, Any] | None = None
) -> Sequence[Any]:
    """The rows of `statement` as the DBAPI cursor's tuples, without a SQLAlchemy Row per row (which costs
    more than the database does at hundreds of thousands of rows).

    Executed by SQLAlchemy, so that its compiled cache serves every evaluation after the first (an
    expanding IN list keeps one compiled form whatever its length) and the connection's transaction and
    error handling apply; only the rows skip the Row objects.
    """
    result = conn.execute(statement, parameters)
    try:
        return result.cursor.fetchall() if result.cursor is not None else []
    finally:
        result.close()
