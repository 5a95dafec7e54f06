"""Evaluate's direct reads of a SQLite store (store/direct.py) give exactly what `Store` gives, without
SQLAlchemy where the history allows it, and hand everything else to `Store` with its own messages."""

from __future__ import annotations

import dataclasses
import math
import random
import sqlite3
from pathlib import Path

import pytest
from helpers import executed_statements
from test_carry import link
from test_store import REWARD, SERIES, TEST, points, run_info

from gatecfg.errors import StoreError
from gatecfg.store import Baseline, HistoryRow, Store, statements
from gatecfg.store.direct import DirectStore


@pytest.fixture
def url(tmp_path: Path) -> str:
    given = f"sqlite:///{tmp_path / 'history.db'}"
    with Store.open(given, create=True):
        pass
    return given


SPECS = [dataclasses.replace(REWARD, coordinate=f"rand{i:08d}", metric=f"m{i}") for i in range(5)]
PATTERNS = [(0, 1, 2), (0, 2), (1, 3), (0, 1, 2, 3)]


def write_history(store: Store, seed: int, *, steps_change: bool, nan: float, untrusted: float) -> None:
    """16 nightlies of 5 coordinates: with `steps_change`, older runs store other sets of steps than the
    newest ones; `nan` and `untrusted` are the shares of NaN values and of untrusted runs (some of them
    then trusted by hand, and some trusted ones untrusted)."""
    rng = random.Random(seed)
    for day in range(16):
        by_spec = {}
        for n, spec in enumerate(SPECS):
            steps = PATTERNS[n % 4] if day > 10 or not steps_change else rng.choice(PATTERNS)
            by_spec[spec] = points({s: math.nan if rng.random() < nan else day * 10.0 + s for s in steps})
        run_id = f"d{day}"
        store.write_run(run_info(run_id, day=day, gate_trusted=rng.random() >= untrusted), by_spec)
        if rng.random() < 0.15:
            store.set_trust(trusted=rng.random() < 0.5, run_id=run_id, reason="test")


HISTORIES = [
    pytest.param({"steps_change": False, "nan": 0.0, "untrusted": 0.0}, True, id="regular"),
    pytest.param({"steps_change": False, "nan": 0.0, "untrusted": 0.3}, True, id="untrusted-runs"),
    pytest.param({"steps_change": False, "nan": 0.1, "untrusted": 0.3}, False, id="nan-values"),
    pytest.param({"steps_change": True, "nan": 0.0, "untrusted": 0.3}, False, id="steps-change"),
]


@pytest.mark.parametrize("seed", [15, 16], ids=["seed15", "seed16"])
@pytest.mark.parametrize(("history", "direct"), HISTORIES)
def test_direct_baselines_equal_the_stores_on_random_histories(
    url: str, history: dict[str, bool | float], direct: bool, seed: int
) -> None:
    with Store.open(url) as store:
        write_history(store, seed, **history)  # type: ignore[arg-type]
    hashes = [spec.coordinate for spec in SPECS] + ["unknown00000"]
    compared = 0
    for window in (1, 2, 3, 5, 20):
        for baseline in ("trusted", "nightly"):
            for excluded in (None, "d15", "d9"):
                with Store.open(url) as store:
                    expected = store.baselines(
                        hashes, window=window, baseline=baseline, exclude_run_id=excluded
                    )
                with DirectStore.open(url) as reader, executed_statements() as statements:
                    found = reader.baselines(
                        hashes, window=window, baseline=baseline, exclude_run_id=excluded
                    )
                assert found == expected, (window, baseline, excluded)
                # Regular windows are read without SQLAlchemy; where NaNs leave a step short of a full
                # window, or older runs stored other steps, the store reads on through Store.
                if window <= 3 or direct:
                    assert (statements == []) == direct, (window, baseline, excluded)
                compared += 1
    assert compared == 30


def test_a_coordinate_that_carries_history_is_read_through_the_store(url: str) -> None:
    new = dataclasses.replace(REWARD, coordinate="n3wn3wn3wn3w", constraint_key='{"rel_down":0.1}')
    with Store.open(url) as store:
        for day in range(4):
            store.write_run(run_info(f"old-{day}", day=day), {REWARD: points({0: float(day)})})
        store.write_run(run_info("new-4", day=4), {new: points({0: 4.0})})
        store.carry([link(new, REWARD)])
        expected = store.baselines([new.coordinate], window=3)

    with DirectStore.open(url) as reader, executed_statements() as statements:
        found = reader.baselines([new.coordinate], window=3)

    assert found == expected == {(new.coordinate, 0): [4.0, 3.0, 2.0]}
    assert statements != []


@pytest.mark.parametrize("seed", [15, 16], ids=["seed15", "seed16"])
def test_direct_history_equals_the_stores(url: str, seed: int) -> None:
    other_series = dataclasses.replace(
        SPECS[1], coordinate="0th3rs3r13s0", series_key='{"labels":{"gpu":"h100"}}'
    )
    with Store.open(url) as store:
        write_history(store, seed, steps_change=True, nan=0.2, untrusted=0.3)
        for day in range(3):
            info = dataclasses.replace(run_info(f"h100-{day}", day=day), series_key=other_series.series_key)
            store.write_run(info, {other_series: points({0: float(day)})})
    queries = [
        {"metric": spec.metric, "step": step, "series_key": series, "limit": limit}
        for spec in SPECS[:2]
        for step in (None, 0, 3)
        for series in (None, SERIES, other_series.series_key)
        for limit in (None, 1, 7)
    ]
    with Store.open(url) as store, DirectStore.open(url) as reader, executed_statements() as statements:
        for query in queries:
            expected = store.history(test=TEST, **query)  # type: ignore[arg-type]
            statements.clear()
            found = reader.history(test=TEST, **query)  # type: ignore[arg-type]
            # NaN is not equal to itself: compare the values' text.
            assert repr(found) == repr(expected), query
            assert statements == []
    assert any(math.isnan(row.point.value) for row in store_history(url, SPECS[0].metric))
    assert any(row.trust_override is not None for row in store_history(url, SPECS[0].metric))


