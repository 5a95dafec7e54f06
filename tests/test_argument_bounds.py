"""Arguments and trees past what gatecfg takes: a count beyond the store's integers, a gates tree nested
beyond what is walked; each one line and exit 2, never a traceback (70)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_cli

HUGE = "9" * 30


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["history", "--test", "t.py", "--metric", "m", "--limit", HUGE], "--limit"),
        (["history", "--test", "t.py", "--metric", "m", "--limit", "9" * 5000], "--limit"),
        (["history", "--test", "t.py", "--metric", "m", "--limit", "-1"], "--limit"),
        (["shifts", "--undo", HUGE], "--undo"),
        (["shifts", "--undo", "0"], "--undo"),
        (["prune", "--keep", HUGE], "--keep"),
    ],
    ids=["limit-huge", "limit-5000-digits", "limit-negative", "undo-huge", "undo-zero", "keep-huge"],
)
def test_a_count_beyond_what_the_store_holds_is_exit_2(tmp_path: Path, argv: list[str], option: str) -> None:
    result = run_cli(*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}")
    assert result.code == 2
    first = result.err.splitlines()[0]
    assert f"argument {option}: " in first
    assert "is not a whole number from" in first
    assert len(first) < 200  # the 5,000 digits are not echoed


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[Path]:
    """A gates root whose only gate file is 1,200 folders down; removed folder by folder afterwards, since
    pytest's own clean-up (shutil.rmtree) recurses a level per folder too."""
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\ndefaults: {}\npolicy: {window: 20}\n", encoding="utf-8")
    folders = [gates]
    for _ in range(1200):
        folders.append(folders[-1] / "d")
        folders[-1].mkdir()
    gate = folders[-1] / "t.yaml"
    gate.write_text(
        "test: t.py\ngates:\n  m:\n    steps: last\n    constraint: {rel_up: 0.1}\n", encoding="utf-8"
    )
    try:
        yield gates
    finally:
        gate.unlink()
        for folder in reversed(folders[1:]):
            folder.rmdir()


def test_a_gates_tree_nested_1200_folders_deep_is_exit_2(deep_tree: Path) -> None:
    for argv in (["lint", "--gates", deep_tree], ["resolve", "--gates", deep_tree]):
        result = run_cli(*argv)
        assert result.code == 2
        assert "is nested more than 64 folders below the gates root" in result.out + result.err
