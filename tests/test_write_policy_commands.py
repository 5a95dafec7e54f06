"""A pull request cannot change the history by any command: the write policy `evaluate --write` uses
(gatecfg.write_policy.check_write) stands in front of `import`, `trust`, `untrust`, `shifts --undo`,
`carry`, `prune --yes` and `db copy`, with the same `--override-write-policy` and the same policies
(the command's test's, else every test's)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import CliResult, run_cli

from gatecfg.store import Store

TEST = "tests/t_ci.py"
GITHUB_PR = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_REF_NAME": "5/merge",
    "GITHUB_HEAD_REF": "feat",
    "GITHUB_BASE_REF": "main",
}

# Each command that changes a store, as a PR job would run it against the nightly store h.db.
COMMANDS = {
    "import": ["import", "--gates", "gates", "--test", TEST, "export.csv"],
    "trust": ["trust", "--run-id", "first"],
    "untrust": ["untrust", "--commit", "abc"],
    "shifts-undo": ["shifts", "--undo", "1"],
    "carry": ["carry", "--gates", "gates", "--base", "HEAD", "--reason", "only the band changed"],
    "carry-undo": ["carry", "--gates", "gates", "--undo", "--metric", "eval/score"],
    "prune-orphaned": ["prune", "--gates", "gates", "--orphaned", "--yes"],
    "prune-keep": ["prune", "--gates", "gates", "--keep", "5", "--yes"],
    "db-copy": ["db", "copy", "--from", "sqlite:///h.db", "--to", "sqlite:///copy.db"],
    "db-copy-replace": ["db", "copy", "--from", "sqlite:///copy.db", "--to", "sqlite:///h.db", "--replace"],
}
WHERE = {
    "import": "gatecfg import",
    "trust": "gatecfg trust",
    "untrust": "gatecfg untrust",
    "shifts-undo": "--undo",
    "carry": "gatecfg carry",
    "carry-undo": "gatecfg carry",
    "prune-orphaned": "--yes",
    "prune-keep": "--yes",
    "db-copy": "gatecfg db copy",
    "db-copy-replace": "gatecfg db copy",
}
NO_DB = {"db-copy", "db-copy-replace"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """gates/, a store h.db holding one run, a second store copy.db and an import export."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (gates / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    for db in ("h.db", "copy.db"):
        argv = ["evaluate", "--gates", "gates", "--test", TEST, "--record", "r.jsonl", "--write"]
        assert run_cli(*argv, "--db", f"sqlite:///{db}", "--run-id", "first", "--commit", "abc").code == 0
    (tmp_path / "export.csv").write_text("run_id,date,commit,eval/score\nimported,2024-05-01,def,0.5\n")
    return tmp_path


def _run(name: str, *extra: str) -> CliResult:
    db = [] if name in NO_DB else ["--db", "sqlite:///h.db"]
    return run_cli(*COMMANDS[name], *db, *extra)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pull_request(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GITHUB_PR.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_pull_request_job_cannot_change_the_store_by_any_command(
    project: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    _pull_request(monkeypatch)
    stores = {db: _digest(project / db) for db in ("h.db", "copy.db")}
    result = _run(name)
    assert result.code == 2, result.err
    assert result.err.startswith(f"{WHERE[name]}: error: this job may not "), result.err
    assert "GitHub Actions runs this job for a pull request" in result.err
    assert {db: _digest(project / db) for db in stores} == stores
    assert not (project / "copy.db-journal").exists()


def test_an_override_lets_a_pull_request_job_repair_trust_and_says_so(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pull_request(monkeypatch)
    result = _run("untrust", "--override-write-policy", "the runner was broken")
    assert result.code == 0, result.err
    assert "gatecfg untrust: written under --override-write-policy: the runner was broken" in result.err
    with Store.open("sqlite:///h.db") as store:
        assert [row.trusted for row in store.runs()] == [False]


@pytest.mark.parametrize("reason", ["", "  ", "\n::error::FORGED", "a\u202eb"], ids=repr)
def test_an_override_reason_that_is_blank_or_forges_lines_is_refused(project: Path, reason: str) -> None:
    result = _run("trust", "--override-write-policy", reason)
    assert result.code == 2
    assert result.err.startswith("--override-write-policy: error: ")


def test_the_nightly_on_the_default_branch_may_import(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}}))
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "schedule", "GITHUB_REF_NAME": "main"}
    for key, value in {**env, "GITHUB_EVENT_PATH": str(event)}.items():
        monkeypatch.setenv(key, value)
    result = _run("import")
    assert result.code == 0, result.err
    with Store.open("sqlite:///h.db") as store:
        assert sorted(row.run.run_id for row in store.runs()) == ["first", "imported"]


def test_a_command_for_one_test_is_held_to_that_tests_policy(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "gates" / "base.yaml").write_text("version: 1\npolicy:\n  write:\n    branches: [nightly]\n")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    refused = _run("import")
    assert refused.code == 2
    assert "the branch is `main`; policy.write.branches allows `nightly`" in refused.err
    monkeypatch.setenv("GITHUB_REF_NAME", "nightly")
    assert _run("import").code == 0


@pytest.mark.parametrize("name", ["prune-orphaned", "carry"])
def test_what_only_lists_is_not_refused(project: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    _pull_request(monkeypatch)
    argv = [a for a in COMMANDS[name] if a != "--yes"] + (["--dry-run"] if name == "carry" else [])
    result = run_cli(*argv, "--db", "sqlite:///h.db")
    assert "this job may not" not in result.err


def test_outside_ci_every_command_changes_the_store_as_before(project: Path) -> None:
    assert _run("untrust").code == 0
    with Store.open("sqlite:///h.db") as store:
        assert [row.trusted for row in store.runs()] == [False]
