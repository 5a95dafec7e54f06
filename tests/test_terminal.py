"""Terminal manners: reports fit the terminal, steps that say the same thing are one row, long commands
show signs of life on stderr, and the small mends of the report formats."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import run_cli, subprocess_env

from gatecfg import terminal
from gatecfg.commands.report import _slug

WIDTH = terminal.width  # conftest fixes the width for every other test; these check the real one

TEST = "tests/e2e/test_eight_ci.py"
BASE = (
    "version: 1\ndefaults:\n  train/grad_norm: {steps: all, constraint: {rel_up: 0.5, abs_floor_up: 0.1}}\n"
)
METRIC = "train/grad_norm"


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "eight.yaml").write_text(f"test: {TEST}\ngates:\n  {METRIC}:\n", encoding="utf-8")
    return root


def record(path: Path, steps: int) -> Path:
    path.write_text(
        json.dumps({METRIC: [[s, 2.0 + 0.01 * s] for s in range(steps)]}) + "\n", encoding="utf-8"
    )
    return path


def evaluate(gates: Path, rec: Path, db: str, *extra: str) -> str:
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", rec, "--db", db, *extra)
    assert result.code == 0, result.err
    return result.out


def attention_rows(out: str) -> list[list[str]]:
    """The `--verbose` report's steps that need attention, each split into words."""
    listed = out.split("needs attention:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split() for line in listed.splitlines() if line.startswith(("COLD", "FAIL", "ERROR"))]


def test_a_cold_gate_is_one_row_not_one_per_step(tmp_path: Path, gates: Path, db: str) -> None:
    out = evaluate(gates, record(tmp_path / "r.jsonl", 8), db, "--verbose")
    [row] = attention_rows(out)
    assert row[:5] == ["COLD", "shadow", METRIC, "8", "steps"]
    assert " ".join(row).endswith("cold: 0 of min_history=1 trusted values; gates after 1 more nightly")


def test_steps_with_different_reasons_stay_apart(tmp_path: Path, gates: Path, db: str) -> None:
    evaluate(gates, record(tmp_path / "n.jsonl", 4), db, "--write", "--run-id", "night")
    out = evaluate(gates, record(tmp_path / "r.jsonl", 8), db, "--verbose")
    rows = attention_rows(out)
    assert [r[:5] for r in rows] == [["COLD", "shadow", METRIC, "4", "steps"]]  # steps 0-3 pass


def test_failing_steps_keep_a_row_each(tmp_path: Path, gates: Path, db: str) -> None:
    evaluate(gates, record(tmp_path / "n.jsonl", 3), db, "--write", "--run-id", "night")
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({METRIC: [[0, 9.0], [1, 9.5], [2, 2.0]]}) + "\n", encoding="utf-8")
    rows = attention_rows(evaluate(gates, rec, db, "--verbose"))
    assert [(r[0], r[3], r[4]) for r in rows] == [("FAIL", "step", "0:"), ("FAIL", "step", "1:")]


