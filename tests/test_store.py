"""The history store on SQLite and PostgreSQL: schema, writes, baselines, trust and failures."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import random
import sqlite3
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from helpers import executed_statements, status_names

import gatecfg.store
from gatecfg.errors import EXIT_STORE, StoreError
from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store, StoredPoint
from gatecfg.store import reads as store_reads
from gatecfg.store.facts import SCHEMA_REVISION
from gatecfg.store.tables import metadata
from gatecfg.store.writes import steps_digest

T0 = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
TEST = "tests/e2e/megatron/test_kimi_k3_4layer_ci.py"
SERIES = '{"labels":{},"test":"tests/e2e/megatron/test_kimi_k3_4layer_ci.py"}'
REWARD = CoordinateSpec(
    coordinate="a1b2c3d4e5f6",
    series_key=SERIES,
    test=TEST,
    metric="rollout/raw_reward",
    steps_key='"all"',
    constraint_key='{"abs_floor_down":0.05,"rel_down":0.2}',
)
GRAD_NORM = CoordinateSpec(
    coordinate="0f9e8d7c6b5a",
    series_key=SERIES,
    test=TEST,
    metric="train/grad_norm",
    steps_key='"all"',
    constraint_key='{"abs_floor_down":0.1,"abs_floor_up":0.1,"rel_down":0.8,"rel_up":0.5}',
)


def run_info(
    run_id: str,
    *,
    day: int,
    gate_trusted: bool = True,
    commit: str | None = None,
    ci_run_id: str | None = None,
    test: str = TEST,
    series_key: str = SERIES,
    labels: Mapping[str, str] | None = None,
) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        test=test,
        series_key=series_key,
        labels=labels or {},
        commit=commit,
        branch="main",
        ci_run_id=ci_run_id,
        ci_run_attempt="1",
        url=None,
        created_at=T0 + timedelta(days=day),
        gate_trusted=gate_trusted,
        written_by="gatecfg 0.1.0",
    )


def points(values: Mapping[int, float]) -> list[StoredPoint]:
    return [StoredPoint(step, value, "pass", None, None, None) for step, value in values.items()]


def fetch(url: str, sql: str) -> list[sa.Row[Any]]:
    """Read the store behind the Store's back, as a user with a SQL client would."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql)))
    finally:
        engine.dispose()


def count(url: str, table: str) -> int:
    return int(fetch(url, f"SELECT COUNT(*) FROM {table}")[0][0])


def migrations_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(gatecfg.store.__file__).with_name("migrations")))
    return config


def point_reads() -> contextlib.AbstractContextManager[list[str]]:
    """The statements that read metric_points, the 8-million-row table, while the block runs."""
    return executed_statements(
        lambda statement: (
            statement.lstrip().upper().startswith(("WITH", "SELECT")) and "metric_points" in statement
        )
    )


def write_nightlies(store: Store, values_by_day: Mapping[int, Mapping[int, float]]) -> None:
    for day, values in values_by_day.items():
        assert store.write_run(run_info(f"nightly-{day}", day=day), {REWARD: points(values)})


# --- schema -------------------------------------------------------------------------------------------


def test_first_use_of_a_sqlite_path_creates_the_file_and_migrates_it(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "history.db"

    with Store.open(f"sqlite:///{path}", create=True):
        pass

    with sqlite3.connect(path) as conn:
        revision = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        names = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        }
        journal_mode = conn.execute("PRAGMA journal_mode").fetchone()
    assert revision == [(ScriptDirectory.from_config(migrations_config()).get_current_head(),)]
    assert {"runs", "coordinates", "run_coordinates", "metric_points", "metric_values"} <= names
    assert journal_mode == ("wal",)


def test_the_schema_revision_a_store_is_checked_against_is_the_newest_migration() -> None:
    # Store.open compares with this constant, so that a CI job does not import Alembic to read its head.
    assert ScriptDirectory.from_config(migrations_config()).get_current_head() == SCHEMA_REVISION


@pytest.mark.postgres
def test_postgresql_store_before_upgrade_is_refused_with_the_upgrade_command(postgresql_url: str) -> None:
    with pytest.raises(StoreError) as raised:
        Store.open(postgresql_url)

    problem = raised.value.problems[0]
    assert "has no gatecfg schema yet; this gatecfg needs revision" in problem.message
    assert problem.hint is not None
    assert "gatecfg db upgrade --db postgresql+psycopg://" in problem.hint
    assert count(postgresql_url, "pg_tables WHERE schemaname = 'public'") == 0


