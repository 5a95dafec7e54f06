"""`gatecfg lint` says everything at once: a misspelt one-liner beside the same file's schema errors, the
default or the value it most likely meant, and what a missing colon really is."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {budget: both}
  rollout/raw_reward:
    steps: all
    constraint: {budget: down}
"""


@pytest.fixture
def gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "base.yaml").write_text(BASE, encoding="utf-8")
    return tmp_path / "gates"


def lint(gates: Path, name: str, text: str) -> list[str]:
    (gates / name).write_text(text, encoding="utf-8")
    result = run_cli("lint")
    assert result.code == 2
    return result.out.splitlines()


def test_a_misspelt_one_liner_shows_with_the_files_schema_errors(gates: Path) -> None:
    out = lint(
        gates, "t.yaml", "test: t.py\ngates:\n  train/grad_nrom:\n  rollout/raw_reward:\n    steps: al\n"
    )
    assert out == [
        "gates/t.yaml:3:3: error: gates.train/grad_nrom: `train/grad_nrom` is a one-liner but no base file "
        "has defaults for it (searched: gates/base.yaml)",
        "  hint: did you mean `train/grad_norm`? (a default of the base files); else write `steps:` and "
        "`constraint:` for it, or add `train/grad_nrom:` under `defaults:` in gates/base.yaml",
        "gates/t.yaml:5:12: error: gates.rollout/raw_reward.steps: must be `all`, `last` or a list of steps, "
        "got 'al'",
        "  hint: did you mean `all`? (write `all`, `last`, or a list of logged steps such as [0, 100, 199])",
    ]


def test_an_enum_value_gets_the_value_it_most_likely_meant(gates: Path) -> None:
    out = lint(gates, "t.yaml", "test: t.py\ngates:\n  rollout/raw_reward:\n    constraint: {budget: dwn}\n")
    assert out == [
        "gates/t.yaml:4:26: error: gates.rollout/raw_reward.constraint.budget: must be 'up', 'down' or "
        "'both', got the string 'dwn'",
        "  hint: did you mean `down`?",
    ]


def test_a_one_liner_far_from_every_default_gets_no_guess(gates: Path) -> None:
    (gates / "t.yaml").write_text("test: t.py\ngates:\n  eval/accuracy:\n", encoding="utf-8")
    result = run_cli("lint")
    assert "did you mean" not in result.out
    assert "`eval/accuracy` is a one-liner but no base file has defaults for it" in result.out


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        pytest.param(
            "test: t.py\ngates:\n  train/grad_norm\n    steps: all\n",
            "  hint: line 3 `train/grad_norm` has no colon: write `train/grad_norm:`",
            id="metric",
        ),
        pytest.param(
            "test t.py\ngates:\n  train/grad_norm:\n",
            "  hint: line 1 `test t.py` has no colon: write `test:` before its value (`test: t.py`)",
            id="key-and-value",
        ),
        pytest.param(
            "test: t.py\ngates:\n  train/grad_norm:\n    reason: a: b\n",
            '  hint: quote a value that contains `: `: `reason: "a: b"`',
            id="value-with-a-colon",
        ),
    ],
)
def test_mapping_values_not_allowed_gets_a_hint_that_fits(gates: Path, text: str, hint: str) -> None:
    out = lint(gates, "t.yaml", text)
    assert out[1] == hint
