"""The driver-free half of reading baselines: each coordinate's candidate runs as the store walked them,
cut to its window by gatecfg.membership (the one rule), and the values of those runs turned into per-step
windows. Both readers of the store share it: SQLAlchemy's (`store/baselines.py`, every store and every
shape of history) and evaluate's sqlite3 one (`store/direct.py`), which must not import SQLAlchemy."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any, TypeVar

import numpy as np

from gatecfg.membership import Baseline, Facts, joining
from gatecfg.windows import Window

T = TypeVar("T")
Values = dict[int, list[float]]
# Well under SQLite's bound-parameter limit (32,766 since 3.32, 999 before) for IN lists.
IN_CHUNK = 500
# Points one statement reads at most: as a tuple each (SQLite), so that this process holds few of them at
# a time; packed per pair (PostgreSQL, `statements.packed_points`), where the driver holds a result as hex
# text, 16 bytes a point: 32 MB, the window of 50 nightlies of 40 gates x 1,000 steps in one statement.
ROWS_PER_STATEMENT = 50_000
PACKED_PER_STATEMENT = 2_000_000

Pair = tuple[int, int]  # (coordinate_pk, run_pk)
# The finite points of (coordinate_pk, run_pk) pairs in primary-key order, as driver tuples: with
# `steps`, (coordinate_pk, run_pk, step) rows; without, (value,) rows.
PointRows = Callable[[bool, Sequence[Pair]], Iterable[Sequence[Any]]]


@dataclass(frozen=True)
class PointReads:
    """How a reader fetches the finite points of (coordinate_pk, run_pk) pairs: `steps`, each pair's steps
    in ascending order; `values`, the values of the given pairs in that order, each pair's by step, as one
    array; at most `per_statement` values in one statement."""

    steps: Callable[[Sequence[Pair]], Mapping[Pair, list[int]]]
    values: Callable[[Sequence[Pair]], np.ndarray]
    per_statement: int

    @classmethod
    def of_rows(cls, rows: PointRows) -> PointReads:
        """The reads of a reader that hands over one driver tuple per point (`PointRows`)."""

        def steps(pairs: Sequence[Pair]) -> dict[Pair, list[int]]:
            found: dict[Pair, list[int]] = {}
            for coordinate_pk, run_pk, step in rows(True, pairs):
                found.setdefault((coordinate_pk, run_pk), []).append(step)
            return found

        def values(pairs: Sequence[Pair]) -> np.ndarray:
            return np.fromiter(chain.from_iterable(rows(False, pairs)), np.float64)

        return cls(steps, values, ROWS_PER_STATEMENT)


@dataclass(frozen=True)
class WindowRuns:
    coordinate_pk: int
    runs: list[tuple[int, str]]  # (run_pk, steps_digest) of the window's runs, newest first


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored (coordinate, run) row as the walk hands it over: what membership decides from."""

    run_pk: int
    digest: str
    facts: Facts


def walk_depth(window: int) -> int:
    """Rows a first walk reads per coordinate, whatever their trust: the window, the one run past it,
    and as many again for runs a gate failed or a person untrusted (a streak of failures that long is
    read on by a second walk)."""
    return 2 * (window + 1)


def decided(
    coordinate_pk: int, candidates: Sequence[Candidate], *, baseline: Baseline, window: int, limit: int
) -> tuple[WindowRuns, bool]:
    """The coordinate's newest `window` + 1 joining runs (the one past the window says older ones exist),
    and whether the walk of `limit` rows was enough to know them: it found them all, reached the oldest
    stored row, or reached a row older than an accepted shift."""
    chosen = list(itertools.islice(joining(candidates, _facts, baseline), window + 1))
    known = len(chosen) > window or len(candidates) < limit or any(c.facts.before_shift for c in candidates)
    return WindowRuns(coordinate_pk, [(c.run_pk, c.digest) for c in chosen]), known


def joining_runs(candidates: Sequence[Candidate], baseline: Baseline) -> list[tuple[int, str]]:
    """Every joining run of a complete walk, newest first."""
    return [(c.run_pk, c.digest) for c in joining(candidates, _facts, baseline)]


def _facts(candidate: Candidate) -> Facts:
    return candidate.facts


def trim(
    windows: Mapping[str, WindowRuns], span: Mapping[str, tuple[str, str]], window: int
) -> tuple[list[str], list[str]]:
    """Cut each coordinate's walk (its newest `window` + 1 qualifying runs) to the window; returns the
    coordinates with qualifying runs beyond it, and those of them whose older runs may hold a set of steps
    no run inside the window does: the lowest and highest digest the coordinate ever stored (`span`) are
    not both the window's one digest."""
    beyond_window = [coordinate for coordinate, w in windows.items() if len(w.runs) > window]
    for coordinate in beyond_window:
        del windows[coordinate].runs[window:]
    uncertain = [
        coordinate
        for coordinate in beyond_window
        if {digest for _, digest in windows[coordinate].runs} != set(span[coordinate])
        or span[coordinate][0] != span[coordinate][1]
    ]
    return beyond_window, uncertain


