"""Baselines for an evaluation: per (coordinate, step), the finite values of the newest `window` runs that
join the coordinate's baseline (gatecfg.membership decides which, from the facts the walk reads), read in a
few statements however many coordinates a run has."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from gatecfg.membership import Baseline, Facts
from gatecfg.store.engine import driver_rows
from gatecfg.store.statements import (
    FINITE,
    NEWEST_FIRST,
    STEP_COLUMNS,
    VALUE_COLUMNS,
    digest_span,
    newest_runs,
    sqlite_points,
    sqlite_walk,
)
from gatecfg.store.tables import coordinates, metric_points
from gatecfg.store.windowing import (
    Candidate,
    Values,
    WindowRuns,
    chunk_points,
    chunked_by_pairs,
    chunks,
    decided,
    joining_runs,
    max_pairs,
    short_of_window,
    trim,
    walk_depth,
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


def _window_values(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> dict[str, Window]:
    windows, beyond_window, irregular, full = _newest_runs(conn, hashes, window, baseline, exclude_run_id)
    found = _window_points(conn, windows)
    groups = short_of_window(found, beyond_window, irregular, window)
    if not groups:
        return found
    rest = [coordinate for group in groups.values() for coordinate in group if coordinate not in full]
    full.update((c, w.candidates) for c, w in _walks(conn, rest, EVERY_ROW, exclude_run_id).items())
    for steps, group in groups.items():
        older = {
            coordinate: [
                (windows[coordinate].coordinate_pk, run_pk)
                for run_pk, _ in joining_runs(full[coordinate], baseline)[window:]
            ]
            for coordinate in group
        }
        for coordinate, older_by_step in values_of_runs(conn, older, steps, window).items():
            extended = found[coordinate].as_lists()
            for step, values in older_by_step.items():
                kept = extended.setdefault(step, [])
                kept.extend(values[: window - len(kept)])
            found[coordinate] = window_of(extended)
    return found


class Walked(NamedTuple):
    """A coordinate's newest stored rows, newest first, with the facts membership decides from, and the
    lowest and highest steps digest the coordinate ever stored."""

    coordinate_pk: int
    candidates: list[Candidate]
    span: tuple[str, str]


# (windows, coordinates with joining runs beyond the window, those of them whose older runs hold a set of
# steps that no run inside the window does, so a step may be missing from the window entirely; and the
# coordinates whose every stored row was walked, with those rows)
Walk = tuple[dict[str, WindowRuns], list[str], set[str], dict[str, list[Candidate]]]
# A walk that reads every stored row of its coordinates (a LIMIT no history reaches).
EVERY_ROW = 2**31 - 1


def _newest_runs(
    conn: Connection, hashes: Sequence[str], window: int, baseline: Baseline, exclude_run_id: str | None
) -> Walk:
    """The window's runs: per coordinate, the newest `window` + 1 runs that join its baseline
    (gatecfg.membership decides), found by walking its newest stored rows newest first on the index of
    runs by (series_key, created_at) and stopping after `walk_depth(window)`, so the cost does not grow
    with history (at 80M values on PostgreSQL, 2,000 runs per coordinate: 0.012 s against 0.16-0.34 s for
    ranking them all). A run's coordinates share its series key (Store.write_run checks it), which is
    what lets the walk start from the coordinate. Where those rows did not settle the window (a long
    streak of failures), and where the coordinate's runs stored more than one set of steps so that older
    runs may hold steps the window's do not, every stored row of it is walked."""
    depth = walk_depth(window)
    windows: dict[str, WindowRuns] = {}
    span: dict[str, tuple[str, str]] = {}
    full: dict[str, list[Candidate]] = {}
    unsettled = []
    for coordinate, rows in _walks(conn, hashes, depth, exclude_run_id).items():
        runs_of, known = decided(
            rows.coordinate_pk, rows.candidates, baseline=baseline, window=window, limit=depth
        )
        if not known:
            unsettled.append(coordinate)
        elif runs_of.runs:
            windows[coordinate], span[coordinate] = runs_of, rows.span
    for coordinate, rows in _walks(conn, unsettled, EVERY_ROW, exclude_run_id).items():
        full[coordinate] = rows.candidates
        runs_of, _ = decided(
            rows.coordinate_pk, rows.candidates, baseline=baseline, window=window, limit=EVERY_ROW
        )
        if runs_of.runs:
            windows[coordinate], span[coordinate] = runs_of, rows.span
    beyond_window, uncertain = trim(windows, span, window)
    rest = [coordinate for coordinate in uncertain if coordinate not in full]
    full.update((c, w.candidates) for c, w in _walks(conn, rest, EVERY_ROW, exclude_run_id).items())
    irregular = set()
    for coordinate in uncertain:
        inside = {digest for _, digest in windows[coordinate].runs}
        older = joining_runs(full[coordinate], baseline)[window:]
        if any(digest not in inside for _, digest in older):
            irregular.add(coordinate)
    return windows, beyond_window, irregular, full


