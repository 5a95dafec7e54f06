"""What `gatecfg db status` and `gatecfg db copy` read and write: a store's inventory (revision, rows,
size) and a copy of every table from one store to another (SQLite <-> PostgreSQL).

A copy reads the source in one read transaction (a consistent snapshot while nightlies keep writing) and
writes the target in one write transaction, a batch of rows at a time; the row counts of every table are
compared before it commits, so a target is either a full copy or left as it was.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gatecfg.errors import StoreError
from gatecfg.store.facts import VERSION_TABLE
from gatecfg.store.rows import PointColumns
from gatecfg.store.tables import metadata, metric_points
from gatecfg.store.writes import Chunk, insert_points

# Rows read and written at a time: bounded memory whatever the store's size.
BATCH_ROWS = 50_000
# Every table, in the order rows are written (a row's references first), metric_points, the bulk of a
# store, last; and the tables whose `pk` a sequence numbers on PostgreSQL (copied with their keys, the
# sequence must follow). From the metadata: a table a migration adds is copied and counted too.
TABLES = tuple(sorted(metadata.sorted_tables, key=lambda table: table is metric_points))
NUMBERED = tuple(t for t in TABLES if "pk" in t.c and t.c.pk.autoincrement is True)


@dataclass(frozen=True)
class Inventory:
    """Rows per table and the store's size in bytes (None where the dialect cannot tell)."""

    revision: str | None
    counts: dict[str, int]
    size: int | None

    @property
    def empty(self) -> bool:
        return not any(self.counts.values())


def inventory(conn: Connection, database: str | None) -> Inventory:
    """Revision, rows per table and size of the store `conn` is connected to (`database`: its SQLite
    file)."""
    revision = None
    if sa.inspect(conn).has_table(VERSION_TABLE):
        revision = conn.execute(
            sa.select(sa.column("version_num")).select_from(sa.table(VERSION_TABLE))
        ).scalar()
    # A database without gatecfg's schema (a new PostgreSQL one) holds no rows of it.
    counts = {
        table.name: 0
        if revision is None
        else int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
        for table in TABLES
    }
    if conn.dialect.name == "postgresql":
        size: int | None = int(
            conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
        )
    elif database and database != ":memory:" and not database.startswith("file:"):
        # The write-ahead log holds pages not yet checkpointed into the file: both are the store.
        files = [Path(database + suffix) for suffix in ("", "-wal")]
        size = sum(f.stat().st_size for f in files if f.is_file())
    else:
        size = None
    return Inventory(revision, counts, size)


def copy_tables(source: Connection, target: Connection, *, replace: bool, where: str) -> dict[str, int]:
    """Every table's rows from `source` into `target` (both at the same schema revision), keys kept;
    returns the rows copied per table. Raises StoreError when the target holds rows and not `replace`
    (then its rows are deleted first, in the target's transaction), or when a count differs after."""
    counts = inventory(source, None).counts
    held = inventory(target, None).counts
    if any(held.values()) and not replace:
        raise StoreError.at(
            where,
            "the target store is not empty (" + _counted(held) + "): nothing was copied",
            hint="copy into an empty store, or pass --replace to delete the target's rows in the same "
            "transaction",
        )
    if any(held.values()):
        for table in reversed(TABLES):
            target.execute(table.delete())
    for table in TABLES[:-1]:  # metric_points, the bulk of a store, through the bulk writer below
        rows = source.execute(sa.select(table).order_by(*table.primary_key.columns)).mappings()
        while batch := rows.fetchmany(BATCH_ROWS):
            target.execute(table.insert(), [dict(row) for row in batch])
    for chunks in _point_chunks(source):
        insert_points(target, chunks)
    if target.dialect.name == "postgresql":
        for table in NUMBERED:
            target.execute(
                sa.text(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'pk'), "
                    f"COALESCE((SELECT max(pk) FROM {table.name}), 0) + 1, false)"
                )
            )
    copied = inventory(target, None).counts
    if copied != counts:
        raise StoreError.at(
            where,
            f"the copy's row counts differ from the source's ({_counted(copied)} against "
            f"{_counted(counts)}): rolled back, nothing was copied",
            hint="is something deleting from the target while it is copied?",
        )
    return counts


def _point_chunks(source: Connection) -> Iterator[list[Chunk]]:
    """metric_points, in key order, as the bulk writer's chunks (a run's points at one coordinate),
    about BATCH_ROWS rows at a time."""
    columns = [metric_points.c[name] for name in ("coordinate_pk", "run_pk", "step", "value", "status")]
    columns += [metric_points.c.ref, metric_points.c.lo, metric_points.c.hi, metric_points.c.sd]
    result = source.execute(sa.select(*columns).order_by(*metric_points.primary_key.columns))
    # The driver's tuples, not a SQLAlchemy Row per row: these columns need no result processing, and
    # at 800,000 rows the Rows cost a quarter of the copy.
    cursor = result.cursor
    if cursor is None:  # only a statement that returns no rows has none
        return
    pending: list[Sequence[Any]] = []
    while batch := cursor.fetchmany(BATCH_ROWS):
        pending += batch
        # A chunk must not be split across batches: keep the last (coordinate, run) for the next one.
        last = (pending[-1][0], pending[-1][1])
        cut = len(pending)
        while cut and (pending[cut - 1][0], pending[cut - 1][1]) == last:
            cut -= 1
        if cut:
            yield _chunks(pending[:cut])
            pending = pending[cut:]
    if pending:
        yield _chunks(pending)


def _chunks(rows: Sequence[Sequence[Any]]) -> list[Chunk]:
    found: list[Chunk] = []
    for (coordinate_pk, run_pk), group in itertools.groupby(rows, key=lambda r: (r[0], r[1])):
        points = list(group)
        found.append(
            (
                int(coordinate_pk),
                int(run_pk),
                PointColumns(
                    steps=[int(p[2]) for p in points],
                    values=[math.nan if p[3] is None else float(p[3]) for p in points],  # NULL is NaN
                    statuses=[p[4] for p in points],
                    refs=[p[5] for p in points],
                    los=[p[6] for p in points],
                    his=[p[7] for p in points],
                    sds=[p[8] for p in points],
                ),
            )
        )
    return found


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {name}" for name, n in counts.items() if n) or "no rows"