def test_migrations_create_exactly_the_table_metadata(store: Store, store_url: str) -> None:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            differences = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_a_store_from_a_newer_gatecfg_is_refused(store: Store, store_url: str) -> None:
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = :newer"), {"newer": "9999"})
    finally:
        engine.dispose()

    with pytest.raises(StoreError, match="schema revision 9999, which this gatecfg does not know"):
        Store.open(store_url)


def test_the_initial_migration_downgrades_to_an_empty_database(store: Store, store_url: str) -> None:
    config = migrations_config()
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "base")
        inspector = sa.inspect(engine)
        left = set(inspector.get_table_names()) | set(inspector.get_view_names())
    finally:
        engine.dispose()
    assert left == {"alembic_version"}


@pytest.mark.parametrize("round_", range(8), ids=lambda r: f"round-{r}")
def test_concurrent_first_opens_of_one_sqlite_file_all_succeed(tmp_path: Path, round_: int) -> None:
    # Several rounds: switching a new file to WAL failed "database is locked" about once in thirty rounds
    # before the pragmas were retried (store/engine.py, _sqlite_pragma).
    url = f"sqlite:///{tmp_path / 'history.db'}"
    results: list[bool | BaseException] = []

    def open_and_write(n: int) -> None:
        try:
            with Store.open(url, create=True) as store:
                results.append(store.write_run(run_info(f"r{n}", day=n), {REWARD: points({0: 1.0})}))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == [True] * 6
    assert count(url, "runs") == 6


# --- writes -------------------------------------------------------------------------------------------


def test_four_points_at_steps_0_to_3_are_four_rows_of_metric_values(store: Store, store_url: str) -> None:
    written = store.write_run(run_info("r1", day=0), {REWARD: points({0: 0.2, 1: 0.4, 2: 0.6, 3: 0.8})})

    rows = fetch(store_url, "SELECT * FROM metric_values ORDER BY step")
    assert written is True
    assert list(rows[0]._mapping) == [
        "run_id",
        "metric",
        "steps_key",
        "constraint_key",
        "step",
        "value",
        "coordinate",
        "trusted",
        "created_at",
    ]
    assert [(r.run_id, r.metric, r.steps_key, r.step, r.value, r.coordinate) for r in rows] == [
        ("r1", "rollout/raw_reward", '"all"', step, value, "a1b2c3d4e5f6")
        for step, value in [(0, 0.2), (1, 0.4), (2, 0.6), (3, 0.8)]
    ]
    assert all(bool(r.trusted) for r in rows)


def test_every_field_of_every_point_round_trips_through_the_bulk_writes(store: Store, store_url: str) -> None:
    # Runs of 257 steps: whole multi-row statements on SQLite and the rows left over; NaN (stored as
    # NULL), infinities, refs and edges with and without None, every status, a value per run and column.
    rng = random.Random(15)
    statuses = ["pass", "fail", "tracked", "cold", "error"]
    specials = [math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, 1.7976931348623157e308, 0.1]

    def number() -> float:
        return rng.choice(specials) if rng.random() < 0.2 else rng.uniform(-1e6, 1e6)

    def maybe() -> float | None:
        return None if rng.random() < 0.3 else number()

    sent = {
        (day, spec.coordinate): [
            StoredPoint(step, number(), rng.choice(statuses), maybe(), maybe(), maybe())
            for step in rng.sample(range(-1, 400), 257)
        ]
        for day in range(3)
        for spec in (REWARD, GRAD_NORM)
    }
    specs = {spec.coordinate: spec for spec in (REWARD, GRAD_NORM)}
    written = store.write_runs(
        (
            run_info(f"r{day}", day=day),
            {
                specs[coordinate]: stored
                if coordinate == REWARD.coordinate
                else PointColumns.of_points(stored)  # both shapes a writer may hand over
                for (at, coordinate), stored in sent.items()
                if at == day
            },
        )
        for day in range(3)
    )

    def key(value: float | None) -> object:
        # NaN is stored as NULL; -0.0 and 0.0 compare alike, their sign is not kept by every store.
        return None if value is None or math.isnan(value) else value

    rows = fetch(
        store_url,
        "SELECT r.run_id, c.coordinate, p.step, p.value, p.status, p.ref, p.lo, p.hi FROM metric_points p "
        "JOIN runs r ON r.pk = p.run_pk JOIN coordinates c ON c.pk = p.coordinate_pk",
    )
    assert written == [True] * 3
    assert sorted(map(tuple, rows), key=repr) == sorted(
        (
            (f"r{day}", coordinate, p.step, key(p.value), p.status, key(p.ref), key(p.lo), key(p.hi))
            for (day, coordinate), stored in sent.items()
            for p in stored
        ),
        key=repr,
    )


