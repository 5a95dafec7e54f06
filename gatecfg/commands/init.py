"""`gatecfg init`: a team's first gates in their own repository: a commented base file with the shipped
defaults, one example gate file, and the pre-commit entry and CI files (GitHub, GitLab) that run them.

What init writes runs as written: the CI installs gatecfg from where this one came from (a git URL pinned
to its commit, or `--install`), and the pre-commit entry is a `repo: local` hook over the installed
gatecfg unless `--pre-commit-repo` and `--pre-commit-rev` name a real remote. Every name init was given
reaches YAML, TOML and shell through `escape.quoted` (and `shlex.quote` for a shell word), so no name can
run a command or change what a file says.

Nothing that exists is overwritten: every file is checked before the first one is written, so a refused
init leaves the repository as it was. In a repository that has its base file already, `--write-ci` adds
the CI files that are missing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gatecfg import __version__
from gatecfg.errors import EXIT_OK, InputError, Location, Problem
from gatecfg.escape import quoted
from gatecfg.gate_files import BASE_NAME, display_path
from gatecfg.models import name_problem
from gatecfg.settings import CONFIG_NAME, gates_root
from gatecfg.textio import write_text

WORKFLOW = Path(".github/workflows/gatecfg.yml")
GITLAB_JOBS = Path(".gitlab/ci/gatecfg.yml")
GITLAB_CI = Path(".gitlab-ci.yml")
PRE_COMMIT = Path(".pre-commit-config.yaml")
EXTRAS = "postgres"  # the CI's store is PostgreSQL (docs/store.md)

BASE_HEADER = """\
# Defaults and policy for every gate file under {gates}/ (written by `gatecfg init`, gatecfg {version}).
# A gate file's one-liner (`train/grad_norm:`) takes its `steps` and `constraint` from here.
# Changing a `steps` or `constraint` literal here re-keys every one-liner that inherits it: run
# `gatecfg diff --base origin/main` before merging to see which baselines cold-start.
# Add your own metrics under `defaults:` (docs/gate-language.md); `gatecfg resolve` shows what each
# gate resolves to and the file:line every literal came from.
"""

RULES_EXAMPLE = """\
# rules:                         # checks lint runs over every gate file (docs/gate-language.md), e.g.
#   - name: mfu-tracked
#     when: gated
#     require: [perf/actor_train_mfu]
#     reason: a throughput drop explains most metric shifts
"""

EXAMPLE = """\
# One gate file per e2e test (written by `gatecfg init`): rename it, set `test:` to the test's path, and
# list the metrics the test logs. `gatecfg lint` checks it, `gatecfg evaluate --test T` judges a run.
test: {test}
gates:
  train/grad_norm:               # a one-liner: steps and constraint from base.yaml
  rollout/raw_reward:
  perf/actor_train_mfu:          # tracked: stored and reported against history, never fails
    steps: last
    constraint: null
"""

PRE_COMMIT_LOCAL = """\
repos:
  - repo: local                  # the gatecfg installed where pre-commit runs (docs/pre-commit.md)
    hooks:
      - id: gatecfg-lint
        name: gatecfg lint
        entry: gatecfg lint
        language: system
        files: {files}
        require_serial: true
"""

PRE_COMMIT_REMOTE = """\
repos:
  - repo: {repo}
    rev: {rev}
    hooks:
      - id: gatecfg-lint
"""

WORKFLOW_TEXT = """\
# Written by `gatecfg init`: lint and re-key preview on pull requests, evaluate and store nightly.
# docs/github-actions.md explains each step; the history store URL comes from a repository secret.
name: gatecfg
on:
  pull_request:
  schedule:
    - cron: "0 3 * * *"

permissions:
  contents: read

