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
from typing import Any

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


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe").load((REPO / "action.yml").read_text(encoding="utf-8"))
    return loaded


EXPRESSION = re.compile(r"\$\{\{ (.*?) \}\}")


def evaluate_expression(text: str, inputs: dict[str, str], steps: dict[str, dict[str, str]]) -> str:
    """The few expressions action.yml uses: `inputs.NAME`, `steps.ID.outputs.NAME` and `a || b`."""

    def value(expression: str) -> str:
        for term in expression.split(" || "):
            kind, _, rest = term.partition(".")
            if kind == "inputs":
                found = inputs[rest]
            else:
                step, _, name = rest.partition(".outputs.")
                found = steps.get(step, {}).get(name, "")
            if found:
                return found
        return ""

    return EXPRESSION.sub(lambda m: value(m[1]), text)


def run_action(project: Path, tmp_path: Path, **given: str) -> tuple[int, dict[str, str], str]:
    """The action's steps after the install as the runner runs them: each step whose `if:` holds (its
    inputs as environment variables, a GITHUB_OUTPUT file of its own, one GITHUB_STEP_SUMMARY) until one
    fails; gatecfg from this checkout's environment. Returns the exit code, the action's outputs and the
    steps' output."""
    spec = action()
    inputs = {name: str(i.get("default", "")) for name, i in spec["inputs"].items()}
    inputs.update({name.replace("_", "-"): value for name, value in given.items()})
    runner = tmp_path / "runner"
    runner.mkdir(exist_ok=True)
    steps: dict[str, dict[str, str]] = {}
    code, shown = 0, ""
    for step in spec["runs"]["steps"]:
        condition = re.fullmatch(r"inputs\.command == '(\w+)'", step.get("if", ""))
        if step["name"].startswith("Install") or (condition and condition[1] != inputs["command"]):
            continue
        output = runner / f"output-{step['id']}"
        output.write_text("")
        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),  # the `gatecfg` on PATH runs this checkout's code
            "RUNNER_TEMP": str(runner),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(runner / "summary.md"),
            **{k: evaluate_expression(v, inputs, steps) for k, v in step.get("env", {}).items()},
        }
        result = subprocess.run(
            ["bash", "-c", step["run"]], cwd=project, env=env, capture_output=True, text=True, check=False
        )
        steps[step["id"]] = dict(line.split("=", 1) for line in output.read_text().splitlines())
        code, shown = result.returncode, shown + result.stdout + result.stderr
        if code != 0:
            break
    outputs = {name: evaluate_expression(o["value"], inputs, steps) for name, o in spec["outputs"].items()}
    return code, {name: value for name, value in outputs.items() if value}, shown


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
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl\n", db_url="history.db"
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
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl", db_url="history.db",
        fail_on_rekey=fail_on_rekey,
    )  # fmt: skip
    assert (code, outputs["exit-code"]) == (expected, str(expected))
    assert len(json.loads(Path(outputs["report-json"]).read_text())["warnings"]) == 1
    assert ("re-keyed and start cold, and --fail-on-rekey is set: exit 1" in stdout) == (expected == 1)
    assert ("::error file=gates/" in stdout) == (expected == 1)  # the re-key's annotation


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


# ---------------------------------------------------------------------- inputs never reach a shell or git


def _git_project(project: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "gates"],
        check=True,
    )


@pytest.mark.parametrize(
    "base",
    [
        "origin/--upload-pack=touch pwned;false",
        "--upload-pack=touch pwned",
        "origin/-oProxyCommand=touch pwned",
        "origin/main;touch pwned",
        "origin/$(touch pwned)",
        "origin/main\ntouch pwned",
        "-c core.pager=touch pwned",
    ],
    ids=["upload-pack-after-origin", "upload-pack", "ssh-option", "semicolon", "substitution", "newline",
         "git-config"],
)  # fmt: skip
def test_a_base_input_is_a_revision_never_an_option_or_a_command(
    project: Path, tmp_path: Path, base: str
) -> None:
    _git_project(project)
    code, outputs, stdout = run_action(project, tmp_path, command="diff", base=base)
    assert (code, outputs["exit-code"]) == (2, "2")
    assert "::error title=gatecfg::base must be a branch, tag or commit" in stdout
    assert not (project / "pwned").exists()
    assert "report-json" not in outputs  # nothing ran, so no report was written


@pytest.mark.parametrize(
    "command",
    [
        "lint\n::error file=evil.py::forged",
        "x\r\n::warning::forged",
        "%0A::error::forged",
        "evaluat\n::stop-commands::t",
    ],
    ids=["lf", "crlf", "encoded", "stop-commands"],
)  # fmt: skip
def test_a_command_input_cannot_forge_a_workflow_command(project: Path, tmp_path: Path, command: str) -> None:
    code, _, stdout = run_action(project, tmp_path, command=command)
    assert code == 2
    lines = stdout.splitlines()
    assert [line for line in lines if line.startswith("::")] == [lines[0]]
    assert lines[0].startswith("::error title=gatecfg::command must be lint, diff or evaluate")
    assert "forged" not in lines[0].replace("%0A", " ").split("::", 2)[1]