def test_writing_a_stored_run_id_again_returns_false_and_adds_nothing(store: Store, store_url: str) -> None:
    store.write_run(run_info("r1", day=0), {REWARD: points({0: 0.2, 1: 0.4, 2: 0.6, 3: 0.8})})

    again = store.write_run(run_info("r1", day=1), {REWARD: points({0: 9.0}), GRAD_NORM: points({0: 1.0})})

    assert again is False
    assert count(store_url, "runs") == 1
    assert count(store_url, "coordinates") == 1
    assert count(store_url, "metric_values") == 4


def test_concurrent_writes_of_one_run_id_store_it_once(store: Store, store_url: str) -> None:
    results: list[bool | BaseException] = []

    def write() -> None:
        try:
            with Store.open(store_url) as other:
                results.append(other.write_run(run_info("retried", day=0), {REWARD: points({0: 1.0})}))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results, key=str) == [False, False, False, True]
    assert count(store_url, "metric_values") == 1


def test_a_failing_point_mid_batch_leaves_no_run_behind(store: Store, store_url: str) -> None:
    duplicate_step = [*points({0: 1.0, 1: 2.0}), StoredPoint(1, 3.0, "pass", None, None, None)]

    with pytest.raises(StoreError) as raised:
        store.write_run(run_info("r1", day=0), {GRAD_NORM: points({0: 1.0}), REWARD: duplicate_step})

    assert "cannot write run 'r1' to the history store" in raised.value.problems[0].message
    assert [count(store_url, table) for table in ("runs", "coordinates", "metric_points")] == [0, 0, 0]
    assert store.write_run(run_info("r1", day=0), {REWARD: points({0: 1.0})}) is True


def test_a_coordinate_hash_stored_with_other_attributes_is_a_collision(store: Store, store_url: str) -> None:
    store.write_run(run_info("r1", day=0), {REWARD: points({0: 1.0})})
    impostor = CoordinateSpec(REWARD.coordinate, SERIES, TEST, "train/ppo_kl", '"all"', "null")

    with pytest.raises(StoreError, match="hash alike"):
        store.write_run(run_info("r2", day=1), {impostor: points({0: 1.0})})

    assert count(store_url, "runs") == 1


def test_a_naive_created_at_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        RunInfo("r1", TEST, SERIES, {}, None, None, None, None, None, datetime(2025, 3, 1), True, "x")


def test_hostile_names_and_labels_round_trip_intact(store: Store, store_url: str) -> None:
    hostile = "'; DROP TABLE runs; --"
    metric = f'eval/"quoted";{hostile}/ünïcødé 🚀'
    labels = {"gpu": 'H100 "SXM"; 80GB', "note": hostile, "ключ": "значение"}
    test = f"tests/e2e/it's;{hostile}.py"
    series = f'{{"labels":{labels},"test":"{test}"}}'
    spec = CoordinateSpec("c0ffee", series, test, metric, '"last"', "null")
    run = run_info(f"run-{hostile}", day=0, test=test, series_key=series, labels=labels, commit=hostile)

    assert store.write_run(run, {spec: [StoredPoint(-1, 0.5, "tracked", None, None, None)]})

    [stored] = store.runs(test=test)
    [row] = store.history(test=test, metric=metric)
    assert stored.run == run
    assert (row.run_id, row.commit, row.coordinate) == (run.run_id, hostile, spec)
    assert [s.spec for s in store.coordinates_for(series, metric)] == [spec]
    assert count(store_url, "runs") == 1


# --- baselines ----------------------------------------------------------------------------------------


