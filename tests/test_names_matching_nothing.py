"""`history` and `shifts` given a test, metric or shift number the store does not hold: exit 2 with the
near stored names (gatecfg.wording), never exit 0 with an empty answer that reads as "nothing yet"."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli
from test_living_baselines import LIVING, STEADY, kl_nights, living_gates, nightly


@pytest.fixture
def stored(tmp_path: Path, db: str) -> str:
    """Two nightlies of the living test, both metrics stored."""
    gates = living_gates(tmp_path)
    nightly(gates, db, "n1", reward=[(0, 0.5)], kl=[(0, 1.0)])
    nightly(gates, db, "n2", reward=[(0, 0.5)], kl=[(0, 1.0)])
    return db


@pytest.mark.parametrize("fmt", ["text", "json"], ids=["text", "json"])
def test_history_of_a_metric_typo_is_exit_2_naming_the_stored_metric(stored: str, fmt: str) -> None:
    result = run_cli("history", "--test", LIVING, "--metric", "train/KL", "--db", stored, "--format", fmt)
    assert result.code == 2
    assert f"--metric: error: no stored values of train/KL for test {LIVING}" in result.err
    assert "hint: did you mean `train/kl`?" in result.err
    assert result.out == ""


def test_history_of_a_metric_nothing_is_near_lists_the_stored_metrics(stored: str) -> None:
    result = run_cli("history", "--test", LIVING, "--metric", "perf/mfu", "--db", stored)
    assert result.code == 2
    assert "hint: stored for the test: rollout/raw_reward, train/kl" in result.err


def test_history_of_a_test_typo_is_exit_2_naming_the_stored_test(stored: str) -> None:
    typo = LIVING.replace("living", "livng")
    result = run_cli("history", "--test", typo, "--metric", "train/kl", "--db", stored)
    assert result.code == 2
    assert f"--test: error: no stored run of test {typo}" in result.err
    assert f"hint: did you mean `{LIVING}`?" in result.err


def test_history_on_an_empty_store_says_no_run_is_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    living_gates(tmp_path)
    assert run_cli("db", "upgrade", "--db", db).code == 0
    result = run_cli("history", "--test", LIVING, "--metric", "train/kl", "--db", db)
    assert result.code == 2
    assert "hint: the store holds no run yet" in result.err


def test_history_of_a_stored_metric_at_a_step_it_lacks_is_an_answer(stored: str) -> None:
    result = run_cli("history", "--test", LIVING, "--metric", "train/kl", "--step", "7", "--db", stored)
    assert result.code == 0
    assert "no stored values for train/kl at step 7" in result.out


@pytest.fixture
def shifted(tmp_path: Path, db: str) -> str:
    """One accepted shift of train/kl (number 1), active."""
    gates = living_gates(tmp_path, body="  train/kl:\n")
    kl_nights(gates, db, "base", STEADY)
    kl_nights(gates, db, "up", [2.0, 2.02, 1.98, 2.01, 2.0])
    return db


def test_shifts_undo_of_no_such_shift_names_the_active_ones(shifted: str) -> None:
    result = run_cli("shifts", "--undo", "9", "--db", shifted)
    assert result.code == 2
    assert "--undo: error: no accepted shift 9: nothing undone" in result.err
    assert "hint: active shifts: 1 (train/kl)" in result.err


def test_shifts_undo_of_an_undone_shift_says_when_it_was_undone(shifted: str) -> None:
    assert run_cli("shifts", "--undo", "1", "--db", shifted).code == 0
    result = run_cli("shifts", "--undo", "1", "--db", shifted)
    assert result.code == 2
    assert "--undo: error: accepted shift 1 was undone " in result.err
    assert "hint: no shift is active; `gatecfg shifts --all` lists all" in result.err


def test_shifts_of_a_test_typo_is_exit_2_naming_the_stored_test(shifted: str) -> None:
    typo = LIVING.replace("living", "livin")
    result = run_cli("shifts", "--test", typo, "--db", shifted)
    assert result.code == 2
    assert f"--test: error: no stored run of test {typo}" in result.err
    assert f"hint: did you mean `{LIVING}`?" in result.err


def test_shifts_of_a_test_nothing_is_near_names_the_tests_with_shifts(shifted: str) -> None:
    result = run_cli("shifts", "--test", "x.py", "--db", shifted, "--format", "json")
    assert result.code == 2
    assert f"hint: 1 test with shifts: {LIVING}" in result.err


def test_shifts_of_a_stored_test_without_shifts_is_an_answer(stored: str) -> None:
    result = run_cli("shifts", "--test", LIVING, "--db", stored)
    assert result.code == 0
    assert result.out == f"no active accepted shifts of {LIVING}\n"
