"""Baselines for an evaluation: per (coordinate, step), the finite values of the newest `window` qualifying
runs, read in a few statements however many coordinates a run has."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise
from typing import Any, cast

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from gatecfg.store.engine import chunks, driver_rows
from gatecfg.store.reads import FINITE, NEWEST_FIRST, qualifies
from gatecfg.store.rows import Baseline
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.windows import Baselines, Window

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
        .where(coordinates.c.coordinate.in_(hashes), *_run_criteria(baseline, exclude_run_id))
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
    # Coordinates that need older runs, grouped by the steps to read there (None: every step).
    groups: dict[frozenset[int] | None, list[str]] = {}
    for coordinate in beyond_window:
        have = found[coordinate]
        counts = zip(have.steps, have.counts.tolist(), strict=True)
        short = frozenset(step for step, n in counts if n < window)
        if coordinate in irregular or short:
            groups.setdefault(None if coordinate in irregular else short, []).append(coordinate)
    for steps, group in groups.items():
        older = _older_values(
            conn, group, steps, window=window, baseline=baseline, exclude_run_id=exclude_run_id
        )
        for coordinate, older_by_step in older.items():
            extended = found[coordinate].as_lists()
            for step, values in older_by_step.items():
                kept = extended.setdefault(step, [])
                kept.extend(values[: window - len(kept)])
            found[coordinate] = _window_of(extended)
    return found


# (windows, coordinates with qualifying runs beyond the window, those of them whose older runs hold a set of
# steps that no run inside the window does, so a step may be missing from the window entirely)
WindowRuns = tuple[dict[str, "_Window"], list[str], set[str]]


def _newest_runs(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> WindowRuns:
    """The window's runs: per coordinate, the newest `window` + 1 qualifying runs, walked newest first on
    the index of runs by (series_key, created_at) and stopped there, so the cost does not grow with history
    (at 80M values on PostgreSQL, 2,000 runs per coordinate: 0.012 s against 0.16-0.34 s for ranking them
    all; at 80k values on SQLite 2 ms against 21 ms). A run's coordinates share its series key
    (Store.write_run checks it), which is what lets the walk start from the coordinate. The one run past the
    window says whether older runs exist; a second statement, only for those coordinates whose runs stored
    more than one set of steps, asks whether any older run stored a set of steps that the window's runs
    did not."""
    walk = (
        sa.select(run_coordinates.c.run_pk, run_coordinates.c.steps_digest, runs.c.created_at, runs.c.pk)
        .select_from(
            runs.join(
                run_coordinates,
                sa.and_(
                    run_coordinates.c.run_pk == runs.c.pk,
                    run_coordinates.c.coordinate_pk == coordinates.c.pk,
                ),
            )
        )
        .where(runs.c.series_key == coordinates.c.series_key, *_run_criteria(baseline, exclude_run_id))
        .order_by(*NEWEST_FIRST)
        .limit(window + 1)
        .correlate(coordinates)
    )
    # The lowest and highest digest any run of the coordinate stored: two seeks on the (coordinate_pk,
    # steps_digest) index. Where both are the one digest of the window's runs, no older run can hold other
    # steps, and the second statement is not needed (nearly always).
    digests = sa.select(run_coordinates.c.steps_digest).where(
        run_coordinates.c.coordinate_pk == coordinates.c.pk
    )
    lowest = digests.with_only_columns(sa.func.min(run_coordinates.c.steps_digest)).scalar_subquery()
    highest = digests.with_only_columns(sa.func.max(run_coordinates.c.steps_digest)).scalar_subquery()
    windows: dict[str, _Window] = {}
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
                windows[coordinate] = _Window(coordinate_pk, [])
                span[coordinate] = (low, high)
            windows[coordinate].runs.append((run_pk, digest))
    else:
        # SQLite has no LATERAL: a correlated subquery per coordinate walks the same index and hands its
        # runs back as one JSON array (created_at and pk say their order; an aggregate's input order is
        # not promised).
        newest = walk.subquery("newest")
        runs_json = sa.select(
            sa.func.json_group_array(
                sa.func.json_array(newest.c.run_pk, newest.c.steps_digest, newest.c.created_at, newest.c.pk),
                type_=sa.String,
            )
        ).scalar_subquery()
        query = (
            sa.select(coordinates.c.coordinate, coordinates.c.pk, runs_json, lowest, highest)
            .where(coordinates.c.coordinate.in_(hashes))
            .order_by(coordinates.c.pk)
        )
        found = cast(Sequence[tuple[str, int, str, str, str]], conn.execute(query).all())
        for coordinate, coordinate_pk, runs_found, low, high in found:
            walked: list[list[Any]] = sorted(
                json.loads(runs_found), key=lambda run: (run[2], run[3]), reverse=True
            )
            if walked:
                windows[coordinate] = _Window(
                    coordinate_pk, [(run_pk, digest) for run_pk, digest, _, _ in walked]
                )
                span[coordinate] = (low, high)
    beyond_window = [coordinate for coordinate, w in windows.items() if len(w.runs) > window]
    for coordinate in beyond_window:
        del windows[coordinate].runs[window:]
    uncertain = [
        coordinate
        for coordinate in beyond_window
        if {digest for _, digest in windows[coordinate].runs} != set(span[coordinate])
        or span[coordinate][0] != span[coordinate][1]
    ]
    if not uncertain:
        return windows, beyond_window, set()
    pk_of = {windows[coordinate].coordinate_pk: coordinate for coordinate in uncertain}
    other_steps = (
        sa.select(run_coordinates.c.coordinate_pk)
        .distinct()
        .select_from(run_coordinates.join(runs, runs.c.pk == run_coordinates.c.run_pk))
        .where(
            sa.or_(*(_other_digests(windows[coordinate]) for coordinate in uncertain)),
            *_run_criteria(baseline, exclude_run_id),
        )
    )
    irregular = {pk_of[coordinate_pk] for (coordinate_pk,) in conn.execute(other_steps)}
    return windows, beyond_window, irregular


def _other_digests(window_runs: _Window) -> sa.ColumnElement[bool]:
    """Rows of the coordinate whose digest is none of its window's: the ranges below, between and above
    the window's digests, which the (coordinate_pk, steps_digest) index seeks (nearly always two empty
    ranges around the one digest)."""
    digest = run_coordinates.c.steps_digest
    inside = sorted({d for _, d in window_runs.runs})
    gaps = [digest < inside[0], digest > inside[-1]]
    gaps += [sa.and_(digest > low, digest < high) for low, high in pairwise(inside)]
    return sa.and_(run_coordinates.c.coordinate_pk == window_runs.coordinate_pk, sa.or_(*gaps))


def _run_criteria(baseline: Baseline, exclude_run_id: str | None) -> list[sa.ColumnElement[bool]]:
    criteria = [qualifies(baseline)]
    if exclude_run_id is not None:
        criteria.append(runs.c.run_id != exclude_run_id)
    return criteria


@dataclass(frozen=True)
class _Window:
    coordinate_pk: int
    runs: list[tuple[int, str]]  # (run_pk, steps_digest) of the window's runs, newest first


def _window_points(conn: Connection, windows: Mapping[str, _Window]) -> dict[str, Window]:
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
    found: dict[str, Window] = {}
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


def _chunk_points(conn: Connection, chunk: Sequence[tuple[str, _Window]]) -> dict[str, Window]:
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
    lengths = [len(steps_of[(pair[0], digest_of[pair])]) for pair in pairs]
    parts = [
        np.fromiter(chain.from_iterable(_points_rows(conn, (metric_points.c.value,), part)), np.float64)
        for part in _by_rows(pairs, lengths)
    ]
    values = np.concatenate(parts) if parts else np.empty(0)
    if len(values) != sum(lengths):
        # Points that no digest accounts for (written by something other than gatecfg): read by step.
        return _chunk_points_by_step(conn, chunk)
    start_of = dict(zip(pairs, accumulate(lengths, initial=0), strict=False))
    found: dict[str, Window] = {}
    for coordinate, w in chunk:
        digests = {digest for _, digest in w.runs}
        if len(digests) == 1:
            # One digest: the window's runs hold values at the same steps, and their pairs are adjacent
            # in `pairs`, in run_pk order. A matrix of runs x steps, its rows put newest first.
            steps = steps_of[(w.coordinate_pk, digests.pop())]
            first = min(start_of[(w.coordinate_pk, run_pk)] for run_pk, _ in w.runs)
            block = values[first : first + len(w.runs) * len(steps)].reshape(len(w.runs), len(steps))
            rank = {run_pk: i for i, run_pk in enumerate(sorted(run_pk for run_pk, _ in w.runs))}
            found[coordinate] = Window.from_runs(steps, block[[rank[run_pk] for run_pk, _ in w.runs]])
            continue
        by_step: Values = {}
        for run_pk, digest in w.runs:
            steps = steps_of[(w.coordinate_pk, digest)]
            start = start_of[(w.coordinate_pk, run_pk)]
            for step, value in zip(steps, values[start : start + len(steps)].tolist(), strict=True):
                by_step.setdefault(step, []).append(value)
        found[coordinate] = _window_of(by_step)
    return found


def _window_of(by_step: Mapping[int, Sequence[float]]) -> Window:
    return Window.from_lists(by_step) or Window.from_runs([], np.empty((0, 0)))


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


def _chunk_points_by_step(conn: Connection, chunk: Sequence[tuple[str, _Window]]) -> dict[str, Window]:
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
    return {coordinate: _window_of(by_pk.get(w.coordinate_pk, {})) for coordinate, w in chunk}


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
    return driver_rows(conn, statement)


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
