"""The smaller day-one findings of issue 27, each pinned: diff's fetch hint, the pull request that adds
gates/, `gatecfg schema` outside gatecfg's checkout, the pre-commit hook's docs link."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import REPO, run_cli
from rekey_helpers import git, make_repo


def test_an_unknown_remote_branch_gets_a_fetch_that_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No remote `origin`: the hint never spells `origin/origin/main`."""
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    result = run_cli("diff", "--base", "origin/main")
    assert result.code == 2
    assert "origin/origin" not in result.err
    assert (
        "this clone has no git remote: `git remote add origin URL`, then `git fetch --depth=1 origin main`"
        in result.err
    )
    git(repo, "remote", "add", "upstream", "https://example.com/x.git")
    other = run_cli("diff", "--base", "origin/main")
    assert "origin/origin" not in other.err
    assert (
        "`origin` is not a remote of this clone (remotes: upstream): `git fetch --depth=1 upstream main`, "
        "then pass `--base upstream/main`" in other.err
    )


def test_the_pull_request_that_adds_gates_lists_them_as_added_without_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "before gatecfg")
    shutil.copytree(REPO / "gates", repo / "gates")
    monkeypatch.chdir(repo)
    result = run_cli("diff", "--base", "main")
    assert (result.code, result.err) == (0, "")
    assert re.search(r"0 cause\(s\) re-key 0 gate\(s\); \d+ gate\(s\) added, 0 removed", result.out)


def test_schema_without_arguments_writes_nothing_outside_gatecfgs_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("schema")
    assert result.code == 2
    assert "hint: `gatecfg schema --dir DIR`, or for an editor or check-jsonschema one file" in result.err
    assert list(tmp_path.iterdir()) == []
    assert run_cli("schema", "--dir", "out").code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "base.schema.json",
        "gatefile.schema.json",
    ]


def test_schema_without_arguments_still_writes_in_gatecfgs_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("schema")
    assert result.code == 0, result.err


def test_every_docs_link_in_the_hook_definitions_exists() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    linked = re.findall(r"docs/[\w./-]+\.md", text)
    assert linked
    for path in linked:
        assert (REPO / path).is_file(), path


def test_the_readme_says_the_test_database_role_must_create_databases() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.search(r"GATECFG_TEST_PG_URL[^\n]*\n?[^\n]*(CREATEDB|create databases)", readme)