jobs:
  gates:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: {install}
      - name: Lint the gate files (annotations on the PR's lines)
        run: gatecfg lint --format github
      - name: Fetch the base branch (the checkout holds one commit)
        run: git fetch --depth=1 origin "$BASE_REF"
        env:
          BASE_REF: ${{{{ github.base_ref }}}}
      - name: Which baselines does this PR re-key?
        run: gatecfg diff --base "origin/$BASE_REF" --format github
        env:
          BASE_REF: ${{{{ github.base_ref }}}}
          GATECFG_DB_URL: ${{{{ secrets.GATECFG_DB_URL_READONLY }}}}

  nightly:
    if: github.event_name == 'schedule'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: {install}
      - name: e2e test (writes metrics.jsonl)
        run: {pytest}
      - name: Gate the run and store it into history
        run: {evaluate}
        env:
          GATECFG_DB_URL: ${{{{ secrets.GATECFG_DB_URL }}}}
"""

GITLAB_TEXT = """\
# Written by `gatecfg init`: lint and re-key preview on merge requests, evaluate and store on scheduled
# pipelines. Set the CI/CD variables GATECFG_DB_URL (masked) and GATECFG_DB_URL_READONLY.
gatecfg-merge-request:
  image: python:3.11
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
  variables:
    GATECFG_DB_URL: $GATECFG_DB_URL_READONLY
  script:
    - {install}
    - gatecfg lint
    - git fetch --depth=1 origin "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
    - gatecfg diff --base "origin/$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"

gatecfg-nightly:
  image: python:3.11
  rules:
    - if: $CI_PIPELINE_SOURCE == "schedule"
  script:
    - {install}
    - {pytest}
    - {evaluate}
"""

GITLAB_INCLUDE = """\
include:
  - local: {jobs}
"""


@dataclass(frozen=True)
class Planned:
    path: Path
    text: str
    what: str


@dataclass(frozen=True)
class PreCommitRemote:
    repo: str
    rev: str


def shipped_base(gates: Path) -> str:
    """The shipped defaults (the copy the demo carries, package data) under this init's own header. The
    demo's rules name its own tests' metrics, so they become a commented example."""
    demo = (resources.files("gatecfg") / "data" / "demo" / "gates" / BASE_NAME).read_text(encoding="utf-8")
    body = re.split(r"(?m)^rules:", demo, maxsplit=1)[0]
    while body.startswith("#"):  # the demo's own header lines
        body = body.split("\n", 1)[1]
    header = BASE_HEADER.format(gates=gates.as_posix(), version=__version__)
    return header + body + RULES_EXAMPLE


def init_command(
    *,
    gates: Path,
    test: str,
    write_ci: bool,
    ci: tuple[str, ...] = ("github",),
    install: str | None = None,
    pre_commit_remote: PreCommitRemote | None = None,
) -> int:
    """`install`: the pip requirement CI installs gatecfg by (default: where this gatecfg came from)."""
    _check_name("--test", test)
    _check_name("--gates", gates.as_posix())
    if Path(test).name in ("", ".", "..") or test.endswith("/"):
        raise InputError.at("--test", f"{quoted(test)} names no file", hint="give the test's path")
    requirement = _requirement(install) if install is not None else installed_requirement()
    pre_commit = _pre_commit(gates, pre_commit_remote)
    existing_setup = (gates / BASE_NAME).exists()
    if existing_setup and not write_ci:
        _refuse([Planned(gates / BASE_NAME, "", "base file")])
    planned: list[Planned] = []
    if not existing_setup:
        planned += [
            Planned(gates / BASE_NAME, shipped_base(gates), "base file"),
            Planned(gates / _example_name(test), EXAMPLE.format(test=quoted(test)), "gate file"),
        ]
        if gates_root(None) != gates:  # so that later commands find this gates root without --gates
            planned.append(
                Planned(Path(CONFIG_NAME), f"gates = {quoted(gates.as_posix())}\n", "settings file")
            )
        _refuse([p for p in planned if p.path.exists() or p.path.is_symlink()])
    ci_files = _ci_files(ci, test, requirement) if write_ci else []
    left = [p for p in ci_files if p.path.exists() or p.path.is_symlink()]
    planned += [p for p in ci_files if p not in left]
    if write_ci and not PRE_COMMIT.exists():
        planned.append(Planned(PRE_COMMIT, pre_commit, "pre-commit configuration"))
    for p in planned:
        write_text(p.path, p.text, what=p.what)
        print(f"wrote {display_path(p.path)} ({p.what})")
    for p in left:
        print(f"{display_path(p.path)} exists, left as it was")
    if GITLAB_CI in (p.path for p in left) and "gitlab" in ci:
        print(f"\nadd to {GITLAB_CI}:\n\n{GITLAB_INCLUDE.format(jobs=quoted(GITLAB_JOBS.as_posix()))}")
    if not write_ci:
        print(f"\nadd to .pre-commit-config.yaml (or rerun with --write-ci):\n\n{pre_commit}")
        if requirement is not None:
            workflow = _workflow(test, requirement)
            print(f"a GitHub workflow, for {WORKFLOW} (or rerun with --write-ci):\n\n{workflow}")
        else:
            print("for CI files, rerun with --write-ci --install SPEC (where CI installs gatecfg from)")
    elif PRE_COMMIT.exists() and not any(p.path == PRE_COMMIT for p in planned):
        print(f"\n{PRE_COMMIT} exists, left as it was: add this hook to it:\n\n{pre_commit}")
    if existing_setup and not planned:
        print("nothing to add: every CI file exists")
    print(
        "next: gatecfg lint\n"
        f"      gatecfg evaluate --test {shlex.quote(test)} --record metrics.jsonl --write"
        "   (the first nightly)",
        file=sys.stderr,
    )
    return EXIT_OK


def _check_name(flag: str, value: str) -> None:
    problem = name_problem(value) if value.strip() else "is empty"
    if problem is None and "${{" in value:
        # GitHub substitutes an expression into a `run:` line before any shell quoting applies.
        problem = "holds `${{`, which GitHub Actions would evaluate as an expression in the workflow"
    if problem is not None:
        raise InputError.at(flag, f"{quoted(value)} {problem}", hint="give a plain file path")


def _refuse(existing: list[Planned]) -> None:
    if existing:
        raise InputError(
            [
                Problem(
                    Location(display_path(p.path)),
                    f"exists already: `gatecfg init` never overwrites a {p.what}",
                    hint="move it away, init another folder with --gates DIR, or add the CI files with "
                    "--write-ci",
                )
                for p in existing
            ]
        )


def _pre_commit(gates: Path, remote: PreCommitRemote | None) -> str:
    if remote is not None:
        # pre-commit's own test for a mutable reference (a branch, a moving tag): it installs a hook once
        # per `rev` and never again, so every machine would lint with whatever the branch held that day.
        if "." not in remote.rev and not re.fullmatch(r"[0-9a-fA-F]+", remote.rev):
            raise InputError.at(
                "--pre-commit-rev",
                f"{quoted(remote.rev)} looks like a branch: pre-commit installs a hook once per rev, so the "
                "hook would not follow it",
                hint="pin a release tag (v0.1.0) or a full commit hash (docs/install.md, Releases)",
            )
        return PRE_COMMIT_REMOTE.format(repo=quoted(remote.repo), rev=quoted(remote.rev))
    files = "^" + re.escape(gates.as_posix().strip("/")) + r"/.*\.ya?ml$"
    return PRE_COMMIT_LOCAL.format(files=quoted(files))


def _shell(*words: str) -> str:
    """A shell command line of these words, each quoted for the shell, as one YAML scalar."""
    return quoted(" ".join(shlex.quote(word) for word in words))


def _commands(test: str, requirement: str) -> dict[str, str]:
    return {
        "install": _shell("pip", "install", requirement),
        "pytest": _shell("pytest", test),
        "evaluate": _shell("gatecfg", "evaluate", "--test", test, "--record", "metrics.jsonl", "--write"),
    }


def _workflow(test: str, requirement: str) -> str:
    return WORKFLOW_TEXT.format(**_commands(test, requirement))


def _ci_files(ci: tuple[str, ...], test: str, requirement: str | None) -> list[Planned]:
    if requirement is None:
        raise InputError.at(
            "--write-ci",
            "cannot tell where CI should install gatecfg from: this gatecfg came from a package index or "
            "a local folder, and no published package is assumed",
            hint="give it with --install, e.g. --install 'git+https://github.com/ORG/gatecfg@COMMIT' "
            f"(or --install 'gatecfg[{EXTRAS}]==VERSION' when your CI's index serves that release)",
        )
    files = []
    if "github" in ci:
        files.append(Planned(WORKFLOW, _workflow(test, requirement), "GitHub workflow"))
    if "gitlab" in ci:
        files.append(
            Planned(GITLAB_JOBS, GITLAB_TEXT.format(**_commands(test, requirement)), "GitLab CI job file")
        )
        include = GITLAB_INCLUDE.format(jobs=quoted(GITLAB_JOBS.as_posix()))
        files.append(Planned(GITLAB_CI, include, "GitLab CI configuration"))
    return files


def _requirement(spec: str) -> str:
    """`--install`: a URL (a git URL pinned to a commit or tag, a wheel) gets the extras CI needs; a
    requirement (`gatecfg[postgres]==1.2`) is taken as it is."""
    _check_name("--install", spec)
    if " @ " in spec or "://" not in spec:
        return spec
    if spec.startswith("git+") and "@" not in spec.rsplit("/", 1)[-1]:
        raise InputError.at(
            "--install",
            f"{quoted(spec)} is not pinned: CI would install whatever the branch holds that night",
            hint="pin it to a commit or a tag: git+https://github.com/ORG/gatecfg@COMMIT",
        )
    return f"gatecfg[{EXTRAS}] @ {spec}"


def installed_requirement() -> str | None:
    """The pip requirement that installs this gatecfg again, read from where it was installed from
    (PEP 610's direct_url.json): a git install as its URL at its commit, a wheel or archive by its URL, an
    editable checkout by its git remote at its current commit. None from an index or a local path, which
    CI cannot reach."""
    try:
        text = metadata.distribution("gatecfg").read_text("direct_url.json")
        found = json.loads(text) if text else None
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("url"), str):
        return None
    url: str = found["url"]
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and vcs.get("commit_id"):
        return f"gatecfg[{EXTRAS}] @ git+{url}@{vcs['commit_id']}"
    if url.startswith("file:"):
        return _checkout_requirement(Path(unquote(urlsplit(url).path)))
    return f"gatecfg[{EXTRAS}] @ {url}"


def _checkout_requirement(folder: Path) -> str | None:
    """A local checkout's remote (https or ssh) at its commit, when it has both."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), *args], capture_output=True, text=True, check=False, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None

    remote, commit = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
    if remote is None or commit is None or ("://" not in remote and not remote.startswith("git@")):
        return None
    if remote.startswith("git@"):  # scp-like: git@github.com:org/gatecfg.git
        host, path = remote.removeprefix("git@").split(":", 1)
        remote = f"ssh://git@{host}/{path}"
    return f"gatecfg[{EXTRAS}] @ git+{remote}@{commit}"


def _example_name(test: str) -> str:
    """`tests/e2e/test_example_ci.py` -> `test_example_ci.yaml`: one gate file per test, named after it;
    characters a file name should not hold become `_`."""
    stem = Path(test).name.removesuffix(".py")
    safe = re.sub(r"[^\w.-]+", "_", stem).strip("._") or "gate"
    return f"{safe}.yaml"
