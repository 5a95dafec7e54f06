"""The read statements of evaluate and regimes, defined once, as SQLAlchemy expressions with named
parameters; and their SQLite text for the direct reader.

`Store` executes these statements through SQLAlchemy (store/baselines.py, store/reads.py, store/store.py).
`DirectStore` (store/direct.py) runs the very same statements on a SQLite file through sqlite3, as the
SQLite text SQLAlchemy compiles them to: that text is generated into store/sqlite_reads.py by

    python -m gatecfg.store.statements

and committed, since the direct reader exists to keep SQLAlchemy out of a CI job's process (its import was
a fifth of `gatecfg evaluate`'s CPU at 8M stored values), so it may not compile anything at run time.
tests/test_direct_reads.py fails when the generated file is stale. Each statement is built by a function
of the values it reads with; the generator builds it with stand-in values, which only choose the variant
(trusted or nightly baseline, a run excluded or not, ...): every value is a named parameter, supplied when
the statement runs.
"""

from __future__ import annotations

import argparse
import pprint
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from gatecfg.membership import Baseline
from gatecfg.store.tables import carries, coordinates, metric_points, run_coordinates, runs, shifts

# Effective trust of a run: an explicit trust/untrust wins over the verdict the run got when it was written.
TRUSTED = sa.func.coalesce(runs.c.trust_override, runs.c.gate_trusted)
NEWEST_FIRST = (runs.c.created_at.desc(), runs.c.pk.desc())
# Excludes NULL (NaN) and infinities, which no band can be built from.
FINITE = metric_points.c.value.between(-sys.float_info.max, sys.float_info.max)
ACTIVE_CARRY = carries.c.undone_at.is_(None)


# What gatecfg.membership reads of a candidate (coordinate, run) row to decide whether its values join the
# baseline: the store hands these over and decides nothing (`Facts.stored` reads them, in this order).
FACT_COLUMNS = (
    run_coordinates.c.gate_trusted,
    runs.c.gate_trusted,
    run_coordinates.c.trust_override,
    runs.c.trust_override,
    run_coordinates.c.rejoined,
)


def before_shift(coordinate: sa.ColumnElement[str]) -> sa.Exists:
    """Whether the run is older than the first run of an accepted shift of `coordinate` (a fact the
    baseline rule reads: `gatecfg.membership.Facts.before_shift`)."""
    return (
        sa.select(shifts.c.pk)
        .where(
            shifts.c.coordinate == coordinate,
            shifts.c.undone_at.is_(None),
            shifts.c.first_created_at > runs.c.created_at,
        )
        .correlate_except(shifts)
        .exists()
    )


def run_qualifies(baseline: Baseline) -> sa.ColumnElement[bool]:
    """Whole runs whose trust lets them stand for a series' baseline (the newest such run is what a
    failing night's report compares its metadata with): a run no gate kept out, or trusted by hand; for
    `nightly` every run not untrusted by hand."""
    trust = TRUSTED if baseline == "trusted" else sa.func.coalesce(runs.c.trust_override, sa.true())
    return trust.is_(True)


def newest_runs(exclude_run_id: str | None) -> sa.Select[Any]:
    """Correlated to `coordinates`: the coordinate's newest `limit` stored runs (whatever their trust),
    newest first, with the facts gatecfg.membership decides from, walked on the runs (series_key,
    created_at) index (a run's coordinates share its series key)."""
    query = (
        sa.select(
            run_coordinates.c.run_pk,
            run_coordinates.c.steps_digest,
            runs.c.created_at,
            runs.c.pk,
            *FACT_COLUMNS,
            before_shift(coordinates.c.coordinate),
        )
        .select_from(
            runs.join(
                run_coordinates,
                sa.and_(
                    run_coordinates.c.run_pk == runs.c.pk,
                    run_coordinates.c.coordinate_pk == coordinates.c.pk,
                ),
            )
        )
        .where(runs.c.series_key == coordinates.c.series_key)
        .order_by(*NEWEST_FIRST)
        .limit(sa.bindparam("limit"))
        .correlate(coordinates)
    )
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != sa.bindparam("exclude_run_id", exclude_run_id))
    return query


