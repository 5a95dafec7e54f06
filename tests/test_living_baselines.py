"""Baselines that live through real histories: trust per gate, a stale baseline named,
missing steps, a sustained shift named and followed, and no silent write under another test's run id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli
from test_evaluate_cli import TEST, write_gates, write_record

import gatecfg


def test_write_under_another_tests_run_id_is_an_input_error(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    (gates / "other.yaml").write_text("test: tests/e2e/test_other_ci.py\ngates:\n  rollout/raw_reward:\n")
    points = {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}
    first = gatecfg.evaluate(
        "tests/e2e/test_other_ci.py", points, gates=gates, db=db, write=True, run_id="r-1"
    )
    assert first.run.written
    with pytest.raises(
        gatecfg.InputError, match=r"already stored for test `tests/e2e/test_other_ci\.py`"
    ) as raised:
        gatecfg.evaluate(TEST, points, gates=gates, db=db, write=True, run_id="r-1")
    # The core names the input neutrally: the API's keyword argument, and the CLI's flag.
    [problem] = raised.value.problems
    assert (problem.argument, problem.location.path) == ("run_id", "run_id")
    assert "--" not in str(raised.value)
    record = write_record(tmp_path / "r.jsonl", points)
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                  "--write", "--run-id", "r-1")  # fmt: skip
    assert cli.code == 2
    assert cli.err.startswith(
        "--run-id: error: run id `r-1` is already stored for test `tests/e2e/test_other_ci.py`"
    )
    # The same run id for the same test stays idempotent: exit 0, nothing written twice.
    again = gatecfg.evaluate(
        "tests/e2e/test_other_ci.py", points, gates=gates, db=db, write=True, run_id="r-1"
    )
    assert again.exit_code == 0
    assert not again.run.written
    assert again.run.already_stored


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
    assert untrust.code == 0
    assert "train/kl in 1 run with --run-id n2: 1 now untrusted" in untrust.out
    report = gatecfg.evaluate(LIVING, {"rollout/raw_reward": [(0, 0.5)], "train/kl": [(0, 1.0)]},
                              gates=gates, db=db)  # fmt: skip
    assert (n_of(report, "rollout/raw_reward"), n_of(report, "train/kl")) == (2, 1)
    again = run_cli("untrust", "--run-id", "n2", "--metric", "train/kl", "--db", db)
    assert "0 now untrusted, 1 already untrusted" in again.out
    run_cli("trust", "--run-id", "n2", "--metric", "train/kl", "--db", db)
    report = gatecfg.evaluate(LIVING, {"rollout/raw_reward": [(0, 0.5)], "train/kl": [(0, 1.0)]},
                              gates=gates, db=db)  # fmt: skip
    assert n_of(report, "train/kl") == 2


def kl_nights(gates: Path, db: str, prefix: str, values: list[float]) -> list[gatecfg.RunReport]:
    return [nightly(gates, db, f"{prefix}{i}", kl=[(0, v)]) for i, v in enumerate(values)]


STEADY = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.02]


def test_a_sustained_shift_is_named_then_followed_and_undone(tmp_path: Path, db: str) -> None:
    gates = living_gates(tmp_path, body="  train/kl:\n    enforce: true\n")
    kl_nights(gates, db, "base", STEADY)
    shifted = kl_nights(gates, db, "up", [2.0, 2.02, 1.98, 2.01, 2.0])
    # Enforced: every night of the shift fails the job; it is named from its third night on.
    assert [r.exit_code for r in shifted] == [1] * 5
    assert [len(r.shifts) for r in shifted] == [0, 0, 1, 1, 1]
    third = shifted[2].to_dict()["shifts"][0]
    assert (third["status"], third["first_run_id"], third["commit"], third["nightlies"]) == (
        "shifted",
        "up0",
        "up0",
        3,
    )
    assert third["direction"] == "up"
    assert 0.9 < third["size"] < 1.1
    assert any(n.startswith("SHIFTED: train/kl shifted up by +") for n in shifted[2].notes)
    assert shifted[4].shifts[0].accepted
    assert any(n.startswith("SHIFT ACCEPTED: ") for n in shifted[4].notes)
    # The new level is the baseline from the next nightly on: the first five nights of the shift.
    after = nightly(gates, db, "after", kl=[(0, 2.0)])
    assert after.exit_code == 0
    assert n_of(after, "train/kl") == 5
    listed = run_cli("shifts", "--db", db, "--format", "json")
    [row] = json.loads(listed.out)
    assert (row["metric"], row["first_run_id"], row["nightlies"], row["undone_at"]) == (
        "train/kl",
        "up0",
        5,
        None,
    )
    history = run_cli("history", "--test", LIVING, "--metric", "train/kl", "--db", db)
    assert "accepted shifts" in history.out
    assert "from run up0" in history.out
    undone = run_cli("shifts", "--undo", str(row["id"]), "--reason", "a real slowdown", "--db", db)
    assert undone.code == 0
    again = gatecfg.evaluate(LIVING, {"train/kl": [(0, 2.0)]}, gates=gates, db=db)
    assert again.exit_code == 1
    assert n_of(again, "train/kl") == 10 + 1
    assert run_cli("shifts", "--undo", str(row["id"]), "--db", db).code == 2
    # A night back on the old level passes; the undone shift's runs do not come back as a recovery.
    assert nightly(gates, db, "fixed", kl=[(0, 1.0)]).exit_code == 0
    final = gatecfg.evaluate(LIVING, {"train/kl": [(0, 1.0)]}, gates=gates, db=db)
    assert n_of(final, "train/kl") == 10 + 2


def test_never_keeps_failing_nights_out(tmp_path: Path, db: str) -> None:
    gates = living_gates(tmp_path, "  accept_shift_after: never\n", body="  train/kl:\n    enforce: true\n")
    kl_nights(gates, db, "base", STEADY)
    shifted = kl_nights(gates, db, "up", [2.0, 2.02, 1.98, 2.01, 2.0, 2.0])
    assert [r.exit_code for r in shifted] == [1] * 6
    assert not any(s.accepted for r in shifted for s in r.shifts)
    assert "never followed" in shifted[-1].shifts[0].describe()


def test_a_baseline_that_takes_no_value_is_named_with_its_fix(tmp_path: Path, db: str) -> None:
    gates = living_gates(
        tmp_path, "  stale_after: 3\n", body="  train/kl:\n    constraint: {rel_up: 0.5, rel_down: 0.5}\n"
    )
    kl_nights(gates, db, "base", STEADY[:3])
    # Failing up and down in turn: no level, so no shift; the baseline takes nothing.
    reports = kl_nights(gates, db, "odd", [3.0, 0.1, 3.0])
    assert [len(r.stale) for r in reports] == [0, 0, 1]
    stale = reports[-1].to_dict()["stale"][0]
    assert (stale["since_run_id"], stale["nightlies"], stale["causes"]) == ("odd0", 3, ["failed"])
    assert "gatecfg trust --run-id odd0 --metric train/kl" in stale["command"]
    for fmt in ("text", "markdown", "github", "junit"):
        assert "STALE BASELINE: train/kl" in reports[-1].render(fmt), fmt


def test_a_run_that_stopped_early_is_missing_steps(tmp_path: Path, db: str) -> None:
    body = "  rollout/raw_reward:\n    steps: all\n    enforce: true\n"
    gates = living_gates(tmp_path, body=body)
    full = [(s, 0.5) for s in range(50)]
    nightly(gates, db, "n1", reward=full)
    nightly(gates, db, "n2", reward=full)
    short = nightly(gates, db, "crash", reward=full[:10])
    [gate] = short.results
    assert short.exit_code == 1
    assert gate.status == "missing"
    message = "steps 10-49 not logged; the last 2 nightlies logged 0-49"
    assert short.to_dict()["gates"][0]["missing"]["message"] == message
    for fmt in ("text", "json", "markdown", "github", "junit"):
        assert message in short.render(fmt), fmt
    # Not written as trusted for that gate: the next night's steps 0-9 see two values, not three.
    after = nightly(gates, db, "n3", reward=full)
    assert {v.band.n for v in after.verdicts} == {2}


def test_missing_steps_can_warn(tmp_path: Path, db: str) -> None:
    body = "  rollout/raw_reward:\n    steps: all\n    enforce: true\n"
    gates = living_gates(tmp_path, "  missing: warn\n", body=body)
    full = [(s, 0.5) for s in range(5)]
    nightly(gates, db, "n1", reward=full)
    short = nightly(gates, db, "crash", reward=full[:2])
    assert short.exit_code == 0
    assert short.results[0].status == "missing"
    assert short.run.trusted


def test_junit_fails_the_testcase_of_an_enforced_gate_missing_steps(tmp_path: Path, db: str) -> None:
    gates = living_gates(tmp_path, body="  rollout/raw_reward:\n    steps: all\n    enforce: true\n")
    nightly(gates, db, "n1", reward=[(0, 0.5), (1, 0.5)])
    short = nightly(gates, db, "crash", reward=[(0, 0.5)])
    assert (
        '<failure message="missing steps: step 1 not logged; the last 1 nightly logged 0-1"'
        in short.render("junit")
    )
