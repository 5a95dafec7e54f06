"""The store's inventory of coordinates: every stored key with its amount of history, and pruning them.

`gatecfg diff --db` counts what a re-key orphans from it; `gatecfg prune --orphaned` lists and deletes
the coordinates no declaration uses any more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gatecfg.errors import StoreError
from gatecfg.store.reads import summary_of
from gatecfg.store.rows import CoordinateSummary
from gatecfg.store.statements import summaries_query
from gatecfg.store.tables import coordinates, metric_points
from gatecfg.store.windowing import chunks


def summaries(
    conn: Connection, *, tests: Sequence[str] | None = None, hashes: Sequence[str] | None = None
) -> list[CoordinateSummary]:
    """Stored coordinates with their amount of history: of these tests, these hashes, or all of them."""
    if tests is None and hashes is None:
        return [summary_of(row) for row in conn.execute(summaries_query())]
    column, wanted = (coordinates.c.test, tests) if tests is not None else (coordinates.c.coordinate, hashes)
    found: list[CoordinateSummary] = []
    for chunk in chunks(sorted(set(wanted or ()))):
        found += [summary_of(row) for row in conn.execute(summaries_query().where(column.in_(chunk)))]
    return found


def delete(conn: Connection, listed: Mapping[str, int], *, where: str) -> int:
    """Delete these coordinates with all their values, if each still holds the values it was listed with.

    `listed` maps each coordinate hash to its number of values when the user saw the list. A coordinate
    that has gained values since was written by a run that still declares it: nothing is deleted then.
    Returns the number of values deleted.
    """
    hashes = sorted(listed)
    pks: dict[str, int] = {}
    for chunk in chunks(hashes):
        query = sa.select(coordinates.c.coordinate, coordinates.c.pk).where(
            coordinates.c.coordinate.in_(chunk)
        )
        if conn.dialect.name == "postgresql":
            # Held to the commit: a run writing one of these now waits, then fails cleanly rather than
            # leaving values under a coordinate that is gone.
            query = query.with_for_update()
        pks.update((coordinate, pk) for coordinate, pk in conn.execute(query))
    now = {s.spec.coordinate: s.n_values for s in summaries(conn, hashes=hashes)}
    changed = sorted(h for h in hashes if h not in pks or now.get(h, 0) != listed[h])
    if changed:
        raise StoreError.at(
            where,
            f"{len(changed)} of the listed coordinates changed since they were listed "
            f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}): nothing deleted",
            hint="a run may still write them: run `gatecfg prune --orphaned --dry-run` again, check the list",
        )
    deleted = 0
    for pk_chunk in chunks([pks[h] for h in hashes]):
        points = sa.delete(metric_points).where(metric_points.c.coordinate_pk.in_(pk_chunk))
        deleted += conn.execute(points).rowcount
        # run_coordinates rows go with their coordinate (ON DELETE CASCADE).
        conn.execute(sa.delete(coordinates).where(coordinates.c.pk.in_(pk_chunk)))
    return deleted
