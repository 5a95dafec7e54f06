"""What the store keeps of alerts and of what people decided about them (docs/alerts.md): the open gates
as `gatecfg alerts` groups them, each decision with its audit row, and its exact undo.

A decision acts only through the facts the baseline rule reads (gatecfg/membership.py): `intended` and
`environment` accept the new level as an accepted shift does (a `shifts` row, the episode's values
`rejoined` as `shift N`); `false-alarm` lets the failed values rejoin (`recovered`); `regression` keeps
them out as a hand untrust does, and `hold` keeps each later failing value of the gate out too until a
nightly passes it, which closes the gate's alert. Before changing a row, a decision copies its trust
columns into `alert_prior`, from which the undo restores them. `hold` follows the nightly write
(`Store.write_run`); an import's bulk write, a replay of history, follows no decision.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gatecfg.alerts import Cause, Decided, Kind, Night, OpenGate, Triaged, Verdict
from gatecfg.membership import Facts, standing
from gatecfg.shifts import Shift
from gatecfg.store import follow
from gatecfg.store.rows import PointColumns
from gatecfg.store.statements import FACT_COLUMNS, FINITE, NEWEST_FIRST, before_shift
from gatecfg.store.tables import (
    alert_decisions,
    alert_gates,
    alert_prior,
    coordinates,
    metric_points,
    run_coordinates,
    runs,
    shifts,
)
from gatecfg.store.windowing import chunks

# How far back an episode is read: a gate failing for longer is shown from this many nightlies ago.
DEPTH = 100
# A followed shift stays an open alert, until someone triages it, for this many nightlies of its series.
SHIFTED_WITHIN = 30
TRUST_COLUMNS = ("trust_override", "trust_reason", "trust_changed_at", "rejoined")


@dataclass(frozen=True)
class Snapshot:
    """The open gates and what `alerts.group` needs besides them."""

    gates: list[OpenGate]
    history: dict[str, list[Night]]  # each series' runs, oldest first
    width: dict[str, int]  # gates on each series' newest run
    closed: list[tuple[Decided, int, int]]  # regression decisions a newest run closed: (decision, closed, of)


@dataclass(frozen=True)
class DecisionRow:
    """A decision as stored, with its gates counted."""

    decided: Decided
    cause: Mapping[str, object]
    first_failed_at: datetime
    gates: int
    tests: int
    closed: int
    undone_at: datetime | None
    undone_by: str | None
    undo_reason: str | None


def summary(stored: PointColumns) -> dict[str, object]:
    """What a run_coordinates row keeps of a failed gate for `alerts` (store/writes.py writes it): its
    steps that failed or errored, those that errored, and the mean relative change of its steps against
    their baselines (the change gatecfg/shifts.py reads). NULLs for a gate that passed: a clean night
    pays nothing. `_points` gives the same from the points (benchmarks/alerts.py: reading them was most
    of the time at 1,000 steps; tests/test_alerts.py holds the two equal)."""
    if stored.gate_trusted is not False:
        # Every row of a bulk insert names the same columns: SQLAlchemy reads them from the first row.
        return {"failed_steps": None, "error_steps": None, "change": None}
    statuses = np.asarray(stored.statuses)
    values = np.asarray(stored.values, dtype=float)
    refs = np.asarray([np.nan if r is None else r for r in stored.refs], dtype=float)
    usable = np.isfinite(values) & np.isfinite(refs) & (refs != 0)
    change = float(np.mean((values[usable] - refs[usable]) / np.abs(refs[usable]))) if usable.any() else None
    return {
        "failed_steps": int(np.isin(statuses, ("fail", "error")).sum()),
        "error_steps": int((statuses == "error").sum()),
        "change": change,
    }


def snapshot(conn: Connection, *, test: str | None) -> Snapshot:
    query = sa.select(
        runs.c.pk,
        runs.c.run_id,
        runs.c.series_key,
        runs.c.test,
        runs.c.commit_sha,
        runs.c.created_at,
        runs.c.meta,
    ).order_by(runs.c.series_key, runs.c.created_at, runs.c.pk)
    if test is not None:
        query = query.where(runs.c.test == test)
    nights: dict[int, Night] = {}
    history: dict[str, list[Night]] = {}
    pks: dict[str, list[int]] = {}
    for pk, run_id, series, run_test, commit, at, meta in conn.execute(query):
        night = Night(run_id, series, run_test, commit, at, json.loads(meta) if meta else {})
        nights[pk] = night
        history.setdefault(series, []).append(night)
        pks.setdefault(series, []).append(pk)
    position = {pk: (series, i) for series, listed in pks.items() for i, pk in enumerate(listed)}
    newest = [listed[-1] for listed in pks.values()]
    width: dict[str, int] = {}
    failing: dict[int, tuple[str, str, str]] = {}  # coordinate_pk -> (coordinate, metric, series)
    for chunk in chunks(newest):
        counted = (
            sa.select(run_coordinates.c.run_pk, sa.func.count())
            .where(run_coordinates.c.run_pk.in_(list(chunk)))
            .group_by(run_coordinates.c.run_pk)
        )
        for run_pk, n in conn.execute(counted):
            width[nights[run_pk].series_key] = int(n)
        # Only the values their own gate failed can be kept out for a failure: the rule decides which are.
        candidates = _facts().where(
            run_coordinates.c.run_pk.in_(list(chunk)), run_coordinates.c.gate_trusted.is_(False)
        )
        for row in conn.execute(candidates):
            coordinate_pk, run_pk, coordinate, metric, *columns, before = row
            facts = Facts.stored(columns, before)
            if facts.gate_trusted is False and not standing(facts, "trusted").joins:
                failing[coordinate_pk] = (coordinate, metric, nights[run_pk].series_key)
    episodes, points = _episodes(conn, failing, nights)
    gates: list[OpenGate] = []
    ends = {(c, pk) for c, (streak, _) in episodes.items() for pk in (streak[0], streak[-1])}
    points.update(_points(conn, sorted(ends - set(points))))
    for coordinate_pk, (streak, before) in episodes.items():
        coordinate, metric, series = failing[coordinate_pk]
        change, _, _ = points.get((coordinate_pk, streak[0]), (None, 0, 0))
        _, bad, errors = points.get((coordinate_pk, streak[-1]), (None, 0, 0))
        kind: Kind = "missing" if bad == 0 else "error" if errors == bad else "failing"
        first = nights[streak[0]]
        gates.append(
            OpenGate(
                test=first.test,
                series_key=series,
                metric=metric,
                coordinate=coordinate,
                kind=kind,
                first=first,
                before=None if before is None else nights[before],
                newest=nights[streak[-1]],
                runs=tuple(nights[pk].run_id for pk in streak),
                change=change,
                steps=bad,
            )
        )
    gates += _shifted(conn, test, history=history, pks=pks, position=position, nights=nights)
    decided = _covering(conn, [g.coordinate for g in gates])
    gates = [_with_decision(g, decided) for g in gates]
    newest_ids = {nights[pk].run_id for pk in newest}
    return Snapshot(gates, history, width, _closed(conn, newest_ids))


def _facts() -> sa.Select[Any]:
    return sa.select(
        run_coordinates.c.coordinate_pk,
        run_coordinates.c.run_pk,
        coordinates.c.coordinate,
        coordinates.c.metric,
        *FACT_COLUMNS,
        before_shift(coordinates.c.coordinate).label("before_shift"),
    ).select_from(
        run_coordinates.join(runs, runs.c.pk == run_coordinates.c.run_pk).join(
            coordinates, coordinates.c.pk == run_coordinates.c.coordinate_pk
        )
    )


Summary = tuple[float | None, int, int]  # mean relative change, steps failed or in error, steps in error


def _episodes(
    conn: Connection, failing: Mapping[int, object], nights: Mapping[int, Night]
) -> tuple[dict[int, tuple[list[int], int | None]], dict[tuple[int, int], Summary]]:
    """Per failing coordinate: its streak's run pks (oldest first) and the run before the streak; and the
    summary each streak row was written with (rows written before revision 0009 have none)."""
    found: dict[int, tuple[list[int], int | None]] = {}
    summaries: dict[tuple[int, int], Summary] = {}
    ranked = (
        _facts()
        .add_columns(
            run_coordinates.c.failed_steps,
            run_coordinates.c.error_steps,
            run_coordinates.c.change,
            sa.func.row_number()
            .over(partition_by=run_coordinates.c.coordinate_pk, order_by=NEWEST_FIRST)
            .label("rn"),
        )
        .where(run_coordinates.c.coordinate_pk.in_(sa.bindparam("pks", expanding=True)))
        .subquery()
    )
    query = sa.select(ranked).where(ranked.c.rn <= DEPTH).order_by(ranked.c.coordinate_pk, ranked.c.rn)
    walking: dict[int, list[int]] = {}
    ended: set[int] = set()
    for chunk in chunks(sorted(failing)):
        for row in conn.execute(query, {"pks": list(chunk)}):
            pk = row.coordinate_pk
            if pk in ended:
                continue
            facts = Facts.stored(row[4:9], row.before_shift)
            if facts.gate_trusted is False and not standing(facts, "trusted").joins:
                walking.setdefault(pk, []).append(row.run_pk)
                if row.failed_steps is not None:
                    summaries[(pk, row.run_pk)] = (row.change, row.failed_steps, row.error_steps or 0)
                continue
            ended.add(pk)
            found[pk] = (walking.pop(pk, [])[::-1], row.run_pk)
    for pk, streak in walking.items():  # failing as far back as read
        found[pk] = (streak[::-1], None)
    return {pk: v for pk, v in found.items() if v[0] and v[0][-1] in nights}, summaries


def _points(conn: Connection, pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Summary]:
    """Per (coordinate_pk, run_pk) written before revision 0009: its summary (`summary`) from its points."""
    ref = metric_points.c.ref
    relative = sa.case((sa.and_(ref != 0, FINITE), (metric_points.c.value - ref) / sa.func.abs(ref)))
    bad = sa.func.sum(sa.case((metric_points.c.status.in_(["fail", "error"]), 1), else_=0))
    errors = sa.func.sum(sa.case((metric_points.c.status == "error", 1), else_=0))
    found: dict[tuple[int, int], tuple[float | None, int, int]] = {}
    wanted = set(pairs)
    for chunk in chunks(sorted(wanted)):
        # Two IN lists rather than a tuple IN, which SQLite answers by scanning every point: a coordinate
        # holds only its own series' runs, so the cross product adds few pairs, dropped below.
        query = (
            sa.select(
                metric_points.c.coordinate_pk, metric_points.c.run_pk, sa.func.avg(relative), bad, errors
            )
            .where(
                metric_points.c.coordinate_pk.in_(sorted({c for c, _ in chunk})),
                metric_points.c.run_pk.in_(sorted({r for _, r in chunk})),
            )
            .group_by(metric_points.c.coordinate_pk, metric_points.c.run_pk)
        )
        for c, r, change, n_bad, n_errors in conn.execute(query):
            if (c, r) in wanted:
                found[(c, r)] = (
                    None if change is None else float(change),
                    int(n_bad or 0),
                    int(n_errors or 0),
                )
    return found


def _shifted(
    conn: Connection,
    test: str | None,
    *,
    history: Mapping[str, Sequence[Night]],
    pks: Mapping[str, Sequence[int]],
    position: Mapping[int, tuple[str, int]],
    nights: Mapping[int, Night],
) -> list[OpenGate]:
    """Shifts evaluate followed in the newest SHIFTED_WITHIN nightlies of their series that no active
    decision covers: a person should say whether the new level is right."""
    covered = (
        sa.select(alert_gates.c.shift_pk)
        .join(alert_decisions)
        .where(alert_decisions.c.undone_at.is_(None), alert_gates.c.shift_pk.is_not(None))
    )
    query = sa.select(shifts).where(shifts.c.undone_at.is_(None), shifts.c.pk.not_in(covered))
    if test is not None:
        query = query.where(shifts.c.test == test)
    by_id = {n.run_id: pk for pk, n in nights.items()}
    found = []
    for row in conn.execute(query):
        first_pk, accepted_pk = by_id.get(row.first_run_id), by_id.get(row.accepted_run_id)
        if first_pk is None or accepted_pk is None:
            continue
        series, at = position[accepted_pk]
        listed = pks[series]
        if len(listed) - at > SHIFTED_WITHIN:
            continue
        start = position[first_pk][1]
        found.append(
            OpenGate(
                test=row.test,
                series_key=series,
                metric=row.metric,
                coordinate=row.coordinate,
                kind="shifted",
                first=nights[first_pk],
                before=history[series][start - 1] if start > 0 else None,
                newest=history[series][-1],
                runs=tuple(nights[pk].run_id for pk in listed[start : at + 1]),
                change=row.size,
                steps=0,
                shift_pk=row.pk,
            )
        )
    return found


def _decided(row: sa.Row[tuple[object, ...]]) -> Decided:
    return Decided(
        pk=int(row.pk),
        alert=str(row.alert),
        verdict=row.verdict,
        reason=str(row.reason),
        link=row.link,
        decided_by=str(row.decided_by),
        decided_at=row.decided_at,
    )


def _covering(conn: Connection, hashes: Sequence[str]) -> dict[tuple[str, str], Decided]:
    """The active decisions by the (coordinate, first run) of the episodes they cover."""
    found: dict[tuple[str, str], Decided] = {}
    for chunk in chunks(sorted(set(hashes))):
        query = (
            sa.select(alert_decisions, alert_gates.c.coordinate, alert_gates.c.first_run_id)
            .join(alert_gates, alert_gates.c.decision_pk == alert_decisions.c.pk)
            .where(alert_decisions.c.undone_at.is_(None), alert_gates.c.coordinate.in_(list(chunk)))
        )
        for row in conn.execute(query):
            found[(row.coordinate, row.first_run_id)] = _decided(row)
    return found


def _with_decision(gate: OpenGate, decided: Mapping[tuple[str, str], Decided]) -> OpenGate:
    found = decided.get((gate.coordinate, gate.first.run_id))
    if found is None:
        return gate
    return dataclasses.replace(gate, decision=found)


def _closed(conn: Connection, newest: set[str]) -> list[tuple[Decided, int, int]]:
    """Regression decisions that a series' newest run closed, gate by gate: (decision, closed, gates)."""
    query = (
        sa.select(
            alert_decisions,
            sa.func.count().label("gates"),
            sa.func.count(alert_gates.c.closed_run_id).label("closed"),
        )
        .join(alert_gates, alert_gates.c.decision_pk == alert_decisions.c.pk)
        .where(alert_decisions.c.undone_at.is_(None), alert_decisions.c.verdict == "regression")
        .group_by(*alert_decisions.c)
    )
    closing = sa.select(alert_gates.c.decision_pk).where(alert_gates.c.closed_run_id.in_(sorted(newest)))
    return [
        (_decided(row), int(row.closed), int(row.gates))
        for row in conn.execute(query.where(alert_decisions.c.pk.in_(closing)))
    ]


