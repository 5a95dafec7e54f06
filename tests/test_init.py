"""`gatecfg init`: a new repository's first gates, which lint clean and gate a first run; nothing that
exists is ever overwritten."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, flat, run_cli, subprocess_env
from rekey_helpers import git
from ruamel.yaml import YAML
from test_github_action import actionlint

import gatecfg
from gatecfg.commands import init
from gatecfg.commands.init import GITLAB_CI, GITLAB_JOBS, PRE_COMMIT, WORKFLOW

COMMIT = "3dca1d7" + "0" * 33
PINNED = f"git+https://github.com/acme/gatecfg@{COMMIT}"
REQUIREMENT = f"gatecfg[postgres] @ {PINNED}"

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
    result = run_cli("init", "--test", TEST, "--install", PINNED)
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
    assert "run written as trusted" in flat(first.out)


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
    result = run_cli("init")
    assert result.code == 2
    assert "gates/base.yaml: error: exists already: `gatecfg init` never overwrites a base file" in result.err
    assert (repo / "gates" / "base.yaml").read_text() == "version: 1\n"
    assert sorted(p.name for p in repo.iterdir()) == [".git", "gates"]  # nothing else written


def test_write_ci_writes_a_workflow_that_passes_actionlint_and_the_pre_commit_config(repo: Path) -> None:
    result = run_cli("init", "--test", TEST, "--write-ci", "--install", PINNED)
    assert result.code == 0, result.err
    workflow = (repo / WORKFLOW).read_text(encoding="utf-8")
    checked = actionlint(repo / "lint", [workflow])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = YAML(typ="safe").load((repo / PRE_COMMIT).read_text(encoding="utf-8"))
    [hook] = config["repos"][0]["hooks"]
    assert (config["repos"][0]["repo"], hook["id"], hook["entry"]) == (
        "local",
        "gatecfg-lint",
        "gatecfg lint",
    )


def test_write_ci_leaves_an_existing_pre_commit_config_alone_and_prints_the_entry(repo: Path) -> None:
    (repo / PRE_COMMIT).write_text("repos: []\n", encoding="utf-8")
    result = run_cli("init", "--write-ci", "--install", PINNED)
    assert result.code == 0, result.err
    assert (repo / PRE_COMMIT).read_text() == "repos: []\n"
    assert ".pre-commit-config.yaml exists, left as it was: add this hook to it" in result.out


def test_init_elsewhere_records_the_gates_root_for_later_commands(repo: Path) -> None:
    assert run_cli("init", "--gates", "ci/gates").code == 0
    assert (repo / ".gatecfg.toml").read_text() == 'gates = "ci/gates"\n'
    linted = run_cli("lint")  # no --gates: the settings file says where
    assert linted.code == 0
    assert "2 files checked, 0 errors" in linted.err + linted.out


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def runs(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def test_ci_installs_gatecfg_from_the_pinned_source_never_a_bare_package_name(repo: Path) -> None:
    assert run_cli("init", "--write-ci", "--install", PINNED).code == 0
    installs = [run for run in runs(load(repo / WORKFLOW)) if run.startswith("pip ")]
    assert installs == [f"pip install '{REQUIREMENT}'"] * 2
    assert shlex.split(installs[0]) == ["pip", "install", REQUIREMENT]


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        pytest.param(
            {"url": "https://github.com/acme/gatecfg", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
            REQUIREMENT,
            id="git",
        ),
        pytest.param(
            {"url": "https://example.com/gatecfg-1.0-py3-none-any.whl", "archive_info": {}},
            "gatecfg[postgres] @ https://example.com/gatecfg-1.0-py3-none-any.whl",
            id="wheel-url",
        ),
        pytest.param({"url": "file:///nowhere/gatecfg-1.0.whl", "archive_info": {}}, None, id="local-wheel"),
        pytest.param(None, None, id="index"),
    ],
)
def test_the_install_source_is_where_this_gatecfg_came_from(
    monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, Any] | None, expected: str | None
) -> None:
    class Installed:
        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return None if direct_url is None else json.dumps(direct_url)

    monkeypatch.setattr(init.metadata, "distribution", lambda name: Installed())
    assert init.installed_requirement() == expected


def test_write_ci_without_a_known_source_is_refused_and_writes_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init, "installed_requirement", lambda: None)
    result = run_cli("init", "--write-ci")
    assert result.code == 2
    assert "--write-ci: error: cannot tell where CI should install gatecfg from" in result.err
    assert "--install 'git+https://github.com/ORG/gatecfg@COMMIT'" in result.err
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


def test_an_unpinned_git_source_is_refused(repo: Path) -> None:
    result = run_cli("init", "--write-ci", "--install", "git+https://github.com/acme/gatecfg")
    assert result.code == 2
    assert "is not pinned: CI would install whatever the branch holds that night" in result.err


def test_write_ci_adds_the_missing_ci_files_to_an_existing_setup(repo: Path) -> None:
    assert run_cli("init", "--test", TEST).code == 0
    base = (repo / "gates" / "base.yaml").read_text(encoding="utf-8")
    added = run_cli("init", "--test", TEST, "--write-ci", "--install", PINNED)
    assert added.code == 0, added.err
    assert "wrote .github/workflows/gatecfg.yml (GitHub workflow)" in added.out
    assert (repo / PRE_COMMIT).exists()
    assert (repo / "gates" / "base.yaml").read_text(encoding="utf-8") == base
    again = run_cli("init", "--test", TEST, "--write-ci", "--install", PINNED)
    assert again.code == 0
    assert "nothing to add: every CI file exists" in again.out


def test_gitlab_ci_gets_a_job_file_and_an_include(repo: Path) -> None:
    result = run_cli("init", "--test", TEST, "--write-ci", "--ci", "gitlab", "--install", PINNED)
    assert result.code == 0, result.err
    assert not (repo / WORKFLOW).exists()
    assert load(repo / GITLAB_CI) == {"include": [{"local": GITLAB_JOBS.as_posix()}]}
    jobs = load(repo / GITLAB_JOBS)
    nightly = jobs["gatecfg-nightly"]
    assert nightly["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    assert [shlex.split(line) for line in nightly["script"]] == [
        ["pip", "install", REQUIREMENT],
        ["pytest", TEST],
        ["gatecfg", "evaluate", "--test", TEST, "--record", "metrics.jsonl", "--write"],
    ]
    assert jobs["gatecfg-merge-request"]["variables"] == {"GATECFG_DB_URL": "$GATECFG_DB_URL_READONLY"}


def test_an_existing_gitlab_ci_file_is_left_and_the_include_printed(repo: Path) -> None:
    (repo / GITLAB_CI).write_text("stages: [test]\n", encoding="utf-8")
    result = run_cli("init", "--write-ci", "--ci", "gitlab", "--install", PINNED)
    assert result.code == 0, result.err
    assert (repo / GITLAB_CI).read_text(encoding="utf-8") == "stages: [test]\n"
    assert (repo / GITLAB_JOBS).exists()
    assert f'include:\n  - local: "{GITLAB_JOBS.as_posix()}"' in result.out


def test_a_remote_pre_commit_entry_needs_its_repo_and_rev(repo: Path) -> None:
    lone = run_cli("init", "--pre-commit-repo", "https://github.com/acme/gatecfg")
    assert lone.code == 2
    assert "--pre-commit-repo and --pre-commit-rev go together" in lone.err
    both = ("--pre-commit-repo", "https://github.com/acme/gatecfg", "--pre-commit-rev", "v1.0.0")
    assert run_cli("init", "--write-ci", "--install", PINNED, *both).code == 0
    [entry] = load(repo / PRE_COMMIT)["repos"]
    assert entry == {
        "repo": "https://github.com/acme/gatecfg",
        "rev": "v1.0.0",
        "hooks": [{"id": "gatecfg-lint"}],
    }


@pytest.mark.parametrize("rev", ["main", "stable", "HEAD"])
def test_a_remote_pre_commit_entry_is_never_pinned_to_a_branch(repo: Path, rev: str) -> None:
    result = run_cli("init", "--pre-commit-repo", "https://github.com/acme/gatecfg", "--pre-commit-rev", rev)
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines() == [
        f'--pre-commit-rev: error: "{rev}" looks like a branch: pre-commit installs a hook once per rev, '
        "so the hook would not follow it",
        "  hint: pin a release tag (v0.1.0) or a full commit hash (docs/install.md, Releases)",
    ]
    assert not (repo / "gates").exists()  # nothing half-written


@pytest.mark.parametrize("rev", ["v0.1.0", "0.1.0", "3f2a9c1e" * 5])
def test_a_remote_pre_commit_entry_takes_a_release_tag_or_a_commit(repo: Path, rev: str) -> None:
    result = run_cli("init", "--pre-commit-repo", "https://github.com/acme/gatecfg", "--pre-commit-rev", rev)
    assert result.code == 0, result.err
    assert f"rev: {rev}" in result.out or f'rev: "{rev}"' in result.out


@pytest.mark.skipif(shutil.which("pre-commit") is None, reason="pre-commit is not installed")
def test_the_written_pre_commit_config_runs_as_written(repo: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--test", TEST, "--write-ci", "--install", PINNED).code == 0
    git(repo, "add", ".")
    env = {**subprocess_env(), "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}

    def pre_commit() -> subprocess.CompletedProcess[str]:
        command = ["pre-commit", "run", "--all-files", "--color", "never"]
        return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)

    clean = pre_commit()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "gatecfg lint" in clean.stdout
    assert "Passed" in clean.stdout
    (repo / "gates" / "test_tiny_ci.yaml").write_text(f"test: {TEST}\ngates:\n  train/grad_norm: 3\n")
    git(repo, "add", ".")
    broken = pre_commit()
    assert broken.returncode == 1
    assert "gates/test_tiny_ci.yaml:3:" in broken.stdout


HOSTILE = ["x.py; touch PWNED", "tests/a: b.py", "tests/*.py", "tests/&a.py", "tests/%x.py", "tests/@x.py",
           "tests/[x.py", "tests/it's \"q\".py", "tests/$(touch PWNED).py"]  # fmt: skip


@pytest.mark.parametrize("test", HOSTILE)
def test_a_hostile_test_name_is_written_as_data(repo: Path, test: str) -> None:
    result = run_cli(
        "init", "--test", test, "--write-ci", "--install", PINNED, "--ci", "github", "--ci", "gitlab"
    )
    assert result.code == 0, result.err
    tree = gatecfg.load_gates(repo / "gates")
    assert list(tree.tests) == [test]  # the gate file lints and names the same test
    for run in runs(load(repo / WORKFLOW)) + load(repo / GITLAB_JOBS)["gatecfg-nightly"]["script"]:
        words = shlex.split(run)
        assert test not in words or words[0] in ("pytest", "gatecfg")
    assert ["pytest", test] in [shlex.split(run) for run in runs(load(repo / WORKFLOW))]
    assert not (repo / "PWNED").exists()


@pytest.mark.parametrize(
    ("test", "message"),
    [
        pytest.param("tests/a\nb.py", "holds the control character U+000A", id="newline"),
        pytest.param("tests/\u202eyp.x", "holds the control character U+202E", id="bidi"),
        pytest.param("", "is empty", id="empty"),
        pytest.param(".", "names no file", id="dot"),
        pytest.param("/", "names no file", id="slash"),
        pytest.param("tests/", "names no file", id="folder"),
        pytest.param("tests/${{ github.event.issue.title }}.py", "GitHub Actions would evaluate", id="expr"),
    ],
)
def test_a_test_name_that_cannot_be_written_is_refused(repo: Path, test: str, message: str) -> None:
    result = run_cli("init", "--test", test, "--write-ci", "--install", PINNED)
    assert result.code == 2
    assert result.err.startswith("--test: error: ")
    assert message in result.err
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


def test_a_gates_root_with_a_quote_gives_a_settings_file_that_parses(repo: Path) -> None:
    assert run_cli("init", "--gates", 'ci/"g').code == 0
    assert tomllib.loads((repo / ".gatecfg.toml").read_text(encoding="utf-8")) == {"gates": 'ci/"g'}
    assert run_cli("lint").code == 0


def test_a_workflow_for_a_hostile_test_name_passes_actionlint(repo: Path) -> None:
    assert run_cli("init", "--test", HOSTILE[0], "--write-ci", "--install", PINNED).code == 0
    checked = actionlint(repo / "lint", [(repo / WORKFLOW).read_text(encoding="utf-8")])
    assert checked.returncode == 0, checked.stdout + checked.stderr
