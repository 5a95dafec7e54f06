"""What the store keeps of baselines that follow their metric: the recent runs of a gate as its baseline
sees them, failed values that rejoin it, and accepted shifts (the `shifts` table) with their undo."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gatecfg.membership import Facts
from gatecfg.shifts import Recent, Shift
from gatecfg.store.statements import FACT_COLUMNS, FINITE, NEWEST_FIRST, before_shift
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs, shifts
from gatecfg.store.windowing import chunks


@dataclass(frozen=True)
class ShiftRow:
    """An accepted shift as stored."""

    pk: int
    coordinate: str
    test: str
    metric: str
    series_key: str
    first_run_id: str
    commit: str | None
    direction: str
    size: float | None
    nightlies: int
    accepted_run_id: str
    created_at: datetime
    undone_at: datetime | None
    undo_reason: str | None


def recent(
    conn: Connection, hashes: Sequence[str], *, depth: int, exclude_run_id: str | None
) -> dict[str, list[Recent]]:
    """Per coordinate, its newest `depth` stored runs (whatever their trust), newest first."""
    change = (
        sa.select(
            sa.func.avg((metric_points.c.value - metric_points.c.ref) / sa.func.abs(metric_points.c.ref))
        )
        .where(
            metric_points.c.coordinate_pk == run_coordinates.c.coordinate_pk,
            metric_points.c.run_pk == run_coordinates.c.run_pk,
            metric_points.c.ref != 0,
            FINITE,
        )
        .correlate(run_coordinates)
        .scalar_subquery()
    )
    ranked = (
        sa.select(
            coordinates.c.coordinate,
            runs.c.run_id,
            runs.c.commit_sha,
            runs.c.created_at,
            runs.c.meta,
            *FACT_COLUMNS,
            before_shift(coordinates.c.coordinate).label("before_shift"),
            change.label("change"),
            sa.func.row_number()
            .over(partition_by=run_coordinates.c.coordinate_pk, order_by=NEWEST_FIRST)
            .label("rn"),
        )
        .select_from(
            run_coordinates.join(runs, runs.c.pk == run_coordinates.c.run_pk).join(
                coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk
            )
        )
        .where(coordinates.c.coordinate.in_(sa.bindparam("hashes", expanding=True)))
    )
    if exclude_run_id is not None:
        ranked = ranked.where(runs.c.run_id != exclude_run_id)
    sub = ranked.subquery()
    query = sa.select(sub).where(sub.c.rn <= depth).order_by(sub.c.coordinate, sub.c.rn)
    found: dict[str, list[Recent]] = {}
    for chunk in chunks(sorted(set(hashes))):
        for row in conn.execute(query, {"hashes": list(chunk)}):
            found.setdefault(row.coordinate, []).append(
                Recent.of(
                    run_id=row.run_id,
                    commit=row.commit_sha,
                    created_at=row.created_at,
                    facts=Facts.stored(row[5:10], row.before_shift),
                    change=None if row.change is None else float(row.change),
                    meta=json.loads(row.meta) if row.meta else {},
                )
            )
    return found


def rejoin(conn: Connection, hashes: Sequence[str]) -> int:
    """The failed values of these coordinates that no hand override keeps out rejoin their baselines:
    each gate passed tonight, so the failures before it did not hold (noise, not a level)."""
    if not hashes:
        return 0
    pks = sa.select(coordinates.c.pk).where(coordinates.c.coordinate.in_(list(hashes)))
    return int(
        conn.execute(
            sa.update(run_coordinates)
            .where(
                run_coordinates.c.coordinate_pk.in_(pks),
                run_coordinates.c.gate_trusted.is_(False),
                run_coordinates.c.rejoined.is_(None),
                run_coordinates.c.trust_override.is_(None),
            )
            .values(rejoined="recovered")
        ).rowcount
    )


def rejoin_values(conn: Connection, values: Sequence[tuple[str, str]]) -> None:
    """These (coordinate, run id) failed values rejoin their baselines as `recovered` (an import's replay
    found that a later night of their gate passed, which is when a nightly write lets them rejoin)."""
    for chunk in chunks(sorted(set(values))):
        pairs = (
            sa.select(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk)
            .join(coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk)
            .join(runs, runs.c.pk == run_coordinates.c.run_pk)
            .where(sa.tuple_(coordinates.c.coordinate, runs.c.run_id).in_(list(chunk)))
        )
        conn.execute(
            sa.update(run_coordinates)
            .where(sa.tuple_(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk).in_(pairs))
            .values(rejoined="recovered")
        )


def accept(conn: Connection, shift: Shift, *, series_key: str, test: str, at: datetime) -> int:
    """Record an accepted shift, and let its runs' values (tonight's too, written before) into the
    baseline: from now on the coordinate's baseline starts at the shift's first run. Its pk: a shift
    already recorded as active (another nightly accepted it first) is not recorded again."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(shifts).on_conflict_do_nothing(
        index_elements=["coordinate", "first_run_id"], index_where=shifts.c.undone_at.is_(None)
    )
    pk = conn.execute(
        insert.values(
            coordinate=shift.coordinate,
            series_key=series_key,
            test=test,
            metric=shift.metric,
            first_run_id=shift.first_run_id,
            first_created_at=shift.first_created_at,
            commit_sha=shift.commit,
            direction=shift.direction,
            size=shift.size,
            nightlies=shift.nightlies,
            accepted_run_id=shift.runs[-1],
            created_at=at,
        ).returning(shifts.c.pk)
    ).scalar_one_or_none()
    if pk is None:
        pk = conn.execute(
            sa.select(shifts.c.pk).where(
                shifts.c.coordinate == shift.coordinate,
                shifts.c.first_run_id == shift.first_run_id,
                shifts.c.undone_at.is_(None),
            )
        ).scalar_one()
    coordinate_pk = sa.select(coordinates.c.pk).where(coordinates.c.coordinate == shift.coordinate)
    conn.execute(
        sa.update(run_coordinates)
        .where(
            run_coordinates.c.coordinate_pk.in_(coordinate_pk),
            run_coordinates.c.run_pk.in_(sa.select(runs.c.pk).where(runs.c.run_id.in_(list(shift.runs)))),
            run_coordinates.c.rejoined.is_(None),
        )
        .values(rejoined=f"shift {pk}")
    )
    return int(pk)


