"""The text report's counts: the result line counts gates as gates (with the status each failed with)
and steps as steps, a declared metric the record lacks names the logged metric near it, and a tolerated
failure is named without `--verbose`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from gatecfg import terminal

TEST = "tests/e2e/test_ppo_ci.py"
BASE = """\
version: 1
defaults:
  train/grad_norm: {steps: all, constraint: {rel_up: 0.5, abs_floor_up: 0.1}}
  train/ppo_kl: {steps: all, constraint: {rel_up: 0.5, abs_floor_up: 0.02}}
"""


def gates_with(tmp_path: Path, body: str) -> Path:
    root = tmp_path / "gates"
    root.mkdir(exist_ok=True)
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "ppo.yaml").write_text(f"test: {TEST}\ngates:\n{body}", encoding="utf-8")
    return root


def record(path: Path, points: dict[str, list[float]]) -> Path:
    path.write_text(
        "".join(json.dumps({m: [[s, v] for s, v in enumerate(vs)]}) + "\n" for m, vs in points.items()),
        encoding="utf-8",
    )
    return path


def evaluate(gates: Path, rec: Path, db: str, *extra: str) -> tuple[int, str]:
    done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", rec, "--db", db, *extra)
    assert done.code in (0, 1), done.err
    return done.code, done.out


ENFORCED_BOTH = "  train/grad_norm:\n    enforce: true\n  train/ppo_kl:\n    enforce: true\n"
NIGHT = {"train/grad_norm": [2.0, 2.1, 2.0], "train/ppo_kl": [0.1, 0.1, 0.1]}


@pytest.fixture
def seeded(tmp_path: Path, db: str) -> Path:
    gates = gates_with(tmp_path, ENFORCED_BOTH)
    evaluate(gates, record(tmp_path / "night.jsonl", NIGHT), db, "--write", "--run-id", "night-1")
    return gates


@pytest.fixture(autouse=True)
def unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports as a CI log shows them: a line each, whatever its length."""
    monkeypatch.setattr(terminal, "width", lambda: None)


def result_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith("result: ")]
    return line.removeprefix("result: ")


def test_a_renamed_metric_counts_as_a_failed_gate_and_names_the_logged_one(
    tmp_path: Path, db: str, seeded: Path
) -> None:
    renamed = {"train/grad_norm": NIGHT["train/grad_norm"], "train/ppo_KL": NIGHT["train/ppo_kl"]}
    code, out = evaluate(seeded, record(tmp_path / "pr.jsonl", renamed), db)
    assert code == 1
    [finding] = [line for line in out.splitlines() if line.startswith("ENFORCED FAIL")]
    # No step was logged, so none is named: not `step last` for a `steps: all` gate.
    assert finding.endswith("ppo.yaml:5): metric missing from the record; did you mean `train/ppo_KL`?")
    line = result_line(out)
    assert line.startswith("exit 1 · 1 of 2 gates failed (1 error); noise alone")
    assert "· 1 enforced gate failing · 0 shadow gates failing · 0 steps cold ·" in line
    code, doc = evaluate(seeded, tmp_path / "pr.jsonl", db, "--format", "json")
    noise = json.loads(doc)["noise"]
    assert (noise["judged"], noise["failed"], noise["statuses"]) == (2, 1, {"error": 1})


def test_failing_steps_count_one_gate(tmp_path: Path, db: str, seeded: Path) -> None:
    worse = {**NIGHT, "train/grad_norm": [9.0, 9.0, 9.0]}
    code, out = evaluate(seeded, record(tmp_path / "pr.jsonl", worse), db)
    assert code == 1
    line = result_line(out)
    assert line.startswith("exit 1 · 1 of 2 gates failed; noise alone")  # all failed on their values
    assert "· 1 enforced gate failing ·" in line  # one gate, not its three steps
    assert "3 of 3 steps failing" in out


def test_cold_steps_are_counted_as_steps_and_one_is_singular(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n")
    code, out = evaluate(gates, record(tmp_path / "pr.jsonl", {"train/grad_norm": [2.0]}), db)
    assert code == 0
    line = result_line(out)
    assert line.startswith("exit 0 · 0 of 0 gates failed;")
    assert "· 0 enforced gates failing · 0 shadow gates failing · 1 step cold ·" in line


def test_a_tolerated_failure_is_named_without_verbose(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    enforce: true\n    tolerate: 1\n")
    evaluate(gates, record(tmp_path / "night.jsonl", NIGHT), db, "--write", "--run-id", "night-1")
    exploded = {"train/grad_norm": [2000.0, 2.1, 2.0]}
    code, out = evaluate(gates, record(tmp_path / "pr.jsonl", exploded), db)
    assert code == 0
    [named] = [line for line in out.splitlines() if "TOLERATED" in line]
    assert named.startswith("ENFORCED TOLERATED train/grad_norm (")
    assert named.endswith(
        "ppo.yaml:3): 1 of 3 steps failing, within `tolerate: 1`; step 0: 2000 vs mean 2 of 1 night: "
        "+99900.0%, beyond the band's edge 3 by 1997"
    )
    assert "· 1 gate within tolerate (1 failing step) ·" in result_line(out)


def test_a_passing_run_names_no_tolerated_gate(tmp_path: Path, db: str, seeded: Path) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    tolerate: 1\n")
    code, out = evaluate(gates, record(tmp_path / "pr.jsonl", NIGHT), db)
    assert code == 0
    assert "TOLERATED" not in out
    assert "within tolerate" not in out


def test_junit_counts_one_tolerated_step_in_the_singular(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    enforce: true\n    tolerate: 1\n")
    evaluate(gates, record(tmp_path / "night.jsonl", NIGHT), db, "--write", "--run-id", "night-1")
    rec = record(tmp_path / "pr.jsonl", {"train/grad_norm": [2000.0, 2.1, 2.0]})
    code, junit = evaluate(gates, rec, db, "--format", "junit")
    assert code == 0
    assert "TOLERATED: 1 failing step within `tolerate: 1`" in junit
