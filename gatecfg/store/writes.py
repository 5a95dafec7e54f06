"""Writes to the history store: a run with all its points, and trust repairs after the fact."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gatecfg.errors import StoreError
from gatecfg.store import triage
from gatecfg.store.reads import spec_of
from gatecfg.store.rows import STATUSES, CoordinateSpec, PointColumns, RunInfo, StoredPoint
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import chunks

# Points per bulk statement: an import's runs go to the store in batches of about this many values, so its
# memory stays bounded whatever the export's size (all of them in the one transaction of the import).
BATCH_VALUES = 100_000

Points = Mapping[CoordinateSpec, Sequence[StoredPoint] | PointColumns]


def write_runs(conn: Connection, items: Iterable[tuple[RunInfo, Points]], *, where: str) -> list[bool]:
    """Insert runs and their points: per run, False, writing nothing for it, when its run id is already
    stored. Runs are written in batches of about BATCH_VALUES values; per batch, the coordinates, the run
    coordinates and the points of all its runs go in one bulk statement each (COPY on PostgreSQL), so an
    import of 10,000 runs costs a statement per run, not five, and holds one batch in memory at a time."""
    stored_now: list[bool] = []
    coordinate_pks: dict[str, int] = {}
    batch: list[tuple[RunInfo, Mapping[CoordinateSpec, PointColumns]]] = []
    size = 0
    for run, points in items:
        columns = {
            spec: p if isinstance(p, PointColumns) else PointColumns.of_points(p)
            for spec, p in points.items()
        }
        for spec in columns:
            if (spec.test, spec.series_key) != (run.test, run.series_key):
                raise ValueError(
                    f"coordinate {spec.coordinate} belongs to another series than run {run.run_id!r}"
                )
        batch.append((run, columns))
        size += sum(map(len, columns.values()))
        if size >= BATCH_VALUES:
            stored_now += _write_batch(conn, batch, coordinate_pks, where=where)
            batch, size = [], 0
    if batch:
        stored_now += _write_batch(conn, batch, coordinate_pks, where=where)
    return stored_now


def _write_batch(
    conn: Connection,
    items: Sequence[tuple[RunInfo, Mapping[CoordinateSpec, PointColumns]]],
    coordinate_pks: dict[str, int],
    *,
    where: str,
) -> list[bool]:
    # ON CONFLICT rather than a prior SELECT: a concurrent writer of the same run id (a retried CI job)
    # waits for the first to commit and then inserts nothing.
    insert_run = _insert_ignoring(conn, runs, "run_id").returning(runs.c.pk)
    written: list[tuple[int, Mapping[CoordinateSpec, PointColumns]]] = []
    stored_now: list[bool] = []
    for run, points in items:
        run_pk = conn.execute(insert_run, _run_values(run)).scalar_one_or_none()
        stored_now.append(run_pk is not None)
        if run_pk is not None:
            written.append((run_pk, {spec: stored for spec, stored in points.items() if len(stored)}))
    # A stable order makes concurrent PostgreSQL writers lock shared coordinate rows alike (no deadlock).
    specs = sorted(
        {spec.coordinate: spec for _, points in written for spec in points}.values(),
        key=lambda s: s.coordinate,
    )
    if not specs:
        return stored_now
    new = [spec for spec in specs if spec.coordinate not in coordinate_pks]
    if new:
        coordinate_pks.update(_coordinate_pks(conn, new, where=where))
    conn.execute(
        sa.insert(run_coordinates),
        [
            {
                "coordinate_pk": coordinate_pks[spec.coordinate],
                "run_pk": run_pk,
                "n_values": len(stored),
                "steps_digest": steps_digest(stored.steps, stored.values),
                "gate_trusted": stored.gate_trusted,
                **triage.summary(stored),
            }
            for run_pk, points in written
            for spec, stored in points.items()
        ],
    )
    chunks = [
        (coordinate_pks[spec.coordinate], run_pk, stored)
        for run_pk, points in written
        for spec, stored in points.items()
    ]
    insert_points(conn, chunks)
    return stored_now


Chunk = tuple[int, int, PointColumns]  # coordinate pk, run pk, points


def insert_points(conn: Connection, chunks: Sequence[Chunk]) -> None:
    """The metric_points rows of `chunks`, through each dialect's bulk path."""
    if conn.dialect.name == "postgresql":
        _copy_points(conn, chunks)
    else:
        _executemany_points(conn, chunks)


# Rows per INSERT statement on SQLite: one statement of many rows costs half as much CPU per row as
# executemany of one row at a time. 9 parameters a row, under the 999 of SQLite before 3.32.
ROWS_PER_INSERT = 100


