"""The store as `evaluate` and `regimes` use it: their reads of a SQLite file through the sqlite3 driver,
without SQLAlchemy.

A CI job evaluates once per process, so the process pays for whatever it imports and compiles: SQLAlchemy
was about a fifth of `gatecfg evaluate`'s CPU at 8M stored values, on top of a fetch that the driver alone
makes. `DirectStore.open` therefore reads directly where it can: a SQLite file named plainly
(`sqlite:///path`, no options), already at this gatecfg's schema revision. Its reads are the statements
`Store` runs on SQLite, defined once in store/statements.py and compiled to SQLite text ahead of time into
store/sqlite_reads.py (the window walk, the steps of one run per digest, the values; a metric's history;
the keys a metric is stored under, for the re-key check of a cold gate), plus the carry and has-runs
checks. Anything else goes through `Store`, opened on first need, so that every message, check and
guarantee stays that class's: PostgreSQL, a URL with options, a store to create or upgrade, coordinates
that carry history from others, windows whose runs stored other steps (read on into older runs), and
writes.

Kept for speed by benchmarks/bench.py (`gatecfg evaluate` on SQLite at 8M stored values); held equal
to `Store`'s reads by tests/test_direct_reads.py.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from gatecfg.errors import StoreError
from gatecfg.escape import mask_url
from gatecfg.membership import Baseline
from gatecfg.memory import collector_paused
from gatecfg.store.facts import SCHEMA_REVISION, SQLITE_BUSY_TIMEOUT_S, STORE_HINT, VERSION_TABLE
from gatecfg.store.protocol import StoreReads
from gatecfg.store.rows import (
    HISTORY_CREATED_AT,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    RunRow,
    history_row,
)
from gatecfg.store.sqlite_reads import STATEMENTS
from gatecfg.store.windowing import (
    PointReads,
    WindowRuns,
    chunk_points,
    chunked_by_pairs,
    chunks,
    decided,
    max_pairs,
    trim,
    walk_depth,
    walked,
)
from gatecfg.windows import Baselines, Window

if TYPE_CHECKING:
    from gatecfg.shifts import Recent, Shift
    from gatecfg.store.store import Store
    from gatecfg.store.writes import Points


# What reads directly: a plain SQLite file URL. A query string (`?timeout=`, `?mode=`), percent-escapes,
# `:memory:` and `file:` URIs are left to SQLAlchemy's parsing, as is every other store.
PLAIN_SQLITE = re.compile(r"sqlite(?:\+pysqlite)?:///(?P<path>[^?%\x00]+)")

# The columns of a stored coordinate that make its spec, looked up by name in a statement's result.
SPEC_FIELDS = ("coordinate", "series_key", "test", "metric", "steps_key", "constraint_key")


class DirectStore(StoreReads):
    """The store as `gatecfg evaluate` and `gatecfg regimes` use it: `baselines`, `has_runs`,
    `coordinates_for` and `write_run`; `history`. Each is `Store`'s method of the same name, in effect."""

    def __init__(self, url: str, *, create: bool, conn: sqlite3.Connection | None) -> None:
        self._given = url
        self._create = create
        self._conn = conn
        self._store: Store | None = None
        self.url = mask_url(url)

    @classmethod
    def open(cls, url: str, *, create: bool = False) -> DirectStore:
        """Open as `Store.open(url, create=create)` would, reading directly where the store allows it."""
        conn = _connect(url)
        opened = cls(url, create=create, conn=conn)
        if conn is None:
            opened.url = opened._full().url
        return opened

    @property
    def direct(self) -> bool:
        """Whether reads go straight through sqlite3 (else through `Store`)."""
        return self._conn is not None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def baselines(
        self,
        coordinates: Sequence[str],
        *,
        window: int,
        baseline: Baseline = "trusted",
        exclude_run_id: str | None = None,
    ) -> Baselines:
        """`StoreReads.baselines`, directly when no coordinate carries history and every window is regular."""
        if self._conn is not None and window >= 1:
            with self._read("read baselines from the history store") as conn:
                found = _baselines(conn, coordinates, window, baseline, exclude_run_id)
            if found is not None:
                return found
        return self._full().baselines(
            coordinates, window=window, baseline=baseline, exclude_run_id=exclude_run_id
        )

    def has_runs(self, series_key: str, *, exclude_run_id: str | None = None) -> bool:
        """`StoreReads.has_runs`."""
        if self._conn is None:
            return self._full().has_runs(series_key, exclude_run_id=exclude_run_id)
        name = "has_runs" if exclude_run_id is None else "has_runs excluding"
        with self._read("read runs from the history store") as conn:
            found = _run(conn, name, series_key=series_key, exclude_run_id=exclude_run_id).fetchone()
        return found is not None

    def history(
        self,
        *,
        test: str,
        metric: str,
        step: int | None = None,
        series_key: str | None = None,
        limit: int | None = None,
    ) -> list[HistoryRow]:
        """`StoreReads.history`."""
        if self._conn is None:
            return self._full().history(
                test=test, metric=metric, step=step, series_key=series_key, limit=limit
            )
        with self._read("read the history store") as conn:
            return _history(conn, test=test, metric=metric, step=step, series_key=series_key, limit=limit)

    def coordinates_for(self, series_key: str, metric: str) -> list[CoordinateSummary]:
        """`StoreReads.coordinates_for` (the re-key check of a cold gate)."""
        if self._conn is None:
            return self._full().coordinates_for(series_key, metric)
        with self._read("read coordinates from the history store") as conn:
            rows = _run(conn, "keys_of_metric", series_key=series_key, metric=metric).fetchall()
        at = _columns("keys_of_metric")
        return [
            CoordinateSummary(
                spec=CoordinateSpec(*(row[at[field]] for field in SPEC_FIELDS)),
                n_values=int(row[at["n_values"]]),
                n_trusted_values=int(row[at["n_trusted_values"]]),
                n_runs=int(row[at["n_runs"]]),
                last_written=None if row[at["last_written"]] is None else _utc(row[at["last_written"]]),
            )
            for row in rows
        ]

    def newest_run(
        self, series_key: str, *, baseline: Baseline, exclude_run_id: str | None = None
    ) -> RunRow | None:
        """As `Store.newest_run`, through it: only a run with a failing gate asks."""
        return self._full().newest_run(series_key, baseline=baseline, exclude_run_id=exclude_run_id)

    def write_run(
        self, run: RunInfo, points: Points, *, rejoin: Sequence[str] = (), accept: Sequence[Shift] = ()
    ) -> bool:
        """As `Store.write_run`."""
        return self._full().write_run(run, points, rejoin=rejoin, accept=accept)

    def recent(
        self, coordinates: Sequence[str], *, depth: int, exclude_run_id: str | None = None
    ) -> dict[str, list[Recent]]:
        """As `Store.recent` (asked only for gates that fail or stay cold tonight)."""
        return self._full().recent(coordinates, depth=depth, exclude_run_id=exclude_run_id)

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """As `Store.runs_by_id` (asked only when a write found its run id stored)."""
        return self._full().runs_by_id(run_ids)

    def _full(self) -> Store:
        if self._store is None:
            from gatecfg.store.store import Store

            self._store = Store.open(_full_url(self._given), create=self._create)
        return self._store

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot), its driver errors as the one-line StoreError that
        `Store` gives."""
        conn = self._conn
        assert conn is not None
        try:
            # The rows are tuples and floats in no cycle, hundreds of thousands of them (memory.py).
            with collector_paused():
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = lines[0] if lines else type(exc).__name__
            raise StoreError.at(self.url, f"cannot {action}: {reason}", hint=STORE_HINT) from exc


def _connect(url: str) -> sqlite3.Connection | None:
    """A connection to a plain SQLite file URL already at SCHEMA_REVISION, else None (`Store` opens it, and
    gives its own error where there is one)."""
    plain = PLAIN_SQLITE.fullmatch(url)
    if plain is None:
        return None
    path = Path(plain["path"])
    if plain["path"] == ":memory:" or plain["path"].startswith("file:") or not path.is_file():
        return None
    conn: sqlite3.Connection | None = None
    try:
        # isolation_level None: the driver issues no BEGIN of its own; _read brackets each read.
        read_only = _read_only_uri(path)
        target, uri = (read_only, True) if read_only is not None else (str(path), False)
        conn = sqlite3.connect(target, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, uri=uri)
        revision = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
    except sqlite3.Error:
        revision = []
    if revision != [(SCHEMA_REVISION,)]:
        if conn is not None:
            conn.close()
        return None
    return conn


def _full_url(url: str) -> str:
    """The URL `Store` opens for the reads the direct reader leaves to it: a plain SQLite file in a folder
    this process cannot write through the same read-only URI as the direct reader (`_read_only_uri`), so
    that a failing gate's extra reads (recent runs, the newest baseline run) work there too."""
    plain = PLAIN_SQLITE.fullmatch(url)
    if plain is not None and Path(plain["path"]).is_file():
        read_only = _read_only_uri(Path(plain["path"]))
        if read_only is not None:
            return f"sqlite:///{read_only}&uri=true"
    return url


