"""Reads from the history store: per-key summaries, history and runs (baselines: `baselines.py`)."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from gatecfg.store.engine import driver_rows
from gatecfg.store.rows import (
    STATUSES,
    Baseline,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    RunRow,
    ValueColumns,
    history_row,
)
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import IN_CHUNK, chunks

# Effective trust: an explicit trust/untrust wins over the verdict the run got when it was written.
TRUSTED = sa.func.coalesce(runs.c.trust_override, runs.c.gate_trusted)
NEWEST_FIRST = (runs.c.created_at.desc(), runs.c.pk.desc())
# Excludes NULL (NaN) and infinities, which no band can be built from.
FINITE = metric_points.c.value.between(-sys.float_info.max, sys.float_info.max)


def qualifies(baseline: Baseline) -> sa.ColumnElement[bool]:
    """Runs whose values form baselines: `trusted` ones, or for `nightly` every run not untrusted by hand."""
    trust = TRUSTED if baseline == "trusted" else sa.func.coalesce(runs.c.trust_override, sa.true())
    return trust.is_(True)


def coordinates_for(conn: Connection, series_key: str, metric: str) -> list[CoordinateSummary]:
    """Every stored key of one series and metric, with how many values it holds, newest first."""
    query = summaries_query().where(coordinates.c.series_key == series_key, coordinates.c.metric == metric)
    return [summary_of(row) for row in conn.execute(query)]


def summaries_query() -> sa.Select[Any]:
    """Stored coordinates with their amount of history, most recently written first; callers add a WHERE."""
    trusted_values = sa.case((TRUSTED.is_(True), run_coordinates.c.n_values), else_=0)
    last_written = sa.func.max(runs.c.created_at).label("last_written")
    return (
        sa.select(
            coordinates,
            sa.func.coalesce(sa.func.sum(run_coordinates.c.n_values), 0).label("n_values"),
            sa.func.coalesce(sa.func.sum(trusted_values), 0).label("n_trusted_values"),
            sa.func.count(runs.c.pk).label("n_runs"),
            last_written,
        )
        .select_from(
            coordinates.outerjoin(
                run_coordinates, run_coordinates.c.coordinate_pk == coordinates.c.pk
            ).outerjoin(runs, runs.c.pk == run_coordinates.c.run_pk)
        )
        .group_by(coordinates.c.pk)
        .order_by(last_written.desc(), coordinates.c.coordinate)
    )


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
    conn: Connection, runs: Sequence[tuple[int, object]], *, test: str, metrics: Sequence[str]
) -> Iterator[tuple[object, dict[tuple[str, str], ValueColumns]]]:
    """Every stored value of `metrics` of `test` for each of `runs` ((run pk, anything) pairs, in the
    order wanted), as (anything, {(metric, steps_key): ValueColumns}), read a batch of runs at a time in
    primary-key order: millions of values stream through without a Python object each.

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
    code = sa.case(
        *((metric_points.c.status == status, i) for i, status in enumerate(STATUSES)), else_=len(STATUSES)
    )
    interned: dict[bytes, npt.NDArray[np.int64]] = {}
    start, size = 0, 1
    while start < len(runs):
        batch = runs[start : start + size]
        found: dict[int, list[tuple[int, int, ValueColumns]]] = {pk: [] for pk, _ in batch}
        rows = 0
        for coordinate_pks in chunks(list(rank)):
            statement = (
                sa.select(
                    metric_points.c.coordinate_pk,
                    metric_points.c.run_pk,
                    metric_points.c.step,
                    # NULL (a NaN) as a flag beside a number: the rows then fill a numpy record array
                    # straight from the cursor's tuples.
                    sa.func.coalesce(metric_points.c.value, 0.0),
                    metric_points.c.value.is_(None),
                    code,
                )
                .where(
                    metric_points.c.coordinate_pk.in_(coordinate_pks),
                    metric_points.c.run_pk.in_([pk for pk, _ in batch]),
                )
                .order_by(metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step)
            )
            fetched = driver_rows(conn, statement)
            rows += len(fetched)
            for coordinate_pk, run_pk, columns in _segments(fetched, interned):
                found[run_pk].append((*rank[coordinate_pk][:1], coordinate_pk, columns))
        for pk, item in batch:
            yield item, _quantities(found[pk], rank)
        start += len(batch)
        size = max(1, min(IN_CHUNK, ROWS_PER_READ * len(batch) // max(rows, 1)))


_ROW = np.dtype(
    [("coordinate", np.int64), ("run", np.int64), ("step", np.int64), ("value", np.float64),
     ("null", np.bool_), ("status", np.int8)]
)  # fmt: skip


def _segments(
    rows: Sequence[Any], interned: dict[bytes, npt.NDArray[np.int64]]
) -> Iterator[tuple[int, int, ValueColumns]]:
    """(coordinate pk, run pk, columns) per run and coordinate of rows in primary-key order."""
    if not rows:
        return
    table = np.fromiter(rows, _ROW, count=len(rows))
    values = np.where(table["null"], np.nan, table["value"])
    coordinate, run = table["coordinate"], table["run"]
    starts = np.flatnonzero((coordinate[1:] != coordinate[:-1]) | (run[1:] != run[:-1])) + 1
    bounds = [0, *starts.tolist(), len(rows)]
    for lo, hi in itertools.pairwise(bounds):
        steps = table["step"][lo:hi]
        key = steps.tobytes()
        shared = interned.get(key)
        if shared is None:
            shared = interned[key] = steps.copy()
        yield (
            int(coordinate[lo]),
            int(run[lo]),
            ValueColumns(shared, values[lo:hi].copy(), table["status"][lo:hi].copy()),
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
            np.concatenate([first.statuses, columns.statuses[extra]])[order],
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
    query = (
        sa.select(
            metric_points.c.coordinate_pk,
            metric_points.c.step,
            metric_points.c.value,
            metric_points.c.status,
            metric_points.c.ref,
            metric_points.c.lo,
            metric_points.c.hi,
            runs.c.run_id,
            runs.c.commit_sha,
            runs.c.branch,
            runs.c.created_at,
            runs.c.gate_trusted,
            runs.c.trust_override,
        )
        .select_from(
            metric_points.join(coordinates, coordinates.c.pk == metric_points.c.coordinate_pk).join(
                runs, runs.c.pk == metric_points.c.run_pk
            )
        )
        .where(coordinates.c.test == test, coordinates.c.metric == metric)
        .order_by(
            *NEWEST_FIRST,
            coordinates.c.steps_key,
            coordinates.c.constraint_key,
            coordinates.c.series_key,
            metric_points.c.step,
        )
        .limit(limit)
    )
    keys = sa.select(coordinates).where(coordinates.c.test == test, coordinates.c.metric == metric)
    if step is not None:
        query = query.where(metric_points.c.step == step)
    if series_key is not None:
        query = query.where(coordinates.c.series_key == series_key)
        keys = keys.where(coordinates.c.series_key == series_key)
    spec = {row.pk: spec_of(row) for row in conn.execute(keys)}
    return [history_row(row, spec[row[0]], row[10]) for row in conn.execute(query)]


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
