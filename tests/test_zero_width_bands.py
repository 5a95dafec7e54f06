"""Zero-width bands (`rel_up: 0`, `sigma_up` alone, `rel_down: 0`, `abs_floor_up: 0`): a value equal to
the reference is inside, whichever path (one step, in bulk, stored) computed the band."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from gatecfg.band import band
from gatecfg.models import Constraint

TEST = "tests/e2e/test_x_ci.py"
# Values with more than 12 significant digits, whose 12-digit reference is not the value itself, and
# values whose mean of identical nights, n * v / n, is not v.
AWKWARD = [0.1234567890123456, 0.1, 1 / 3, 2.0000000000004, -7.123456789012345e-5, 1.234567890123456e20]
CONSTRAINTS = {
    "rel_up-0": "{rel_up: 0}",
    "sigma_up-alone": "{sigma_up: 3}",
    "rel_down-0": "{rel_down: 0}",
    "abs_floor_up-0": "{abs_floor_up: 0}",
    "both-sides-0": "{rel_up: 0, rel_down: 0, abs_floor_up: 0, abs_floor_down: 0}",
}


@pytest.mark.parametrize("value", AWKWARD, ids=repr)
@pytest.mark.parametrize("nights", [1, 2, 3, 7, 20])
def test_the_identical_value_is_inside_a_zero_width_band(value: float, nights: int) -> None:
    for constraint in (Constraint(rel_up=0.0, rel_down=0.0), Constraint(sigma_up=3.0, sigma_down=3.0)):
        current = band(constraint, [value] * nights)
        if nights >= 2 or constraint.rel_up is not None:
            assert current.contains(value), (constraint, current)


def test_a_zero_width_band_still_fails_a_value_beyond_its_precision() -> None:
    current = band(Constraint(rel_up=0.0), [0.1234567890123456] * 3)
    assert not current.contains(0.12345678902)


def _gates(root: Path, constraint: str) -> Path:
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        f"version: 1\ndefaults:\n  m/x:\n    steps: all\n    constraint: {constraint}\n"
        "policy:\n  window: 20\n  min_history: 1\n",
        encoding="utf-8",
    )
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n  m/x:\n    enforce: true\n", encoding="utf-8")
    return gates


@pytest.mark.parametrize("constraint", CONSTRAINTS.values(), ids=CONSTRAINTS.keys())
def test_a_metric_identical_every_night_passes_evaluate(tmp_path: Path, constraint: str) -> None:
    gates = _gates(tmp_path, constraint)
    record = tmp_path / "run.jsonl"
    record.write_text(json.dumps({"m/x": [[i, v] for i, v in enumerate(AWKWARD)]}) + "\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    args = ("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--format", "json")
    statuses = []
    for night in range(4):  # the written nights judge through the stored bands, the last in bulk
        written = ("--write", "--run-id", f"n{night}") if night < 3 else ()
        result = run_cli(*args, *written)
        report = json.loads(result.out)
        statuses.append({v["status"] for v in report["verdicts"]})
        assert result.code == 0, [v["reason"] for v in report["verdicts"] if v["status"] == "fail"]
    assert statuses[-1] == {"pass"}