# Decisions.


def decide(
    conn: Connection,
    *,
    alert: str,
    cause: Cause,
    verdict: Verdict,
    reason: str,
    link: str | None,
    who: str,
    at: datetime,
    gates: Sequence[OpenGate],
) -> int:
    """Record one decision about the gates of an alert and act on them; the decision's number."""
    pk = int(
        conn.execute(
            sa.insert(alert_decisions)
            .values(
                alert=alert,
                verdict=verdict,
                reason=reason,
                link=link,
                decided_by=who,
                decided_at=at,
                cause=json.dumps(cause.as_json(), sort_keys=True),
                first_failed_at=min(g.first.created_at for g in gates),
            )
            .returning(alert_decisions.c.pk)
        ).scalar_one()
    )
    for gate in gates:
        rows = _rows(conn, gate.coordinate, gate.runs)
        _keep_prior(conn, pk, rows)
        shift_pk = _act(conn, pk, verdict=verdict, reason=reason, gate=gate, rows=rows, at=at)
        conn.execute(
            sa.insert(alert_gates).values(
                decision_pk=pk,
                coordinate=gate.coordinate,
                test=gate.test,
                metric=gate.metric,
                kind=gate.kind,
                first_run_id=gate.first.run_id,
                first_failed_at=gate.first.created_at,
                shift_pk=shift_pk,
            )
        )
    return pk


