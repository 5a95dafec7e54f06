"""Golden gate files: each folder under tests/fixtures/{invalid,valid}/ is a tiny gates root.

* `invalid/<case>/expected.txt` is the exact stdout of `gatecfg lint --gates tests/fixtures/invalid/<case>`
  run from the repository root (every `path:line:col: error: dotted.path: message` line and its
  `  hint:` line), and lint must exit 2.
* `valid/<case>/expected.json` is the exact stdout of
  `gatecfg resolve --gates tests/fixtures/valid/<case> --format json`, and resolve must exit 0.

Adding a case: create the folder with its YAML files, then regenerate. Regenerating (after an
intended change of a message, a position or the resolve output) is explicit and reviewed:

    GATECFG_REGEN=1 python -m pytest tests/test_fixtures.py
    git diff tests/fixtures/        # read every changed line before committing it

With GATECFG_REGEN=1 each case rewrites its expected file and is reported as skipped, never as
passed, so a regenerating run cannot be mistaken for a green one. It refuses to run where `CI` is set:
CI only ever compares.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures"
INVALID = sorted(p for p in (FIXTURES / "invalid").iterdir() if p.is_dir())
VALID = sorted(p for p in (FIXTURES / "valid").iterdir() if p.is_dir())
REGEN = os.environ.get("GATECFG_REGEN") == "1"


@pytest.fixture(autouse=True)
def _from_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages show paths relative to the working directory; the expected files hold repo-relative ones.
    monkeypatch.chdir(REPO)


def _compare_or_regen(expected: Path, actual: str) -> None:
    if REGEN:
        if os.environ.get("CI"):
            pytest.fail("GATECFG_REGEN=1 rewrites golden files; it is for a developer's checkout, not CI")
        expected.write_text(actual, encoding="utf-8")
        pytest.skip(f"rewrote {expected.relative_to(REPO)}: review `git diff` before committing")
    assert expected.is_file(), f"{expected} is missing: run GATECFG_REGEN=1 pytest {__file__}"
    assert actual == expected.read_text(encoding="utf-8")


def _rel(case: Path) -> str:
    return case.relative_to(REPO).as_posix()


def test_there_are_enough_golden_cases() -> None:
    assert len(INVALID) >= 45
    assert len(VALID) >= 12


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_invalid_case_prints_exactly_the_expected_errors_and_exits_2(case: Path) -> None:
    result = run_cli("lint", "--gates", _rel(case))
    assert result.code == 2, result.err
    _compare_or_regen(case / "expected.txt", result.out)


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_invalid_case_summary_counts_every_printed_error(case: Path) -> None:
    result = run_cli("lint", "--gates", _rel(case))
    printed = sum(": error: " in line for line in result.out.splitlines())
    assert printed >= 1
    assert result.err.rstrip().endswith(f"{printed} error{'s' * (printed != 1)}")


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_invalid_case_every_error_line_names_a_file_of_the_case_with_line_and_col(case: Path) -> None:
    result = run_cli("lint", "--gates", _rel(case))
    for line in result.out.splitlines():
        if line.startswith("  hint: "):
            continue
        location = line.split(": error: ", 1)[0]
        path, row, col = location.rsplit(":", 2)
        assert (REPO / path).is_file(), line
        assert (REPO / path).is_relative_to(case), line
        assert int(row) >= 1, line
        assert int(col) >= 1, line


@pytest.mark.parametrize("case", VALID, ids=[p.name for p in VALID])
def test_valid_case_resolves_to_exactly_the_expected_json_and_exits_0(case: Path) -> None:
    result = run_cli("resolve", "--gates", _rel(case), "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out), "a valid case declares at least one gate"
    _compare_or_regen(case / "expected.json", result.out)


@pytest.mark.parametrize("case", VALID, ids=[p.name for p in VALID])
def test_valid_case_lints_clean(case: Path) -> None:
    result = run_cli("lint", "--gates", _rel(case))
    assert (result.code, result.out) == (0, "")