@pytest.mark.parametrize("columns", [80, 100])
def test_the_text_report_fits_the_terminal(
    tmp_path: Path, gates: Path, db: str, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setattr(terminal, "width", WIDTH)
    monkeypatch.setenv("COLUMNS", str(columns))
    out = evaluate(gates, record(tmp_path / "r.jsonl", 8), db, "--verbose")
    assert max(len(line) for line in out.splitlines()) <= columns


def piped(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`python -m gatecfg ARGS` with stdout a pipe, as in a CI log: no terminal and no `COLUMNS`."""
    env = {k: v for k, v in subprocess_env().items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "gatecfg", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def deep_gates(tmp_path: Path) -> Path:
    """A gate file whose path alone makes the finding line longer than any terminal."""
    root = tmp_path / "gates"
    folder = root / "a_team_folder_with_a_long_name" / "and_a_nested_one_for_the_model_family"
    folder.mkdir(parents=True)
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (folder / "eight.yaml").write_text(f"test: {TEST}\ngates:\n  {METRIC}:\n", encoding="utf-8")
    return root


def failing_run(tmp_path: Path, gates: Path, db: str) -> Path:
    """One stored nightly, and a record whose step 0 is far above it."""
    evaluate(gates, record(tmp_path / "n.jsonl", 3), db, "--write", "--run-id", "night")
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({METRIC: [[0, 9.0], [1, 2.01], [2, 2.02]]}) + "\n", encoding="utf-8")
    return rec


def test_without_a_terminal_a_finding_is_one_line(tmp_path: Path, deep_gates: Path, db: str) -> None:
    rec = failing_run(tmp_path, deep_gates, db)
    done = piped("evaluate", "--gates", deep_gates, "--test", TEST, "--record", rec, "--db", db, "--verbose")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    [finding] = [line for line in lines if "FAIL train/grad_norm" in line]
    # `grep "SHADOW FAIL"` in a CI log returns the whole finding: gate, file:line and why.
    assert finding.startswith("SHADOW FAIL train/grad_norm (")
    assert "and_a_nested_one_for_the_model_family/eight.yaml:3): 1 of 3 steps failing" in finding
    assert finding.endswith("beyond the band's edge 3 by 6")
    [gate_row] = [line for line in lines if line.startswith("  FAIL ")]  # the --verbose table's row
    assert gate_row.rstrip().endswith("and_a_nested_one_for_the_model_family/eight.yaml:3")
    assert not any(line.startswith("    ") for line in lines)  # no continuation line anywhere
    assert max(len(line) for line in lines) > 120


def test_without_a_terminal_history_keeps_one_row_per_value(tmp_path: Path, gates: Path, db: str) -> None:
    evaluate(gates, record(tmp_path / "n.jsonl", 3), db, "--write", "--run-id", "night-with-a-long-run-id")
    evaluate(gates, record(tmp_path / "m.jsonl", 3), db, "--write", "--run-id", "night-2-with-a-long-run-id")
    done = piped("history", "--test", TEST, "--metric", METRIC, "--db", db)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if "long-run-id" in line]
    assert len(rows) == 6  # a row per stored value, none folded onto a second line
    assert all(row[1].endswith("-with-a-long-run-id") and len(row) >= 6 for row in rows)


def test_width_is_none_without_a_terminal_or_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "width", WIDTH)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert terminal.width() is None
    monkeypatch.setenv("COLUMNS", "132")
    assert terminal.width() == 132


def test_a_table_without_a_width_keeps_its_columns() -> None:
    # `gatecfg regimes` draws thirteen columns; in a CI log they stay a table, as docs/analytics.md shows.
    columns = ["#", "first run", "last run", "opened by", "median", "spread", "kind", "change vs previous"]
    columns += ["likely start", "from", "to", "mean", "n"]
    report = terminal.TextReport(None)
    row = ["1", "nightly-01", "nightly-20", "b92ba5f2f61d", "2.19353", "0.0529", "level", "", "", "a", "b"]
    report.table(columns, [[*row, "2.195", "20"]])
    _, header, _rule, line = report.text().splitlines()  # a blank line before the table
    assert re.split(" {3,}", header.strip()) == columns
    assert line.split() == [*row[:7], "a", "b", "2.195", "20"]


def test_render_from_python_does_not_wrap_unless_asked(
    tmp_path: Path, deep_gates: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gatecfg

    rec = failing_run(tmp_path, deep_gates, db)
    monkeypatch.setattr(terminal, "width", lambda: 80)  # whatever terminal the caller sits at
    report = gatecfg.evaluate(TEST, rec, gates=deep_gates, db=db)
    unwrapped = report.render("text").splitlines()
    assert max(len(line) for line in unwrapped) > 120
    assert sum("FAIL train/grad_norm" in line for line in unwrapped) == 1
    wrapped = report.render("text", width=80).splitlines()
    assert max(len(line) for line in wrapped) <= 80
    assert "".join("".join(wrapped).split()) == "".join("".join(unwrapped).split())  # a long path folds


WIDE = ["评估/平均分", "train/grad_norm", "評価/スコア/全体"]  # CJK metric names: two cells a character


def test_wide_characters_keep_a_table_column_aligned() -> None:
    report = terminal.TextReport()
    report.width = 120
    report.table(["metric", "status"], [[name, "PASS"] for name in WIDE])
    # 评估/平均分 takes 11 cells, 評価/スコア/全体 16, as a terminal draws them.
    assert report.text().splitlines()[1:] == [
        "  metric             status",
        " " + "\u2500" * 27,
        "  评估/平均分        PASS",
        "  train/grad_norm    PASS",
        "  評価/スコア/全体   PASS",
    ]


@pytest.mark.parametrize(
    ("at", "folded"),
    [
        # A word wider than the column starts beside the word before it, then folds, as textwrap does.
        pytest.param(6, ["训练", "评估平", "均分数", "值 評", "価/ス", "コア/", "全体"], id="even"),
        pytest.param(7, ["训练 评", "估平均", "分数值", "評価/ス", "コア/全", "体"], id="odd"),
        pytest.param(11, ["训练 评估平", "均分数值 評", "価/スコア/", "全体"], id="wider"),
    ],
)
def test_wide_characters_wrap_within_the_column(at: int, folded: list[str]) -> None:
    report = terminal.TextReport()
    report.width = 2 + at + 3 + 4 + 2  # edge, the metric column at `at` cells, gap, "PASS", edge
    report.table(["m", "PASS"], [["训练 评估平均分数值 " + WIDE[2], "PASS"]])
    lines = report.text().splitlines()[3:]
    assert [line[2:].split("   ")[0].rstrip() for line in lines] == folded
    assert all(len(line) + sum(ord(c) > 0x2E80 for c in line) <= report.width for line in lines)


def test_junit_and_github_say_the_status_once(tmp_path: Path, gates: Path, db: str) -> None:
    rec = record(tmp_path / "r.jsonl", 2)
    junit = ET.fromstring(evaluate(gates, rec, db, "--format", "junit").split("\n", 1)[1])
    text = junit.findtext(".//system-out") or ""
    assert text.startswith("step 0: cold: 0 of min_history=1")
    assert "cold: cold:" not in text
    github = evaluate(gates, rec, db, "--format", "github")
    assert "at step 0: 0 of min_history=1" in github


def test_markdown_shows_a_cold_band_as_a_dash(tmp_path: Path, gates: Path, db: str) -> None:
    out = evaluate(gates, record(tmp_path / "r.jsonl", 2), db, "--format", "markdown")
    rows = [line for line in out.splitlines() if line.startswith("| 🧊 | `train/grad_norm` | 0 |")]
    assert rows == ["| 🧊 | `train/grad_norm` | 0 | 2 | - | 0 | - | cold: 0 of min_history=1 trusted values; "
                    "gates after 1 more nightly |"]  # fmt: skip


@pytest.mark.parametrize(
    ("test", "name"),
    [
        pytest.param(
            "tests/e2e/megatron/model_scripts/test_kimi_k3_4layer_lora_ci.py",
            "e2e_megatron_model_scripts_test_kimi_k3_4layer_lora_ci.py",
            id="whole-components",
        ),
        pytest.param("tests/t_ci.py", "tests_t_ci.py", id="short"),
        pytest.param("x/" + "a" * 70 + ".py", "a" * 57 + ".py", id="one-long-name"),
    ],
)
def test_html_page_names_keep_whole_path_components(test: str, name: str) -> None:
    slug, _, digest = _slug(test).rpartition("-")
    assert (slug, len(digest)) == (name, 8)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Beats:
    """Stands for a stage's stop event: the heartbeat's pause (`wait`) waits for the stage's body to let it
    start, then says "not stopped" `beats` times at once, then waits for the real stop. Heartbeats counted,
    not timed."""

    def __init__(self, beats: int) -> None:
        self.left = beats
        self.started, self.beaten, self.stopped = threading.Event(), threading.Event(), threading.Event()

    def wait(self, _timeout: float) -> bool:
        self.started.wait()
        if self.left:
            self.left -= 1
            return False
        self.beaten.set()
        return self.stopped.wait()

    def set(self) -> None:
        self.started.set()
        self.stopped.set()


def test_a_long_stage_prints_a_line_at_each_heartbeat_without_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    beats = _Beats(2)
    monkeypatch.setattr(terminal, "threading", SimpleNamespace(Event=lambda: beats, Thread=threading.Thread))
    out = io.StringIO()
    with terminal.stage("gatecfg backtest", "replaying 3 test(s)", total=3, stream=out) as advance:
        advance(2)
        beats.started.set()
        assert beats.beaten.wait(timeout=60)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert all(line.startswith("gatecfg backtest: replaying 3 test(s): 2/3 (") for line in lines)


def test_a_quick_stage_prints_nothing_without_a_terminal() -> None:
    out = io.StringIO()
    with terminal.stage("gatecfg import", "reading x.csv", stream=out):
        pass
    assert out.getvalue() == ""


def test_on_a_terminal_a_stage_draws_a_progress_bar_and_clears_it() -> None:
    out = _Tty()
    with terminal.stage("gatecfg report", "charting 2 test(s)", total=2, stream=out) as advance:
        advance(1)
        advance(1)
    assert "gatecfg report: charting 2 test(s)" in out.getvalue()


def test_a_table_whose_titles_do_not_fit_is_a_wrapped_line_per_row() -> None:
    # `gatecfg regimes` draws thirteen columns: at 80 cells every title and cell folded mid-word.
    columns = ["#", "first run", "last run", "opened by", "median", "spread", "kind", "change vs previous"]
    columns += ["likely start", "from", "to", "mean", "n"]
    report = terminal.TextReport()
    report.width = 80
    row = ["1", "nightly-01", "nightly-20", "b92ba5f2f61d", "2.19353", "0.0529", "level", "", "", "a", "b"]
    report.table(columns, [[*row, "2.195", "20"]])

    lines = report.text().splitlines()
    text = " ".join(" ".join(lines).split())

    assert max(len(line) for line in lines) <= 80
    assert lines[1].startswith("  # 1: first run nightly-01; last run nightly-20; opened by b92ba5f2f61d;")
    assert "change vs previous" not in text  # an empty cell is left out
    assert "median 2.19353" in text