def _rows(conn: Connection, coordinate: str, run_ids: Sequence[str]) -> sa.ColumnElement[bool]:
    """The run_coordinates rows of one coordinate's episode."""
    return sa.and_(
        run_coordinates.c.coordinate_pk.in_(
            sa.select(coordinates.c.pk).where(coordinates.c.coordinate == coordinate)
        ),
        run_coordinates.c.run_pk.in_(sa.select(runs.c.pk).where(runs.c.run_id.in_(list(run_ids)))),
    )


def _keep_prior(conn: Connection, pk: int, rows: sa.ColumnElement[bool]) -> None:
    columns = [run_coordinates.c[name] for name in TRUST_COLUMNS]
    already = sa.select(alert_prior.c.coordinate_pk, alert_prior.c.run_pk).where(
        alert_prior.c.decision_pk == pk
    )
    conn.execute(
        sa.insert(alert_prior).from_select(
            ["decision_pk", "coordinate_pk", "run_pk", *TRUST_COLUMNS],
            sa.select(
                sa.literal(pk), run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk, *columns
            ).where(
                rows, sa.tuple_(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk).not_in(already)
            ),
        )
    )


def _act(
    conn: Connection,
    pk: int,
    *,
    verdict: Verdict,
    reason: str,
    gate: OpenGate,
    rows: sa.ColumnElement[bool],
    at: datetime,
) -> int | None:
    """Change the episode's rows as the verdict says; the shift the decision accepted or undid."""
    if verdict in ("intended", "environment"):
        if gate.kind == "shifted":
            return None  # evaluate followed the new level already: the decision only records it is right
        active = sa.select(shifts.c.pk).where(
            shifts.c.coordinate == gate.coordinate,
            shifts.c.first_run_id == gate.first.run_id,
            shifts.c.undone_at.is_(None),
        )
        if conn.execute(active).first() is not None:
            return None
        shift = Shift(
            metric=gate.metric,
            coordinate=gate.coordinate,
            first_run_id=gate.first.run_id,
            first_created_at=gate.first.created_at,
            commit=gate.first.commit,
            direction="down" if gate.direction == "down" else "up",
            size=gate.change or 0.0,
            nightlies=len(gate.runs),
            accepted=True,
            accept_after=None,
            runs=gate.runs,
        )
        return follow.accept(conn, shift, series_key=gate.series_key, test=gate.test, at=at)
    undone = None
    if gate.kind == "shifted" and gate.shift_pk is not None:
        conn.execute(
            sa.update(shifts)
            .where(shifts.c.pk == gate.shift_pk)
            .values(undone_at=at, undo_reason=f"alert decision {pk}: {verdict}")
        )
        undone = gate.shift_pk
    if verdict == "false-alarm":
        conn.execute(sa.update(run_coordinates).where(rows).values(rejoined="recovered"))
    else:
        conn.execute(sa.update(run_coordinates).where(rows).values(**_held(pk, reason, at)))
    return undone


