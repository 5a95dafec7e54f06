"""`gatecfg completion bash|zsh|fish`: scripts generated from the parser, so every command, option and
choice completes; bash's is run for real, zsh's and fish's are checked by their shells when installed."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_cli

from gatecfg.cli import build_parser
from gatecfg.completion import commands


def complete_bash(line: str) -> list[str]:
    """What bash offers after `line` (a trailing space: a new word), through the generated function."""
    script = run_cli("completion", "bash").out
    words = line.split() + ([""] if line.endswith(" ") else [])
    probe = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        '_gatecfg; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_commands_options_and_choices() -> None:
    assert complete_bash("gatecfg li") == ["lint"]
    assert "completion" in complete_bash("gatecfg ")
    assert set(complete_bash("gatecfg lint --format ")) == {"text", "github", "json"}
    assert "--max-false-alarm" in complete_bash("gatecfg lint --")
    assert complete_bash("gatecfg db ") == ["upgrade", "status", "copy"]
    assert "--dry-run" in complete_bash("gatecfg carry --")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_offers_file_names_with_a_space_or_a_star_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `COMPREPLY=($(compgen -f ...))` split `night one.jsonl` in two and expanded `*`.
    names = ["night one.jsonl", "run*.jsonl", "run2.jsonl"]
    for name in names:
        (tmp_path / name).write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    script = run_cli("completion", "bash").out
    probe = (
        f"{script}\nCOMP_WORDS=(gatecfg evaluate --record ''); COMP_CWORD=3\n"
        '_gatecfg; printf "%s\\0" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert sorted(done.stdout.split("\0")[:-1]) == sorted(names)


def test_every_command_and_option_of_the_parser_is_in_every_script() -> None:
    _, found = commands(build_parser())
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert [c.name for c in found] == list(subparsers.choices)
    for shell in ("bash", "zsh", "fish"):
        script = run_cli("completion", shell).out
        for command in found:
            assert command.name in script, (shell, command.name)
            for option in command.options:
                long = option.flags[0]
                assert (long[2:] if shell == "fish" else long) in script, (shell, command.name, long)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_parses_in_its_shell(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    script = run_cli("completion", shell).out
    done = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_an_unknown_shell_is_exit_2() -> None:
    result = run_cli("completion", "powershell")
    assert result.code == 2
    assert "invalid choice: 'powershell'" in result.err


def test_a_positional_help_with_a_quote_or_colon_stays_one_zsh_word() -> None:
    # `db`'s positional help ("apply the store's migrations") once ended the zsh script's quoting early.
    script = run_cli("completion", "zsh").out
    assert "'*:upgrade\\: apply the store'\\''s migrations:(upgrade status copy)'" in script
