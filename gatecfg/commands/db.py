"""`gatecfg db`: apply the history store's migrations (PostgreSQL needs this once per release), show what
a store holds, copy one store into another (SQLite <-> PostgreSQL)."""

from __future__ import annotations

import time

from gatecfg.errors import EXIT_OK
from gatecfg.store import Store
from gatecfg.store.facts import SCHEMA_REVISION


def upgrade(*, db: str) -> int:
    """Says what it did: created the schema, upgraded it from one revision to another, or nothing."""
    with Store.open(db, check_schema=False) as store:
        before = store.revision()
        store.upgrade()
        after = store.revision()
    if before is None:
        print(f"history store {store.url}: created the schema at revision {after}")
    elif before == after:
        print(f"history store {store.url} is already at the current schema (revision {after}): nothing to do")
    else:
        print(f"history store {store.url}: upgraded the schema from revision {before} to {after}")
    return EXIT_OK


def status(*, db: str) -> int:
    # Read as it is: a status must not migrate, nor create, the store it describes.
    with Store.open(db, check_schema=False, exists=True) as store:
        found = store.inventory()
    revision = found.revision or "none (no gatecfg schema: `gatecfg db upgrade` creates it)"
    behind = "" if found.revision in (None, SCHEMA_REVISION) else f" (this gatecfg needs {SCHEMA_REVISION})"
    counts = found.counts
    print(f"history store {store.url}")
    print(f"  schema revision  {revision}{behind}")
    print(f"  runs             {counts['runs']:,}")
    print(f"  values           {counts['metric_points']:,} at {counts['coordinates']:,} coordinate(s)")
    print(f"  carries          {counts['carries']:,}")
    print(f"  size             {_size(found.size)}")
    return EXIT_OK


def copy(*, source: str, target: str, replace: bool) -> int:
    started = time.perf_counter()
    # A SQLite target is created; a PostgreSQL one gets the schema (this is an admin's command, run by a
    # role that may create tables, as `db upgrade` is). Then the rows, in one transaction.
    with Store.open(source) as reader, Store.open(target, check_schema=False) as writer:
        writer.upgrade()
        copied = reader.copy_into(writer, replace=replace)
    shown = ", ".join(f"{n:,} {name}" for name, n in copied.items())
    print(f"copied {reader.url} -> {writer.url} in {time.perf_counter() - started:.1f} s")
    print(f"  {shown}; every table's count checked against the source")
    return EXIT_OK


def _size(size: int | None) -> str:
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"
