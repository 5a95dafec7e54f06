"""`gatecfg --help` and every command's `--help`, byte for byte as committed under tests/golden/help/.

The help is rendered through the real entry point at a fixed width (argparse reads `COLUMNS`), so a change
to any command's arguments or wording shows here as a diff of the text a user reads. After an intended
change, regenerate the files with `python tests/test_help_golden.py` and review the diff."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatecfg.cli import build_parser, main

GOLDEN = Path(__file__).resolve().parent / "golden" / "help"
COLUMNS = "100"


def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command line whose `--help` a user can ask for: the root, each command, each subcommand."""
    yield words
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*words, name))


COMMANDS = sorted(commands(build_parser()))


def golden_file(words: tuple[str, ...]) -> Path:
    return GOLDEN / ("-".join(("gatecfg", *words)) + ".txt")


def rendered_help(words: tuple[str, ...]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*words, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(("gatecfg", *words)))
def test_help_is_the_committed_text(monkeypatch: pytest.MonkeyPatch, words: tuple[str, ...]) -> None:
    monkeypatch.setenv("COLUMNS", COLUMNS)
    assert rendered_help(words) == golden_file(words).read_text(encoding="utf-8")


SHELLS = ("bash", "zsh", "fish")


def completion_file(shell: str) -> Path:
    return GOLDEN / f"completion.{shell}"


def rendered_completion(shell: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["completion", shell]) == 0
    return out.getvalue()


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_script_is_the_committed_text(shell: str) -> None:
    """The scripts are generated from the parser: the same parser, the same scripts."""
    assert rendered_completion(shell) == completion_file(shell).read_text(encoding="utf-8")


def test_every_golden_file_is_a_command_of_the_parser() -> None:
    assert sorted(GOLDEN.glob("*.txt")) == sorted(golden_file(words) for words in COMMANDS)


if __name__ == "__main__":  # regenerate: python tests/test_help_golden.py
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", COLUMNS)
        for stale in GOLDEN.glob("*.txt"):
            stale.unlink()
        for words in COMMANDS:
            golden_file(words).write_text(rendered_help(words), encoding="utf-8")
        for shell in SHELLS:
            completion_file(shell).write_text(rendered_completion(shell), encoding="utf-8")
    sys.exit(0)