def _held(pk: int, reason: str, at: datetime) -> dict[str, object]:
    return {
        "trust_override": False,
        "trust_reason": f"regression (alert decision {pk}): {reason}",
        "trust_changed_at": at,
        "rejoined": None,
    }


def hold(conn: Connection, run_id: str, at: datetime) -> None:
    """After a nightly write: each gate of an open `regression` decision that failed tonight stays out of
    its baseline (so that no shift follows it), and each that passed closes."""
    run_pk = sa.select(runs.c.pk).where(runs.c.run_id == run_id).scalar_subquery()
    query = (
        sa.select(
            alert_gates.c.decision_pk,
            alert_gates.c.coordinate,
            run_coordinates.c.coordinate_pk,
            run_coordinates.c.gate_trusted,
            alert_decisions.c.reason,
        )
        .join(alert_decisions, alert_decisions.c.pk == alert_gates.c.decision_pk)
        .join(coordinates, coordinates.c.coordinate == alert_gates.c.coordinate)
        .join(run_coordinates, run_coordinates.c.coordinate_pk == coordinates.c.pk)
        .where(
            alert_decisions.c.undone_at.is_(None),
            alert_decisions.c.verdict == "regression",
            alert_gates.c.closed_run_id.is_(None),
            run_coordinates.c.run_pk == run_pk,
        )
    )
    for decision_pk, coordinate, coordinate_pk, passed, reason in conn.execute(query).all():
        if passed is False:
            row = sa.and_(
                run_coordinates.c.coordinate_pk == coordinate_pk, run_coordinates.c.run_pk == run_pk
            )
            _keep_prior(conn, decision_pk, row)
            conn.execute(sa.update(run_coordinates).where(row).values(**_held(decision_pk, reason, at)))
        elif passed is True:
            conn.execute(
                sa.update(alert_gates)
                .where(alert_gates.c.decision_pk == decision_pk, alert_gates.c.coordinate == coordinate)
                .values(closed_run_id=run_id, closed_at=at)
            )


