"""Retention: `gatecfg prune --keep N` deletes, per coordinate, the values of runs that no baseline of at
most N values can reach any more.

A baseline is the newest `window` trusted finite values at each (coordinate, step) (docs/evaluate.md). So
a run's values at a coordinate may go when, at every step where that run holds a finite value, at least N
newer trusted runs hold one too. Where every run stored the same steps (nearly always) that is "older than the
coordinate's N newest trusted runs"; where steps differ between runs, a step that few runs log keeps its
N newest values. The rule is exact for both baseline policies: a `nightly` baseline counts every run not
untrusted by hand, a superset of the trusted ones, so its window is never older than theirs. Untrusted
runs newer than what is kept stay (trusting one again by hand must find its values). Carried history
reads the newest values of each coordinate it joins, which each coordinate keeps.

What goes is decided per (coordinate, run) pair, never per point: the points of a pair and its
run_coordinates row (whose steps digest says which steps the pair holds) go together, so every pair that
stays is whole. Run rows stay: they are the record of what ran, and a re-import of an old export skips
runs already stored rather than bringing pruned values back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gatecfg.store.reads import spec_of
from gatecfg.store.rows import CoordinateSpec
from gatecfg.store.statements import FINITE, NEWEST_FIRST, TRUSTED
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import chunks


@dataclass(frozen=True)
class Retained:
    """One coordinate's part of a retention plan: the runs whose values stay, and those that go."""

    spec: CoordinateSpec
    coordinate_pk: int
    runs_kept: int
    values_kept: int
    doomed: tuple[int, ...]  # run pks whose values at this coordinate go
    values_doomed: int


def plan(conn: Connection, keep: int) -> list[Retained]:
    """Per stored coordinate, what `prune --keep keep` would delete, coordinates with nothing to delete
    left out. Reads the run_coordinates rows (one per run and coordinate) and the steps of one run per
    steps digest; no point is read otherwise."""
    if keep < 1:
        raise ValueError(f"--keep must be at least 1, got {keep}")
    pairs = (
        sa.select(
            run_coordinates.c.coordinate_pk,
            run_coordinates.c.run_pk,
            run_coordinates.c.steps_digest,
            run_coordinates.c.n_values,
            TRUSTED.is_(True).label("trusted"),
        )
        .join(runs, runs.c.pk == run_coordinates.c.run_pk)
        .order_by(run_coordinates.c.coordinate_pk, *NEWEST_FIRST)
    )
    by_coordinate: dict[int, list[tuple[int, str, int, bool]]] = {}
    for coordinate_pk, run_pk, digest, n_values, trusted in conn.execute(pairs):
        by_coordinate.setdefault(coordinate_pk, []).append((run_pk, digest, n_values, bool(trusted)))
    # Only a coordinate with more than `keep` trusted runs can lose anything.
    candidates = {
        pk: walk for pk, walk in by_coordinate.items() if sum(trusted for *_, trusted in walk) > keep
    }
    steps = _digest_steps(conn, candidates)
    specs = _specs(conn, sorted(candidates))
    found: list[Retained] = []
    for coordinate_pk, walk in sorted(candidates.items()):
        doomed = _doomed(walk, steps, keep, coordinate_pk)
        if not doomed:
            continue
        gone = set(doomed)
        values_doomed = sum(n for run_pk, _, n, _ in walk if run_pk in gone)
        found.append(
            Retained(
                spec=specs[coordinate_pk],
                coordinate_pk=coordinate_pk,
                runs_kept=len(walk) - len(gone),
                values_kept=sum(n for *_, n, _ in walk) - values_doomed,
                doomed=tuple(sorted(gone)),
                values_doomed=values_doomed,
            )
        )
    return found


def delete(conn: Connection, planned: Sequence[Retained]) -> int:
    """Delete the planned pairs' points and run_coordinates rows; returns the number of points deleted."""
    deleted = 0
    for retained in planned:
        for run_pks in chunks(retained.doomed):
            pair = (
                metric_points.c.coordinate_pk == retained.coordinate_pk,
                metric_points.c.run_pk.in_(run_pks),
            )
            deleted += conn.execute(sa.delete(metric_points).where(*pair)).rowcount
            conn.execute(
                sa.delete(run_coordinates).where(
                    run_coordinates.c.coordinate_pk == retained.coordinate_pk,
                    run_coordinates.c.run_pk.in_(run_pks),
                )
            )
    return deleted


def _doomed(
    walk: Sequence[tuple[int, str, int, bool]],
    steps: dict[tuple[int, str], np.ndarray],
    keep: int,
    coordinate_pk: int,
) -> list[int]:
    """The runs (newest first in `walk`) at each of whose steps at least `keep` newer trusted runs hold a
    finite value: one pass, newest first, counting trusted values per step."""
    union = np.unique(np.concatenate([steps[(coordinate_pk, digest)] for _, digest, _, _ in walk]))
    newer = np.zeros(len(union), np.int64)  # trusted values newer than the run at hand, per step
    doomed = []
    for run_pk, digest, _, trusted in walk:
        at = np.searchsorted(union, steps[(coordinate_pk, digest)])
        # A run without a finite value (every step NaN) goes once every step has `keep` newer values.
        if len(union) and newer[at if len(at) else slice(None)].min() >= keep:
            doomed.append(run_pk)
        if trusted:
            newer[at] += 1
    return doomed


def _digest_steps(
    conn: Connection, walks: dict[int, list[tuple[int, str, int, bool]]]
) -> dict[tuple[int, str], np.ndarray]:
    """The finite steps of each (coordinate, steps digest), read from one run that stored it."""
    representative: dict[tuple[int, str], int] = {}
    for coordinate_pk, walk in walks.items():
        for run_pk, digest, _, _ in walk:
            representative.setdefault((coordinate_pk, digest), run_pk)
    found: dict[tuple[int, str], list[int]] = {key: [] for key in representative}
    by_coordinate: dict[int, dict[int, str]] = {}
    for (coordinate_pk, digest), run_pk in representative.items():
        by_coordinate.setdefault(coordinate_pk, {})[run_pk] = digest
    for coordinate_pk, digest_of in by_coordinate.items():
        for run_pks in chunks(sorted(digest_of)):
            query = sa.select(metric_points.c.run_pk, metric_points.c.step).where(
                metric_points.c.coordinate_pk == coordinate_pk, metric_points.c.run_pk.in_(run_pks), FINITE
            )
            for run_pk, step in conn.execute(query):
                found[(coordinate_pk, digest_of[run_pk])].append(step)
    return {key: np.asarray(sorted(values), np.int64) for key, values in found.items()}


def _specs(conn: Connection, pks: Sequence[int]) -> dict[int, CoordinateSpec]:
    found: dict[int, CoordinateSpec] = {}
    for chunk in chunks(pks):
        for row in conn.execute(sa.select(coordinates).where(coordinates.c.pk.in_(chunk))):
            found[row.pk] = spec_of(row)
    return found
