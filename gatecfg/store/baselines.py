"""Baselines for an evaluation: per (coordinate, step), the finite values of the newest `window` qualifying
runs, read in a few statements however many coordinates a run has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from gatecfg.membership import Baseline
from gatecfg.store.engine import driver_rows
from gatecfg.store.statements import (
    FINITE,
    NEWEST_FIRST,
    STEP_COLUMNS,
    VALUE_COLUMNS,
    digest_span,
    newest_runs,
    run_criteria,
    sqlite_points,
    sqlite_walk,
)
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import (
    Values,
    WindowRuns,
    chunk_points,
    chunked_by_pairs,
    chunks,
    max_pairs,
    short_of_window,
    trim,
    walked,
    window_of,
)
from gatecfg.windows import Baselines, Window


def baselines(
    conn: Connection,
    hashes: Sequence[str],
    *,
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> Baselines:
    """Per (coordinate, step), the finite values of the newest `window` qualifying runs, newest first.

    One query walks each coordinate's newest qualifying runs (`_newest_runs`), two more read the points
    of the newest `window` (`_window_points`). Only where a coordinate has more qualifying runs than that and
    a step came up short (or older runs hold steps the window lacks) do further queries read on into
    the older runs, for just those steps.
    """
    if window < 1:
        raise ValueError(f"a baseline window must be at least 1, got {window}")
    found = Baselines()
    if conn.dialect.name == "postgresql":
        # For this transaction only (safe behind a transaction-mode pooler): a point read of 50,000 rows
        # costs enough to be JIT-compiled, 7 ms a statement that saves nothing, and its sort by primary key
        # spills to disk just above the default 4 MB work_mem.
        conn.exec_driver_sql("SELECT set_config('jit', 'off', true), set_config('work_mem', '16MB', true)")
    for chunk in chunks(sorted(set(hashes))):
        found.windows.update(_window_values(conn, chunk, window, baseline, exclude_run_id))
    return found


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
        .where(coordinates.c.coordinate.in_(hashes), *run_criteria(baseline, exclude_run_id))
    )
    return query.cte("ranked")


def points_of(ranked: sa.CTE) -> sa.ColumnElement[bool]:
    """The finite points of the (coordinate_pk, run_pk) pairs a ranking CTE picked."""
    return sa.and_(
        metric_points.c.coordinate_pk == ranked.c.coordinate_pk,
        metric_points.c.run_pk == ranked.c.run_pk,
        FINITE,
    )


def _window_values(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> dict[str, Window]:
    windows, beyond_window, irregular = _newest_runs(conn, hashes, window, baseline, exclude_run_id)
    found = _window_points(conn, windows)
    for steps, group in short_of_window(found, beyond_window, irregular, window).items():
        older = _older_values(
            conn, group, steps, window=window, baseline=baseline, exclude_run_id=exclude_run_id
        )
        for coordinate, older_by_step in older.items():
            extended = found[coordinate].as_lists()
            for step, values in older_by_step.items():
                kept = extended.setdefault(step, [])
                kept.extend(values[: window - len(kept)])
            found[coordinate] = window_of(extended)
    return found


# (windows, coordinates with qualifying runs beyond the window, those of them whose older runs hold a set of
# steps that no run inside the window does, so a step may be missing from the window entirely)
Walk = tuple[dict[str, WindowRuns], list[str], set[str]]


def _newest_runs(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> Walk:
    """The window's runs: per coordinate, the newest `window` + 1 qualifying runs, walked newest first on
    the index of runs by (series_key, created_at) and stopped there, so the cost does not grow with history
    (at 80M values on PostgreSQL, 2,000 runs per coordinate: 0.012 s against 0.16-0.34 s for ranking them
    all; at 80k values on SQLite 2 ms against 21 ms). A run's coordinates share its series key
    (Store.write_run checks it), which is what lets the walk start from the coordinate. The one run past the
    window says whether older runs exist; a second statement, only for those coordinates whose runs stored
    more than one set of steps, asks whether any older run stored a set of steps that the window's runs
    did not."""
    walk = newest_runs(window, baseline, exclude_run_id)
    # Where both digests are the one of the window's runs, no older run can hold other steps, and the
    # second statement is not needed (nearly always).
    lowest, highest = digest_span()
    windows: dict[str, WindowRuns] = {}
    span: dict[str, tuple[str, str]] = {}
    if conn.dialect.name == "postgresql":
        lateral = walk.add_columns(sa.func.row_number().over(order_by=NEWEST_FIRST).label("rn")).lateral()
        first = lateral.c.rn == 1  # the two seeks once per coordinate, not once per run
        query = (
            sa.select(
                coordinates.c.coordinate,
                coordinates.c.pk,
                lateral.c.run_pk,
                lateral.c.steps_digest,
                sa.case((first, lowest)),
                sa.case((first, highest)),
            )
            .select_from(coordinates.join(lateral, sa.true()))
            .where(coordinates.c.coordinate.in_(hashes))
            .order_by(coordinates.c.pk, lateral.c.rn)
        )
        for coordinate, coordinate_pk, run_pk, digest, low, high in conn.execute(query):
            if coordinate not in windows:
                windows[coordinate] = WindowRuns(coordinate_pk, [])
                span[coordinate] = (low, high)
            windows[coordinate].runs.append((run_pk, digest))
    else:
        query = sqlite_walk(hashes, window, baseline, exclude_run_id)  # no LATERAL: JSON arrays
        found = cast(Sequence[tuple[str, int, str, str, str]], conn.execute(query).all())
        for coordinate, coordinate_pk, runs_found, low, high in found:
            if runs_of := walked(runs_found):
                windows[coordinate] = WindowRuns(coordinate_pk, runs_of)
                span[coordinate] = (low, high)
    beyond_window, uncertain = trim(windows, span, window)
    if not uncertain:
        return windows, beyond_window, set()
    pk_of = {windows[coordinate].coordinate_pk: coordinate for coordinate in uncertain}
    other_steps = (
        sa.select(run_coordinates.c.coordinate_pk)
        .distinct()
        .select_from(
            run_coordinates.join(runs, runs.c.pk == run_coordinates.c.run_pk).join(
                coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk
            )
        )
        .where(
            sa.or_(*(_other_digests(windows[coordinate]) for coordinate in uncertain)),
            *run_criteria(baseline, exclude_run_id),
        )
    )
    irregular = {pk_of[coordinate_pk] for (coordinate_pk,) in conn.execute(other_steps)}
    return windows, beyond_window, irregular


def _other_digests(window_runs: WindowRuns) -> sa.ColumnElement[bool]:
    """Rows of the coordinate whose digest is none of its window's: the ranges below, between and above
    the window's digests, which the (coordinate_pk, steps_digest) index seeks (nearly always two empty
    ranges around the one digest)."""
    digest = run_coordinates.c.steps_digest
    inside = sorted({d for _, d in window_runs.runs})
    gaps = [digest < inside[0], digest > inside[-1]]
    gaps += [sa.and_(digest > low, digest < high) for low, high in pairwise(inside)]
    return sa.and_(run_coordinates.c.coordinate_pk == window_runs.coordinate_pk, sa.or_(*gaps))


def _window_points(conn: Connection, windows: Mapping[str, WindowRuns]) -> dict[str, Window]:
    """Per coordinate, the finite values of its window's runs by step, newest first (`chunk_points`)."""
    found: dict[str, Window] = {}
    for chunk in chunked_by_pairs(windows, max_pairs(conn.dialect.name)):
        read = chunk_points(
            lambda steps, pairs: _points_rows(conn, STEP_COLUMNS if steps else VALUE_COLUMNS, pairs), chunk
        )
        # None: points that no digest accounts for (written by something other than gatecfg): by step.
        found.update(_chunk_points_by_step(conn, chunk) if read is None else read)
    return found


