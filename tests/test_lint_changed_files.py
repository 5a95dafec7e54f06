"""`gatecfg lint` of the files a commit changed reads what those files need, not the whole tree
(gatecfg/resolve.py `load_tree(wanted=...)`), and reports what the whole tree's lint reports for them;
benchmarks/lint_changed.py times it at 10,000 files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import run_cli

import gatecfg.bases
import gatecfg.resolve
from gatecfg.linting import find_problems

BASE = "version: 1\ndefaults:\n  train/grad_norm: {steps: all, constraint: {rel_up: 0.5}}\n"
TEAM_BASE = "version: 1\nextends: ../base.yaml\n"
GATE = "test: tests/e2e/{team}/test_{n}_ci.py\ngates:\n  train/grad_norm:\n"
TEAMS, PER_TEAM = 5, 20


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """100 gate files in five folders, each folder's base file extending the root's."""
    monkeypatch.chdir(tmp_path)
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE)
    for t in range(TEAMS):
        team = gates / f"team{t}"
        team.mkdir()
        (team / "base.yaml").write_text(TEAM_BASE)
        for n in range(PER_TEAM):
            (team / f"test_{n}.yaml").write_text(GATE.format(team=f"team{t}", n=n))
    return gates


@contextmanager
def _parsed() -> Iterator[list[str]]:
    """The YAML files the gate tree's loader parses while the block runs (gate files in `resolve`, base
    files in `bases`)."""
    seen: list[str] = []
    original = gatecfg.resolve.read_yaml
    readers = (gatecfg.resolve, gatecfg.bases)

    def counted(path: Path, shown: str | None = None) -> gatecfg.resolve.LoadedDoc:
        seen.append(str(path))
        return original(path, shown)

    for module in readers:
        module.read_yaml = counted
    try:
        yield seen
    finally:
        for module in readers:
            module.read_yaml = original


def test_linting_two_changed_files_parses_them_and_the_base_files_only(tree: Path) -> None:
    changed = [tree / "team1" / "test_3.yaml", tree / "team4" / "test_0.yaml"]
    with _parsed() as parsed:
        problems = find_problems(changed, gates=tree)

    assert problems == []
    bases = {str(tree / "base.yaml"), *(str(tree / f"team{t}" / "base.yaml") for t in range(TEAMS))}
    assert set(parsed) == bases | {str(path) for path in changed}
    with _parsed() as whole:
        find_problems([], gates=tree)
    assert len(set(whole)) == len(bases) + TEAMS * PER_TEAM


@pytest.mark.parametrize(
    "declared",
    ["tests/e2e/team0/test_7_ci.py", '"tests/e2e/team0/test_\\x37_ci.py"'],
    ids=["as-written", "escaped"],
)
def test_a_changed_file_that_declares_another_files_test_is_told_so_as_by_the_whole_tree(
    tree: Path, declared: str
) -> None:
    changed = tree / "team3" / "test_9.yaml"
    other = GATE.format(team="team0", n=7).replace("tests/e2e/team0/test_7_ci.py", declared)
    (tree / "team0" / "test_7.yaml").write_text(other)
    changed.write_text(GATE.format(team="team0", n=7))

    with _parsed() as parsed:
        alone = find_problems([changed], gates=tree)
    whole = [p for p in find_problems([], gates=tree) if p.location.path == "gates/team3/test_9.yaml"]

    assert [p.message for p in alone] == [
        "test `tests/e2e/team0/test_7_ci.py` is already gated by gates/team0/test_7.yaml"
    ]
    assert alone == whole
    assert str(tree / "team0" / "test_7.yaml") in parsed
    assert len(set(parsed)) == 1 + TEAMS + 2  # the bases, the changed file and the one holding the name


def test_the_pre_commit_hook_prints_the_same_count_of_files_checked(tree: Path) -> None:
    result = run_cli("lint", "gates/team2/test_5.yaml")
    assert (result.code, result.out) == (0, "")
    # the file and every base file of its tree, as before
    assert result.err == f"gatecfg lint: {2 + TEAMS} files checked, 0 errors\n"
