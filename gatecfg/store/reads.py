"""Reads from the history store: per-key summaries, history and runs (baselines: `baselines.py`)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from gatecfg.membership import Baseline
from gatecfg.store.engine import driver_rows
from gatecfg.store.rows import (
    HISTORY_CREATED_AT,
    STATUSES,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    RunRow,
    ValueColumns,
    history_row,
)
from gatecfg.store.statements import (
    NEWEST_FIRST,
    TRUSTED,
    history_keys,
    history_values,
    keys_of_metric,
    run_qualifies,
)
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import IN_CHUNK, chunks


def coordinates_for(conn: Connection, series_key: str, metric: str) -> list[CoordinateSummary]:
    """Every stored key of one series and metric, with how many values it holds, newest first."""
    return [summary_of(row) for row in conn.execute(keys_of_metric(series_key, metric))]


def summary_of(row: Row[Any]) -> CoordinateSummary:
    return CoordinateSummary(
        spec=spec_of(row),
        n_values=int(row.n_values),
        n_trusted_values=int(row.n_trusted_values),
        n_runs=int(row.n_runs),
        last_written=row.last_written,
    )


# Rows one statement of `run_values` reads (about 50 MB of driver tuples): the runs of a batch are sized
# from the rows per run of the batch before.
ROWS_PER_READ = 500_000


def run_values(
    conn: Connection,
    runs: Sequence[tuple[int, object]],
    *,
    test: str,
    metrics: Sequence[str],
    statuses: Collection[str] | None = None,
) -> Iterator[tuple[object, dict[tuple[str, str], ValueColumns]]]:
    """Every stored value of `metrics` of `test` for each of `runs` ((run pk, anything) pairs, in the
    order wanted), as (anything, {(metric, steps_key): ValueColumns}), read a batch of runs at a time in
    primary-key order: millions of values stream through without a Python object each. The statuses are
    read only for the metrics of `statuses` (None: all); the others' columns hold none.

    A run holds one quantity under two keys only when a constraint change was carried; then the values of
    the key that sorts first (by constraint_key, then series) win, and the other key adds only the steps
    the first lacks.
    """
    keys = conn.execute(
        sa.select(coordinates.c.pk, coordinates.c.metric, coordinates.c.steps_key)
        .where(coordinates.c.test == test, coordinates.c.metric.in_(list(metrics)))
        .order_by(coordinates.c.constraint_key, coordinates.c.series_key, coordinates.c.pk)
    ).all()
    if not keys:
        for _, item in runs:
            yield item, {}
        return
    rank = {pk: (n, metric, steps_key) for n, (pk, metric, steps_key) in enumerate(keys)}
    # One coordinate per statement, so that a row is the three columns a replay needs (a status only
    # where asked for): the driver's tuples are most of the cost of a read of millions of values.
    plain = sa.select(metric_points.c.run_pk, metric_points.c.step, metric_points.c.value)
    statements = {
        pk: (plain.add_columns(metric_points.c.status) if statuses is None or metric in statuses else plain)
        .where(
            metric_points.c.coordinate_pk == sa.bindparam("coordinate"),
            metric_points.c.run_pk.in_(sa.bindparam("runs", expanding=True)),
        )
        .order_by(metric_points.c.run_pk, metric_points.c.step)
        for pk, (_, metric, _) in rank.items()
    }
    interned: dict[bytes, npt.NDArray[np.int64]] = {}
    start, size = 0, 1
    while start < len(runs):
        batch = runs[start : start + size]
        found: dict[int, list[tuple[int, int, ValueColumns]]] = {pk: [] for pk, _ in batch}
        run_pks = sorted(pk for pk, _ in batch)
        rows = 0
        for coordinate_pk, statement in statements.items():
            table = _points(conn, statement, coordinate_pk, run_pks)
            rows += len(table)
            for run_pk, columns in _segments(table, interned):
                found[run_pk].append((rank[coordinate_pk][0], coordinate_pk, columns))
        for pk, item in batch:
            yield item, _quantities(found[pk], rank)
        start += len(batch)
        size = max(1, min(IN_CHUNK, ROWS_PER_READ * len(batch) // max(rows, 1)))


# A stored row as the driver hands it over: NULL (a NaN, which SQLite cannot store) reads as NaN.
_ROW = np.dtype([("run", np.int64), ("step", np.int64), ("value", np.float64)])
_STATUS_ROW = np.dtype([*_ROW.descr, ("status", f"U{max(map(len, STATUSES))}")])
# A second spelling of `run_values`' read, kept for speed on PostgreSQL only: a run's values of one
# coordinate as one row, the steps and values each as one string of their binary (big-endian) forms, which
# numpy reads whole (through psycopg's binary cursor, which SQLAlchemy does not hand over): a cursor's tuple
# per value is most of the cost of a read of millions of them, the server's aggregation a fraction.
_PG_POINTS = (
    "SELECT run_pk, string_agg(int4send(step), ''::bytea ORDER BY step),"
    " string_agg(float8send(coalesce(value, 'NaN'::float8)), ''::bytea ORDER BY step)"
    " FROM metric_points WHERE coordinate_pk = %s AND run_pk = ANY(%s) GROUP BY run_pk ORDER BY run_pk"
)


def _points(
    conn: Connection, statement: sa.Select[Any], coordinate_pk: int, run_pks: Sequence[int]
) -> npt.NDArray[np.void]:
    """The rows of `statement` for one coordinate and these runs, in primary-key order, as a record array
    (`_ROW`, or `_STATUS_ROW` when it reads the status too); on PostgreSQL without the status, a row per
    run (`_PG_POINTS`)."""
    with_status = len(statement.selected_columns) == len(_STATUS_ROW.names or ())
    if conn.dialect.name == "postgresql" and not with_status:
        return _aggregated(conn, coordinate_pk, run_pks)
    rows = driver_rows(conn, statement, {"coordinate": coordinate_pk, "runs": run_pks})
    return np.fromiter(rows, _STATUS_ROW if with_status else _ROW, count=len(rows))


def _aggregated(conn: Connection, coordinate_pk: int, run_pks: Sequence[int]) -> npt.NDArray[np.void]:
    import psycopg  # only a PostgreSQL store gets here, and then psycopg is loaded already

    driver = conn.connection.driver_connection
    try:
        with driver.cursor(binary=True) as cursor:  # type: ignore[union-attr]
            rows = cursor.execute(_PG_POINTS, (coordinate_pk, list(run_pks))).fetchall()
    except psycopg.Error as exc:
        # As SQLAlchemy would raise it, so that the store's error handling names the store and the cause.
        raise sa.exc.DBAPIError.instance(_PG_POINTS, None, exc, psycopg.Error) from exc
    steps = [np.frombuffer(stepped, ">i4") for _, stepped, _ in rows]
    table = np.empty(sum(map(len, steps)), _ROW)
    table["run"] = np.repeat([run for run, _, _ in rows], list(map(len, steps)))
    if rows:
        table["step"] = np.concatenate(steps)
        table["value"] = np.concatenate([np.frombuffer(values, ">f8") for _, _, values in rows])
    return table


def _segments(
    table: npt.NDArray[np.void], interned: dict[bytes, npt.NDArray[np.int64]]
) -> Iterator[tuple[int, ValueColumns]]:
    """(run pk, columns) per run of one coordinate's rows in primary-key order."""
    if not len(table):
        return
    codes: npt.NDArray[np.int8] | None = None
    if table.dtype == _STATUS_ROW:
        codes = np.full(len(table), -1, np.int8)
        for code, status in enumerate(STATUSES):
            codes[table["status"] == status] = code
    run = table["run"]
    starts = np.flatnonzero(run[1:] != run[:-1]) + 1
    bounds = [0, *starts.tolist(), len(table)]
    values = table["value"]
    for lo, hi in itertools.pairwise(bounds):
        steps = table["step"][lo:hi]
        key = steps.tobytes()
        shared = interned.get(key)
        if shared is None:
            shared = interned[key] = steps.copy()
        yield (
            int(run[lo]),
            ValueColumns(shared, values[lo:hi].copy(), None if codes is None else codes[lo:hi]),
        )