def digest_span() -> tuple[sa.ScalarSelect[Any], sa.ScalarSelect[Any]]:
    """Correlated to `coordinates`: the lowest and highest steps digest any run of it stored, two seeks on
    the (coordinate_pk, steps_digest) index."""
    digests = sa.select(run_coordinates.c.steps_digest).where(
        run_coordinates.c.coordinate_pk == coordinates.c.pk
    )
    lowest = digests.with_only_columns(sa.func.min(run_coordinates.c.steps_digest)).scalar_subquery()
    highest = digests.with_only_columns(sa.func.max(run_coordinates.c.steps_digest)).scalar_subquery()
    return lowest, highest


def sqlite_walk(hashes: Sequence[str], exclude_run_id: str | None) -> sa.Select[Any]:
    """(coordinate, pk, newest runs as one JSON array, lowest digest, highest digest) per coordinate.

    SQLite has no LATERAL: a correlated subquery per coordinate walks the index and hands its runs back as
    one JSON array (created_at and pk say their order; an aggregate's input order is not promised)."""
    newest = newest_runs(exclude_run_id).subquery("newest")
    runs_json = sa.select(
        sa.func.json_group_array(sa.func.json_array(*newest.c), type_=sa.String)
    ).scalar_subquery()
    lowest, highest = digest_span()
    return (
        sa.select(coordinates.c.coordinate, coordinates.c.pk, runs_json, lowest, highest)
        .where(coordinates.c.coordinate.in_(sa.bindparam("hashes", list(hashes), expanding=True)))
        .order_by(coordinates.c.pk)
    )


def sqlite_points(
    columns: Sequence[sa.ColumnElement[Any]], pairs: Sequence[tuple[int, int]]
) -> sa.Select[Any]:
    """The finite points of these (coordinate_pk, run_pk) pairs in primary-key order. The coordinate list
    lets the primary key of run_coordinates seek; the pairs pick the runs."""
    return (
        sa.select(*columns)
        .select_from(
            run_coordinates.join(
                metric_points,
                sa.and_(
                    metric_points.c.coordinate_pk == run_coordinates.c.coordinate_pk,
                    metric_points.c.run_pk == run_coordinates.c.run_pk,
                ),
            )
        )
        .where(
            run_coordinates.c.coordinate_pk.in_(
                sa.bindparam("coordinate_pks", sorted({pk for pk, _ in pairs}), expanding=True)
            ),
            sa.tuple_(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk).in_(
                sa.bindparam("pairs", list(pairs), expanding=True)
            ),
            FINITE,
        )
        .order_by(run_coordinates.c.coordinate_pk, run_coordinates.c.run_pk, metric_points.c.step)
    )


def packed_points(*, steps: bool, values: bool, some_steps: bool) -> sa.Select[Any]:
    """PostgreSQL: per (coordinate_pk, run_pk) pair of the two array parameters, in their order, the pair
    and its finite points' `steps` (int4send) and `values` (float8send), each packed in step order into one
    bytea of big-endian numbers (NULL: none); `some_steps` only at the steps of the array `steps`.

    An aggregate inside LATERAL is one index seek per pair on metric_points' primary key whatever the
    statistics say: PostgreSQL cannot turn it into a join, so no estimate makes it scan the table (a plain
    join of the pairs, or a LATERAL without the aggregate, which it flattens into one, became a parallel
    scan of every point once the table was analyzed). Packed, a pair is one row of two columns, which the
    driver hands over as bytes for numpy to read: no sort of the points, no tuple per point.
    """
    chosen = (
        sa.func.unnest(
            sa.bindparam("coordinate_pks", type_=postgresql.ARRAY(sa.Integer)),
            sa.bindparam("run_pks", type_=postgresql.ARRAY(sa.Integer)),
        )
        .table_valued("coordinate_pk", "run_pk", with_ordinality="n")
        .render_derived(name="chosen")
    )
    # string_agg(bytes, '' ORDER BY step): the ORDER BY goes with the last argument.
    in_order = postgresql.aggregate_order_by(sa.literal(b"", sa.LargeBinary), metric_points.c.step)
    step_bytes = sa.func.int4send(metric_points.c.step, type_=sa.LargeBinary)
    value_bytes = sa.func.float8send(metric_points.c.value, type_=sa.LargeBinary)
    packed = [
        sa.func.string_agg(sent, in_order, type_=sa.LargeBinary).label(name)
        for wanted, sent, name in ((steps, step_bytes, "steps"), (values, value_bytes, "values"))
        if wanted
    ]
    inner = sa.select(*packed).where(
        metric_points.c.coordinate_pk == chosen.c.coordinate_pk,
        metric_points.c.run_pk == chosen.c.run_pk,
        FINITE,
    )
    if some_steps:
        inner = inner.where(
            metric_points.c.step == sa.func.any(sa.bindparam("steps", type_=postgresql.ARRAY(sa.Integer)))
        )
    lateral = inner.lateral("packed")
    return (
        sa.select(chosen.c.coordinate_pk, chosen.c.run_pk, *lateral.c)
        .select_from(chosen.join(lateral, sa.true()))
        .order_by(chosen.c.n)
    )


