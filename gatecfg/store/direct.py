"""The store as `evaluate` and `regimes` use it: their reads of a SQLite file through the sqlite3 driver,
without SQLAlchemy.

A CI job evaluates once per process, so the process pays for whatever it imports and compiles: SQLAlchemy
was about a fifth of `gatecfg evaluate`'s CPU at 8M stored values, on top of a fetch that the driver alone
makes. `DirectStore.open` therefore reads directly where it can: a SQLite file named plainly
(`sqlite:///path`, no options), already at this gatecfg's schema revision. Its reads are the statements
`store/baselines.py` and `store/reads.py` compile, written out for SQLite (the window walk, the steps of
one run per digest, the values; a metric's history; the keys a metric is stored under, for the re-key
check of a cold gate), plus the carry and has-runs checks. Anything else goes through `Store`, opened on
first need, so that every message, check and guarantee stays that class's: PostgreSQL, a URL with options,
a store to create or upgrade, coordinates that carry history from others, windows whose runs stored other
steps (read on into older runs), and writes.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from gatecfg.errors import StoreError
from gatecfg.escape import mask_url
from gatecfg.memory import collector_paused
from gatecfg.store.rows import (
    Baseline,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    history_row,
)
from gatecfg.store.windowing import (
    WindowRuns,
    chunk_points,
    chunked_by_pairs,
    chunks,
    max_pairs,
    trim,
    walked,
)
from gatecfg.windows import Baselines, Window

if TYPE_CHECKING:
    from gatecfg.store.store import Store
    from gatecfg.store.writes import Points

# The newest migration in store/migrations (a test holds the two together) and the table Alembic records
# it in; here, so that reading the revision needs neither SQLAlchemy nor Alembic.
SCHEMA_REVISION = "0004"
VERSION_TABLE = "alembic_version"
STORE_HINT = "check that the store named by --db / GATECFG_DB_URL is reachable and writable"
# The wait for another writer's lock that store/engine.py sets as `PRAGMA busy_timeout` (milliseconds).
SQLITE_BUSY_TIMEOUT_S = 30.0

# What reads directly: a plain SQLite file URL. A query string (`?timeout=`, `?mode=`), percent-escapes,
# `:memory:` and `file:` URIs are left to SQLAlchemy's parsing, as is every other store.
PLAIN_SQLITE = re.compile(r"sqlite(?:\+pysqlite)?:///(?P<path>[^?%\x00]+)")

TRUSTED = {
    "trusted": "coalesce(runs.trust_override, runs.gate_trusted) IS 1",
    "nightly": "coalesce(runs.trust_override, 1) IS 1",
}

CARRIED = "SELECT 1 FROM carries WHERE carries.coordinate IN ({hashes}) AND carries.undone_at IS NULL LIMIT 1"

# baselines._newest_runs on SQLite: per coordinate, its newest `window` + 1 qualifying runs walked on the
# runs (series_key, created_at) index as one JSON array, and the lowest and highest steps digest it ever
# stored.
WALK = """
SELECT coordinates.coordinate, coordinates.pk,
  (SELECT json_group_array(json_array(newest.run_pk, newest.steps_digest, newest.created_at, newest.pk))
   FROM (SELECT run_coordinates.run_pk AS run_pk, run_coordinates.steps_digest AS steps_digest,
                runs.created_at AS created_at, runs.pk AS pk
         FROM runs JOIN run_coordinates
           ON run_coordinates.run_pk = runs.pk AND run_coordinates.coordinate_pk = coordinates.pk
         WHERE runs.series_key = coordinates.series_key AND {qualifies}{excluded}
         ORDER BY runs.created_at DESC, runs.pk DESC LIMIT ?) AS newest),
  (SELECT min(run_coordinates.steps_digest) FROM run_coordinates
   WHERE run_coordinates.coordinate_pk = coordinates.pk),
  (SELECT max(run_coordinates.steps_digest) FROM run_coordinates
   WHERE run_coordinates.coordinate_pk = coordinates.pk)
