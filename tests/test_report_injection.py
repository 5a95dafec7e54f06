"""Markdown and log injection: what the CI environment or a stored label holds never becomes markup or a
workflow command. `GITHUB_SHA`, `GITHUB_SERVER_URL` and `GITHUB_REPOSITORY` holding `)` and a link build no
link (gatecfg.ci) and a link destination is escaped (escape.markdown_url); a series label stored with a
newline prints escaped in every text report (report.labels.series_text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_cli

from gatecfg.escape import markdown_url
from gatecfg.evaluation import Request, run_evaluation

TEST = "tests/t_ci.py"
FORGED = "a\n::error::FORGED"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.1}}}}
    (tmp_path / "gates" / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.1}\n')
    return tmp_path


GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/train",
    "GITHUB_SHA": "0123abc",
    "GITHUB_RUN_ID": "42",
}
HOSTILE = [
    ("GITHUB_SHA", "0123abc)![pwned](https://evil.example/x.png)"),
    ("GITHUB_SERVER_URL", "https://evil.example/x)[click](https://evil.example"),
    ("GITHUB_REPOSITORY", "acme/train) [click](https://evil.example"),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE, ids=[name for name, _ in HOSTILE])
def test_a_ci_variable_holding_a_link_injects_no_link_or_image_into_the_summary(
    project: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    for key, given in {**GITHUB, name: value}.items():
        monkeypatch.setenv(key, given)
    summary = project / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    argv = ["evaluate", "--gates", "gates", "--test", TEST, "--db", "sqlite:///h.db"]
    # A store with one trusted night (written outside CI), so that the gate fails and the summary links
    # its file.
    for key in ("GITHUB_ACTIONS", "GITHUB_EVENT_NAME"):
        monkeypatch.delenv(key)
    (project / "night.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    assert run_cli(*argv, "--record", "night.jsonl", "--write").code == 0
    for key in ("GITHUB_ACTIONS", "GITHUB_EVENT_NAME"):
        monkeypatch.setenv(key, GITHUB[key])
    result = run_cli(*argv, "--record", "r.jsonl", "--format", "markdown")
    assert result.code == 0, result.err
    for rendered in (result.out, summary.read_text()):
        # A value inside a code span is shown, not rendered; outside them no link but the gate file's.
        text = re.sub(r"(`+).*?\1", "", rendered)
        assert "evil.example" not in text
        assert "![" not in text
        assert not re.search(r"\]\((?!https://github\.com/acme/train/blob/0123abc/)", text), text


def test_a_link_destination_cannot_end_early_or_start_markup() -> None:
    escaped = markdown_url('https://x/a)![i](https://evil) "t"<b>')
    assert not set(escaped) & set(')( <>"[]')
    assert (
        markdown_url("https://github.com/o/r/blob/0123abc/g/t.yaml")
        == "https://github.com/o/r/blob/0123abc/g/t.yaml"
    )


def _store_hostile_label(project: Path) -> None:
    """Runs whose series label holds a newline, stored through the core (as an older gatecfg's API did,
    or a store copied from elsewhere): the entry points refuse such labels now."""
    for night in range(3):
        run_evaluation(
            Request(
                gates=project / "gates",
                test=TEST,
                records={"eval/score": [(0, 0.5)]},
                db="sqlite:///h.db",
                write=True,
                labels={"hw": FORGED},
                run_id=f"n{night}",
            )
        )


COMMANDS = {
    "backtest": ["backtest", "--test", TEST, "--gates", "gates"],
    "prune": ["prune", "--orphaned", "--dry-run", "--gates", "other-gates"],
    "evaluate": ["evaluate", "--test", TEST, "--record", "r.jsonl", "--gates", "gates", "--series", "hw=b"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_stored_label_with_a_newline_never_prints_as_a_workflow_command(
    project: Path, command: str
) -> None:
    pytest.importorskip("scipy")
    _store_hostile_label(project)
    other = project / "other-gates"
    other.mkdir()
    (other / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/other": {"steps": "last", "constraint": None}}}
    (other / "t.yaml").write_text(json.dumps(gate))
    result = run_cli(*COMMANDS[command], "--db", "sqlite:///h.db")
    output = result.out + result.err
    assert not [line for line in output.splitlines() if line.lstrip().startswith("::")], output
    if command != "evaluate":
        assert "hw=a\\x0a::error::FORGED" in output