def undo(conn: Connection, pk: int, *, who: str, at: datetime, reason: str | None) -> bool:
    """Undo an active decision: every row it changed holds again what it held before, the shifts it
    accepted are undone and those it undid are active again. False when no active decision has `pk`."""
    done = conn.execute(
        sa.update(alert_decisions)
        .where(alert_decisions.c.pk == pk, alert_decisions.c.undone_at.is_(None))
        .values(undone_at=at, undone_by=who, undo_reason=reason)
    ).rowcount
    if not done:
        return False
    prior = conn.execute(sa.select(alert_prior).where(alert_prior.c.decision_pk == pk)).all()
    if prior:
        conn.execute(
            sa.update(run_coordinates)
            .where(
                run_coordinates.c.coordinate_pk == sa.bindparam("c_pk"),
                run_coordinates.c.run_pk == sa.bindparam("r_pk"),
            )
            .values({name: sa.bindparam(f"p_{name}") for name in TRUST_COLUMNS}),
            [
                {
                    "c_pk": p.coordinate_pk,
                    "r_pk": p.run_pk,
                    **{f"p_{n}": getattr(p, n) for n in TRUST_COLUMNS},
                }
                for p in prior
            ],
        )
    for kind, shift_pk in conn.execute(
        sa.select(alert_gates.c.kind, alert_gates.c.shift_pk).where(
            alert_gates.c.decision_pk == pk, alert_gates.c.shift_pk.is_not(None)
        )
    ):
        values = (
            {"undone_at": None, "undo_reason": None}
            if kind == "shifted"
            else {"undone_at": at, "undo_reason": f"alert decision {pk} undone"}
        )
        conn.execute(sa.update(shifts).where(shifts.c.pk == shift_pk).values(**values))
    return True


