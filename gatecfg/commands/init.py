"""`gatecfg init`: a team's first gates in their own repository: a commented base file with the shipped
defaults, one example gate file, and the pre-commit entry and GitHub workflow that run them.

Nothing that exists is overwritten: every file is checked before the first one is written, so a refused
init leaves the repository as it was.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gatecfg import __version__
from gatecfg.errors import EXIT_OK, InputError, Location, Problem
from gatecfg.resolve import BASE_NAME, display_path
from gatecfg.settings import CONFIG_NAME, gates_root
from gatecfg.textio import write_text

WORKFLOW = Path(".github/workflows/gatecfg.yml")
PRE_COMMIT = Path(".pre-commit-config.yaml")

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
# list the metrics the test logs. `gatecfg lint` checks it, `gatecfg evaluate --test {test}` judges a run.
test: {test}
gates:
  train/grad_norm:               # a one-liner: steps and constraint from base.yaml
  rollout/raw_reward:
  perf/actor_train_mfu:          # tracked: stored and reported against history, never fails
    steps: last
    constraint: null
"""

PRE_COMMIT_ENTRY = """\
repos:
  - repo: https://github.com/<org>/gatecfg   # where your team takes gatecfg from
    rev: v{version}
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
      - run: pip install 'gatecfg[postgres]'
      - name: Lint the gate files (annotations on the PR's lines)
        run: gatecfg lint --format github
      - name: Fetch the base branch (the checkout holds one commit)
        run: git fetch --depth=1 origin ${{{{ github.base_ref }}}}
      - name: Which baselines does this PR re-key?
        run: gatecfg diff --base origin/${{{{ github.base_ref }}}} --format github
        env:
          GATECFG_DB_URL: ${{{{ secrets.GATECFG_DB_URL_READONLY }}}}

  nightly:
    if: github.event_name == 'schedule'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install 'gatecfg[postgres]'
      - name: e2e test (writes metrics.jsonl)
        run: pytest {test}
      - name: Gate the run and store it into history
        run: gatecfg evaluate --test {test} --record metrics.jsonl --write
        env:
          GATECFG_DB_URL: ${{{{ secrets.GATECFG_DB_URL }}}}
"""


@dataclass(frozen=True)
class Planned:
    path: Path
    text: str
    what: str


def shipped_base(gates: Path) -> str:
    """The shipped defaults (the copy the demo carries, package data) under this init's own header. The
    demo's rules name its own tests' metrics, so they become a commented example."""
    demo = (resources.files("gatecfg") / "data" / "demo" / "gates" / BASE_NAME).read_text(encoding="utf-8")
    body = re.split(r"(?m)^rules:", demo, maxsplit=1)[0]
    while body.startswith("#"):  # the demo's own header lines
        body = body.split("\n", 1)[1]
    header = BASE_HEADER.format(gates=gates.as_posix(), version=__version__)
    return header + body + RULES_EXAMPLE


def init_command(*, gates: Path, test: str, write_ci: bool) -> int:
    planned = [
        Planned(gates / BASE_NAME, shipped_base(gates), "base file"),
        Planned(gates / _example_name(test), EXAMPLE.format(test=test), "gate file"),
    ]
    if gates_root(None) != gates:  # so that later commands find this gates root without --gates
        planned.append(Planned(Path(CONFIG_NAME), f'gates = "{gates.as_posix()}"\n', "settings file"))
    workflow = WORKFLOW_TEXT.format(test=test)
    pre_commit = PRE_COMMIT_ENTRY.format(version=__version__)
    if write_ci:
        planned.append(Planned(WORKFLOW, workflow, "GitHub workflow"))
        if not PRE_COMMIT.exists():
            planned.append(Planned(PRE_COMMIT, pre_commit, "pre-commit configuration"))
    existing = [p for p in planned if p.path.exists() or p.path.is_symlink()]
    if existing:
        raise InputError(
            [
                Problem(
                    Location(display_path(p.path)),
                    f"exists already: `gatecfg init` never overwrites a {p.what}",
                    hint="move it away, or init another folder with --gates DIR",
                )
                for p in existing
            ]
        )
    for p in planned:
        write_text(p.path, p.text, what=p.what)
        print(f"wrote {display_path(p.path)} ({p.what})")
    if not write_ci:
        print(f"\nadd to .pre-commit-config.yaml (or rerun with --write-ci):\n\n{pre_commit}")
        print(f"a GitHub workflow, for {WORKFLOW} (or rerun with --write-ci):\n\n{workflow}")
    elif PRE_COMMIT.exists() and not any(p.path == PRE_COMMIT for p in planned):
        print(f"\n{PRE_COMMIT} exists, left as it was: add this hook to it:\n\n{pre_commit}")
    print(
        "next: gatecfg lint\n"
        f"      gatecfg evaluate --test {test} --record metrics.jsonl --write   (the first nightly)",
        file=sys.stderr,
    )
    return EXIT_OK


def _example_name(test: str) -> str:
    """`tests/e2e/test_example_ci.py` -> `test_example_ci.yaml`: one gate file per test, named after it."""
    return Path(test).with_suffix(".yaml").name