def test_baselines_are_the_newest_window_trusted_values_newest_first(store: Store) -> None:
    for day in range(6):
        run = run_info(f"r{day}", day=day, gate_trusted=day != 4)
        store.write_run(run, {REWARD: points({0: float(day), 1: 10.0 + day})})

    found = store.baselines([REWARD.coordinate], window=3)

    assert found == {(REWARD.coordinate, 0): [5.0, 3.0, 2.0], (REWARD.coordinate, 1): [15.0, 13.0, 12.0]}


def test_nightly_baselines_take_gate_untrusted_runs_but_not_explicitly_untrusted(store: Store) -> None:
    for day in range(5):
        store.write_run(
            run_info(f"r{day}", day=day, gate_trusted=day != 3), {REWARD: points({0: float(day)})}
        )
    store.set_trust(trusted=False, run_id="r4", reason="broken node")

    nightly = store.baselines([REWARD.coordinate], window=3, baseline="nightly")
    trusted = store.baselines([REWARD.coordinate], window=3)

    assert nightly == {(REWARD.coordinate, 0): [3.0, 2.0, 1.0]}
    assert trusted == {(REWARD.coordinate, 0): [2.0, 1.0, 0.0]}


def test_a_trusted_override_brings_a_gate_untrusted_run_into_baselines(store: Store) -> None:
    store.write_run(run_info("r0", day=0), {REWARD: points({0: 1.0})})
    store.write_run(run_info("r1", day=1, gate_trusted=False), {REWARD: points({0: 2.0})})

    store.set_trust(trusted=True, run_id="r1", reason="known flake")

    assert store.baselines([REWARD.coordinate], window=5) == {(REWARD.coordinate, 0): [2.0, 1.0]}


def test_a_step_short_in_the_window_is_filled_from_older_runs_exactly(store: Store) -> None:
    write_nightlies(
        store,
        {
            0: {0: 0.0, 1: 0.1, 2: 0.2},
            1: {0: 1.0, 1: 1.1, 2: 1.2},
            2: {0: 2.0, 1: 2.1, 2: 2.2},
            3: {0: 3.0, 1: 3.1, 2: 3.2},
            4: {0: 4.0, 1: 4.1},
            5: {0: 5.0, 1: 5.1},
        },
    )

    with point_reads() as queries:
        found = store.baselines([REWARD.coordinate], window=3)

    assert found == {
        (REWARD.coordinate, 0): [5.0, 4.0, 3.0],
        (REWARD.coordinate, 1): [5.1, 4.1, 3.1],
        (REWARD.coordinate, 2): [3.2, 2.2, 1.2],
    }
    assert len(queries) == 3  # the window's steps and values, then the older runs for the short step


def test_a_baseline_read_in_many_small_statements_equals_the_read_in_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_nightlies(
        store,
        {
            0: {0: 0.0, 1: 0.1, 2: 0.2},
            1: {0: 1.0, 2: 1.2},
            2: {0: 2.0, 1: math.nan, 2: 2.2},
            3: {0: 3.0, 1: 3.1, 2: 3.2},
            4: {1: 4.1},
        },
    )
    whole = store.baselines([REWARD.coordinate], window=3)
    with point_reads() as queries:
        monkeypatch.setattr(gatecfg.store.windowing, "ROWS_PER_STATEMENT", 2)
        monkeypatch.setattr(gatecfg.store.baselines, "PACKED_PER_STATEMENT", 2)
        split = store.baselines([REWARD.coordinate], window=3)

    assert split == whole
    assert whole[(REWARD.coordinate, 1)] == [4.1, 3.1, 0.1]
    assert len(queries) > 3


def test_a_step_absent_from_the_whole_window_is_read_from_older_runs(store: Store) -> None:
    write_nightlies(
        store,
        {
            0: {0: 0.0, 9: 0.9},
            1: {0: 1.0, 9: 1.9},
            2: {0: 2.0},
            3: {0: 3.0},
            4: {0: 4.0},
        },
    )

    found = store.baselines([REWARD.coordinate], window=3)

    assert found == {(REWARD.coordinate, 0): [4.0, 3.0, 2.0], (REWARD.coordinate, 9): [1.9, 0.9]}