FROM coordinates WHERE coordinates.coordinate IN ({hashes}) ORDER BY coordinates.pk
"""

# baselines._points_rows on SQLite: the finite points of (coordinate_pk, run_pk) pairs in primary-key
# order; the coordinate list lets run_coordinates' primary key seek, the pairs pick the runs.
POINTS = """
SELECT {columns} FROM run_coordinates JOIN metric_points
  ON metric_points.coordinate_pk = run_coordinates.coordinate_pk
  AND metric_points.run_pk = run_coordinates.run_pk
WHERE run_coordinates.coordinate_pk IN ({coordinates})
  AND (run_coordinates.coordinate_pk, run_coordinates.run_pk) IN (VALUES {pairs})
  AND metric_points.value BETWEEN ? AND ?
ORDER BY run_coordinates.coordinate_pk, run_coordinates.run_pk, metric_points.step
"""
STEP_COLUMNS = "metric_points.coordinate_pk, metric_points.run_pk, metric_points.step"
VALUE_COLUMNS = "metric_points.value"

HAS_RUNS = "SELECT runs.pk FROM runs WHERE runs.series_key = ?{excluded} LIMIT 1"

# reads.history on SQLite: one metric's stored values, newest run first, then by key and step; and the
# coordinates they are stored under.
HISTORY = """
SELECT metric_points.coordinate_pk, metric_points.step, metric_points.value, metric_points.status,
  metric_points.ref, metric_points.lo, metric_points.hi, runs.run_id, runs.commit_sha, runs.branch,
  runs.created_at, runs.gate_trusted, runs.trust_override
FROM metric_points JOIN coordinates ON coordinates.pk = metric_points.coordinate_pk
  JOIN runs ON runs.pk = metric_points.run_pk
WHERE coordinates.test = ? AND coordinates.metric = ?{where}
ORDER BY runs.created_at DESC, runs.pk DESC, coordinates.steps_key, coordinates.constraint_key,
  coordinates.series_key, metric_points.step
LIMIT ?
"""
# reads.coordinates_for on SQLite: every stored key of one series and metric with its amount of history.
KEYS_OF_METRIC = """
SELECT coordinates.coordinate, coordinates.series_key, coordinates.test, coordinates.metric,
  coordinates.steps_key, coordinates.constraint_key,
  coalesce(sum(run_coordinates.n_values), 0),
  coalesce(sum(CASE WHEN (coalesce(runs.trust_override, runs.gate_trusted) IS 1)
    THEN run_coordinates.n_values ELSE 0 END), 0),
  count(runs.pk), max(runs.created_at) AS last_written
FROM coordinates LEFT OUTER JOIN run_coordinates ON run_coordinates.coordinate_pk = coordinates.pk
  LEFT OUTER JOIN runs ON runs.pk = run_coordinates.run_pk