def test_a_fork_pull_request_without_a_store_fails_closed_by_default(project: Path, tmp_path: Path) -> None:
    code, outputs, stdout = run_action(project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl")
    assert (code, outputs["exit-code"]) == (3, "3")
    assert "::error title=gatecfg::sqlite:///.gatecfg/history.db: no history store" in stdout
    assert "file=sqlite" not in stdout  # the store's URL is no file to annotate
    assert "set missing-store: notice" in stdout
    # Outputs name only files that were written: none were.
    assert set(outputs) == {"exit-code"}


def test_a_fork_pull_request_without_a_store_passes_with_a_notice_when_asked(
    project: Path, tmp_path: Path
) -> None:
    code, outputs, stdout = run_action(
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl", missing_store="notice"
    )
    assert (code, outputs["exit-code"]) == (0, "0")
    assert stdout.startswith("::notice title=gatecfg::no history store")
    assert "nothing was gated" in stdout
    assert set(outputs) == {"exit-code"}


def test_missing_store_notice_does_not_hide_a_store_that_is_there_but_broken(
    project: Path, tmp_path: Path
) -> None:
    code, outputs, stdout = run_action(
        project, tmp_path, command="evaluate", test=TEST, record="pr.jsonl", missing_store="notice",
        db_url="postgresql+psycopg://u:hunter2@127.0.0.1:1/x",
    )  # fmt: skip
    assert (code, outputs["exit-code"]) == (3, "3")
    assert "::error title=gatecfg::postgresql+psycopg://u:***@127.0.0.1:1/x: cannot connect" in stdout
    assert "hunter2" not in stdout


def test_a_bad_missing_store_value_is_an_input_error(project: Path, tmp_path: Path) -> None:
    code, _, stdout = run_action(project, tmp_path, command="evaluate", test=TEST, missing_store="pass")
    assert code == 2
    assert "missing-store must be fail or notice, not 'pass'" in stdout


def test_diff_with_fail_on_rekey_annotates_an_error(project: Path, tmp_path: Path) -> None:
    _git_project(project)
    base = project / "gates" / "base.yaml"
    base.write_text(base.read_text().replace("rel_down: 0.2,", "rel_down: 0.25,"))
    code, outputs, stdout = run_action(project, tmp_path, command="diff", base="main", fail_on_rekey="true")
    assert (code, outputs["exit-code"]) == (1, "1")
    assert "::error file=gates/base.yaml" in stdout
    assert "::warning" not in stdout
    warn_code, _, warn_stdout = run_action(project, tmp_path, command="diff", base="main")
    assert warn_code == 0
    assert "::warning file=gates/base.yaml" in warn_stdout


# ---------------------------------------------------------------------- installed once per job

FAKE_PYTHON = """#!/bin/bash
# `python3 -m venv DIR` makes a venv whose pip logs its arguments and installs a gatecfg of the version given.
set -e
venv=$3
mkdir -p "$venv/bin"
cat > "$venv/bin/pip" <<PIP
#!/bin/bash
if [ "\\$1" = install ]; then
  echo "\\$*" >> "$LOG"
  printf '#!/bin/bash\\necho gatecfg $VERSION\\n' > "$venv/bin/gatecfg"
  chmod +x "$venv/bin/gatecfg"
fi
PIP
chmod +x "$venv/bin/pip"
"""


def test_the_action_installs_gatecfg_once_per_job_and_says_what(tmp_path: Path) -> None:
    [script] = [run for name, run in action_scripts() if name.startswith("Install gatecfg")]
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON)
    (fake / "python3").chmod(0o755)
    runner, log, path_file = tmp_path / "runner", tmp_path / "pip.log", tmp_path / "github_path"
    runner.mkdir()
    path_file.write_text("")

    def use(extras: str) -> str:
        # Each `uses:` is a new step: its PATH holds what earlier steps added through GITHUB_PATH.
        added = ":".join(path_file.read_text().split())
        env = {
            "PATH": f"{added}:{fake}:/usr/bin:/bin",
            "RUNNER_TEMP": str(runner),
            "GITHUB_PATH": str(path_file),
            "GATECFG_ACTION_PATH": str(REPO),
            "GATECFG_EXTRAS": extras,
            "LOG": str(log),
            "VERSION": gatecfg.__version__,
        }
        result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    first = use("postgres")
    assert f"Installing gatecfg {gatecfg.__version__} with extras postgres,store from {REPO}" in first
    second = use("postgres")
    assert (
        f"gatecfg {gatecfg.__version__} (extras: postgres,store) is installed in this job already" in second
    )
    third = use("tensorboard, postgres")
    assert "with extras postgres,store,tensorboard" in third
    fourth = use("")
    assert "is installed in this job already" in fourth
    installs = log.read_text().splitlines()
    assert len(installs) == 2
    assert installs[1].endswith(f"{REPO}[postgres,store,tensorboard]")