def _walks(
    conn: Connection, hashes: Sequence[str], limit: int, exclude_run_id: str | None
) -> dict[str, Walked]:
    """Per coordinate of `hashes` with stored rows: its newest `limit` of them (`Walked`)."""
    if not hashes:
        return {}
    walk = newest_runs(exclude_run_id)
    lowest, highest = digest_span()
    params = {"limit": limit, "exclude_run_id": exclude_run_id}
    found: dict[str, Walked] = {}
    if conn.dialect.name == "postgresql":
        lateral = walk.add_columns(sa.func.row_number().over(order_by=NEWEST_FIRST).label("rn")).lateral()
        first = lateral.c.rn == 1  # the two seeks once per coordinate, not once per run
        query = (
            sa.select(
                coordinates.c.coordinate,
                coordinates.c.pk,
                sa.case((first, lowest)),
                sa.case((first, highest)),
                *lateral.c,
            )
            .select_from(coordinates.join(lateral, sa.true()))
            .where(coordinates.c.coordinate.in_(list(hashes)))
            .order_by(coordinates.c.pk, lateral.c.rn)
        )
        for row in conn.execute(query, params):
            coordinate, coordinate_pk, low, high, run_pk, digest = row[:6]
            if coordinate not in found:
                found[coordinate] = Walked(coordinate_pk, [], (low, high))
            found[coordinate].candidates.append(Candidate(run_pk, digest, Facts.stored(row[8:13], row[13])))
        return found
    query = sqlite_walk(hashes, exclude_run_id)  # no LATERAL: JSON arrays
    for coordinate, coordinate_pk, runs_found, low, high in conn.execute(query, params):
        if candidates := walked(runs_found):
            found[coordinate] = Walked(coordinate_pk, candidates, (low, high))
    return found


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


def values_of_runs(
    conn: Connection,
    ordered: Mapping[str, Sequence[tuple[int, int]]],
    steps: Collection[int] | None,
    window: int,
) -> dict[str, Values]:
    """Per key, up to `window` finite values per step of its (coordinate_pk, run_pk) pairs, in the order
    given (newest first). `steps` None reads every step; a set of steps lets the primary key seek just
    those. The window's own values have a faster read (`_window_points`); this one reads on past it."""
    rank = {pair: (key, n) for key, pairs in ordered.items() for n, pair in enumerate(pairs)}
    rows: list[tuple[str, int, int, float]] = []
    for part in chunks(sorted(rank), max_pairs(conn.dialect.name)):
        query = sa.select(
            metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step, metric_points.c.value
        ).where(sa.tuple_(metric_points.c.coordinate_pk, metric_points.c.run_pk).in_(list(part)), FINITE)
        if steps is not None:
            query = query.where(metric_points.c.step.in_(sorted(steps)))
        for coordinate_pk, run_pk, step, value in conn.execute(query):
            key, n = rank[(coordinate_pk, run_pk)]
            rows.append((key, n, int(step), float(value)))
    rows.sort(key=lambda row: row[:2])
    found: dict[str, Values] = {}
    for key, _, step, value in rows:
        kept = found.setdefault(key, {}).setdefault(step, [])
        if len(kept) < window:
            kept.append(value)
    return found