WHERE coordinates.series_key = ? AND coordinates.metric = ?
GROUP BY coordinates.pk ORDER BY last_written DESC, coordinates.coordinate
"""
HISTORY_KEYS = """
SELECT pk, coordinate, series_key, test, metric, steps_key, constraint_key FROM coordinates
WHERE coordinates.test = ? AND coordinates.metric = ?{where}
"""


class DirectStore:
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
        """As `Store.baselines`."""
        if self._conn is not None and window >= 1:
            with self._read("read baselines from the history store") as conn:
                found = _baselines(conn, coordinates, window, baseline, exclude_run_id)
            if found is not None:
                return found
        return self._full().baselines(
            coordinates, window=window, baseline=baseline, exclude_run_id=exclude_run_id
        )

    def has_runs(self, series_key: str, *, exclude_run_id: str | None = None) -> bool:
        """As `Store.has_runs`."""
        if self._conn is None:
            return self._full().has_runs(series_key, exclude_run_id=exclude_run_id)
        excluded, params = _excluded(exclude_run_id)
        with self._read("read runs from the history store") as conn:
            found = conn.execute(HAS_RUNS.format(excluded=excluded), [series_key, *params]).fetchone()
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
        """As `Store.history`."""
        if self._conn is None:
            return self._full().history(
                test=test, metric=metric, step=step, series_key=series_key, limit=limit
            )
        with self._read("read the history store") as conn:
            return _history(conn, test=test, metric=metric, step=step, series_key=series_key, limit=limit)

    def coordinates_for(self, series_key: str, metric: str) -> list[CoordinateSummary]:
        """As `Store.coordinates_for` (the re-key check of a cold gate)."""
        if self._conn is None:
            return self._full().coordinates_for(series_key, metric)
        with self._read("read coordinates from the history store") as conn:
            rows = conn.execute(KEYS_OF_METRIC, [series_key, metric]).fetchall()
        return [
            CoordinateSummary(
                spec=CoordinateSpec(*row[:6]),
                n_values=int(row[6]),
                n_trusted_values=int(row[7]),
                n_runs=int(row[8]),
                last_written=None if row[9] is None else _utc(row[9]),
            )
            for row in rows
        ]

    def write_run(self, run: RunInfo, points: Points) -> bool:
        """As `Store.write_run`."""
        return self._full().write_run(run, points)

    def _full(self) -> Store:
        if self._store is None:
            from gatecfg.store.store import Store

            self._store = Store.open(self._given, create=self._create)
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


def _excluded(exclude_run_id: str | None) -> tuple[str, list[Any]]:
    return ("", []) if exclude_run_id is None else (" AND runs.run_id != ?", [exclude_run_id])


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
        if conn.execute(CARRIED.format(hashes=_marks(len(chunk))), chunk).fetchone() is not None:
            return None
    excluded, params = _excluded(exclude_run_id)
    windows: dict[str, WindowRuns] = {}
    span: dict[str, tuple[str, str]] = {}
    for chunk in chunks(wanted):
        sql = WALK.format(qualifies=TRUSTED[baseline], excluded=excluded, hashes=_marks(len(chunk)))
        walks = conn.execute(sql, [*params, window + 1, *chunk])
        for coordinate, coordinate_pk, runs_json, low, high in walks:
            if runs_of := walked(runs_json):
                windows[coordinate] = WindowRuns(coordinate_pk, runs_of)
                span[coordinate] = (low, high)
    # Not uncertain: each coordinate's window runs and all its older runs stored one set of finite steps,
    # so no step of a full window comes up short and nothing older needs reading.
    _, uncertain = trim(windows, span, window)
    if uncertain:
        return None
    found: dict[str, Window] = {}
    for part in chunked_by_pairs(windows, max_pairs("sqlite")):
        read = chunk_points(lambda steps, pairs: _points(conn, steps, pairs), part)
        if read is None:
            return None
        found.update(read)
    return Baselines(found)


def _points(conn: sqlite3.Connection, steps: bool, pairs: Sequence[tuple[int, int]]) -> list[Any]:
    coordinate_pks = sorted({pk for pk, _ in pairs})
    sql = POINTS.format(
        columns=STEP_COLUMNS if steps else VALUE_COLUMNS,
        coordinates=_marks(len(coordinate_pks)),
        pairs=", ".join(["(?, ?)"] * len(pairs)),
    )
    params = [*coordinate_pks, *(n for pair in pairs for n in pair), -sys.float_info.max, sys.float_info.max]
    return conn.execute(sql, params).fetchall()


def _history(
    conn: sqlite3.Connection,
    *,
    test: str,
    metric: str,
    step: int | None,
    series_key: str | None,
    limit: int | None,
) -> list[HistoryRow]:
    in_series, series = ("", []) if series_key is None else (" AND coordinates.series_key = ?", [series_key])
    at_step, steps = ("", []) if step is None else (" AND metric_points.step = ?", [step])
    keys = conn.execute(HISTORY_KEYS.format(where=in_series), [test, metric, *series])
    spec = {pk: CoordinateSpec(*columns) for pk, *columns in keys}
    # LIMIT -1 is SQLite's "no limit".
    query_params = [test, metric, *steps, *series, -1 if limit is None else limit]
    rows = conn.execute(HISTORY.format(where=at_step + in_series), query_params)
    return [history_row(row, spec[row[0]], _utc(row[10])) for row in rows]


def _utc(stored: str) -> datetime:
    """A stored timestamp: SQLite keeps UTC as zoneless text (store/tables.py, UTCDateTime)."""
    return datetime.fromisoformat(stored).replace(tzinfo=UTC)
