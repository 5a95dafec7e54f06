"""Confirmation: a CI job that can run a test again asks gatecfg to judge both runs of the
same code together (`evaluate --record A --confirm-with B`, the API's `confirm_with`): a gate fails the job
only where both runs fail it; one slow run is reported and not failing."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli
from test_evaluate_cli import write_record

import gatecfg

TEST = "tests/e2e/test_confirmation_ci.py"
KL, LOSS = "train/kl", "train/loss"
BASE = """\
version: 1
defaults:
  train/kl:
    steps: last
    constraint: {rel_up: 0.1}
    enforce: true
  train/loss:
    steps: last
    constraint: {rel_up: 0.1}
    enforce: true
policy:
  window: 20
  min_history: 1
"""
STEADY = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]


def history(root: Path, db: str) -> Path:
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n  {KL}:\n  {LOSS}:\n", encoding="utf-8")
    for i, value in enumerate(STEADY):
        metrics = {KL: [(0, value)], LOSS: [(0, value)]}
        gatecfg.evaluate(TEST, metrics, gates=gates, db=db, write=True, run_id=f"n{i}", commit=f"c{i}")
    return gates


def test_a_failure_the_second_run_does_not_show_does_not_fail_the_job(tmp_path: Path, db: str) -> None:
    gates = history(tmp_path, db)
    # kl is slow on the first run only; loss regressed on both.
    first = {KL: [(0, 1.5)], LOSS: [(0, 1.5)]}
    second = {KL: [(0, 1.0)], LOSS: [(0, 1.6)]}
    report = gatecfg.evaluate(TEST, first, gates=gates, db=db, commit="d1", confirm_with=second)
    assert report.exit_code == 1  # loss: both runs fail it
    [note] = [n for n in report.notes if n.startswith("NOT CONFIRMED: ")]
    assert note.startswith("NOT CONFIRMED: train/kl failed on this run but not on its confirmation run")
    alone = gatecfg.evaluate(TEST, {KL: [(0, 1.5)], LOSS: [(0, 1.0)]}, gates=gates, db=db, commit="d1",
                             confirm_with={KL: [(0, 1.0)], LOSS: [(0, 1.0)]})  # fmt: skip
    assert alone.exit_code == 0
    assert [r.status for r in alone.results] == ["fail", "pass"]  # the run's own verdicts, as judged


def test_the_cli_takes_the_confirmation_record_and_says_why(tmp_path: Path, db: str) -> None:
    gates = history(tmp_path, db)
    slow = write_record(tmp_path / "a.jsonl", {KL: [(0, 1.5)], LOSS: [(0, 1.0)]})
    again = write_record(tmp_path / "b.jsonl", {KL: [(0, 1.01)], LOSS: [(0, 1.0)]})
    args = ("evaluate", "--gates", gates, "--test", TEST, "--record", slow, "--db", db)
    assert run_cli(*args).code == 1
    confirmed = run_cli(*args, "--confirm-with", again, "--format", "json")
    assert confirmed.code == 0, confirmed.err
    assert any(n.startswith("NOT CONFIRMED: train/kl") for n in json.loads(confirmed.out)["notes"])
    both_slow = write_record(tmp_path / "c.jsonl", {KL: [(0, 1.4)], LOSS: [(0, 1.0)]})
    assert run_cli(*args, "--confirm-with", both_slow).code == 1
    missing = run_cli(*args, "--confirm-with", tmp_path / "nope.jsonl")
    assert missing.code == 2
    assert "nope.jsonl" in missing.err