def _chunk_points_by_step(conn: Connection, chunk: Sequence[tuple[str, WindowRuns]]) -> dict[str, Window]:
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
    return {coordinate: window_of(by_pk.get(w.coordinate_pk, {})) for coordinate, w in chunk}


def _points_rows(
    conn: Connection, columns: Sequence[sa.ColumnElement[Any]], pairs: Iterable[tuple[int, int]]
) -> Sequence[Any]:
    """The finite points of these (coordinate_pk, run_pk) pairs in primary-key order, as DBAPI tuples."""
    pairs = list(pairs)
    if not pairs:
        return []
    if conn.dialect.name == "postgresql":
        # Two arrays, one parameter each: one compiled and planned form whatever the number of pairs, a
        # nested loop over metric_points' primary key (an IN list of row values plans a bitmap scan per
        # pair).
        chosen = (
            sa.func.unnest(
                sa.bindparam("coordinate_pks", [pk for pk, _ in pairs], type_=postgresql.ARRAY(sa.Integer)),
                sa.bindparam("run_pks", [run_pk for _, run_pk in pairs], type_=postgresql.ARRAY(sa.Integer)),
            )
            .table_valued("coordinate_pk", "run_pk")
            .render_derived(name="chosen")
        )
        return driver_rows(
            conn,
            sa.select(*columns)
            .select_from(
                chosen.join(
                    metric_points,
                    sa.and_(
                        metric_points.c.coordinate_pk == chosen.c.coordinate_pk,
                        metric_points.c.run_pk == chosen.c.run_pk,
                    ),
                )
            )
            .where(FINITE)
            .order_by(metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step),
        )
    statement = sqlite_points(columns, pairs)
    return driver_rows(conn, statement)


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
    ranked = _ranked_runs(hashes, baseline, exclude_run_id)
    for step_list in step_lists:
        query = beyond_window(ranked, ranked.c.coordinate, ranked.c.coordinate_pk, window, step_list)
        for coordinate, step, value in conn.execute(query):
            found.setdefault(coordinate, {}).setdefault(step, []).append(value)
    return found


def beyond_window(
    ranked: sa.CTE,
    key: sa.ColumnElement[Any],
    partition: sa.ColumnElement[Any],
    window: int,
    steps: Sequence[int] | None,
    *criteria: sa.ColumnElement[bool],
) -> sa.Select[Any]:
    """(key, step, value): up to `window` finite values per key and step from the runs a ranking CTE put
    beyond the window (`rn > window`), the nearest first; `steps` None reads every step, a list lets the
    primary key seek just those. The plain and the carried baselines both read on this way."""
    points = points_of(ranked)
    if steps is not None:
        points = sa.and_(points, metric_points.c.step.in_(steps))
    numbered = (
        sa.select(
            key.label("key"),
            metric_points.c.step,
            metric_points.c.value,
            sa.func.row_number()
            .over(partition_by=(partition, metric_points.c.step), order_by=ranked.c.rn)
            .label("k"),
        )
        .select_from(ranked.join(metric_points, points))
        .where(ranked.c.rn > window, *criteria)
        .subquery("numbered")
    )
    return (
        sa.select(numbered.c.key, numbered.c.step, numbered.c.value)
        .where(numbered.c.k <= window)
        .order_by(numbered.c.key, numbered.c.step, numbered.c.k)
    )
