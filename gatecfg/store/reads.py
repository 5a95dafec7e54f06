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
ROWS_PER_FETCH = 50_000


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
    the points of the newest `window`. Only where a coordinate has more qualifying runs than that and
    a step came up short (or older runs hold steps the window lacks) do further queries read on into
    the older runs, for just those steps.
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


def qualifies(baseline: Baseline) -> sa.ColumnElement[bool]:
    """Runs whose values form baselines: `trusted` ones, or for `nightly` every run not untrusted by hand."""
    trust = TRUSTED if baseline == "trusted" else sa.func.coalesce(runs.c.trust_override, sa.true())
    return trust.is_(True)


def _ranked_runs(hashes: Sequence[str], baseline: Baseline, exclude_run_id: str | None) -> sa.CTE:
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
        .where(coordinates.c.coordinate.in_(hashes), qualifies(baseline))
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != exclude_run_id)
    return query.cte("ranked")


def _points_of(ranked: sa.CTE) -> sa.ColumnElement[bool]:
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
            ranked.c.coordinate,
            sa.func.count().label("n_runs"),
            sa.func.min(ranked.c.rn).label("first_rn"),
        )
        .group_by(ranked.c.coordinate_pk, ranked.c.coordinate, ranked.c.steps_digest)
        .subquery("digests")
    )
    # newest_new_digest > window: some run beyond the window stored a set of steps that no run inside it
    # did, so a step may be missing from the window entirely.
    summary = (
        sa.select(
            digests.c.coordinate_pk,
            digests.c.coordinate,
            sa.func.sum(digests.c.n_runs).label("n_runs"),
            sa.func.max(digests.c.first_rn).label("newest_new_digest"),
        )
        .group_by(digests.c.coordinate_pk, digests.c.coordinate)
        .cte("summary")
    )
    # The coordinate's hash and summary ride on its first row only (rn = 1): carried on all 800,000 rows
    # of 40 gates x 1,000 steps x window 20, the text alone doubled the time of the query.
    # Outer join: a coordinate whose window holds no finite value still returns its first row.
    query = (
        sa.select(
            ranked.c.coordinate_pk,
            metric_points.c.step,
            metric_points.c.value,
            summary.c.coordinate,
            summary.c.n_runs,
            summary.c.newest_new_digest,
        )
        .select_from(
            ranked.outerjoin(
                summary, sa.and_(summary.c.coordinate_pk == ranked.c.coordinate_pk, ranked.c.rn == 1)
            ).outerjoin(metric_points, _points_of(ranked))
        )
        .where(ranked.c.rn <= window)
        .order_by(ranked.c.coordinate_pk, ranked.c.rn, metric_points.c.step)
    )
    found: dict[str, Values] = {}
    beyond_window: list[str] = []
    irregular: set[str] = set()
    current_pk = None
    by_step: Values = {}
    # The ORDER BY brings each coordinate's rows together, its rn = 1 row first.
    for partition in conn.execute(query).partitions(ROWS_PER_FETCH):
        for coordinate_pk, step, value, coordinate, n_runs, newest_new_digest in partition:
            if coordinate_pk != current_pk:
                current_pk = coordinate_pk
                by_step = found[coordinate] = {}
                if n_runs > window:
                    beyond_window.append(coordinate)
                if n_runs > window and newest_new_digest > window:
                    irregular.add(coordinate)
            if step is not None:
                values = by_step.get(step)
                if values is None:
                    by_step[step] = [value]
                else:
                    values.append(value)
    # Coordinates that need older runs, grouped by the steps to read there (None: every step).
    groups: dict[frozenset[int] | None, list[str]] = {}
    for coordinate in beyond_window:
        short = frozenset(step for step, values in found[coordinate].items() if len(values) < window)
        if coordinate in irregular or short:
            groups.setdefault(None if coordinate in irregular else short, []).append(coordinate)
    for steps, group in groups.items():
        older = _older_values(
            conn, group, steps, window=window, baseline=baseline, exclude_run_id=exclude_run_id
        )
        for coordinate, older_by_step in older.items():
            have = found[coordinate]
            for step, values in older_by_step.items():
                kept = have.setdefault(step, [])
                kept.extend(values[: window - len(kept)])
    return found


def _older_values(
    conn: Connection,
    hashes: Sequence[str],
    steps: frozenset[int] | None,
    *,
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> dict[str, Values]:
    """Up to `window` finite values per step from the qualifying runs ranked beyond the window.

    `steps` None reads every step; a set of steps lets the primary key seek just those.
    """
    step_lists: list[Sequence[int] | None] = [None] if steps is None else list(chunks(sorted(steps)))
    found: dict[str, Values] = {}
    for step_list in step_lists:
        ranked = _ranked_runs(hashes, baseline, exclude_run_id)
        points = _points_of(ranked)
        if step_list is not None:
            points = sa.and_(points, metric_points.c.step.in_(step_list))
        numbered = (
            sa.select(
                ranked.c.coordinate,
                metric_points.c.step,
                metric_points.c.value,
                sa.func.row_number()
                .over(partition_by=(ranked.c.coordinate_pk, metric_points.c.step), order_by=ranked.c.rn)
                .label("k"),
            )
            .select_from(ranked.join(metric_points, points))
            .where(ranked.c.rn > window)
            .subquery("numbered")
        )
        query = (
            sa.select(numbered.c.coordinate, numbered.c.step, numbered.c.value)
            .where(numbered.c.k <= window)
            .order_by(numbered.c.coordinate, numbered.c.step, numbered.c.k)
        )
        for coordinate, step, value in conn.execute(query):
            found.setdefault(coordinate, {}).setdefault(step, []).append(value)
    return found


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