def _quantities(
    found: list[tuple[int, int, ValueColumns]], rank: dict[int, tuple[int, str, str]]
) -> dict[tuple[str, str], ValueColumns]:
    """A run's columns per (metric, steps_key), the first key's in rank order winning."""
    by_quantity: dict[tuple[str, str], ValueColumns] = {}
    for _, coordinate_pk, columns in sorted(found, key=lambda item: item[0]):
        _, metric, steps_key = rank[coordinate_pk]
        first = by_quantity.get((metric, steps_key))
        if first is None:
            by_quantity[metric, steps_key] = columns
            continue
        extra = ~np.isin(columns.steps, first.steps)
        steps = np.concatenate([first.steps, columns.steps[extra]])
        order = np.argsort(steps, kind="stable")
        by_quantity[metric, steps_key] = ValueColumns(
            steps[order],
            np.concatenate([first.values, columns.values[extra]])[order],
            None
            if first.statuses is None or columns.statuses is None
            else np.concatenate([first.statuses, columns.statuses[extra]])[order],
        )
    return by_quantity


def history(
    conn: Connection,
    *,
    test: str,
    metric: str,
    step: int | None,
    series_key: str | None,
    limit: int | None,
) -> list[HistoryRow]:
    """Stored values of one metric of one test, newest run first, then by key and step.

    Read as plain tuples, each coordinate's spec built once: regimes and the report read every night of a
    gate here (10,000 rows in 0.1 s rather than 0.5 s with a Row and a spec per value)."""
    query = history_values(test, metric, step, series_key, limit)
    keys = history_keys(test, metric, series_key)
    spec = {row.pk: spec_of(row) for row in conn.execute(keys)}
    return [history_row(row, spec[row[0]], row[HISTORY_CREATED_AT]) for row in conn.execute(query)]


