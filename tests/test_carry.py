"""`gatecfg carry`: a constraint-only re-key continues the old key's history; a `steps` change is refused.

End to end through the CLI in a temporary git repository with the project's gates, and the carried baseline
read through the Store, on SQLite and (when configured) PostgreSQL.
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import run_cli
from rekey_helpers import (
    GSM8K,
    GSM8K_FILE,
    NIGHT_REWARDS,
    NIGHTS,
    RAW_REWARD_DEFAULT,
    RAW_REWARD_EDITED,
    edit,
    gsm8k_record,
    seed_nightlies,
)

from gatecfg.keys import coordinate_hash, series_key
from gatecfg.store import CoordinateSpec, RunInfo, Store, StoredPoint
from gatecfg.store.links import Carry

RAW_REWARD = "rollout/raw_reward"


def raw_reward_verdict(repo: Path, db: str, reward: float) -> tuple[dict[str, object], list[object], str]:
    """The PR evaluation's raw_reward verdict, its re-key warnings, and stderr."""
    record = gsm8k_record(repo / "pr.jsonl", reward)
    result = run_cli("evaluate", "--test", GSM8K, "--record", record, "--db", db, "--format", "json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    verdict = next(v for v in report["verdicts"] if v["metric"] == RAW_REWARD)
    return verdict, report["warnings"], result.err


def rows(url: str, table: str) -> list[sa.Row[object]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY pk")))
    finally:
        engine.dispose()


def carry(db: str, *extra: str) -> tuple[int, str, str]:
    result = run_cli("carry", "--base", "HEAD", "--db", db, *extra)
    return result.code, result.out, result.err


# --- the done means ---------------------------------------------------------------------------------------


def test_carry_restores_the_baseline_of_a_constraint_only_change(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    cold, warnings, _ = raw_reward_verdict(repo, db, 0.3)
    assert (cold["status"], cold["n"], len(warnings)) == ("cold", None, 1)

    code, out, err = carry(db, "--reason", "widened rel_down; the reward is the same quantity")

    assert code == 0, err
    assert f"carried: {GSM8K}: {RAW_REWARD}" in out
    verdict, warnings, stderr = raw_reward_verdict(repo, db, 0.3)
    ref = sum(NIGHT_REWARDS) / NIGHTS
    assert verdict["n"] == NIGHTS
    assert verdict["ref"] == pytest.approx(ref)
    # The new band: rel_down 0.25 of the old values' mean, not 0.2.
    assert verdict["lo"] == pytest.approx(ref - 0.25 * ref)
    assert verdict["status"] == "fail"
    assert warnings == []
    assert "RE-KEY" not in stderr


def test_carry_refuses_a_steps_change_and_records_nothing(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / GSM8K_FILE, "  rollout/raw_reward:\n    steps: last", "  rollout/raw_reward:\n    steps: all")

    code, out, err = carry(db, "--reason", "try")

    assert code == 2
    assert f"{GSM8K_FILE}:9: error: gates.rollout/raw_reward: cannot carry the history" in err
    assert 'its steps changed "last" -> "all"' in err
    assert "step -1 of `last` is the last logged point" in err
    assert "hint: accept the cold start" in err
    assert "Traceback" not in err
    assert out == ""
    assert rows(db, "carries") == []


# --- carrying ---------------------------------------------------------------------------------------------


def test_carrying_twice_records_one_carry(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    first = carry(db, "--reason", "widened")
    second = carry(db, "--reason", "widened again")

    assert first[0] == second[0] == 0
    assert "already carried" in second[1]
    assert "nothing new recorded" in second[1]
    [recorded] = rows(db, "carries")
    assert recorded.reason == "widened"  # type: ignore[attr-defined]


def test_a_carry_is_recorded_with_time_commit_and_reason_and_shown_by_history(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    carry(db, "--reason", "widened rel_down", "--commit", "abc1234")
    history = run_cli("history", "--test", GSM8K, "--metric", RAW_REWARD, "--db", db)
    as_json = run_cli("history", "--test", GSM8K, "--metric", RAW_REWARD, "--db", db, "--format", "json")

    [recorded] = rows(db, "carries")
    assert recorded.commit_sha == "abc1234"  # type: ignore[attr-defined]
    assert recorded.base_commit is not None  # type: ignore[attr-defined]
    assert recorded.created_at is not None  # type: ignore[attr-defined]
    assert "carried history" in history.out
    assert f"{recorded.coordinate} continues {recorded.from_coordinate}" in history.out  # type: ignore[attr-defined]
    assert "commit abc1234 · reason: widened rel_down" in history.out
    assert {tuple(r["carried_into"]) for r in json.loads(as_json.out)} == {(recorded.coordinate,)}  # type: ignore[attr-defined]


def test_undo_returns_the_gate_to_its_cold_start_and_stays_on_record(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    carry(db, "--reason", "widened")

    undone = run_cli("carry", "--undo", "--base", "HEAD", "--db", db, "--reason", "wrong call")

    assert undone.code == 0, undone.err
    assert "1 carry(ies) undone" in undone.out
    verdict, warnings, _ = raw_reward_verdict(repo, db, 0.3)
    assert (verdict["status"], len(warnings)) == ("cold", 1)
    history = run_cli("history", "--test", GSM8K, "--metric", RAW_REWARD, "--db", db)
    assert "UNDONE" in history.out
    assert "undone because: wrong call" in history.out
    again = run_cli("carry", "--undo", "--test", GSM8K, "--db", db)
    assert "nothing undone" in again.out


def test_a_carry_can_be_made_again_after_its_undo(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    carry(db, "--reason", "first")
    run_cli("carry", "--undo", "--test", GSM8K, "--metric", RAW_REWARD, "--db", db)

    code, out, _ = carry(db, "--reason", "second")

    assert code == 0
    assert "1 carry(ies) recorded" in out
    verdict, _, _ = raw_reward_verdict(repo, db, 0.5)
    assert verdict["n"] == NIGHTS
    assert [r.undone_at is None for r in rows(db, "carries")] == [False, True]  # type: ignore[attr-defined]


def test_metric_narrows_a_carry_past_another_gates_steps_change(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    edit(
        repo / GSM8K_FILE,
        "  perf/actor_train_mfu:\n    steps: last",
        "  perf/actor_train_mfu:\n    steps: all",
    )

    refused = carry(db, "--reason", "widened")
    narrowed = carry(db, "--reason", "widened", "--metric", RAW_REWARD)

    assert refused[0] == 2
    assert "cannot carry the history of perf/actor_train_mfu" in refused[2]
    assert narrowed[0] == 0, narrowed[2]
    assert [r.metric for r in rows(db, "carries")] == [RAW_REWARD]  # type: ignore[attr-defined]


def test_a_renamed_test_is_refused(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / GSM8K_FILE, f"test: {GSM8K}", "test: tests/e2e/fully_async/test_gsm8k_renamed_ci.py")

    code, _, err = carry(db, "--reason", "renamed")

    assert code == 2
    assert "its test was renamed" in err
    assert rows(db, "carries") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reason", "x", "--test", "tests/e2e/nope.py"], "no gate file declares `test: tests/e2e/nope.py`"),
        (["--reason", "x", "--test", GSM8K, "--metric", "nope/metric"], "`nope/metric` is not declared"),
        (["--reason", "   "], "the reason is empty"),
    ],
    ids=["unknown-test", "unknown-metric", "blank-reason"],
)
def test_bad_selections_exit_2_and_record_nothing(repo: Path, db: str, args: list[str], message: str) -> None:
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    code, _, err = carry(db, *args)

    assert code == 2
    assert message in err
    assert rows(db, "carries") == []


def test_carry_without_base_or_reason_exits_2(repo: Path, db: str) -> None:
    result = run_cli("carry", "--db", db, "--reason", "x")

    assert result.code == 2
    assert "carry needs --base" in result.err


def test_nothing_to_carry_without_a_rekey_or_without_history(repo: Path, db: str) -> None:
    unchanged = carry(db, "--reason", "x")
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    empty = carry(db, "--reason", "x")

    assert unchanged[0] == empty[0] == 0
    assert "nothing to carry" in unchanged[1]
    assert "no history to carry" in empty[1]
    assert rows(db, "carries") == []


# --- the carried baseline, through the Store ---------------------------------------------------------------

SERIES = series_key("tests/e2e/test_carry_ci.py")
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def spec(constraint: str) -> CoordinateSpec:
    return CoordinateSpec(
        coordinate=coordinate_hash(SERIES, "m", '"all"', constraint),
        series_key=SERIES,
        test="tests/e2e/test_carry_ci.py",
        metric="m",
        steps_key='"all"',
        constraint_key=constraint,
    )


A, B, C = spec('{"rel_up":0.1}'), spec('{"rel_up":0.2}'), spec('{"rel_up":0.3}')


def write(
    store: Store, night: int, coordinate: CoordinateSpec, value: float, *, trusted: bool = True
) -> None:
    run = RunInfo(
        run_id=f"run-{night}",
        test=coordinate.test,
        series_key=SERIES,
        labels={},
        commit=None,
        branch=None,
        ci_run_id=None,
        ci_run_attempt=None,
        url=None,
        created_at=T0 + timedelta(days=night),
        gate_trusted=trusted,
        written_by="test",
    )
    store.write_run(run, {coordinate: [StoredPoint(0, value, "pass", None, None, None)]})


def link(new: CoordinateSpec, old: CoordinateSpec) -> Carry:
    return Carry(
        coordinate=new.coordinate,
        from_coordinate=old.coordinate,
        series_key=SERIES,
        test=new.test,
        metric=new.metric,
        steps_key=new.steps_key,
        constraint_key=new.constraint_key,
        from_constraint_key=old.constraint_key,
        reason="test",
        commit=None,
        base_commit=None,
        created_at=T0,
    )


@pytest.fixture
def carried(store: Store) -> Store:
    """A: 1, 2, 3, 4 and an untrusted 100 on night 4; B carries A, then stores 10 and 20."""
    for night, value in enumerate([1.0, 2.0, 3.0, 4.0]):
        write(store, night, A, value)
    write(store, 4, A, 100.0, trusted=False)
    assert store.carry([link(B, A)]) == [True]
    write(store, 5, B, 10.0)
    write(store, 6, B, 20.0)
    return store


def test_a_carried_baseline_reads_the_newest_values_of_both_keys_within_the_window(carried: Store) -> None:
    assert carried.baselines([B.coordinate], window=3) == {(B.coordinate, 0): [20.0, 10.0, 4.0]}
    assert carried.baselines([B.coordinate], window=20) == {
        (B.coordinate, 0): [20.0, 10.0, 4.0, 3.0, 2.0, 1.0]
    }


def test_a_carried_baseline_keeps_the_trust_rules(carried: Store) -> None:
    nightly = carried.baselines([B.coordinate], window=20, baseline="nightly")
    excluding = carried.baselines([B.coordinate], window=20, exclude_run_id="run-6")
    carried.set_trust(trusted=False, run_id="run-3")
    untrusted = carried.baselines([B.coordinate], window=20)

    assert nightly[(B.coordinate, 0)] == [20.0, 10.0, 100.0, 4.0, 3.0, 2.0, 1.0]
    assert excluding[(B.coordinate, 0)] == [10.0, 4.0, 3.0, 2.0, 1.0]
    assert untrusted[(B.coordinate, 0)] == [20.0, 10.0, 3.0, 2.0, 1.0]


def test_a_carry_of_a_carry_reads_the_whole_chain_and_a_cycle_reads_each_key_once(carried: Store) -> None:
    carried.carry([link(C, B)])
    write(carried, 7, C, 30.0)
    chain = carried.baselines([C.coordinate, A.coordinate], window=20)
    carried.carry([link(A, C)])  # carried back: A continues C, which continues B, which continues A

    cycle = carried.baselines([A.coordinate], window=20)

    assert chain[(C.coordinate, 0)] == [30.0, 20.0, 10.0, 4.0, 3.0, 2.0, 1.0]
    assert chain[(A.coordinate, 0)] == [4.0, 3.0, 2.0, 1.0]  # A itself continues nothing yet
    assert cycle[(A.coordinate, 0)] == [30.0, 20.0, 10.0, 4.0, 3.0, 2.0, 1.0]


def test_an_undone_carry_reads_only_its_own_values(carried: Store) -> None:
    assert carried.undo_carries([(B.coordinate, A.coordinate)], reason="no") == 1

    assert carried.baselines([B.coordinate], window=20) == {(B.coordinate, 0): [20.0, 10.0]}
    assert carried.undo_carries([(B.coordinate, A.coordinate)], reason="again") == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_carried_baseline_equals_the_baseline_of_one_key_holding_the_same_runs(
    store: Store, seed: int
) -> None:
    """Ragged steps, NaNs and untrusted runs, split across a carry, read exactly as one key reads them;
    small windows make both readers go on into the older runs for short and missing steps."""
    rng = random.Random(seed)
    single = CoordinateSpec(
        coordinate=coordinate_hash(series_key("tests/e2e/test_single_ci.py"), "m", '"all"', "{}"),
        series_key=series_key("tests/e2e/test_single_ci.py"),
        test="tests/e2e/test_single_ci.py",
        metric="m",
        steps_key='"all"',
        constraint_key="{}",
    )
    for night in range(30):
        steps = sorted(rng.sample(range(6), rng.randint(1, 6)))
        points = [
            StoredPoint(
                step, math.nan if rng.random() < 0.2 else float(rng.randint(0, 99)), "pass", None, None, None
            )
            for step in steps
        ]
        trusted = rng.random() > 0.2
        for coordinate in (A if night < 18 else B, single):
            run = RunInfo(
                run_id=f"{coordinate.test}-{night}",
                test=coordinate.test,
                series_key=coordinate.series_key,
                labels={},
                commit=None,
                branch=None,
                ci_run_id=None,
                ci_run_attempt=None,
                url=None,
                created_at=T0 + timedelta(hours=night),
                gate_trusted=trusted,
                written_by="test",
            )
            store.write_run(run, {coordinate: points})
    store.carry([link(B, A)])

    for window in (1, 2, 3, 5, 20):
        for baseline in ("trusted", "nightly"):
            carried = store.baselines([B.coordinate], window=window, baseline=baseline)  # type: ignore[arg-type]
            plain = store.baselines([single.coordinate], window=window, baseline=baseline)  # type: ignore[arg-type]
            assert {step: v for (_, step), v in carried.items()} == {
                step: v for (_, step), v in plain.items()
            }
            assert carried  # the comparison is not between two empty results


def test_dry_run_lists_the_carry_and_records_nothing_then_the_undo_likewise(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    code, out, err = carry(db, "--reason", "widened rel_down", "--dry-run")

    assert code == 0, err
    assert f"would carry: {GSM8K}: {RAW_REWARD}" in out
    assert "dry run: 1 carry(ies) would be recorded" in out
    assert rows(db, "carries") == []
    assert carry(db, "--reason", "widened rel_down")[0] == 0
    code, out, _ = carry(db, "--undo", "--dry-run")
    assert code == 0
    assert f"would undo: {GSM8K}: {RAW_REWARD}" in out
    assert "dry run: 1 carry(ies) would be undone; nothing was written" in out
    assert [row.undone_at for row in rows(db, "carries")] == [None]
    assert carry(db, "--reason", "again", "--dry-run")[1].startswith(f"already carried: {GSM8K}")
