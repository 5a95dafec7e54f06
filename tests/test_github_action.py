"""The GitHub Action (`action.yml`) and every workflow in docs/github-actions.md pass `actionlint`, with the
docs' `uses:` of the action pointed at this checkout so that actionlint reads action.yml and checks each
step's inputs against it; the action's shell scripts pass `shellcheck`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from ruamel.yaml import YAML

ACTION_REF = "your-org/gatecfg@v0.1.0"


def tool(name: str) -> str:
    """A linter installed by the dev extra: beside this Python first (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is missing: pip install -e '.[dev]'"
    return found


def doc_workflows() -> list[str]:
    text = (REPO / "docs" / "github-actions.md").read_text(encoding="utf-8")
    return re.findall(r"```yml\n(.*?)```", text, re.DOTALL)


def actionlint(project: Path, workflows: list[str]) -> subprocess.CompletedProcess[str]:
    """actionlint over these workflows in a git project whose root holds a copy of action.yml."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    folder = project / ".github" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "action.yml", project / "action.yml")
    # The docs' self-hosted GPU runner label, declared as a team with such runners declares it.
    (project / ".github" / "actionlint.yaml").write_text("self-hosted-runner:\n  labels: [gpu-h100]\n")
    for number, workflow in enumerate(workflows):
        (folder / f"docs-{number}.yml").write_text(workflow.replace(ACTION_REF, "./"), encoding="utf-8")
    return subprocess.run(
        [tool("actionlint"), "-oneline", "-shellcheck", tool("shellcheck")],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )


def test_docs_workflows_and_the_action_pass_actionlint(tmp_path: Path) -> None:
    workflows = doc_workflows()
    assert len(workflows) == 4
    assert sum(ACTION_REF in w for w in workflows) == 3
    result = actionlint(tmp_path, workflows)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_actionlint_reads_the_action_inputs(tmp_path: Path) -> None:
    # The control: a misspelt input of the action, and a required one left out, are caught.
    workflow = (
        "on: push\njobs:\n  gate:\n    runs-on: ubuntu-latest\n    steps:\n"
        f"      - uses: {ACTION_REF}\n        with:\n          tset: tests/e2e/test_tiny_ci.py\n"
    )
    result = actionlint(tmp_path, [workflow])
    assert result.returncode == 1
    assert 'input "tset" is not defined in action "gatecfg"' in result.stdout
    assert 'missing input "command" which is required by action "gatecfg"' in result.stdout


def action_scripts() -> list[tuple[str, str]]:
    action = YAML(typ="safe").load((REPO / "action.yml").read_text(encoding="utf-8"))
    return [(step["name"], step["run"]) for step in action["runs"]["steps"] if "run" in step]


@pytest.mark.parametrize(("name", "script"), action_scripts(), ids=[n for n, _ in action_scripts()])
def test_action_scripts_pass_shellcheck(name: str, script: str) -> None:
    # Expressions stay out of the scripts (inputs come in as environment variables), so they are bash.
    assert "${{" not in script
    result = subprocess.run(
        [tool("shellcheck"), "--shell=bash", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, "")


def test_action_declares_the_documented_interface() -> None:
    action = YAML(typ="safe").load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {"command", "test", "record", "db-url", "write", "fail-on-rekey"}
    assert set(action["outputs"]) >= {"exit-code", "report-json"}
    docs = (REPO / "docs" / "github-actions.md").read_text(encoding="utf-8")
    for name in [*action["inputs"], *action["outputs"]]:
        assert f"| `{name}` |" in docs, f"docs/github-actions.md does not describe `{name}`"