STEP_COLUMNS = (metric_points.c.coordinate_pk, metric_points.c.run_pk, metric_points.c.step)
VALUE_COLUMNS = (metric_points.c.value,)


def any_carried(hashes: Sequence[str]) -> sa.Select[Any]:
    """A row when any of these coordinates reads others' history (`gatecfg carry`): the direct reader
    then leaves the baselines to `Store`, which follows the carries (store/links.py)."""
    return (
        sa.select(sa.literal(1))
        .where(carries.c.coordinate.in_(sa.bindparam("hashes", list(hashes), expanding=True)), ACTIVE_CARRY)
        .limit(1)
    )


def has_runs(series_key: str, exclude_run_id: str | None) -> sa.Select[Any]:
    query = sa.select(runs.c.pk).where(runs.c.series_key == sa.bindparam("series_key", series_key))
    if exclude_run_id is not None:
        query = query.where(runs.c.run_id != sa.bindparam("exclude_run_id", exclude_run_id))
    return query.limit(1)


def summaries_query() -> sa.Select[Any]:
    """Stored coordinates with their amount of history, most recently written first; callers add a WHERE."""
    # The values a re-key warning says the old key holds in its baselines: a count over every stored row,
    # so in SQL, spelling gatecfg.membership's precedence for the `trusted` baseline (hand trust of the
    # gate, of the run; a rejoin; the gate's verdict; the run's), shifts aside. tests/test_one_baseline.py
    # holds it equal to the rule.
    joined = sa.func.coalesce(
        run_coordinates.c.trust_override,
        runs.c.trust_override,
        sa.case((run_coordinates.c.rejoined.is_not(None), sa.true())),
        run_coordinates.c.gate_trusted,
        runs.c.gate_trusted,
    )
    trusted_values = sa.case((joined.is_(True), run_coordinates.c.n_values), else_=0)
    last_written = sa.func.max(runs.c.created_at).label("last_written")
    return (
        sa.select(
            coordinates,
            sa.func.coalesce(sa.func.sum(run_coordinates.c.n_values), 0).label("n_values"),
            sa.func.coalesce(sa.func.sum(trusted_values), 0).label("n_trusted_values"),
            sa.func.count(runs.c.pk).label("n_runs"),
            last_written,
        )
        .select_from(
            coordinates.outerjoin(
                run_coordinates, run_coordinates.c.coordinate_pk == coordinates.c.pk
            ).outerjoin(runs, runs.c.pk == run_coordinates.c.run_pk)
        )
        .group_by(coordinates.c.pk)
        .order_by(last_written.desc(), coordinates.c.coordinate)
    )


def keys_of_metric(series_key: str, metric: str) -> sa.Select[Any]:
    """Every stored key of one series and metric with its amount of history (the re-key check)."""
    return summaries_query().where(
        coordinates.c.series_key == sa.bindparam("series_key", series_key),
        coordinates.c.metric == sa.bindparam("metric", metric),
    )


def _of_metric(query: sa.Select[Any], test: str, metric: str, series_key: str | None) -> sa.Select[Any]:
    query = query.where(
        coordinates.c.test == sa.bindparam("test", test),
        coordinates.c.metric == sa.bindparam("metric", metric),
    )
    if series_key is not None:
        query = query.where(coordinates.c.series_key == sa.bindparam("series_key", series_key))
    return query


def history_keys(test: str, metric: str, series_key: str | None) -> sa.Select[Any]:
    """The coordinates a metric's history is stored under."""
    return _of_metric(sa.select(coordinates), test, metric, series_key)


