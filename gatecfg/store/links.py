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

from gatecfg.membership import Baseline, Facts, joining
from gatecfg.store.baselines import values_of_runs
from gatecfg.store.statements import ACTIVE_CARRY, FACT_COLUMNS, NEWEST_FIRST, before_shift
from gatecfg.store.tables import carries, coordinates, run_coordinates, runs
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
    finite values of the runs that join its baseline among those stored under the coordinate or any it
    continues, newest first.

    The rows of a whole chain are walked together, newest first, and gatecfg.membership decides which join
    (an accepted shift of the target bounds them all); the points of the newest `window` of those are read
    first, then older ones only for the steps that came up short (or every step, where older runs stored
    steps the window lacks). A run writes one key per series and metric, so a run never appears twice in
    one chain.
    """
    found: dict[tuple[str, int], list[float]] = {}
    for chunk in chunks(sorted(carried), TARGETS_PER_QUERY):
        members = {target: (target, *carried[target]) for target in chunk}
        joined = {
            target: list(joining(rows, lambda row: row[2], baseline))
            for target, rows in _candidates(conn, members, exclude_run_id).items()
        }
        first = {target: [pair for pair, _, _ in rows[:window]] for target, rows in joined.items()}
        have = values_of_runs(conn, first, None, window)
        for target, rows in joined.items():
            if len(rows) <= window:
                continue
            inside = {digest for _, digest, _ in rows[:window]}
            by_step = have.setdefault(target, {})
            irregular = any(digest not in inside for _, digest, _ in rows[window:])
            short = [step for step, values in by_step.items() if len(values) < window]
            if not irregular and not short:
                continue
            older = values_of_runs(
                conn, {target: [pair for pair, _, _ in rows[window:]]}, None if irregular else short, window
            )
            for step, values in older.get(target, {}).items():
                kept = by_step.setdefault(step, [])
                kept.extend(values[: window - len(kept)])
        found.update(
            ((target, step), values) for target, by_step in have.items() for step, values in by_step.items()
        )
    return found


def _candidates(
    conn: Connection, members: Mapping[str, Sequence[str]], exclude_run_id: str | None
) -> dict[str, list[tuple[tuple[int, int], str, Facts]]]:
    """Per target, every stored row of its chain, newest first: ((coordinate_pk, run_pk), steps digest,
    the facts membership decides from)."""
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
            *FACT_COLUMNS,
            before_shift(pairs.c.target),
        )
        .select_from(
            pairs.join(coordinates, coordinates.c.coordinate == pairs.c.member)
            .join(run_coordinates, run_coordinates.c.coordinate_pk == coordinates.c.pk)
            .join(runs, runs.c.pk == run_coordinates.c.run_pk)
        )
        .order_by(pairs.c.target, *NEWEST_FIRST)
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != exclude_run_id)
    found: dict[str, list[tuple[tuple[int, int], str, Facts]]] = {}
    for row in conn.execute(query):
        target, coordinate_pk, run_pk, digest = row[:4]
        found.setdefault(target, []).append(((coordinate_pk, run_pk), digest, Facts.stored(row[4:9], row[9])))
    return found
