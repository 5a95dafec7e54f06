"""`gatecfg compare RUN_A RUN_B` and `RUN_A --record FILE`: per gate (and with `--steps` per step) both
values, the change, and the change in spread, from the stored `sd` or the baseline window's spread."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import test_history_spread as spread
from helpers import run_cli
from test_evaluate_cli import NIGHTLY_STEP1, TEST, seed_nightlies, write_gates, write_record


def compare_json(db: str, gates: Path, *args: str | Path) -> dict[str, object]:
    done = run_cli("compare", *args, "--db", db, "--gates", gates, "--format", "json")
    assert done.code == 0, done.err
    found: dict[str, object] = json.loads(done.out)
    return found


@pytest.fixture
def seeded(tmp_path: Path, db: str) -> Path:
    """Twenty band-gate nightlies night-00..night-19: step 0 always 0.2, step 1 NIGHTLY_STEP1."""
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    return gates


def test_a_gate_is_the_mean_over_its_steps_with_its_window_spread(seeded: Path, db: str) -> None:
    found = compare_json(db, seeded, "night-03", "night-04")
    [gate] = found["gates"]  # type: ignore[misc]
    # A band gate stores no sd: a step's spread is its baseline window's (the nights before it).
    spread_a = statistics.mean([0.0, statistics.stdev(NIGHTLY_STEP1[:3])])
    spread_b = statistics.mean([0.0, statistics.stdev(NIGHTLY_STEP1[:4])])
    assert gate["metric"] == "rollout/raw_reward"
    assert gate["n_steps"] == 2
    assert gate["a"] == {"value": (0.2 + 0.5) / 2, "spread": pytest.approx(spread_a), "spread_from": "window"}
    assert gate["b"] == {
        "value": (0.2 + 0.625) / 2,
        "spread": pytest.approx(spread_b),
        "spread_from": "window",
    }
    assert gate["change"] == pytest.approx(0.0625)
    assert gate["change_pct"] == pytest.approx(100 * 0.0625 / 0.35)
    assert gate["spread_change"] == pytest.approx(spread_b - spread_a)
    assert [s["step"] for s in gate["steps"]] == [0, 1]
    assert gate["steps"][1]["change"] == pytest.approx(0.125)
    assert (found["a"]["run_id"], found["b"]["run_id"]) == ("night-03", "night-04")  # type: ignore[index]


def test_text_is_a_row_per_gate_and_with_steps_a_row_per_step(seeded: Path, db: str) -> None:
    gate_only = run_cli("compare", "night-03", "night-04", "--db", db, "--gates", seeded)
    assert gate_only.code == 0, gate_only.err
    rows = [line.split() for line in gate_only.out.splitlines() if "rollout/raw_reward" in line]
    assert len(rows) == 1
    assert rows[0][:3] == ["rollout/raw_reward", "2", "steps"]
    assert "(+17.9%)" in rows[0]
    assert "a: run night-03 (commit c03," in gate_only.out
    per_step = run_cli("compare", "night-03", "night-04", "--steps", "--db", db, "--gates", seeded)
    step_rows = [line.split() for line in per_step.out.splitlines() if line.split()[:1] == ["1"]]
    assert step_rows == [
        ["1", "0.500", "±", "0.062", "0.625", "±", "0.051", "+0.125", "(+25.0%)", "-0.0115", "(x0.82)"]
    ]


def test_a_budget_gate_reads_the_sd_stored_with_each_value(tmp_path: Path, db: str) -> None:
    gates = spread.write_gates(tmp_path)
    spread.nightlies(tmp_path, gates, db)
    found = compare_json(db, gates, "night-6", "night-7")
    by_metric = {g["metric"]: g for g in found["gates"]}  # type: ignore[attr-defined]
    stored = {r["run_id"]: r["sd"] for r in spread.history_json(db, "train/loss") if r["step"] == 2}
    loss = by_metric["train/loss"]
    assert loss["a"]["spread_from"] == "sd"
    assert [s["a"]["spread"] for s in loss["steps"] if s["step"] == 2] == [stored["night-6"]]
    assert by_metric["eval/score"]["a"]["spread_from"] == "window"


def test_a_record_is_compared_with_a_stored_run(seeded: Path, db: str, tmp_path: Path) -> None:
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    found = compare_json(db, seeded, "night-19", "--record", record)
    [gate] = found["gates"]  # type: ignore[misc]
    assert gate["b"]["value"] == pytest.approx((0.2 + 0.3125) / 2)
    # The record is judged now: its window is the newest twenty nights.
    assert gate["b"]["spread"] == pytest.approx(statistics.mean([0.0, statistics.stdev(NIGHTLY_STEP1)]))
    assert found["b"] == {"records": [str(record)]}


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        pytest.param(
            ("nigth-03", "night-04"),
            "RUN_A: error: no stored run has run id nigth-03",
            "did you mean one of `night-03`",
            id="run-a",
        ),
        pytest.param(
            ("night-03", "night-4"),
            "RUN_B: error: no stored run has run id night-4",
            "did you mean one of `night-04`",
            id="run-b",
        ),
    ],
)
def test_an_unknown_run_id_is_exit_2_with_the_near_ones(
    seeded: Path, db: str, args: tuple[str, str], message: str, hint: str
) -> None:
    done = run_cli("compare", *args, "--db", db, "--gates", seeded)
    assert done.code == 2
    assert message in done.err
    assert hint in done.err


def test_runs_of_two_tests_are_exit_2(seeded: Path, db: str, tmp_path: Path) -> None:
    (seeded / "other.yaml").write_text("test: tests/e2e/test_other_ci.py\ngates:\n  rollout/raw_reward:\n")
    record = write_record(tmp_path / "o.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    run_cli("evaluate", "--gates", seeded, "--test", "tests/e2e/test_other_ci.py", "--record", record,
            "--db", db, "--write", "--run-id", "other-1")  # fmt: skip
    done = run_cli("compare", "night-03", "other-1", "--db", db, "--gates", seeded)
    assert done.code == 2
    assert (
        f"RUN_B: error: run other-1 is a run of test tests/e2e/test_other_ci.py, run night-03 of test {TEST}"
        in done.err
    )


def test_runs_of_two_series_of_a_test_are_compared_with_their_labels(
    seeded: Path, db: str, tmp_path: Path
) -> None:
    record = write_record(tmp_path / "a100.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.75)]})
    done = run_cli("evaluate", "--gates", seeded, "--test", TEST, "--record", record, "--db", db, "--write",
                   "--run-id", "a100-1", "--series", "hardware=a100")  # fmt: skip
    assert done.code == 0, done.err
    found = compare_json(db, seeded, "night-19", "a100-1")
    [gate] = found["gates"]  # type: ignore[misc]
    assert gate["change"] == pytest.approx((0.75 - 0.5625) / 2)
    # The first run of its series: no window before it, and no stored sd.
    assert gate["b"]["spread"] is None
    assert found["b"]["series"] == {"hardware": "a100"}  # type: ignore[index]
    text = run_cli("compare", "night-19", "a100-1", "--db", db, "--gates", seeded).out
    assert "b: run a100-1 (commit" in text
    assert "hardware=a100" in text