def listed(conn: Connection, *, test: str | None, active: bool) -> list[ShiftRow]:
    query = sa.select(shifts).order_by(shifts.c.created_at.desc(), shifts.c.pk.desc())
    if test is not None:
        query = query.where(shifts.c.test == test)
    if active:
        query = query.where(shifts.c.undone_at.is_(None))
    return [
        ShiftRow(
            pk=row.pk,
            coordinate=row.coordinate,
            test=row.test,
            metric=row.metric,
            series_key=row.series_key,
            first_run_id=row.first_run_id,
            commit=row.commit_sha,
            direction=row.direction,
            size=row.size,
            nightlies=row.nightlies,
            accepted_run_id=row.accepted_run_id,
            created_at=row.created_at,
            undone_at=row.undone_at,
            undo_reason=row.undo_reason,
        )
        for row in conn.execute(query)
    ]


def undo(conn: Connection, pk: int, *, at: datetime, reason: str | None) -> bool:
    """Undo an accepted shift: its coordinate's baseline reads the older runs again, and the shift's
    failing runs leave it. False when no active shift has this number."""
    done = conn.execute(
        sa.update(shifts)
        .where(shifts.c.pk == pk, shifts.c.undone_at.is_(None))
        .values(undone_at=at, undo_reason=reason)
    ).rowcount
    if not done:
        return False
    # Kept out as by hand: a later night that passes must not let the shift back in as a recovery.
    conn.execute(
        sa.update(run_coordinates)
        .where(run_coordinates.c.rejoined == f"shift {pk}")
        .values(
            rejoined=None,
            trust_override=False,
            trust_reason=f"shift {pk} undone" + (f": {reason}" if reason else ""),
            trust_changed_at=at,
        )
    )
    return True