def _read_only_uri(path: Path) -> str | None:
    """The URI that reads a store whose folder this process cannot write (a read-only mount, a cache
    restored without write permission), else None. A WAL store's readers need its -shm file, which SQLite
    cannot create there, so it would not open at all ("unable to open database file"); `immutable=1` reads
    the file as it is, without the -shm, which is right only while nothing writes it: so only when no -wal
    file (a writer's pages not yet in the file) is beside it, and the folder is not writable, so no
    writer can have one."""
    folder = path.absolute().parent
    if os.access(folder, os.W_OK) or Path(f"{path}-wal").exists():
        return None
    return f"{path.absolute().as_uri()}?mode=ro&immutable=1"


def _run(conn: sqlite3.Connection, name: str, **values: Any) -> sqlite3.Cursor:
    """Run one of store/statements.py's reads by its SQLite text (store/sqlite_reads.py), its parameters
    in their compiled order: an expanding one's marks written out for its number of items as SQLAlchemy
    writes them (`?, ?` for values, `VALUES (?, ?), (?, ?)` for pairs), a constant one from the file."""
    sql, order, constants, expanding, _ = STATEMENTS[name]
    params: list[Any] = []
    for key in order:
        if key in constants:
            params.append(constants[key])
        elif key in expanding:
            items, width = values[key], expanding[key]
            if width:
                marks = "VALUES " + ", ".join([f"({_marks(width)})"] * len(items))
                params.extend(value for item in items for value in item)
            else:
                marks = _marks(len(items))
                params.extend(items)
            sql = sql.replace(f"__[POSTCOMPILE_{key}]", marks)
        else:
            params.append(values[key])
    return conn.execute(sql, params)