def test_the_points_of_a_regular_history_are_read_in_two_queries_for_all_coordinates(store: Store) -> None:
    write_nightlies(store, {day: {0: float(day), 1: float(day)} for day in range(6)})
    for day in range(6):
        store.write_run(run_info(f"grad-{day}", day=day), {GRAD_NORM: points({5: float(day)})})

    with point_reads() as queries:
        found = store.baselines([REWARD.coordinate, GRAD_NORM.coordinate, "unknown"], window=3)

    assert found[(GRAD_NORM.coordinate, 5)] == [5.0, 4.0, 3.0]
    assert len(found) == 3
    # One reads the steps of a run per steps digest, one the values of every window run.
    assert len(queries) == 2


def test_non_finite_values_are_stored_but_never_enter_baselines(store: Store) -> None:
    write_nightlies(store, {0: {0: 0.0}, 1: {0: 1.0}, 2: {0: math.nan}, 3: {0: math.inf}})

    found = store.baselines([REWARD.coordinate], window=2)
    stored = [row.point.value for row in store.history(test=TEST, metric=REWARD.metric)]

    assert found == {(REWARD.coordinate, 0): [1.0, 0.0]}
    assert stored[0] == math.inf
    assert math.isnan(stored[1])


def test_excluded_run_id_is_left_out_of_baselines(store: Store) -> None:
    write_nightlies(store, {day: {0: float(day)} for day in range(4)})

    found = store.baselines([REWARD.coordinate], window=2, exclude_run_id="nightly-3")

    assert found == {(REWARD.coordinate, 0): [2.0, 1.0]}


def test_baselines_equal_a_plain_reading_of_random_histories(store: Store) -> None:
    """Windows over histories whose runs store different sets of steps (several digests per coordinate, in
    and beyond the window), with untrusted, trust-overridden, excluded and NaN-valued runs in between."""
    rng = random.Random(15)
    patterns = [{0: 0, 1: 0, 2: 0}, {0: 0, 2: 0}, {1: 0, 3: 0}, {0: 0, 1: 0, 2: 0, 3: 0}]
    specs = [dataclasses.replace(REWARD, coordinate=f"rand{i:08d}", metric=f"m{i}") for i in range(6)]
    history: list[tuple[str, bool, dict[str, dict[int, float]]]] = []  # newest last
    for day in range(16):
        trusted = rng.random() < 0.7
        by_spec = {}
        for n, spec in enumerate(specs):
            # Coordinate n keeps to pattern n % 4 for its newest runs, so older runs hold other digests.
            steps = patterns[n % 4] if day > 10 else rng.choice(patterns)
            by_spec[spec.coordinate] = {
                step: math.nan if rng.random() < 0.1 else float(day * 10 + step) for step in steps
            }
        run_id = f"d{day}"
        store.write_run(
            run_info(run_id, day=day, gate_trusted=trusted),
            {spec: points(by_spec[spec.coordinate]) for spec in specs},
        )
        if rng.random() < 0.15:
            trusted = not trusted
            store.set_trust(trusted=trusted, run_id=run_id, reason="test")
        history.append((run_id, trusted, by_spec))

    for window in (1, 2, 3, 5):
        for excluded in (None, "d15", "d9"):
            expected: dict[tuple[str, int], list[float]] = {}
            for run_id, trusted, by_spec in reversed(history):
                if not trusted or run_id == excluded:
                    continue
                for coordinate, values in by_spec.items():
                    for step, value in values.items():
                        kept = expected.setdefault((coordinate, step), [])
                        if math.isfinite(value) and len(kept) < window:
                            kept.append(value)
            expected = {key: values for key, values in expected.items() if values}

            found = store.baselines(
                [spec.coordinate for spec in specs], window=window, exclude_run_id=excluded
            )

            assert found == expected, (window, excluded)


def test_coordinates_for_counts_the_history_under_each_key(store: Store) -> None:
    old_key = CoordinateSpec("0ld0ld0ld0ld", SERIES, TEST, REWARD.metric, '"all"', '{"rel_down":0.1}')
    store.write_run(run_info("r0", day=0), {old_key: points({0: 1.0, 1: 1.0})})
    store.write_run(run_info("r1", day=1, gate_trusted=False), {old_key: points({0: 1.0, 1: 1.0})})
    store.write_run(run_info("r2", day=2), {REWARD: points({0: 1.0})})

    summaries = store.coordinates_for(SERIES, REWARD.metric)

    assert [(s.spec, s.n_values, s.n_trusted_values, s.n_runs, s.last_written) for s in summaries] == [
        (REWARD, 1, 1, 1, T0 + timedelta(days=2)),
        (old_key, 4, 2, 2, T0 + timedelta(days=1)),
    ]


