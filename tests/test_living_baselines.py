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