def short_of_window(
    found: Mapping[str, Window], beyond_window: Iterable[str], irregular: set[str], window: int
) -> dict[frozenset[int] | None, list[str]]:
    """Coordinates that must read on into older runs, grouped by the steps to read there (None: every
    step): those with runs beyond the window where a step came up short, or whose older runs hold other
    steps (`irregular`)."""
    groups: dict[frozenset[int] | None, list[str]] = {}
    for coordinate in beyond_window:
        have = found[coordinate]
        counts = zip(have.steps, have.counts.tolist(), strict=True)
        short = frozenset(step for step, n in counts if n < window)
        if coordinate in irregular or short:
            groups.setdefault(None if coordinate in irregular else short, []).append(coordinate)
    return groups


def chunked_by_pairs(windows: Mapping[str, WindowRuns], limit: int) -> Iterator[list[tuple[str, WindowRuns]]]:
    """The windows in coordinate order, in chunks of at most `limit` (coordinate, run) pairs (or one
    coordinate)."""
    chunk: list[tuple[str, WindowRuns]] = []
    pairs = 0
    for coordinate, window_runs in sorted(windows.items(), key=lambda item: item[1].coordinate_pk):
        if chunk and pairs + len(window_runs.runs) > limit:
            yield chunk
            chunk, pairs = [], 0
        chunk.append((coordinate, window_runs))
        pairs += len(window_runs.runs)
    if chunk:
        yield chunk


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def max_pairs(dialect: str) -> int:
    """Pairs per statement, two parameters each: SQLite before 3.32 allows 999 parameters, later 32,766."""
    if dialect == "sqlite" and sqlite3.sqlite_version_info < (3, 32, 0):
        return 400
    return 10_000


def chunk_points(reads: PointReads, chunk: Sequence[tuple[str, WindowRuns]]) -> dict[str, Window] | None:
    """Per coordinate, the finite values of its window's runs by step, newest first; None when the store
    holds points that no steps digest accounts for (written by something other than gatecfg), which must be
    read step by step.

    800,000 baseline values (40 gates x 1,000 steps x window 20) made as many SQLAlchemy Row objects, and
    grouping them by step cost more than the database did. So the values come as one array (`reads`: one
    column straight from the driver's cursor in primary-key order on SQLite, packed per pair on
    PostgreSQL).
    A first, small query reads the steps of one run per steps digest: runs with one digest hold finite
    values at the same steps (Store.write_run writes a run's points and its digest together, and nothing
    changes them after), so the step lists say which value is which. Where every run of a window has one
    digest, nearly always, the per-step lists are a transposition.
    """
    digest_of = {(w.coordinate_pk, run_pk): digest for _, w in chunk for run_pk, digest in w.runs}
    representative: dict[tuple[int, str], tuple[int, int]] = {}
    for pair, digest in digest_of.items():
        representative.setdefault((pair[0], digest), pair)
    steps_by_run = reads.steps(list(representative.values())) if representative else {}
    steps_of = {key: steps_by_run.get(pair, []) for key, pair in representative.items()}
    pairs = sorted(digest_of)
    lengths = [len(steps_of[(pair[0], digest_of[pair])]) for pair in pairs]
    parts = [reads.values(part) for part in _by_rows(pairs, lengths, reads.per_statement)]
    values = np.concatenate(parts) if parts else np.empty(0)
    if len(values) != sum(lengths):
        return None
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
        found[coordinate] = window_of(by_step)
    return found


def window_of(by_step: Mapping[int, Sequence[float]]) -> Window:
    return Window.from_lists(by_step) or Window.from_runs([], np.empty((0, 0)))


def _by_rows(pairs: Sequence[Pair], rows: Sequence[int], limit: int) -> Iterator[Sequence[Pair]]:
    """Consecutive runs of `pairs` that hold at most `limit` points between them (or one pair)."""
    start, total = 0, 0
    for end, count in enumerate(rows):
        if total and total + count > limit:
            yield pairs[start:end]
            start, total = end, 0
        total += count
    if start < len(pairs):
        yield pairs[start:]


def walked(runs_json: str) -> list[Candidate]:
    """The candidate rows of SQLite's walk of a coordinate's newest runs, newest first: a JSON array of
    [run_pk, steps_digest, created_at, pk, *FACT_COLUMNS, before_shift], whose order an aggregate does not
    promise."""
    rows: list[list[Any]] = sorted(json.loads(runs_json), key=lambda run: (run[2], run[3]), reverse=True)
    return [Candidate(row[0], row[1], Facts.stored(row[4:9], row[9])) for row in rows]