# --- trust and reads ----------------------------------------------------------------------------------


def test_run_values_reads_each_runs_columns_with_the_first_key_of_a_quantity_winning(store: Store) -> None:
    # One run holding the reward under two constraint keys (as after a carry): the key that sorts first
    # wins its steps, the other adds only the steps it lacks; a NaN reads back as NaN; another metric of
    # the test is not read unless asked for; runs come oldest first, one without values with none.
    other_key = CoordinateSpec("0ther0ther00", SERIES, TEST, REWARD.metric, '"all"', '{"rel_down":0.9}')
    store.write_run(
        run_info("r0", day=0),
        {REWARD: points({0: 1.0, 1: math.nan}), other_key: points({0: 5.0, 7: 6.0})},
    )
    store.write_run(run_info("r1", day=1), {GRAD_NORM: points({3: 2.5})})

    read = [(row.run.run_id, values) for row, values in store.run_values(test=TEST, metrics=[REWARD.metric])]

    assert REWARD.constraint_key < other_key.constraint_key
    assert [run_id for run_id, _ in read] == ["r0", "r1"]
    [(_, first), (_, second)] = read
    column = first[REWARD.metric, '"all"']
    assert column.steps.tolist() == [0, 1, 7]
    assert column.values[0] == 1.0
    assert math.isnan(column.values[1])
    assert column.values[2] == 6.0
    assert status_names(column) == ["pass", "pass", "pass"]
    assert second == {}
    [(_, grad)] = [(row, values) for row, values in store.run_values(test=TEST, metrics=[GRAD_NORM.metric])][
        1:
    ]
    assert grad[GRAD_NORM.metric, '"all"'].steps.tolist() == [3]


def test_run_values_reads_the_statuses_of_the_metrics_asked_for_only(store: Store) -> None:
    # A replay needs every value but the recorded verdicts of the gates it reports: the statuses of the
    # other metrics are not read, and a NaN reads back as NaN either way.
    store.write_run(
        run_info("r0", day=0),
        {
            REWARD: [
                StoredPoint(0, 1.0, "fail", None, None, None),
                StoredPoint(1, math.nan, "error", None, None, None),
            ],
            GRAD_NORM: [StoredPoint(3, 2.5, "tracked", None, None, None)],
        },
    )
    metrics = [REWARD.metric, GRAD_NORM.metric]

    [(_, some)] = store.run_values(test=TEST, metrics=metrics, statuses={REWARD.metric})
    [(_, none)] = store.run_values(test=TEST, metrics=metrics, statuses=())
    [(_, every)] = store.run_values(test=TEST, metrics=metrics)

    assert status_names(some[REWARD.metric, '"all"']) == ["fail", "error"]
    assert some[GRAD_NORM.metric, '"all"'].statuses is None
    assert all(column.statuses is None for column in none.values())
    assert status_names(every[GRAD_NORM.metric, '"all"']) == ["tracked"]
    for read in (some, none, every):
        assert repr(read[REWARD.metric, '"all"'].values.tolist()) == "[1.0, nan]"
        assert read[GRAD_NORM.metric, '"all"'].steps.tolist() == [3]
    with pytest.raises(ValueError, match="not read"):
        status_names(none[REWARD.metric, '"all"'])