def _executemany_points(conn: Connection, chunks: Sequence[Chunk]) -> None:
    """SQLite: the rows ROWS_PER_INSERT at a time in one multi-row INSERT, bound straight through the
    driver in one executemany (SQLAlchemy's per-row parameter handling costs twice what the driver
    does, and these columns need no bind processing); the last few rows one at a time. The rows' fields
    are chained into one flat list, cut into statements' parameters whole (half the CPU of laying them
    out in an object array first)."""
    width = len(metric_points.c)
    flat = list(
        itertools.chain.from_iterable(
            itertools.chain.from_iterable(
                zip(
                    itertools.repeat(coordinate_pk, len(stored)),
                    itertools.repeat(run_pk, len(stored)),
                    stored.steps,
                    _nan_as_null(stored.values),
                    stored.statuses,
                    stored.refs,
                    stored.los,
                    stored.his,
                    stored.sds,
                    strict=True,
                )
                for coordinate_pk, run_pk, stored in chunks
            )
        )
    )
    one = str(sa.insert(metric_points).compile(dialect=conn.dialect))
    size = width * ROWS_PER_INSERT
    whole = len(flat) // size * size
    if whole:
        row = "(" + ", ".join(["?"] * width) + ")"
        many = one[: one.index(" VALUES ")] + " VALUES " + ", ".join([row] * ROWS_PER_INSERT)
        conn.exec_driver_sql(many, [tuple(flat[at : at + size]) for at in range(0, whole, size)])
    if whole < len(flat):
        conn.exec_driver_sql(one, [tuple(flat[at : at + width]) for at in range(whole, len(flat), width)])


def _nan_as_null(values: Sequence[float]) -> Sequence[float | None]:
    """NaN as NULL (SQLite cannot store NaN, so both dialects agree); values are nearly always finite."""
    if not np.isnan(np.asarray(values, np.float64)).any():
        return values
    return [None if math.isnan(v) else v for v in values]


# PostgreSQL's binary COPY format: a signature, then per row a field count and each field as its length
# (-1: NULL) and its big-endian bytes, then a trailer.
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\0" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_FLOAT_COLUMNS = ("value", "ref", "lo", "hi", "sd")


def _copy_points(conn: Connection, chunks: Sequence[Chunk]) -> None:
    """Kept for speed by benchmarks/bulk_paths.py and benchmarks/db_copy.py (PostgreSQL); held equal to
    the rows written by tests/test_store.py's
    test_every_field_of_every_point_round_trips_through_the_bulk_writes (under GATECFG_TEST_PG_URL).

    PostgreSQL: the rows as one binary COPY on the connection's own transaction, encoded by numpy a
    row layout at a time (which fields are NULL, how long the status is), not by psycopg a row at a time
    (4 µs a row, 30 s of an 8M-value import)."""
    import psycopg  # only a PostgreSQL store gets here, and then psycopg is loaded already

    sizes = [len(stored) for _, _, stored in chunks]
    columns: dict[str, np.ndarray] = {
        "coordinate_pk": np.repeat([pk for pk, _, _ in chunks], sizes).astype(">i4"),
        "run_pk": np.repeat([pk for _, pk, _ in chunks], sizes).astype(">i4"),
        "step": np.concatenate([np.asarray(c.steps, np.int64) for _, _, c in chunks]).astype(">i4"),
    }
    for name, field in zip(_FLOAT_COLUMNS, ("values", "refs", "los", "his", "sds"), strict=True):
        columns[name] = np.concatenate(
            [np.asarray(getattr(c, field), np.float64) for _, _, c in chunks]
        ).astype(">f8")  # None reads as NaN, stored as NULL
    statuses = np.concatenate([np.asarray(c.statuses, dtype=object) for _, _, c in chunks])
    codes = np.full(len(statuses), -1, np.int64)
    for code, status in enumerate(STATUSES):
        codes[statuses == status] = code
    if (codes < 0).any():  # what the table's CHECK constraint refuses on SQLite
        raise ValueError(f"unknown status {statuses[np.argmin(codes)]!r}: one of {', '.join(STATUSES)}")
    nulls = [np.isnan(columns[name]) for name in _FLOAT_COLUMNS]
    # A row's layout: its status's code above one bit per float column that is NULL.
    nullable = 1 << len(_FLOAT_COLUMNS)
    layout = codes * nullable + sum(null.astype(np.int64) << bit for bit, null in enumerate(nulls))
    parts = [_COPY_SIGNATURE]
    for kind in np.unique(layout).tolist():
        rows = np.flatnonzero(layout == kind)
        status = STATUSES[kind // nullable].encode()
        null = {name: bool(kind >> bit & 1) for bit, name in enumerate(_FLOAT_COLUMNS)}
        fields: list[tuple[str, str]] = [("count", ">i2")]
        for name in ("coordinate_pk", "run_pk", "step"):
            fields += [(f"{name}_size", ">i4"), (name, ">i4")]
        for name in _FLOAT_COLUMNS:
            fields += [(f"{name}_size", ">i4")] + ([] if null[name] else [(name, ">f8")])
            if name == "value":
                fields += [("status_size", ">i4"), ("status", f"S{len(status)}")]
        encoded = np.empty(len(rows), np.dtype(fields))
        encoded["count"] = len(metric_points.c)
        for name in ("coordinate_pk", "run_pk", "step"):
            encoded[f"{name}_size"] = 4
            encoded[name] = columns[name][rows]
        for name in _FLOAT_COLUMNS:
            encoded[f"{name}_size"] = -1 if null[name] else 8
            if not null[name]:
                encoded[name] = columns[name][rows]
        encoded["status_size"] = len(status)
        encoded["status"] = status
        parts.append(encoded.tobytes())
    parts.append(_COPY_TRAILER)
    names = ", ".join(c.name for c in metric_points.c)
    statement = f"COPY {metric_points.name} ({names}) FROM STDIN (FORMAT BINARY)"
    driver = conn.connection.driver_connection
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            for part in parts:
                copy.write(part)
    except psycopg.Error as exc:
        # As SQLAlchemy would raise it, so that the store's error handling names the store and the cause.
        raise sa.exc.DBAPIError.instance(statement, None, exc, psycopg.Error) from exc


def steps_digest(steps: Sequence[int], values: Sequence[float]) -> str:
    """Fingerprint of the steps that hold a finite value, the ones a baseline can use."""
    finite = np.isfinite(np.asarray(values, np.float64))
    return _digest(np.sort(np.asarray(steps, np.int64)[finite]).tobytes())


@functools.lru_cache(maxsize=64)
def _digest(steps: bytes) -> str:
    # Runs log the same steps night after night: an import of thousands of runs hashes a handful of lists.
    listed = np.frombuffer(steps, np.int64).tolist()
    return hashlib.blake2b(json.dumps(listed).encode(), digest_size=16).hexdigest()


def _run_values(run: RunInfo) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "test": run.test,
        "series_key": run.series_key,
        "labels": json.dumps(dict(run.labels), sort_keys=True, ensure_ascii=False, separators=(",", ":")),
        "commit_sha": run.commit,
        "branch": run.branch,
        "ci_run_id": run.ci_run_id,
        "ci_run_attempt": run.ci_run_attempt,
        "url": run.url,
        "created_at": run.created_at,
        "written_by": run.written_by,
        "write_override": run.write_override,
        "meta": json.dumps(dict(run.meta), sort_keys=True, ensure_ascii=False) if run.meta else None,
        "gate_trusted": run.gate_trusted,
    }


