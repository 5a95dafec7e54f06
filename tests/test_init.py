"""`gatecfg init`: a new repository's first gates, which lint clean and gate a first run; nothing that
exists is ever overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, run_cli
from rekey_helpers import git
from ruamel.yaml import YAML
from test_github_action import actionlint

from gatecfg.commands.init import PRE_COMMIT, WORKFLOW

TEST = "tests/e2e/test_tiny_ci.py"
RECORD = (
    '{"_step": 0, "train/grad_norm": 1.2, "rollout/raw_reward": 0.5, "perf/actor_train_mfu": 0.4}\n'
    '{"_step": 1, "train/grad_norm": 1.1, "rollout/raw_reward": 0.55, "perf/actor_train_mfu": 0.41}\n'
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_init_writes_gates_that_lint_clean_and_gate_a_first_run(repo: Path) -> None:
    result = run_cli("init", "--test", TEST)
    assert result.code == 0, result.err
    assert sorted(p.name for p in (repo / "gates").iterdir()) == ["base.yaml", "test_tiny_ci.yaml"]
    assert "- id: gatecfg-lint" in result.out  # the pre-commit entry, printed
    assert "gatecfg evaluate --test tests/e2e/test_tiny_ci.py" in result.out  # the workflow, printed
    assert not (repo / ".github").exists()
    linted = run_cli("lint")
    assert linted.code == 0, linted.out
    assert "2 files checked, 0 errors" in linted.err
    assert "warning" not in linted.out + linted.err
    (repo / "metrics.jsonl").write_text(RECORD, encoding="utf-8")
    first = run_cli("evaluate", "--test", TEST, "--record", "metrics.jsonl", "--write")
    assert first.code == 0, first.err
    assert "run written as trusted" in first.out


def test_the_base_file_carries_the_shipped_defaults_with_comments(repo: Path) -> None:
    run_cli("init")
    written = (repo / "gates" / "base.yaml").read_text(encoding="utf-8")
    shipped = YAML(typ="safe").load((REPO / "gates" / "base.yaml").read_text(encoding="utf-8"))
    loaded = YAML(typ="safe").load(written)
    assert loaded["defaults"] == shipped["defaults"]
    assert loaded["policy"] == shipped["policy"]
    assert "rules" not in loaded  # the project's rules name its own tests' metrics
    assert sum("#" in line for line in written.splitlines()) > 20  # commented for the reader


def test_init_refuses_to_overwrite_and_writes_nothing(repo: Path) -> None:
    (repo / "gates").mkdir()
    (repo / "gates" / "base.yaml").write_text("version: 1\n", encoding="utf-8")
    result = run_cli("init", "--write-ci")
    assert result.code == 2
    assert "gates/base.yaml: error: exists already: `gatecfg init` never overwrites a base file" in result.err
    assert (repo / "gates" / "base.yaml").read_text() == "version: 1\n"
    assert sorted(p.name for p in repo.iterdir()) == [".git", "gates"]  # nothing else written


def test_write_ci_writes_a_workflow_that_passes_actionlint_and_the_pre_commit_config(repo: Path) -> None:
    result = run_cli("init", "--test", TEST, "--write-ci")
    assert result.code == 0, result.err
    workflow = (repo / WORKFLOW).read_text(encoding="utf-8")
    checked = actionlint(repo / "lint", [workflow])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = YAML(typ="safe").load((repo / PRE_COMMIT).read_text(encoding="utf-8"))
    assert config["repos"][0]["hooks"] == [{"id": "gatecfg-lint"}]


def test_write_ci_leaves_an_existing_pre_commit_config_alone_and_prints_the_entry(repo: Path) -> None:
    (repo / PRE_COMMIT).write_text("repos: []\n", encoding="utf-8")
    result = run_cli("init", "--write-ci")
    assert result.code == 0, result.err
    assert (repo / PRE_COMMIT).read_text() == "repos: []\n"
    assert ".pre-commit-config.yaml exists, left as it was: add this hook to it" in result.out


def test_init_elsewhere_records_the_gates_root_for_later_commands(repo: Path) -> None:
    assert run_cli("init", "--gates", "ci/gates").code == 0
    assert (repo / ".gatecfg.toml").read_text() == 'gates = "ci/gates"\n'
    linted = run_cli("lint")  # no --gates: the settings file says where
    assert linted.code == 0
    assert "2 files checked, 0 errors" in linted.err + linted.out