def test_run_values_reads_in_batches_sized_by_rows(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # A read budget of a few rows: each batch of runs is sized from the rows per run of the one before.
    monkeypatch.setattr(store_reads, "ROWS_PER_READ", 5)
    for day in range(7):
        store.write_run(run_info(f"r{day}", day=day), {REWARD: points({0: float(day), 1: -float(day)})})
    read = list(store.run_values(test=TEST, metrics=[REWARD.metric]))
    assert [row.run.run_id for row, _ in read] == [f"r{day}" for day in range(7)]
    assert [values[REWARD.metric, '"all"'].values.tolist() for _, values in read] == [
        [float(day), -float(day)] for day in range(7)
    ]


@pytest.mark.parametrize(
    ("selector", "matched"),
    [({"run_id": "r1"}, 1), ({"commit": "abc123"}, 2), ({"ci_run_id": "9001"}, 2)],
    ids=["run_id", "commit", "ci_run_id"],
)
def test_untrust_is_idempotent_counts_matches_and_deletes_nothing(
    store: Store, store_url: str, selector: dict[str, str], matched: int
) -> None:
    store.write_run(run_info("r1", day=0, commit="abc123", ci_run_id="9001"), {REWARD: points({0: 1.0})})
    store.write_run(run_info("r2", day=1, commit="abc123", ci_run_id="9001"), {REWARD: points({0: 2.0})})
    store.write_run(run_info("r3", day=2, commit="def456", ci_run_id="9002"), {REWARD: points({0: 3.0})})

    first = store.set_trust(trusted=False, reason="bad node", **selector)
    second = store.set_trust(trusted=False, reason="bad node", **selector)

    untrusted = {row.run.run_id for row in store.runs() if not row.trusted}
    assert (first, second) == ((matched, matched), (matched, 0))
    assert len(untrusted) == matched
    assert all(row.trust_reason == "bad node" for row in store.runs() if not row.trusted)
    assert (count(store_url, "runs"), count(store_url, "metric_values")) == (3, 3)


def test_set_trust_needs_exactly_one_selector(store: Store) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        store.set_trust(trusted=False, run_id="r1", commit="abc123")


def test_history_lists_values_newest_first(store: Store) -> None:
    for run_id, day in [("middle", 1), ("newest", 2), ("oldest", 0)]:
        store.write_run(run_info(run_id, day=day), {REWARD: points({0: float(day), 1: 10.0 + day})})

    everything = store.history(test=TEST, metric=REWARD.metric)
    at_step_1 = store.history(test=TEST, metric=REWARD.metric, step=1, limit=2)

    assert [(r.run_id, r.point.step) for r in everything] == [
        ("newest", 0),
        ("newest", 1),
        ("middle", 0),
        ("middle", 1),
        ("oldest", 0),
        ("oldest", 1),
    ]
    assert [(r.run_id, r.point.value, r.created_at) for r in at_step_1] == [
        ("newest", 12.0, T0 + timedelta(days=2)),
        ("middle", 11.0, T0 + timedelta(days=1)),
    ]


def test_runs_are_listed_newest_first_per_test(store: Store) -> None:
    other = CoordinateSpec("e1e2e3e4e5e6", '{"test":"other"}', "other", REWARD.metric, '"all"', "null")
    store.write_run(run_info("r0", day=0), {REWARD: points({0: 1.0})})
    store.write_run(
        run_info("r2", day=2, test="other", series_key=other.series_key), {other: points({0: 1.0})}
    )
    store.write_run(run_info("r1", day=1, gate_trusted=False), {REWARD: points({0: 1.0})})

    listed = store.runs(test=TEST)

    assert [(row.run.run_id, row.trusted) for row in listed] == [("r1", False), ("r0", True)]


# --- failures -----------------------------------------------------------------------------------------


def test_an_unreachable_postgresql_server_is_a_store_error_with_the_password_hidden() -> None:
    with pytest.raises(StoreError) as raised:
        Store.open("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/x")

    [problem] = raised.value.problems
    assert raised.value.exit_code == EXIT_STORE
    assert str(problem.location) == "postgresql+psycopg://postgres:***@127.0.0.1:1/x"
    assert problem.message.startswith("cannot connect to the history store: ")
    assert "\n" not in problem.message
    assert "hunter2" not in str(raised.value)
    assert problem.hint is not None
    assert "GATECFG_DB_URL" in problem.hint


def test_a_steps_digest_names_the_steps_holding_a_finite_value_as_stores_already_hold_it() -> None:
    # The digest is stored: its text must not change for a given set of steps, however often it is asked.
    stored = hashlib.blake2b(json.dumps([1, 2]).encode(), digest_size=16).hexdigest()
    for _ in range(2):
        assert steps_digest([2, 0, 1], [1.0, math.nan, 3.0]) == stored
        assert steps_digest([1, 2, 5], [3.0, 1.0, math.inf]) == stored
    assert steps_digest([0, 1, 2], [1.0, 1.0, 1.0]) != stored