def listed(conn: Connection, *, everything: bool) -> list[DecisionRow]:
    """Decisions, newest first (`everything`: undone ones too)."""
    query = (
        sa.select(
            alert_decisions,
            sa.func.count().label("gates"),
            sa.func.count(sa.distinct(alert_gates.c.test)).label("tests"),
            sa.func.count(alert_gates.c.closed_run_id).label("closed"),
        )
        .join(alert_gates, alert_gates.c.decision_pk == alert_decisions.c.pk)
        .group_by(*alert_decisions.c)
        .order_by(alert_decisions.c.decided_at.desc(), alert_decisions.c.pk.desc())
    )
    if not everything:
        query = query.where(alert_decisions.c.undone_at.is_(None))
    return [
        DecisionRow(
            decided=_decided(row),
            cause=json.loads(row.cause),
            first_failed_at=row.first_failed_at,
            gates=int(row.gates),
            tests=int(row.tests),
            closed=int(row.closed),
            undone_at=row.undone_at,
            undone_by=row.undone_by,
            undo_reason=row.undo_reason,
        )
        for row in conn.execute(query)
    ]


def triaged(conn: Connection, *, test: str | None) -> list[Triaged]:
    """Every gate of every active decision, for `alerts --stats`."""
    query = (
        sa.select(
            alert_gates.c.test,
            alert_gates.c.metric,
            alert_decisions.c.verdict,
            alert_gates.c.first_failed_at,
            alert_decisions.c.decided_at,
            alert_gates.c.closed_run_id,
            alert_gates.c.decision_pk,
        )
        .join(alert_decisions, alert_decisions.c.pk == alert_gates.c.decision_pk)
        .where(alert_decisions.c.undone_at.is_(None))
    )
    if test is not None:
        query = query.where(alert_gates.c.test == test)
    return [
        Triaged(
            test=t, metric=m, verdict=v, first_failed_at=f, decided_at=d, closed=c is not None, decision=pk
        )
        for t, m, v, f, d, c, pk in conn.execute(query)
    ]
