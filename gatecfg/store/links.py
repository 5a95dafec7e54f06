"""Carried history: a coordinate that continues another's history after a constraint-only re-key.

A carry links a new coordinate to the old one it replaces (`gatecfg carry`). The new coordinate's baselines
then read the old coordinate's values as well, under the same window and trust rules, and a carry of a
carry reads the whole chain. Undoing a carry keeps its row with the time it was undone, so `gatecfg
history` can tell what happened; only active rows count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Row

from gatecfg.membership import Baseline
from gatecfg.store.baselines import beyond_window, points_of
from gatecfg.store.statements import ACTIVE_CARRY, NEWEST_FIRST, qualifies
from gatecfg.store.tables import carries, coordinates, metric_points, run_coordinates, runs
from gatecfg.store.windowing import chunks

ACTIVE = ACTIVE_CARRY
# Each target brings itself and its sources as bound literals; a few hundred keep the statement small.
TARGETS_PER_QUERY = 200


@dataclass(frozen=True)
class Carry:
    """`coordinate` (new key) continues the history stored under `from_coordinate` (old key)."""

    coordinate: str
    from_coordinate: str
    series_key: str
    test: str
    metric: str
    steps_key: str
    constraint_key: str
    from_constraint_key: str
    reason: str
    commit: str | None
    base_commit: str | None
    created_at: datetime
    undone_at: datetime | None = None
    undo_reason: str | None = None
    pk: int | None = None

    @property
    def active(self) -> bool:
        return self.undone_at is None


def add(conn: Connection, items: Sequence[Carry]) -> list[bool]:
    """Record each carry; False for one that is already active (a second `carry` changes nothing)."""
    statement = _insert_ignoring_active(conn)
    created: list[bool] = []
    for item in items:
        pk = conn.execute(statement.values(_values(item)).returning(carries.c.pk)).scalar_one_or_none()
        created.append(pk is not None)
    return created


def _insert_ignoring_active(conn: Connection) -> Any:
    # ON CONFLICT on the partial unique index: two people carrying at once record one active row.
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(carries).on_conflict_do_nothing(
        index_elements=["coordinate", "from_coordinate"], index_where=ACTIVE
    )


def _values(item: Carry) -> dict[str, Any]:
    return {
        "coordinate": item.coordinate,
        "from_coordinate": item.from_coordinate,
        "series_key": item.series_key,
        "test": item.test,
        "metric": item.metric,
        "steps_key": item.steps_key,
        "constraint_key": item.constraint_key,
        "from_constraint_key": item.from_constraint_key,
        "reason": item.reason,
        "commit_sha": item.commit,
        "base_commit": item.base_commit,
        "created_at": item.created_at,
    }


def undo(conn: Connection, pairs: Sequence[tuple[str, str]], *, at: datetime, reason: str | None) -> int:
    """Mark the active carries of these (coordinate, from_coordinate) pairs undone; how many were."""
    undone = 0
    for coordinate, from_coordinate in pairs:
        undone += conn.execute(
            sa.update(carries)
            .where(carries.c.coordinate == coordinate, carries.c.from_coordinate == from_coordinate, ACTIVE)
            .values(undone_at=at, undo_reason=reason)
        ).rowcount
    return undone


def listed(
    conn: Connection,
    *,
    test: str | None = None,
    metric: str | None = None,
    into: Sequence[str] | None = None,
    active_only: bool = False,
) -> list[Carry]:
    """Carries, newest first; `into` keeps those whose new coordinate is one of these hashes."""
    query = sa.select(carries).order_by(carries.c.created_at.desc(), carries.c.pk.desc())
    if test is not None:
        query = query.where(carries.c.test == test)
    if metric is not None:
        query = query.where(carries.c.metric == metric)
    if active_only:
        query = query.where(ACTIVE)
    if into is None:
        return [_carry(row) for row in conn.execute(query)]
    found: list[Carry] = []
    for chunk in chunks(sorted(set(into))):
        found += [_carry(row) for row in conn.execute(query.where(carries.c.coordinate.in_(chunk)))]
    return found


def _carry(row: Row[Any]) -> Carry:
    return Carry(
        coordinate=row.coordinate,
        from_coordinate=row.from_coordinate,
        series_key=row.series_key,
        test=row.test,
        metric=row.metric,
        steps_key=row.steps_key,
        constraint_key=row.constraint_key,
        from_constraint_key=row.from_constraint_key,
        reason=row.reason,
        commit=row.commit_sha,
        base_commit=row.base_commit,
        created_at=row.created_at,
        undone_at=row.undone_at,
        undo_reason=row.undo_reason,
        pk=row.pk,
    )


def sources(conn: Connection, hashes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per requested coordinate that continues others, every coordinate it reads, nearest first.

    A carry of a carry reads the whole chain; a cycle (carried there and back) reads each key once.
    Absent from the result: coordinates without an active carry, which is nearly all of them.
    """
    direct: dict[str, list[str]] = {}
    seen = set(hashes)
    frontier = sorted(seen)
    while frontier:
        reached: set[str] = set()
        for chunk in chunks(frontier):
            query = (
                sa.select(carries.c.coordinate, carries.c.from_coordinate)
                .where(carries.c.coordinate.in_(chunk), ACTIVE)
                .order_by(carries.c.created_at.desc(), carries.c.pk.desc())
            )
            for new, old in conn.execute(query):
                direct.setdefault(new, []).append(old)
                if old not in seen:
                    reached.add(old)
        seen |= reached
        frontier = sorted(reached)
    found: dict[str, tuple[str, ...]] = {}
    for target in hashes:
        chain: list[str] = []
        queue = list(direct.get(target, ()))
        visited = {target}
        while queue:
            coordinate = queue.pop(0)
            if coordinate in visited:
                continue
            visited.add(coordinate)
            chain.append(coordinate)
            queue += direct.get(coordinate, ())
        if chain:
            found[target] = tuple(chain)
    return found


