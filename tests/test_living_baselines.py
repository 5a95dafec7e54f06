"""Baselines that live through real histories (issue 24): trust per gate, a stale baseline named,
missing steps, a sustained shift named and followed, and no silent write under another test's run id."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli
from test_evaluate_cli import TEST, write_gates, write_record

import gatecfg


def test_write_under_another_tests_run_id_is_an_input_error(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    (gates / "other.yaml").write_text("test: tests/e2e/test_other_ci.py\ngates:\n  rollout/raw_reward:\n")
    points = {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}
    first = gatecfg.evaluate("tests/e2e/test_other_ci.py", points, gates=gates, db=db, write=True, run_id="r-1")
    assert first.run.written
    with pytest.raises(gatecfg.InputError, match="already stored for test `tests/e2e/test_other_ci.py`"):
        gatecfg.evaluate(TEST, points, gates=gates, db=db, write=True, run_id="r-1")
    record = write_record(tmp_path / "r.jsonl", points)
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                  "--write", "--run-id", "r-1")  # fmt: skip
    assert cli.code == 2
    assert "--run-id" in cli.err and "tests/e2e/test_other_ci.py" in cli.err
    # The same run id for the same test stays idempotent: exit 0, nothing written twice.
    again = gatecfg.evaluate("tests/e2e/test_other_ci.py", points, gates=gates, db=db, write=True, run_id="r-1")
    assert again.exit_code == 0 and not again.run.written and again.run.already_stored


BASE = """\
version: 1
defaults:
  rollout/raw_reward:
    steps: last
    constraint: {rel_down: 0.2}
  train/kl:
    steps: last
    constraint: {rel_up: 0.5}
policy:
  window: 20
  min_history: 1
"""
LIVING = "tests/e2e/test_living_ci.py"


def living_gates(root: Path, policy: str = "", body: str = "  rollout/raw_reward:\n  train/kl:\n") -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE + policy, encoding="utf-8")
    (gates / "living.yaml").write_text(f"test: {LIVING}\ngates:\n{body}", encoding="utf-8")
    return gates


def nightly(gates: Path, db: str, run_id: str, **values: list[tuple[int, float]]) -> gatecfg.RunReport:
    points = {("rollout/raw_reward" if k == "reward" else "train/kl"): v for k, v in values.items()}
    return gatecfg.evaluate(LIVING, points, gates=gates, db=db, write=True, run_id=run_id, commit=run_id)


def n_of(report: gatecfg.RunReport, metric: str) -> int | None:
    [verdict] = [v for v in report.verdicts if v.gate.metric == metric]
    return verdict.band.n


def test_a_failing_shadow_gate_keeps_only_its_own_values_out(tmp_path: Path, db: str) -> None:
    gates = living_gates(tmp_path)
    nightly(gates, db, "n1", reward=[(0, 0.5)], kl=[(0, 1.0)])
    second = nightly(gates, db, "n2", reward=[(0, 0.1)], kl=[(0, 1.1)])
    assert [r.status for r in second.results] == ["fail", "pass"]
    assert not second.run.trusted  # the run as a whole: a gated coordinate failed
    third = nightly(gates, db, "n3", reward=[(0, 0.5)], kl=[(0, 1.0)])
    # The reward's failure keeps night 2's reward out of the reward's baseline, and nothing else.
    assert n_of(third, "rollout/raw_reward") == 1
    assert n_of(third, "train/kl") == 2


def test_trust_and_untrust_take_one_metric(tmp_path: Path, db: str) -> None:
    gates = living_gates(tmp_path)
    nightly(gates, db, "n1", reward=[(0, 0.5)], kl=[(0, 1.0)])
    nightly(gates, db, "n2", reward=[(0, 0.5)], kl=[(0, 1.0)])
    untrust = run_cli("untrust", "--run-id", "n2", "--metric", "train/kl", "--db", db)
    assert untrust.code == 0 and "train/kl in 1 run(s) with --run-id n2: 1 now untrusted" in untrust.out
    report = gatecfg.evaluate(LIVING, {"rollout/raw_reward": [(0, 0.5)], "train/kl": [(0, 1.0)]},
                              gates=gates, db=db)  # fmt: skip
    assert (n_of(report, "rollout/raw_reward"), n_of(report, "train/kl")) == (2, 1)
    again = run_cli("untrust", "--run-id", "n2", "--metric", "train/kl", "--db", db)
    assert "0 now untrusted, 1 already untrusted" in again.out
    run_cli("trust", "--run-id", "n2", "--metric", "train/kl", "--db", db)
    report = gatecfg.evaluate(LIVING, {"rollout/raw_reward": [(0, 0.5)], "train/kl": [(0, 1.0)]},
                              gates=gates, db=db)  # fmt: skip
    assert n_of(report, "train/kl") == 2
