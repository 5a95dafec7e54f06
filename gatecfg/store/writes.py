"""Writes to the history store: a run with all its points, and trust repairs after the fact."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gatecfg.errors import StoreError
from gatecfg.store.engine import chunks
from gatecfg.store.reads import spec_of
from gatecfg.store.rows import CoordinateSpec, RunInfo, StoredPoint
from gatecfg.store.tables import coordinates, metric_points, run_coordinates, runs


def write_runs(
    conn: Connection,
    items: Sequence[tuple[RunInfo, Mapping[CoordinateSpec, Sequence[StoredPoint]]]],
    *,
    where: str,
) -> list[bool]:
    """Insert runs and their points: per run, False, writing nothing for it, when its run id is already
    stored. The coordinates, run coordinates and points of all the runs go in one statement each, so an
    import of 10,000 runs costs a statement per run, not five."""
    for run, points in items:
        for spec in points:
            if (spec.test, spec.series_key) != (run.test, run.series_key):
                raise ValueError(
                    f"coordinate {spec.coordinate} belongs to another series than run {run.run_id!r}"
                )
    # ON CONFLICT rather than a prior SELECT: a concurrent writer of the same run id (a retried CI job)
    # waits for the first to commit and then inserts nothing.
    insert_run = _insert_ignoring(conn, runs, "run_id").returning(runs.c.pk)
    written: list[tuple[int, Mapping[CoordinateSpec, Sequence[StoredPoint]]]] = []
    stored_now: list[bool] = []
    for run, points in items:
        run_pk = conn.execute(insert_run, _run_values(run)).scalar_one_or_none()
        stored_now.append(run_pk is not None)
        if run_pk is not None:
            written.append((run_pk, points))
    # A stable order makes concurrent PostgreSQL writers lock shared coordinate rows alike (no deadlock).
    specs = sorted(
        {
            spec.coordinate: spec for _, points in written for spec, stored in points.items() if stored
        }.values(),
        key=lambda s: s.coordinate,
    )
    if specs:
        coordinate_pks = _coordinate_pks(conn, specs, where=where)
        conn.execute(
            sa.insert(run_coordinates),
            [
                {
                    "coordinate_pk": coordinate_pks[spec.coordinate],
                    "run_pk": run_pk,
                    "n_values": len(stored),
                    "steps_digest": steps_digest(stored),
                }
                for run_pk, points in written
                for spec, stored in points.items()
                if stored
            ],
        )
        _insert_points(
            conn,
            [
                (
                    coordinate_pks[spec.coordinate],
                    run_pk,
                    point.step,
                    None if math.isnan(point.value) else point.value,
                    point.status,
                    point.ref,
                    point.lo,
                    point.hi,
                )
                for run_pk, points in written
                for spec, stored in points.items()
                for point in stored
            ],
        )
    return stored_now


def _insert_points(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    """Bulk insert of metric_points rows given as tuples in the table's column order.

    SQLAlchemy's per-row parameter handling costs twice what the driver does at 40,000 points, and these
    columns need no bind processing, so SQLite gets the compiled INSERT with the tuples as executemany.
    PostgreSQL's executemany still sends a statement per row; one INSERT ... SELECT FROM unnest(arrays)
    with a bound array per column does not.
    """
    if conn.dialect.name == "postgresql":
        columns = [list(column) for column in zip(*rows, strict=True)]
        conn.execute(_pg_points_insert(), dict(zip(metric_points.c.keys(), columns, strict=True)))
        return
    conn.exec_driver_sql(str(sa.insert(metric_points).compile(dialect=conn.dialect)), rows)


def _pg_points_insert() -> sa.Insert:
    arrays = [sa.bindparam(column.key, type_=postgresql.ARRAY(column.type)) for column in metric_points.c]
    source = sa.func.unnest(*arrays).table_valued(*metric_points.c.keys()).render_derived(name="points")
    return sa.insert(metric_points).from_select(metric_points.c.keys(), sa.select(source))


def steps_digest(points: Sequence[StoredPoint]) -> str:
    """Fingerprint of the steps that hold a finite value, the ones a baseline can use."""
    steps = sorted(point.step for point in points if math.isfinite(point.value))
    return hashlib.blake2b(json.dumps(steps).encode(), digest_size=16).hexdigest()


def _run_values(run: RunInfo) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "test": run.test,
        "series_key": run.series_key,
        "labels": json.dumps(dict(run.labels), sort_keys=True, ensure_ascii=False, separators=(",", ":")),
        "commit_sha": run.commit,
        "branch": run.branch,
        "ci_run_id": run.ci_run_id,
        "ci_run_attempt": run.ci_run_attempt,
        "url": run.url,
        "created_at": run.created_at,
        "written_by": run.written_by,
        "write_override": run.write_override,
        "gate_trusted": run.gate_trusted,
    }


def _coordinate_pks(conn: Connection, specs: Sequence[CoordinateSpec], *, where: str) -> dict[str, int]:
    """Get or create each coordinate; safe against concurrent writers creating the same ones."""
    now = datetime.now(UTC)
    conn.execute(
        _insert_ignoring(conn, coordinates, "coordinate"),
        [
            {
                "coordinate": spec.coordinate,
                "series_key": spec.series_key,
                "test": spec.test,
                "metric": spec.metric,
                "steps_key": spec.steps_key,
                "constraint_key": spec.constraint_key,
                "created_at": now,
            }
            for spec in specs
        ],
    )
    given = {spec.coordinate: spec for spec in specs}
    pks: dict[str, int] = {}
    for chunk in chunks(list(given)):
        for row in conn.execute(sa.select(coordinates).where(coordinates.c.coordinate.in_(chunk))):
            existing = spec_of(row)
            if existing != given[row.coordinate]:
                raise StoreError.at(
                    where,
                    f"coordinate {row.coordinate} is stored as {existing} "
                    f"but this run gives it to {given[row.coordinate]}",
                    hint="two coordinate literals hash alike: report this to the gatecfg maintainers",
                )
            pks[row.coordinate] = row.pk
    return pks


def _insert_ignoring(conn: Connection, table: sa.Table, unique_column: str) -> sa.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=[unique_column])
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=[unique_column])


def set_trust(
    conn: Connection, *, trusted: bool, selector: sa.ColumnElement[bool], reason: str | None
) -> tuple[int, int]:
    """Set the trust override of the selected runs: (runs matched, runs whose override changed)."""
    matched = conn.execute(sa.select(sa.func.count()).select_from(runs).where(selector)).scalar_one()
    changed = conn.execute(
        sa.update(runs)
        .where(selector, runs.c.trust_override.is_distinct_from(trusted))
        .values(trust_override=trusted, trust_reason=reason, trust_changed_at=datetime.now(UTC))
    ).rowcount
    return int(matched), changed
