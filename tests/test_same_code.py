"""A failure on code that did not change: a gate that fails on the commit (or the build
label) of a stored run of the series that passed it, in the same environment, is reported as noise or
the machine in every format; `policy.same_code` decides whether it fails the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli
from test_evaluate_cli import write_record

import gatecfg

TEST = "tests/e2e/test_same_code_ci.py"
KL = "train/kl"
BASE = """\
version: 1
defaults:
  train/kl:
    steps: last
    constraint: {rel_up: 0.1}
    enforce: true
policy:
  window: 20
  min_history: 1
"""
STEADY = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]


def gates_with(root: Path, policy: str = "") -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE + policy, encoding="utf-8")
    (gates / "kl.yaml").write_text(f"test: {TEST}\ngates:\n  {KL}:\n", encoding="utf-8")
    return gates


def nightly(gates: Path, db: str, run_id: str, value: float, **given: object) -> gatecfg.RunReport:
    return gatecfg.evaluate(TEST, {KL: [(0, value)]}, gates=gates, db=db, write=True, run_id=run_id, **given)  # type: ignore[arg-type]


def steady(gates: Path, db: str, **given: object) -> None:
    for i, value in enumerate(STEADY):
        nightly(gates, db, f"n{i}", value, commit=f"c{i}", **given)


def test_a_failure_on_the_commit_of_a_run_that_passed_warns_by_default(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path)
    steady(gates, db)
    # The same code as n5 runs again (a retry, a second job of the build) and is slow this time.
    report = nightly(gates, db, "retry", 1.5, commit="c5")
    [result] = report.results
    assert result.status == "fail"
    assert report.exit_code == 0  # policy.same_code: warn
    assert not report.run.trusted  # its value stays out of the baseline all the same
    [note] = [n for n in report.notes if n.startswith("SAME CODE: ")]
    assert "same code as run n5 (commit c5), which passed it" in note
    assert "noise or the machine, not a code change" in note
    assert report.to_dict()["same_code"] == [
        {"metric": KL, "run_id": "n5", "by": "commit", "code": "c5", "policy": "warn"}
    ]
    record = write_record(tmp_path / "r.jsonl", {KL: [(0, 1.5)]})
    text = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--commit", "c5"
    )
    assert text.code == 0
    assert "SAME CODE: train/kl failed on the same code as run n5 (commit c5)" in text.out
    markdown = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--commit", "c5",
        "--format", "markdown",
    )  # fmt: skip
    assert "same code as run n5" in markdown.out


def test_same_code_fail_fails_the_job_and_still_says_why(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  same_code: fail\n")
    steady(gates, db)
    report = nightly(gates, db, "retry", 1.5, commit="c5")
    assert report.exit_code == 1
    assert any("failing the job" in n for n in report.notes if n.startswith("SAME CODE: "))


def test_a_failure_on_new_code_or_in_another_environment_is_a_failure(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path)
    steady(gates, db, meta={"image": "26.02"})
    new_code = nightly(gates, db, "new", 1.5, commit="d1", meta={"image": "26.02"})
    assert (new_code.exit_code, new_code.to_dict()["same_code"]) == (1, [])
    other_image = nightly(gates, db, "moved", 1.5, commit="c5", meta={"image": "26.04"})
    assert (other_image.exit_code, other_image.to_dict()["same_code"]) == (1, [])
    assert not any(n.startswith("SAME CODE: ") for n in other_image.notes)


@pytest.mark.parametrize("runner", ["runner-a", "runner-b"])
def test_a_build_label_is_the_code_and_the_runners_name_is_not_the_environment(
    tmp_path: Path, db: str, runner: str
) -> None:
    gates = gates_with(tmp_path)
    for i, value in enumerate(STEADY):
        nightly(gates, db, f"n{i}", value, meta={"build": f"b{i // 2}", "runner": "runner-a"})
    report = nightly(gates, db, "again", 1.5, meta={"build": "b2", "runner": runner})
    assert report.exit_code == 0
    assert report.to_dict()["same_code"][0]["by"] == "build"
    assert report.to_dict()["same_code"][0]["run_id"] == "n5"
    json.dumps(report.to_dict())  # the report stays JSON
