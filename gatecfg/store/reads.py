"""Reads from the history store: per-key summaries, history and runs (baselines: `baselines.py`)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from gatecfg.store.engine import driver_rows
from gatecfg.store.rows import (
    Baseline,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    RunRow,
    Status,
    StoredPoint,
)
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs

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


def test_values(
    conn: Connection, *, test: str, metrics: Sequence[str]
) -> Iterator[tuple[str, str, str, int, float, Status]]:
    """(run_id, metric, steps_key, step, value, status) of every stored value of `metrics` of `test`, a
    NaN as NaN: what a replay of the test's history reads, without a row object per value.

    A run holds one quantity (metric, steps_key) under two keys only when a constraint change was carried;
    then the rows of the key that sorts first (by constraint_key, then series) come first.
    """
    keys = conn.execute(
        sa.select(coordinates.c.pk, coordinates.c.metric, coordinates.c.steps_key)
        .where(coordinates.c.test == test, coordinates.c.metric.in_(list(metrics)))
        .order_by(coordinates.c.constraint_key, coordinates.c.series_key, coordinates.c.pk)
    ).all()
    run_ids = dict(conn.execute(sa.select(runs.c.pk, runs.c.run_id).where(runs.c.test == test)).all())
    for pk, metric, steps_key in keys:
        # One coordinate at a time, in primary-key order: a range of metric_points read without sorting.
        statement = (
            sa.select(
                metric_points.c.run_pk, metric_points.c.step, metric_points.c.value, metric_points.c.status
            )
            .where(metric_points.c.coordinate_pk == pk)
            .order_by(metric_points.c.run_pk, metric_points.c.step)
        )
        for run_pk, step, value, status in driver_rows(conn, statement):
            run_id = run_ids.get(run_pk)
            if (
                run_id is None
            ):  # a run a nightly wrote after this read began (PostgreSQL reads committed rows)
                continue
            yield run_id, metric, steps_key, step, math.nan if value is None else value, status


def history(
    conn: Connection,
    *,
    test: str,
    metric: str,
    step: int | None,
    series_key: str | None,
    limit: int | None,
) -> list[HistoryRow]:
    """Stored values of one metric of one test, newest run first, then by key and step."""
    query = (
        sa.select(
            coordinates,
            metric_points,
            runs.c.run_id,
            runs.c.commit_sha,
            runs.c.branch,
            runs.c.created_at.label("run_created_at"),
            runs.c.gate_trusted,
            runs.c.trust_override,
            TRUSTED.label("trusted"),
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
    if step is not None:
        query = query.where(metric_points.c.step == step)
    if series_key is not None:
        query = query.where(coordinates.c.series_key == series_key)
    return [
        HistoryRow(
            run_id=row.run_id,
            commit=row.commit_sha,
            branch=row.branch,
            created_at=row.run_created_at,
            trusted=bool(row.trusted),
            gate_trusted=row.gate_trusted,
            trust_override=row.trust_override,
            coordinate=spec_of(row),
            point=StoredPoint(
                step=row.step,
                value=math.nan if row.value is None else row.value,
                status=cast(Status, row.status),
                ref=row.ref,
                lo=row.lo,
                hi=row.hi,
            ),
        )
        for row in conn.execute(query)
    ]


def run_rows(conn: Connection, *, test: str | None) -> list[RunRow]:
    """Stored runs, newest first."""
    query = sa.select(runs, TRUSTED.label("trusted")).order_by(*NEWEST_FIRST)
    if test is not None:
        query = query.where(runs.c.test == test)
    return [
        RunRow(
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
        for row in conn.execute(query)
    ]


def spec_of(row: Row[Any]) -> CoordinateSpec:
    return CoordinateSpec(
        coordinate=row.coordinate,
        series_key=row.series_key,
        test=row.test,
        metric=row.metric,
        steps_key=row.steps_key,
        constraint_key=row.constraint_key,
    )