def _coordinate_pks(conn: Connection, specs: Sequence[CoordinateSpec], *, where: str) -> dict[str, int]:
    """Get or create each coordinate; safe against concurrent writers creating the same ones."""
    now = datetime.now(UTC)
    conn.execute(
        _insert_ignoring(conn, coordinates, "coordinate"),
        [
            {
                "coordinate": spec.coordinate,
                "series_key": spec.series_key,
                "test": spec.test,
                "metric": spec.metric,
                "steps_key": spec.steps_key,
                "constraint_key": spec.constraint_key,
                "created_at": now,
            }
            for spec in specs
        ],
    )
    given = {spec.coordinate: spec for spec in specs}
    pks: dict[str, int] = {}
    for chunk in chunks(list(given)):
        for row in conn.execute(sa.select(coordinates).where(coordinates.c.coordinate.in_(chunk))):
            existing = spec_of(row)
            if existing != given[row.coordinate]:
                raise StoreError.at(
                    where,
                    f"coordinate {row.coordinate} is stored as {existing} "
                    f"but this run gives it to {given[row.coordinate]}",
                    hint="two coordinate literals hash alike: report this to the gatecfg maintainers",
                )
            pks[row.coordinate] = row.pk
    return pks


def _insert_ignoring(conn: Connection, table: sa.Table, unique_column: str) -> sa.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=[unique_column])
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=[unique_column])


def set_trust(
    conn: Connection, *, trusted: bool, selector: sa.ColumnElement[bool], reason: str | None
) -> tuple[int, int]:
    """Set the trust override of the selected runs: (runs matched, runs whose override changed)."""
    matched = conn.execute(sa.select(sa.func.count()).select_from(runs).where(selector)).scalar_one()
    changed = conn.execute(
        sa.update(runs)
        .where(selector, runs.c.trust_override.is_distinct_from(trusted))
        .values(trust_override=trusted, trust_reason=reason, trust_changed_at=datetime.now(UTC))
    ).rowcount
    return int(matched), changed


def set_metric_trust(
    conn: Connection, *, trusted: bool, selector: sa.ColumnElement[bool], metric: str, reason: str | None
) -> tuple[int, int]:
    """Set the trust override of one metric's values in the selected runs, every key it is stored under:
    (runs holding the metric, runs whose override of it changed)."""
    rows = sa.and_(
        run_coordinates.c.run_pk.in_(sa.select(runs.c.pk).where(selector)),
        run_coordinates.c.coordinate_pk.in_(
            sa.select(coordinates.c.pk).where(coordinates.c.metric == metric)
        ),
    )
    held = sa.select(sa.func.count(sa.distinct(run_coordinates.c.run_pk))).where(rows)
    matched = conn.execute(held).scalar_one()
    changing = sa.and_(rows, run_coordinates.c.trust_override.is_distinct_from(trusted))
    changed = conn.execute(
        sa.select(sa.func.count(sa.distinct(run_coordinates.c.run_pk))).where(changing)
    ).scalar_one()
    conn.execute(
        sa.update(run_coordinates)
        .where(changing)
        .values(trust_override=trusted, trust_reason=reason, trust_changed_at=datetime.now(UTC))
    )
    return int(matched), int(changed)
