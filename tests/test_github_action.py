"""The GitHub Action (`action.yml`) and every workflow in docs/github-actions.md pass `actionlint`, with the
docs' `uses:` of the action pointed at this checkout so that actionlint reads action.yml and checks each
step's inputs against it; the action's shell scripts pass `shellcheck`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from ruamel.yaml import YAML
from test_evaluate_cli import TEST, write_gates, write_record

import gatecfg

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


# ---------------------------------------------------------------------- the action's script, run locally


def run_action(project: Path, tmp_path: Path, **inputs: str) -> tuple[int, dict[str, str], str]:
    """The action's gatecfg step as the runner runs it: inputs as environment variables, GITHUB_OUTPUT and
    GITHUB_STEP_SUMMARY files; gatecfg from this checkout's environment."""
    [script] = [run for name, run in action_scripts() if name.startswith("gatecfg ")]
    runner = tmp_path / "runner"
    runner.mkdir(exist_ok=True)
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(runner / "output"),
        "GITHUB_STEP_SUMMARY": str(runner / "summary.md"),
        # Every input is set on the runner, to its default when the workflow does not give it.
        **{f"GATECFG_{name.upper()}": value for name, value in {**DEFAULTS, **inputs}.items()},
    }
    (runner / "output").write_text("")
    result = subprocess.run(
        ["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    outputs = dict(line.split("=", 1) for line in (runner / "output").read_text().splitlines())
    return result.returncode, outputs, result.stdout + result.stderr


DEFAULTS = {
    "command": "",
    "test": "",
    "record": "",
    "gates": "gates",
    "action_db_url": "",
    "write": "false",
    "fail_on_rekey": "false",
    "base": "",
    "series": "",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "repo"
    project.mkdir()
    gates = write_gates(project, "  rollout/raw_reward:\n    enforce: true\n")
    for night, reward in enumerate([0.5, 0.55, 0.45]):
        points = {"rollout/raw_reward": [(0, 0.2), (1, reward)]}
        gatecfg.evaluate(
            TEST, points, gates=gates, db=str(project / "history.db"), write=True, run_id=f"n{night}"
        )
    write_record(project / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    return project


def test_action_evaluate_fails_on_an_enforced_gate_and_sets_outputs(project: Path, tmp_path: Path) -> None:
    code, outputs, stdout = run_action(
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl\n", action_db_url="history.db"
    )
    assert code == 1
    assert outputs["exit-code"] == "1"
    assert json.loads(Path(outputs["report-json"]).read_text())["exit_code"] == 1
    assert Path(outputs["junit"]).read_text().startswith("<?xml")
    assert "rollout/raw_reward" in Path(outputs["report-markdown"]).read_text()
    assert "::error " in stdout  # an annotation
    assert "rollout/raw_reward" in (tmp_path / "runner" / "summary.md").read_text()


@pytest.mark.parametrize(("fail_on_rekey", "expected"), [("false", 0), ("true", 1)], ids=["warn", "fail"])
def test_action_fail_on_rekey(project: Path, tmp_path: Path, fail_on_rekey: str, expected: int) -> None:
    base = project / "gates" / "base.yaml"
    base.write_text(base.read_text().replace("rel_down: 0.2,", "rel_down: 0.25,"))
    code, outputs, stdout = run_action(
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl", action_db_url="history.db",
        fail_on_rekey=fail_on_rekey,
    )  # fmt: skip
    assert (code, outputs["exit-code"]) == (expected, str(expected))
    assert len(json.loads(Path(outputs["report-json"]).read_text())["warnings"]) == 1
    assert ("re-keyed and start cold, and fail-on-rekey is set" in stdout) == (expected == 1)


def test_action_lint_annotates_and_writes_the_problems(project: Path, tmp_path: Path) -> None:
    (project / "gates" / "bad.yaml").write_text("test: tests/e2e/test_bad_ci.py\ngates:\n  nope/metric:\n")
    code, outputs, stdout = run_action(project, tmp_path, command="lint")
    assert (code, outputs["exit-code"]) == (2, "2")
    assert stdout.startswith("::error file=gates/bad.yaml,line=3")
    [problem] = json.loads(Path(outputs["report-json"]).read_text())
    assert problem["path"] == "gates/bad.yaml"


def test_action_rejects_an_unknown_command(project: Path, tmp_path: Path) -> None:
    code, outputs, stdout = run_action(project, tmp_path, command="evaluat")
    assert (code, outputs["exit-code"]) == (2, "2")
    assert "command must be lint, diff or evaluate, not 'evaluat'" in stdout
