"""Baselines for an evaluation: per (coordinate, step), the finite values of the newest `window` runs that
join the coordinate's baseline (gatecfg.membership decides which, from the facts the walk reads), read in a
few statements however many coordinates a run has."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import sqlalchemy as sa
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
    packed_points,
    sqlite_points,
    sqlite_walk,
)
from gatecfg.store.tables import coordinates, metric_points
from gatecfg.store.windowing import (
    PACKED_PER_STATEMENT,
    Candidate,
    Pair,
    PointReads,
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
        # For this transaction only (safe behind a transaction-mode pooler): a point read of thousands of
        # seeks costs enough to be JIT-compiled, milliseconds a statement that save nothing.
        conn.exec_driver_sql("SELECT set_config('jit', 'off', true)")
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
    if conn.dialect.name == "postgresql":
        reads = PointReads(
            lambda pairs: {pair: steps for pair, steps, _ in _packed(conn, pairs, values=False)},
            lambda pairs: _concatenated([values for _, _, values in _packed(conn, pairs, steps=False)]),
            PACKED_PER_STATEMENT,
        )
    else:
        reads = PointReads.of_rows(
            lambda steps, pairs: driver_rows(
                conn, sqlite_points(STEP_COLUMNS if steps else VALUE_COLUMNS, pairs)
            )
        )
    for chunk in chunked_by_pairs(windows, max_pairs(conn.dialect.name)):
        read = chunk_points(reads, chunk)
        # None: points that no digest accounts for (written by something other than gatecfg): by step.
        found.update(_chunk_points_by_step(conn, chunk) if read is None else read)
    return found


def _chunk_points_by_step(conn: Connection, chunk: Sequence[tuple[str, WindowRuns]]) -> dict[str, Window]:
    found = _points_by_pair(conn, [(w.coordinate_pk, run_pk) for _, w in chunk for run_pk, _ in w.runs], None)
    windows: dict[str, Window] = {}
    for coordinate, w in chunk:
        by_step: Values = {}
        for run_pk, _ in w.runs:  # newest first
            for step, value in found.get((w.coordinate_pk, run_pk), []):
                by_step.setdefault(step, []).append(value)
        windows[coordinate] = window_of(by_step)
    return windows


def _points_by_pair(
    conn: Connection, pairs: Sequence[Pair], steps: Collection[int] | None
) -> dict[Pair, list[tuple[int, float]]]:
    """The finite (step, value) points of each pair, by step; only at `steps` unless it is None."""
    found: dict[Pair, list[tuple[int, float]]] = {}
    if conn.dialect.name == "postgresql":
        for part in chunks(sorted(pairs), max_pairs("postgresql")):
            for pair, at, values in _packed(conn, part, at=steps):
                found[pair] = list(zip(at, values.tolist(), strict=True))
        return found
    for part in chunks(sorted(pairs), max_pairs(conn.dialect.name)):
        query = sa.select(
            metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step, metric_points.c.value
        ).where(sa.tuple_(metric_points.c.coordinate_pk, metric_points.c.run_pk).in_(list(part)), FINITE)
        if steps is not None:
            query = query.where(metric_points.c.step.in_(sorted(steps)))
        query = query.order_by(*metric_points.primary_key)
        for coordinate_pk, run_pk, step, value in driver_rows(conn, query):
            found.setdefault((coordinate_pk, run_pk), []).append((int(step), float(value)))
    return found


def _packed(
    conn: Connection,
    pairs: Sequence[Pair],
    *,
    steps: bool = True,
    values: bool = True,
    at: Collection[int] | None = None,
) -> Iterator[tuple[Pair, list[int], np.ndarray]]:
    """PostgreSQL: per pair, in the order given, its finite points' steps and values by step
    (`statements.packed_points`); a list or array left out is empty."""
    if not pairs:
        return
    statement = packed_points(steps=steps, values=values, some_steps=at is not None)
    parameters: dict[str, Any] = {
        "coordinate_pks": [pk for pk, _ in pairs],
        "run_pks": [run_pk for _, run_pk in pairs],
    }
    if at is not None:
        parameters["steps"] = sorted(at)
    for coordinate_pk, run_pk, *packed in driver_rows(conn, statement, parameters):
        step_bytes = packed.pop(0) if steps else None
        value_bytes = packed.pop(0) if values else None
        yield (
            (coordinate_pk, run_pk),
            np.frombuffer(step_bytes or b"", ">i4").tolist(),
            np.frombuffer(value_bytes or b"", ">f8"),
        )


def _concatenated(parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.float64) if parts else np.empty(0)


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
    points = _points_by_pair(conn, list(rank), steps)
    found: dict[str, Values] = {}
    for pair in sorted(rank, key=rank.__getitem__):
        for step, value in points.get(pair, []):
            kept = found.setdefault(rank[pair][0], {}).setdefault(step, [])
            if len(kept) < window:
                kept.append(value)
    return found