def history_values(
    test: str, metric: str, step: int | None, series_key: str | None, limit: int | None
) -> sa.Select[Any]:
    """One metric's stored values, newest run first, then by key and step (the columns
    `rows.history_row` reads)."""
    query = _of_metric(
        sa.select(
            metric_points.c.coordinate_pk,
            metric_points.c.step,
            metric_points.c.value,
            metric_points.c.status,
            metric_points.c.ref,
            metric_points.c.lo,
            metric_points.c.hi,
            metric_points.c.sd,
            runs.c.run_id,
            runs.c.commit_sha,
            runs.c.branch,
            runs.c.created_at,
            runs.c.gate_trusted,
            runs.c.trust_override,
            # What gatecfg.membership reads to say whether the value is in its gate's baseline.
            run_coordinates.c.gate_trusted,
            run_coordinates.c.trust_override,
            run_coordinates.c.rejoined,
            before_shift(coordinates.c.coordinate),
        ).select_from(
            metric_points.join(coordinates, coordinates.c.pk == metric_points.c.coordinate_pk)
            .join(runs, runs.c.pk == metric_points.c.run_pk)
            .join(
                run_coordinates,
                sa.and_(
                    run_coordinates.c.coordinate_pk == metric_points.c.coordinate_pk,
                    run_coordinates.c.run_pk == metric_points.c.run_pk,
                ),
            )
        ),
        test,
        metric,
        series_key,
    ).order_by(
        *NEWEST_FIRST,
        coordinates.c.steps_key,
        coordinates.c.constraint_key,
        coordinates.c.series_key,
        metric_points.c.step,
    )
    if step is not None:
        query = query.where(metric_points.c.step == sa.bindparam("step", step))
    return query if limit is None else query.limit(sa.bindparam("limit", limit))


def direct_statements() -> dict[str, sa.Select[Any]]:
    """The statements the direct reader runs, by the name it runs them by, each variant built with
    stand-in values. `history` always has a LIMIT there: -1 is SQLite's "no limit"."""
    some, pairs = ["0"], [(0, 0)]
    found = {
        "carried": any_carried(some),
        "has_runs": has_runs("", None),
        "has_runs excluding": has_runs("", ""),
        "keys_of_metric": keys_of_metric("", ""),
        "points steps": sqlite_points(STEP_COLUMNS, pairs),
        "points values": sqlite_points(VALUE_COLUMNS, pairs),
    }
    found["walk"] = sqlite_walk(some, None)
    found["walk excluding"] = sqlite_walk(some, "")
    for series_key, in_series in ((None, ""), ("", " in_series")):
        found[f"history_keys{in_series}"] = history_keys("", "", series_key)
        for step, at_step in ((None, ""), (0, " at_step")):
            found[f"history{at_step}{in_series}"] = history_values("", "", step, series_key, -1)
    return found


# The parameters a caller supplies; every other one is a constant of the statement (FINITE's bounds, the
# OFFSET 0 SQLite compiles with a LIMIT), written into the generated file.
GIVEN = frozenset(
    {"hashes", "limit", "exclude_run_id", "coordinate_pks", "pairs", "series_key", "metric", "test", "step"}
)
GENERATED = Path(__file__).with_name("sqlite_reads.py")


def compiled(
    statement: sa.Select[Any],
) -> tuple[str, tuple[str, ...], dict[str, Any], dict[str, int], tuple[str, ...]]:
    """The statement's SQLite text and what running it needs (`Compiled`)."""
    done = statement.compile(dialect=sqlite.dialect())
    order = tuple(done.positiontup or ())
    constants = {name: done.params[name] for name in order if name not in GIVEN}
    expanding = {
        b.key: len(b.value[0]) if b.value and isinstance(b.value[0], tuple) else 0
        for b in done.binds.values()
        if b.expanding
    }
    return done.string, order, constants, expanding, tuple(statement.selected_columns.keys())


def render() -> str:
    """The text of store/sqlite_reads.py."""
    table = {name: compiled(statement) for name, statement in sorted(direct_statements().items())}
    return HEADER + pprint.pformat(table, width=110, sort_dicts=True) + "\n"


HEADER = '''"""The SQLite text of the read statements in store/statements.py, which store/direct.py runs.

Generated by `python -m gatecfg.store.statements`: do not edit (tests/test_direct_reads.py fails when it is
stale). Per statement: (SQL, parameters in order, the constant ones' values, the expanding ones' tuple
width (0: one value per item), the result's columns).
"""

from __future__ import annotations

from typing import Any

STATEMENTS: dict[str, tuple[str, tuple[str, ...], dict[str, Any], dict[str, int], tuple[str, ...]]] = '''


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gatecfg.store.statements", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if store/sqlite_reads.py is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        stale = GENERATED.read_text(encoding="utf-8") != text
        if stale:
            print(f"{GENERATED} is stale: run python -m gatecfg.store.statements", file=sys.stderr)
        return int(stale)
    GENERATED.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
