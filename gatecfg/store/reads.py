"""Reads from the history store: baselines for an evaluation, per-key summaries, history and runs."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
# Points one statement reads at most: PostgreSQL sorts them in its default work_mem (4 MB) rather than on
# disk (800,000 in one statement spilled 23 MB and took 1.1 s), and this process holds few rows at a time.
ROWS_PER_STATEMENT = 50_000


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
    # The runs of each coordinate's window, newest first: a few rows per coordinate. Their points are read
    # next, per coordinate, without joins or sorting (see _window_points).
    query = (
        sa.select(
            summary.c.coordinate,
            ranked.c.coordinate_pk,
            ranked.c.run_pk,
            ranked.c.steps_digest,
            summary.c.n_runs,
            summary.c.newest_new_digest,
        )
        .select_from(ranked.join(summary, summary.c.coordinate_pk == ranked.c.coordinate_pk))
        .where(ranked.c.rn <= window)
        .order_by(ranked.c.coordinate_pk, ranked.c.rn)
    )
    windows: dict[str, _Window] = {}
    beyond_window: list[str] = []
    irregular: set[str] = set()
    for coordinate, coordinate_pk, run_pk, digest, n_runs, newest_new_digest in conn.execute(query):
        found_window = windows.get(coordinate)
        if found_window is None:
            found_window = windows[coordinate] = _Window(coordinate_pk, [])
            if n_runs > window:
                beyond_window.append(coordinate)
            if n_runs > window and newest_new_digest > window:
                irregular.add(coordinate)
        found_window.runs.append((run_pk, digest))
    found = _window_points(conn, windows)
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


@dataclass(frozen=True)
class _Window:
    coordinate_pk: int
    runs: list[tuple[int, str]]  # (run_pk, steps_digest) of the window's runs, newest first


def _window_points(conn: Connection, windows: Mapping[str, _Window]) -> dict[str, Values]:
    """Per coordinate, the finite values of its window's runs by step, newest first.

    800,000 baseline values (40 gates x 1,000 steps x window 20) made as many SQLAlchemy Row objects, and
    grouping them by step cost more than the database did. So the values come as one column straight from
    the DBAPI cursor, in primary-key order (coordinate, run, step), which the join walks without sorting.
    A first, small query reads the steps of one run per steps digest: runs with one digest hold finite
    values at the same steps (Store.write_run writes a run's points and its digest together, and nothing
    changes them after), so the step lists say which value is which. Where every run of a window has one
    digest, nearly always, the per-step lists are a transposition.
    """
    items = sorted(windows.items(), key=lambda item: item[1].coordinate_pk)
    found: dict[str, Values] = {}
    limit = _max_pairs(conn)
    chunk: list[tuple[str, _Window]] = []
    pairs = 0
    for coordinate, window_runs in items:
        if chunk and pairs + len(window_runs.runs) > limit:
            found.update(_chunk_points(conn, chunk))
            chunk, pairs = [], 0
        chunk.append((coordinate, window_runs))
        pairs += len(window_runs.runs)
    if chunk:
        found.update(_chunk_points(conn, chunk))
    return found


def _chunk_points(conn: Connection, chunk: Sequence[tuple[str, _Window]]) -> dict[str, Values]:
    digest_of = {(w.coordinate_pk, run_pk): digest for _, w in chunk for run_pk, digest in w.runs}
    representative: dict[tuple[int, str], tuple[int, int]] = {}
    for pair, digest in digest_of.items():
        representative.setdefault((pair[0], digest), pair)
    steps_by_run: dict[tuple[int, int], list[int]] = {}
    for coordinate_pk, run_pk, step in _points_rows(
        conn,
        (metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step),
        representative.values(),
    ):
        steps_by_run.setdefault((coordinate_pk, run_pk), []).append(step)
    steps_of = {key: steps_by_run.get(pair, []) for key, pair in representative.items()}
    pairs = sorted(digest_of)
    values: list[float] = []
    for part in _by_rows(pairs, [len(steps_of[(pair[0], digest_of[pair])]) for pair in pairs]):
        values += [row[0] for row in _points_rows(conn, (metric_points.c.value,), part)]
    columns: dict[tuple[int, int], list[float]] = {}
    start = 0
    for pair in pairs:
        end = start + len(steps_of[(pair[0], digest_of[pair])])
        columns[pair] = values[start:end]
        start = end
    if start != len(values):
        # Points that no digest accounts for (written by something other than gatecfg): read by step.
        return _chunk_points_by_step(conn, chunk)
    found: dict[str, Values] = {}
    for coordinate, w in chunk:
        newest_first = [columns[(w.coordinate_pk, run_pk)] for run_pk, _ in w.runs]
        digests = {digest for _, digest in w.runs}
        if len(digests) == 1:
            steps = steps_of[(w.coordinate_pk, digests.pop())]
            found[coordinate] = dict(zip(steps, map(list, zip(*newest_first, strict=True)), strict=True))
            continue
        by_step: Values = {}
        for (_, digest), column in zip(w.runs, newest_first, strict=True):
            for step, value in zip(steps_of[(w.coordinate_pk, digest)], column, strict=True):
                have = by_step.get(step)
                if have is None:
                    by_step[step] = [value]
                else:
                    have.append(value)
        found[coordinate] = by_step
    return found


def _by_rows(pairs: Sequence[tuple[int, int]], rows: Sequence[int]) -> Iterator[Sequence[tuple[int, int]]]:
    """Consecutive runs of `pairs` that hold at most ROWS_PER_STATEMENT points between them (or one pair)."""
    start, total = 0, 0
    for end, count in enumerate(rows):
        if total and total + count > ROWS_PER_STATEMENT:
            yield pairs[start:end]
            start, total = end, 0
        total += count
    if start < len(pairs):
        yield pairs[start:]


def _chunk_points_by_step(conn: Connection, chunk: Sequence[tuple[str, _Window]]) -> dict[str, Values]:
    rank = {(w.coordinate_pk, run_pk): rn for _, w in chunk for rn, (run_pk, _) in enumerate(w.runs)}
    columns = (
        metric_points.c.coordinate_pk,
        metric_points.c.run_pk,
        metric_points.c.step,
        metric_points.c.value,
    )
    rows = sorted(_points_rows(conn, columns, sorted(rank)), key=lambda row: (row[0], rank[(row[0], row[1])]))
    by_pk: dict[int, Values] = {}
    for coordinate_pk, _, step, value in rows:
        by_pk.setdefault(coordinate_pk, {}).setdefault(step, []).append(value)
    return {coordinate: by_pk.get(w.coordinate_pk, {}) for coordinate, w in chunk}


def _points_rows(
    conn: Connection, columns: Sequence[sa.ColumnElement[Any]], pairs: Iterable[tuple[int, int]]
) -> Sequence[Any]:
    """The finite points of these (coordinate_pk, run_pk) pairs in primary-key order, as DBAPI tuples.

    The statement is compiled by SQLAlchemy and run with exec_driver_sql, which keeps the connection's
    transaction and error handling; only the rows skip the Row objects.
    """
    pairs = list(pairs)
    if not pairs:
        return []
    statement = (
        sa.select(*columns)
        .select_from(
            run_coordinates.join(
                metric_points,
                sa.and_(
                    metric_points.c.coordinate_pk == run_coordinates.c.coordinate_pk,
                    metric_points.c.run_pk == run_coordinates.c.run_pk,
                ),
            )
        )
        .where(
            # The coordinate list lets the primary key of run_coordinates seek; the pairs pick the runs.
            run_coordinates.c.coordinate_pk.in_(sorted({pk for pk, _ in pairs})),
            sa.tuple_(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk).in_(pairs),
            FINITE,
        )
        .order_by(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk, metric_points.c.step)
    )
    compiled = statement.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    # A tuple, not a list, for positional parameters: exec_driver_sql reads a list as many parameter sets.
    args: Any = tuple(params[name] for name in compiled.positiontup or ()) if compiled.positional else params
    result = conn.exec_driver_sql(str(compiled), args)
    try:
        return result.cursor.fetchall() if result.cursor is not None else []
    finally:
        result.close()


def _max_pairs(conn: Connection) -> int:
    """Pairs per statement, two parameters each: SQLite before 3.32 allows 999 parameters, later 32,766."""
    if conn.dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 32, 0):
        return 400
    return 10_000


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