def store_history(url: str, metric: str) -> list[HistoryRow]:
    with Store.open(url) as store:
        return store.history(test=TEST, metric=metric)


def test_direct_keys_of_a_metric_equal_the_stores(url: str) -> None:
    """The re-key check's read: every key of a series and metric, with values, trusted values, runs and
    the last write, newest first."""
    old_key = dataclasses.replace(REWARD, coordinate="0ld0ld0ld0ld", constraint_key='{"rel_down":0.1}')
    with Store.open(url) as store:
        write_history(store, 15, steps_change=True, nan=0.1, untrusted=0.3)
        for day in range(3):
            run = run_info(f"old-{day}", day=day, gate_trusted=day != 1)
            store.write_run(run, {old_key: points({0: 1.0, 1: 2.0})})
        for day in range(3, 5):
            store.write_run(run_info(f"new-{day}", day=day), {REWARD: points({0: 1.0})})
        queries = [(SERIES, REWARD.metric), (SERIES, SPECS[0].metric), ("nothing", REWARD.metric)]
        expected = [store.coordinates_for(*query) for query in queries]

    with DirectStore.open(url) as reader, executed_statements() as statements:
        found = [reader.coordinates_for(*query) for query in queries]

    assert found == expected
    assert [[s.spec.coordinate for s in summaries] for summaries in found] == [
        [REWARD.coordinate, old_key.coordinate],
        [SPECS[0].coordinate],
        [],
    ]
    assert (found[0][1].n_values, found[0][1].n_trusted_values, found[0][1].n_runs) == (6, 4, 3)
    assert statements == []


def test_has_runs_answers_as_the_store(url: str) -> None:
    with Store.open(url) as store:
        store.write_run(run_info("only", day=0), {REWARD: points({0: 1.0})})

    with DirectStore.open(url) as reader, executed_statements() as statements:
        answers = [
            reader.has_runs(SERIES),
            reader.has_runs(SERIES, exclude_run_id="only"),
            reader.has_runs(SERIES, exclude_run_id="other"),
            reader.has_runs('{"labels":{},"test":"x"}'),
        ]

    assert answers == [True, False, True, False]
    assert statements == []


@pytest.mark.parametrize(
    "form",
    [
        pytest.param("sqlite:///{path}", id="plain"),
        pytest.param("sqlite+pysqlite:///{path}", id="driver"),
        pytest.param("sqlite:///{path}?timeout=5", id="query"),
    ],
)
def test_the_store_is_named_as_store_names_it(url: str, form: str) -> None:
    given = form.format(path=url.removeprefix("sqlite:///"))
    with Store.open(given) as store, DirectStore.open(given) as reader:
        assert reader.url == store.url
        assert reader.direct == ("?" not in given)


def test_a_store_at_another_revision_gets_the_stores_answer(url: str) -> None:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()

    with pytest.raises(StoreError) as direct:
        DirectStore.open(url)
    with pytest.raises(StoreError) as store:
        Store.open(url)

    assert str(direct.value) == str(store.value)
    assert "schema revision 9999, which this gatecfg does not know" in str(direct.value)


def test_a_missing_store_gets_the_stores_answer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    with pytest.raises(StoreError) as direct:
        DirectStore.open(url)
    with pytest.raises(StoreError) as store:
        Store.open(url)

    assert str(direct.value) == str(store.value)
    assert not (tmp_path / "typo.db").exists()


@pytest.mark.parametrize("baseline", ["trusted", "nightly"])
def test_a_failing_direct_read_is_a_one_line_store_error(url: str, baseline: Baseline) -> None:
    with DirectStore.open(url) as reader:
        with sqlite3.connect(url.removeprefix("sqlite:///")) as other:
            other.execute("DROP TABLE carries")
        other.close()
        with pytest.raises(StoreError) as raised:
            reader.baselines([REWARD.coordinate], window=3, baseline=baseline)

    [problem] = raised.value.problems
    assert (problem.location.path, problem.message) == (
        url,
        "cannot read baselines from the history store: no such table: carries",
    )
    assert raised.value.exit_code == 3


def test_the_direct_readers_sql_is_what_the_stores_statements_compile_to() -> None:
    """store/sqlite_reads.py is generated from store/statements.py: after a change there, run
    `python -m gatecfg.store.statements`."""
    assert statements.render() == statements.GENERATED.read_text(encoding="utf-8")
    assert statements.main(["--check"]) == 0


def test_a_stale_generated_file_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "sqlite_reads.py"
    stale.write_text(statements.render().replace("LIMIT ?", "LIMIT 5", 1), encoding="utf-8")
    monkeypatch.setattr(statements, "GENERATED", stale)
    assert statements.main(["--check"]) == 1
    assert statements.main([]) == 0
    assert statements.main(["--check"]) == 0
