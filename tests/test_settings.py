"""One place for settings (gatecfg/settings.py): flag > environment > settings file > default, for the
gates root, the store and the series labels, checked pair by pair, for every command that takes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli
from rekey_helpers import (
    GSM8K,
    RAW_REWARD_DEFAULT,
    RAW_REWARD_EDITED,
    edit,
    git,
    make_repo,
    seed_nightlies,
)
from test_evaluate_cli import TEST, write_gates, write_record

from gatecfg import settings

RECORD = {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose gates live in ci/gates (not the default gates/), the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(settings.DB_ENV, raising=False)
    (tmp_path / "ci").mkdir()
    write_gates(tmp_path / "ci")
    write_record(tmp_path / "metrics.jsonl", RECORD)
    return tmp_path


def resolve_tests(*args: str) -> tuple[int, str]:
    result = run_cli("resolve", "--format", "json", *args)
    return result.code, result.out + result.err


def test_without_a_settings_file_the_gates_root_is_gates(project: Path) -> None:
    code, out = resolve_tests()
    assert code == 2
    assert "gates" in out


@pytest.mark.parametrize(
    ("file", "text"),
    [
        pytest.param(
            "pyproject.toml", '[project]\nname = "x"\n\n[tool.gatecfg]\ngates = "ci/gates"\n', id="pyproject"
        ),
        pytest.param(".gatecfg.toml", 'gates = "ci/gates"\n', id="dotfile"),
    ],
)
def test_the_settings_file_names_the_gates_root(project: Path, file: str, text: str) -> None:
    (project / file).write_text(text, encoding="utf-8")
    code, out = resolve_tests()
    assert code == 0, out
    assert json.loads(out)[0]["test"] == TEST


def test_the_settings_file_is_found_from_a_subfolder_and_its_paths_are_relative_to_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".gatecfg.toml").write_text('gates = "ci/gates"\ndb = ".gatecfg/h.db"\n', encoding="utf-8")
    (project / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(project / "sub" / "deeper")
    result = run_cli("evaluate", "--test", TEST, "--record", project / "metrics.jsonl", "--write")
    assert result.code == 0, result.err
    assert (project / ".gatecfg" / "h.db").is_file()
    assert not (project / "sub" / "deeper" / ".gatecfg").exists()


def test_the_dotfile_wins_over_pyproject_in_one_folder(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.gatecfg]\ngates = "nowhere"\n', encoding="utf-8")
    (project / ".gatecfg.toml").write_text('gates = "ci/gates"\n', encoding="utf-8")
    assert resolve_tests()[0] == 0


def test_a_pyproject_without_the_table_is_passed_over(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / ".gatecfg.toml").write_text('gates = "ci/gates"\n', encoding="utf-8")
    (project / "app").mkdir()
    (project / "app" / "pyproject.toml").write_text('[project]\nname = "app"\n', encoding="utf-8")
    monkeypatch.chdir(project / "app")
    assert settings.gates_root(None).resolve() == (project / "ci" / "gates").resolve()


def test_environment_wins_over_the_file_and_the_flag_over_both(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".gatecfg.toml").write_text('gates = "nowhere"\n', encoding="utf-8")
    assert resolve_tests()[0] == 2  # file: a folder that does not exist
    monkeypatch.setenv(settings.GATES_ENV, "ci/gates")
    assert resolve_tests()[0] == 0  # environment over file
    monkeypatch.setenv(settings.GATES_ENV, "nowhere")
    assert resolve_tests("--gates", "ci/gates")[0] == 0  # flag over environment


def test_store_precedence_pair_by_pair(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.db_url(None) == settings.DEFAULT_DB
    (project / ".gatecfg.toml").write_text('db = "postgresql+psycopg://ci@db/gatecfg"\n', encoding="utf-8")
    assert settings.db_url(None) == "postgresql+psycopg://ci@db/gatecfg"
    monkeypatch.setenv(settings.DB_ENV, "sqlite:///env.db")
    assert settings.db_url(None) == "sqlite:///env.db"
    assert settings.db_url("flag.db") == "sqlite:///flag.db"


def coordinate(*args: str) -> str:
    result = run_cli("resolve", "--format", "json", *args)
    assert result.code == 0, result.err
    value: str = json.loads(result.out)[0]["coordinate"]
    return value


def test_series_labels_precedence_and_a_flag_replaces_the_files_labels(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".gatecfg.toml").write_text(
        'gates = "ci/gates"\n[series]\nhardware = "h100"\nbackend = "megatron"\n', encoding="utf-8"
    )
    from_file = coordinate()
    assert from_file == coordinate("--series", "hardware=h100", "--series", "backend=megatron")
    monkeypatch.setenv(settings.SERIES_ENV, "hardware=a100")
    from_env = coordinate()
    assert from_env == coordinate("--series", "hardware=a100")
    assert from_env != from_file
    flagged = coordinate("--series", "hardware=b200")
    assert flagged not in (from_env, from_file)


def test_the_files_labels_key_what_evaluate_writes(project: Path) -> None:
    (project / ".gatecfg.toml").write_text(
        'gates = "ci/gates"\nseries = { hardware = "h100" }\n', encoding="utf-8"
    )
    result = run_cli(
        "evaluate", "--test", TEST, "--record", project / "metrics.jsonl", "--write", "--format", "json"
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["series"] == {"hardware": "h100"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param('gate = "ci/gates"\n', ".gatecfg.toml: error: unknown setting `gate`", id="unknown-key"),
        pytest.param(
            "gates = 3\n", ".gatecfg.toml: error: gates: must be a non-empty string", id="not-a-string"
        ),
        pytest.param("series = { hardware = 1 }\n", "series: must be a table of string labels", id="labels"),
        pytest.param("gates = \n", ".gatecfg.toml: error: is not valid TOML", id="toml"),
        pytest.param('series = { test = "x" }\n', "`test` is not a label", id="test-label"),
    ],
)
def test_a_bad_settings_file_is_exit_2_naming_the_file(project: Path, text: str, message: str) -> None:
    (project / ".gatecfg.toml").write_text(text, encoding="utf-8")
    result = run_cli("resolve")
    assert result.code == 2
    assert message in result.err


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository of the project's gates, the working directory, with no store named anywhere."""
    root = make_repo(tmp_path / "repo")
    monkeypatch.chdir(root)
    monkeypatch.delenv(settings.DB_ENV, raising=False)
    return root


def rekey(repo: Path) -> None:
    """The working tree's edit that re-keys the gsm8k test's raw_reward (a constraint-only change)."""
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)


def test_diff_reads_the_store_the_settings_file_names(repo: Path) -> None:
    """Without --db or GATECFG_DB_URL, `diff` counts the orphans in the store the settings name."""
    seed_nightlies(repo, f"sqlite:///{repo / 'history.db'}")
    (repo / ".gatecfg.toml").write_text('db = "history.db"\n', encoding="utf-8")
    rekey(repo)
    result = run_cli("diff", "--base", "main")
    assert result.code == 0, result.err
    assert f"{GSM8K}: rollout/raw_reward" in result.out
    assert "stored values orphaned" in result.out


def test_diff_counts_in_the_default_store_when_it_exists(repo: Path) -> None:
    rekey(repo)
    assert "orphaned" not in run_cli("diff", "--base", "main").out  # no store: no counts, no error
    git(repo, "checkout", "gates")
    seed_nightlies(repo, settings.DEFAULT_DB)
    rekey(repo)
    assert "stored values orphaned" in run_cli("diff", "--base", "main").out
