"""The `gatecfg-lint` hook through the real pre-commit (`pre-commit try-repo`), in a scratch repository with
one gate tree under `gates/` and another under `ci/gates/`.

try-repo installs the hook's environment from this checkout (`pip install .`, the core only) into a
temporary store on every call, so the test makes two calls in all: a clean run and a broken one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from rekey_helpers import git

BASE = "version: 1\ndefaults:\n  train/grad_norm: {steps: all, constraint: {rel_up: 0.5}}\n"
GOOD = "test: tests/{name}_ci.py\ngates:\n  train/grad_norm:\n"
BAD = "test: tests/{name}_bad_ci.py\ngates:\n  eval/score:\n"
TREES = ("gates", "ci/gates")


def try_repo(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GATECFG_"))}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "gatecfg-lint", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    git(root, "add", "-A")


@pytest.mark.slow
def test_the_hook_resolves_each_tree_and_reports_each_error_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, {"unrelated.yaml": "services:\n  web: {}\n"})  # outside any gates/ folder: not linted
    for tree in TREES:
        name = tree.replace("/", "_")
        write(repo, {f"{tree}/base.yaml": BASE, f"{tree}/team/one_liner.yaml": GOOD.format(name=name)})

    clean = try_repo(repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "gatecfg lint" in clean.stdout
    assert "Passed" in clean.stdout

    for tree in TREES:
        write(repo, {f"{tree}/team/bad.yaml": BAD.format(name=tree.replace("/", "_"))})
    broken = try_repo(repo)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    errors = [line for line in broken.stdout.splitlines() if ": error: " in line]
    assert errors == [
        f"{tree}/team/bad.yaml:3:3: error: gates.eval/score: `eval/score` is a one-liner but no base file "
        f"has defaults for it (searched: {tree}/base.yaml)"
        for tree in sorted(TREES)
    ]
    assert "gatecfg lint: 6 files checked, 2 errors" in broken.stdout


HOOK_ENV_MB = 40  # what the hook's environment may weigh: the core install only (docs/pre-commit.md)
STORE_PACKAGES = {"numpy", "sqlalchemy", "alembic", "orjson", "rich"}


@pytest.mark.slow
def test_the_hooks_environment_is_the_core_install_under_40_mb(tmp_path: Path) -> None:
    """As another repository installs it: pinned to this checkout's commit (what `rev:` names; try-repo
    removes its environment when it is done, so it cannot be weighed)."""
    head = ["git", "-C", str(REPO), "rev-parse", "HEAD"]
    commit = subprocess.run(head, capture_output=True, text=True, check=False)
    if commit.returncode != 0:
        pytest.skip("the checkout is not a git repository")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    config = (
        f"repos:\n  - repo: {REPO}\n    rev: {commit.stdout.strip()}\n    hooks:\n      - id: gatecfg-lint\n"
    )
    write(repo, {".pre-commit-config.yaml": config, "gates/base.yaml": BASE})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GATECFG_"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit")
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "install-hooks"],
        cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [environment] = (tmp_path / "pre-commit").glob("repo*/py_env-*")
    size = sum(f.stat().st_size for f in environment.rglob("*") if f.is_file() and not f.is_symlink())
    assert size < HOOK_ENV_MB * 1e6, f"the hook's environment is {size / 1e6:.0f} MB"
    installed = {
        d.name.split("-")[0].lower() for d in environment.glob("lib/python*/site-packages/*.dist-info")
    }
    assert "pydantic" in installed
    assert not installed & STORE_PACKAGES
