"""Reads from the history store: baselines for an evaluation, per-key summaries, history and runs."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from gatecfg.store.engine import chunks
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

Values = dict[int, list[float]]


def baselines(
    conn: Connection,
    hashes: Sequence[str],
    *,
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> dict[tuple[str, int], list[float]]:
    """Per (coordinate, step), the finite values of the newest `window` qualifying runs, newest first.

    One query ranks the qualifying runs of each coordinate on the small run_coordinates table and reads
    the points of the newest `window`. A coordinate is read again, exactly, only when it has more
    qualifying runs than that and a step came up short or older runs hold steps the window lacks.
    """
    if window < 1:
        raise ValueError(f"a baseline window must be at least 1, got {window}")
    found: dict[str, Values] = {}
    for chunk in chunks(sorted(set(hashes))):
        found.update(_window_values(conn, chunk, window, baseline, exclude_run_id))
    return {
        (coordinate, step): values
        for coordinate, by_step in found.items()
        for step, values in by_step.items()
    }


def _ranked_runs(hashes: Sequence[str], baseline: Baseline, exclude_run_id: str | None) -> sa.CTE:
    trust = TRUSTED if baseline == "trusted" else sa.func.coalesce(runs.c.trust_override, sa.true())
    query = (
        sa.select(
            run_coordinates.c.coordinate_pk,
            run_coordinates.c.run_pk,
            run_coordinates.c.steps_digest,
            coordinates.c.coordinate,
            sa.func.row_number()
            .over(partition_by=run_coordinates.c.coordinate_pk, order_by=NEWEST_FIRST)
            .label("rn"),
        )
        .join(coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk)
        .join(runs, runs.c.pk == run_coordinates.c.run_pk)
        .where(coordinates.c.coordinate.in_(hashes), trust.is_(True))
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != exclude_run_id)
    return query.cte("ranked")


def _points_of(ranked: sa.CTE) -> sa.sql.elements.ColumnElement[bool]:
    return sa.and_(
        metric_points.c.coordinate_pk == ranked.c.coordinate_pk,
        metric_points.c.run_pk == ranked.c.run_pk,
        FINITE,
    )


def _window_values(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> dict[str, Values]:
    ranked = _ranked_runs(hashes, baseline, exclude_run_id)
    digests = (
        sa.select(
            ranked.c.coordinate_pk,
            sa.func.count().label("n_runs"),
            sa.func.min(ranked.c.rn).label("first_rn"),
        )
        .group_by(ranked.c.coordinate_pk, ranked.c.steps_digest)
        .subquery("digests")
    )
    # newest_new_digest > window: some run beyond the window stored a set of steps that no run inside it
    # did, so a step may be missing from the window entirely.
    summary = (
        sa.select(
            digests.c.coordinate_pk,
            sa.func.sum(digests.c.n_runs).label("n_runs"),
            sa.func.max(digests.c.first_rn).label("newest_new_digest"),
        )
        .group_by(digests.c.coordinate_pk)
        .cte("summary")
    )
    # Outer join: a coordinate whose window holds no finite value still reports its summary.
    query = (
        sa.select(
            ranked.c.coordinate,
            metric_points.c.step,
            metric_points.c.value,
            summary.c.n_runs,
            summary.c.newest_new_digest,
        )
        .select_from(
            ranked.join(summary, summary.c.coordinate_pk == ranked.c.coordinate_pk).outerjoin(
                metric_points, _points_of(ranked)
            )
        )
        .where(ranked.c.rn <= window)
        .order_by(ranked.c.coordinate_pk, ranked.c.rn, metric_points.c.step)
    )
    found: dict[str, Values] = {}
    beyond_window: set[str] = set()
    incomplete: set[str] = set()
    for coordinate, step, value, n_runs, newest_new_digest in conn.execute(query):
        by_step = found.setdefault(coordinate, {})
        if step is not None:
            by_step.setdefault(step, []).append(value)
        if n_runs > window:
            beyond_window.add(coordinate)
            if newest_new_digest > window:
                incomplete.add(coordinate)
    incomplete.update(
        coordinate
        for coordinate in beyond_window
        if any(len(values) < window for values in found[coordinate].values())
    )
    if incomplete:
        found.update(_exact_values(conn, sorted(incomplete), window, baseline, exclude_run_id))
    return found


def _exact_values(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> dict[str, Values]:
    """The newest `window` finite values per step over all qualifying runs of the given coordinates."""
    ranked = _ranked_runs(hashes, baseline, exclude_run_id)
    numbered = (
        sa.select(
            ranked.c.coordinate,
            metric_points.c.step,
            metric_points.c.value,
            sa.func.row_number()
            .over(partition_by=(ranked.c.coordinate_pk, metric_points.c.step), order_by=ranked.c.rn)
            .label("k"),
        )
        .select_from(ranked.join(metric_points, _points_of(ranked)))
        .subquery("numbered")
    )
    query = (
        sa.select(numbered.c.coordinate, numbered.c.step, numbered.c.value)
        .where(numbered.c.k <= window)
        .order_by(numbered.c.coordinate, numbered.c.step, numbered.c.k)
    )
    found: dict[str, Values] = {coordinate: {} for coordinate in hashes}
    for coordinate, step, value in conn.execute(query):
        found[coordinate].setdefault(step, []).append(value)
    return found


def coordinates_for(conn: Connection, series_key: str, metric: str) -> list[CoordinateSummary]:
    """Every stored key of one series and metric, with how many values it holds, newest first."""
    trusted_values = sa.case((TRUSTED.is_(True), run_coordinates.c.n_values), else_=0)
    last_written = sa.func.max(runs.c.created_at).label("last_written")
    query = (
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
        .where(coordinates.c.series_key == series_key, coordinates.c.metric == metric)
        .group_by(coordinates.c.pk)
        .order_by(last_written.desc(), coordinates.c.coordinate)
    )
    return [
        CoordinateSummary(
            spec=spec_of(row),
            n_values=int(row.n_values),
            n_trusted_values=int(row.n_trusted_values),
            n_runs=int(row.n_runs),
            last_written=row.last_written,
        )
        for row in conn.execute(query)
    ]


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