def baselines(
    conn: Connection,
    carried: Mapping[str, Sequence[str]],
    *,
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> dict[tuple[str, int], list[float]]:
    """`baselines.baselines` for coordinates that continue others: per (coordinate, step), the newest `window`
    finite values of qualifying runs stored under the coordinate or any it continues, newest first.

    Read the way `baselines.baselines` reads one coordinate, with the runs of a whole chain ranked together:
    the points of the newest `window` runs first, then older runs only for the steps that came up short
    (or every step, where older runs stored steps the window lacks). A run writes one key per series and
    metric, so a run never appears twice in one chain.
    """
    found: dict[tuple[str, int], list[float]] = {}
    for chunk in chunks(sorted(carried), TARGETS_PER_QUERY):
        members = {target: (target, *carried[target]) for target in chunk}
        ranked = _ranked(members, baseline, exclude_run_id)
        query = (
            sa.select(
                ranked.c.target,
                ranked.c.n_runs,
                ranked.c.steps_digest,
                metric_points.c.step,
                metric_points.c.value,
            )
            .select_from(ranked.outerjoin(metric_points, points_of(ranked)))
            .where(ranked.c.rn <= window)
            .order_by(ranked.c.target, ranked.c.rn, metric_points.c.step)
        )
        have: dict[str, dict[int, list[float]]] = {}
        digests: dict[str, set[str]] = {}
        beyond: list[str] = []
        for target, n_runs, digest, step, value in conn.execute(query):
            if target not in have:
                have[target] = {}
                if n_runs > window:
                    beyond.append(target)
            digests.setdefault(target, set()).add(digest)
            if step is not None:
                have[target].setdefault(step, []).append(value)
        if beyond:
            _read_older(
                conn,
                {target: members[target] for target in beyond},
                have,
                digests=digests,
                window=window,
                baseline=baseline,
                exclude_run_id=exclude_run_id,
            )
        found.update(
            ((target, step), values) for target, by_step in have.items() for step, values in by_step.items()
        )
    return found


def _ranked(members: Mapping[str, Sequence[str]], baseline: Baseline, exclude_run_id: str | None) -> sa.CTE:
    """The qualifying runs of each target's chain, newest first (`rn`), with how many there are."""
    pairs = sa.union_all(
        *(
            sa.select(
                sa.literal(target, sa.Text).label("target"), sa.literal(member, sa.Text).label("member")
            )
            for target, chain in members.items()
            for member in chain
        )
    ).cte("members")
    query = (
        sa.select(
            pairs.c.target,
            run_coordinates.c.coordinate_pk,
            run_coordinates.c.run_pk,
            run_coordinates.c.steps_digest,
            sa.func.row_number().over(partition_by=pairs.c.target, order_by=NEWEST_FIRST).label("rn"),
            sa.func.count().over(partition_by=pairs.c.target).label("n_runs"),
        )
        .select_from(
            pairs.join(coordinates, coordinates.c.coordinate == pairs.c.member)
            .join(run_coordinates, run_coordinates.c.coordinate_pk == coordinates.c.pk)
            .join(runs, runs.c.pk == run_coordinates.c.run_pk)
        )
        .where(qualifies(baseline, pairs.c.target))
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != exclude_run_id)
    return query.cte("ranked")


def _read_older(
    conn: Connection,
    members: Mapping[str, Sequence[str]],
    have: dict[str, dict[int, list[float]]],
    *,
    digests: Mapping[str, set[str]],
    window: int,
    baseline: Baseline,
    exclude_run_id: str | None,
) -> None:
    """Fill the short steps of these targets (each with more than `window` runs) from their older runs."""
    ranked = _ranked(members, baseline, exclude_run_id)
    older_digests = sa.select(ranked.c.target, ranked.c.steps_digest).where(ranked.c.rn > window).distinct()
    # Older runs that stored a set of steps no run in the window did may hold steps the window lacks.
    irregular = {target for target, digest in conn.execute(older_digests) if digest not in digests[target]}
    # Targets grouped by the steps to read in their older runs (None: every step), one query per group.
    groups: dict[tuple[int, ...] | None, list[str]] = {}
    for target in members:
        short = tuple(sorted(step for step, values in have[target].items() if len(values) < window))
        if target in irregular or short:
            groups.setdefault(None if target in irregular else short, []).append(target)
    for steps, targets in groups.items():
        for part in [None] if steps is None else chunks(steps):
            query = beyond_window(
                ranked, ranked.c.target, ranked.c.target, window, part, ranked.c.target.in_(targets)
            )
            for target, step, value in conn.execute(query):
                kept = have[target].setdefault(step, [])
                if len(kept) < window:
                    kept.append(value)