def metric_overrides(conn: Connection, *, test: str) -> dict[str, dict[str, bool]]:
    """Trust set by hand on one metric's values (`trust --metric`): by run id, by metric. Few rows."""
    query = (
        sa.select(runs.c.run_id, coordinates.c.metric, run_coordinates.c.trust_override)
        .select_from(
            run_coordinates.join(runs, runs.c.pk == run_coordinates.c.run_pk).join(
                coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk
            )
        )
        .where(runs.c.test == test, run_coordinates.c.trust_override.is_not(None))
    )
    found: dict[str, dict[str, bool]] = {}
    for run_id, metric, override in conn.execute(query):
        found.setdefault(run_id, {})[metric] = bool(override)
    return found


def stored_tests(conn: Connection) -> list[str]:
    """The tests with a stored run, by name: what a test name that matches nothing is near."""
    return list(conn.scalars(sa.select(runs.c.test).distinct().order_by(runs.c.test)))


def stored_metrics(conn: Connection, *, test: str) -> list[str]:
    """The metrics stored for one test (any series, any key), by name."""
    query = sa.select(coordinates.c.metric).where(coordinates.c.test == test).distinct()
    return list(conn.scalars(query.order_by(coordinates.c.metric)))


def run_rows(conn: Connection, *, test: str | None) -> list[RunRow]:
    """Stored runs, newest first."""
    query = sa.select(runs, TRUSTED.label("trusted")).order_by(*NEWEST_FIRST)
    if test is not None:
        query = query.where(runs.c.test == test)
    return [run_row(row) for row in conn.execute(query)]


def runs_by_id(conn: Connection, run_ids: Sequence[str]) -> dict[str, RunRow]:
    found: dict[str, RunRow] = {}
    for chunk in chunks(run_ids):
        query = sa.select(runs, TRUSTED.label("trusted")).where(runs.c.run_id.in_(chunk))
        found.update((row.run_id, run_row(row)) for row in conn.execute(query))
    return found


def newest_run(
    conn: Connection, series_key: str, *, baseline: Baseline, exclude_run_id: str | None
) -> RunRow | None:
    """The newest run of a series whose values form baselines (`qualifies`), besides the run judged."""
    query = (
        sa.select(runs, TRUSTED.label("trusted"))
        .where(runs.c.series_key == series_key, run_qualifies(baseline))
        .order_by(*NEWEST_FIRST)
        .limit(1)
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != exclude_run_id)
    row = conn.execute(query).first()
    return None if row is None else run_row(row)


def keyed_runs(conn: Connection, *, test: str, series_key: str | None) -> list[tuple[int, RunRow]]:
    """(primary key, run) of a test's stored runs (of one series, or all), oldest first."""
    query = (
        sa.select(runs, TRUSTED.label("trusted"))
        .where(runs.c.test == test)
        .order_by(runs.c.created_at, runs.c.pk)
    )
    if series_key is not None:
        query = query.where(runs.c.series_key == series_key)
    return [(row.pk, run_row(row)) for row in conn.execute(query)]


def run_row(row: Row[Any]) -> RunRow:
    return RunRow(
        run=RunInfo(
            run_id=row.run_id,
            test=row.test,
            series_key=row.series_key,
            labels=json.loads(row.labels),
            commit=row.commit_sha,
            branch=row.branch,
            ci_run_id=row.ci_run_id,
            ci_run_attempt=row.ci_run_attempt,
            url=row.url,
            created_at=row.created_at,
            gate_trusted=row.gate_trusted,
            written_by=row.written_by,
            write_override=row.write_override,
            meta=json.loads(row.meta) if row.meta else {},
        ),
        trusted=bool(row.trusted),
        trust_override=row.trust_override,
        trust_reason=row.trust_reason,
        trust_changed_at=row.trust_changed_at,
    )


def spec_of(row: Row[Any]) -> CoordinateSpec:
    return CoordinateSpec(
        coordinate=row.coordinate,
        series_key=row.series_key,
        test=row.test,
        metric=row.metric,
        steps_key=row.steps_key,
        constraint_key=row.constraint_key,
    )