def _columns(name: str) -> dict[str, int]:
    """A statement's result columns by name, for reads whose columns are a table's (`coordinates`)."""
    return {column: at for at, column in enumerate(STATEMENTS[name][4])}


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _baselines(
    conn: sqlite3.Connection,
    hashes: Sequence[str],
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> Baselines | None:
    """`baselines.baselines` where no coordinate carries history and every window is regular (every run
    of a coordinate with runs beyond its window stored one set of finite steps); None otherwise, for
    `Store` to read."""
    wanted = sorted(set(hashes))
    for chunk in chunks(wanted):
        if _run(conn, "carried", hashes=chunk).fetchone() is not None:
            return None
    walk = "walk excluding" if exclude_run_id is not None else "walk"
    depth = walk_depth(window)
    windows: dict[str, WindowRuns] = {}
    span: dict[str, tuple[str, str]] = {}
    for chunk in chunks(wanted):
        walks = _run(conn, walk, limit=depth, exclude_run_id=exclude_run_id, hashes=chunk)
        for coordinate, coordinate_pk, runs_json, low, high in walks:
            runs_of, known = decided(
                coordinate_pk, walked(runs_json), baseline=baseline, window=window, limit=depth
            )
            if not known:
                return None  # a streak of failures longer than the walk: `Store` reads every row
            if runs_of.runs:
                windows[coordinate] = runs_of
                span[coordinate] = (low, high)
    # Not uncertain: each coordinate's window runs and all its older runs stored one set of finite steps,
    # so no step of a full window comes up short and nothing older needs reading.
    _, uncertain = trim(windows, span, window)
    if uncertain:
        return None
    found: dict[str, Window] = {}
    reads = PointReads.of_rows(lambda steps, pairs: _points(conn, steps, pairs))
    for part in chunked_by_pairs(windows, max_pairs("sqlite")):
        read = chunk_points(reads, part)
        if read is None:
            return None
        found.update(read)
    return Baselines(found)


def _points(conn: sqlite3.Connection, steps: bool, pairs: Sequence[tuple[int, int]]) -> list[Any]:
    coordinate_pks = sorted({pk for pk, _ in pairs})
    name = "points steps" if steps else "points values"
    return _run(conn, name, coordinate_pks=coordinate_pks, pairs=pairs).fetchall()


def _history(
    conn: sqlite3.Connection,
    *,
    test: str,
    metric: str,
    step: int | None,
    series_key: str | None,
    limit: int | None,
) -> list[HistoryRow]:
    where = f"{' at_step' * (step is not None)}{' in_series' * (series_key is not None)}"
    given = {"test": test, "metric": metric, "step": step, "series_key": series_key}
    at = _columns("history_keys" + where.replace(" at_step", ""))
    keys = _run(conn, "history_keys" + where.replace(" at_step", ""), **given)
    spec = {row[at["pk"]]: CoordinateSpec(*(row[at[field]] for field in SPEC_FIELDS)) for row in keys}
    # LIMIT -1 is SQLite's "no limit".
    rows = _run(conn, "history" + where, **given, limit=-1 if limit is None else limit)
    return [history_row(row, spec[row[0]], _utc(row[HISTORY_CREATED_AT])) for row in rows]


@functools.lru_cache(maxsize=4096)
def _utc(stored: str) -> datetime:
    """A stored timestamp: SQLite keeps UTC as zoneless text (store/tables.py, UTCDateTime). Cached: a
    history repeats each run's time once a point, thousands of times over for a gate at many steps."""
    return datetime.fromisoformat(stored).replace(tzinfo=UTC)
