"""Verdicts a person checks in five seconds: a budget step's reason in the metric's units, the
one wrapped line per failing gate of the text report, the failures noise alone would produce, and the
same story in JUnit, GitHub annotations and markdown."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from helpers import flat, run_cli

from gatecfg import terminal

TEST = "tests/e2e/test_train_ci.py"
STEPS = 50
MOVED = range(30, 50)  # the steps tonight's loss moved up 20% on
BASE = """\
version: 1
defaults:
  train/loss: {steps: all, constraint: {budget: up}}
  train/grad_norm: {steps: all, constraint: {budget: up}}
  eval/accuracy: {steps: last, constraint: {rel_down: 0.05}}
policy:
  window: 12
  false_alarm: 0.01
"""
GATES = "test: tests/e2e/test_train_ci.py\ngates:\n" + "".join(
    f"  {metric}:\n    enforce: true\n" for metric in ("train/loss", "train/grad_norm", "eval/accuracy")
)
CURVE = 2.0 + np.exp(-4.0 * np.linspace(0.0, 1.0, STEPS))
NOISE = "noise alone fails about 0.02 here (1 band gate not counted)"


def night(rng: np.random.Generator, *, moved: bool = False) -> dict[str, list[list[float]]]:
    loss = CURVE + 0.02 * rng.standard_normal(STEPS)
    if moved:
        loss[list(MOVED)] *= 1.2
    grad = (0.5 + 0.5 * np.exp(-5.0 * np.linspace(0.0, 1.0, STEPS))) * np.exp(
        0.15 * rng.standard_normal(STEPS)
    )
    return {
        "train/loss": [[s, float(v)] for s, v in enumerate(loss)],
        "train/grad_norm": [[s, float(v)] for s, v in enumerate(grad)],
        "eval/accuracy": [[STEPS - 1, 0.8 + 0.005 * float(rng.standard_normal())]],
    }


def nightlies(root: Path, db: str, *, nights: int, moved_last: bool) -> Path:
    """The three gates under `root` (the working directory, so that gate files print as gates/t.yaml, as
    in a CI checkout) and `nights` clean nightlies written, the last one's loss moved if `moved_last`;
    the gates root."""
    gates = Path("gates")
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "t.yaml").write_text(GATES, encoding="utf-8")
    rng = np.random.default_rng(5)
    rec = root / "r.jsonl"
    for i in range(nights):
        rec.write_text(json.dumps(night(rng, moved=moved_last and i == nights - 1)) + "\n", encoding="utf-8")
        done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", rec, "--db", db, "--write",
                       "--run-id", f"night-{i:02d}", "--commit", f"c{i:02d}")  # fmt: skip
        assert done.code in (0, 1), done.err
    return gates


@pytest.fixture
def pr(tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """A store of 12 clean nightlies of three gates, and tonight's PR run whose loss moved on steps 30-49:
    (gates, the PR's record, the store)."""
    monkeypatch.chdir(tmp_path)
    gates = nightlies(tmp_path, db, nights=12, moved_last=False)
    tonight = tmp_path / "pr.jsonl"
    tonight.write_text(json.dumps(night(np.random.default_rng(6), moved=True)) + "\n", encoding="utf-8")
    return gates, tonight, db


def evaluate(pr: tuple[Path, Path, str], *extra: str) -> str:
    gates, tonight, db = pr
    done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tonight, "--db", db, *extra)
    assert done.code == 1, done.out + done.err
    return done.out


def test_a_three_gate_pr_run_is_at_most_40_lines_at_80_columns(
    pr: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terminal, "width", lambda: 80)

    lines = evaluate(pr).splitlines()

    assert len(lines) <= 40
    assert max(map(len, lines)) <= 80
    # One line per failing gate (wrapped, its continuation indented) and the result line.
    starts = [line.split(" ", 2)[:2] for line in lines if not line.startswith(" ")]
    assert starts == [["gatecfg", "evaluate:"], ["ENFORCED", "FAIL"], ["result:", "exit"]]  # nothing CHANGED


def test_the_text_report_never_breaks_a_word(
    pr: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terminal, "width", lambda: 80)
    out = evaluate(pr)
    as_json = json.loads(evaluate(pr, "--format", "json"))

    [why] = [gate["why"] for gate in as_json["gates"] if gate["why"]]
    assert flat(f"ENFORCED FAIL train/loss (gates/t.yaml:3): {why}") in flat(out)
    # Broken only at spaces: each word of the reason is a word of the report, none cut in two.
    assert set(why.split()) <= set(out.split())


def test_a_budget_step_reads_value_against_usual_and_spread_with_its_own_edge(
    pr: tuple[Path, Path, str],
) -> None:
    report = json.loads(evaluate(pr, "--format", "json"))

    loss = [v for v in report["verdicts"] if v["metric"] == "train/loss"]
    failing = [v["step"] for v in loss if v["status"] == "fail"]
    assert failing
    assert set(failing) <= set(MOVED)  # only steps that moved fail
    for v in loss:
        assert (v["sd"] is None, v["hi"] is None, v["lo"] is None) == (False, False, True)
        match = re.match(r"(\d\.\d+) vs usual (\d\.\d+) ± (0\.\d+): ([+-]\d+(\.\d)?) spreads", v["reason"])
        assert match, v["reason"]
        value, usual, spread, spreads = (float(match[i]) for i in range(1, 5))
        # What a person checks in five seconds: the spreads are (value - usual) / spread, to the digits shown.
        assert spreads == pytest.approx((value - usual) / spread, rel=0.15, abs=0.2)
    first = next(v for v in loss if v["status"] == "fail")
    assert re.search(r", beyond \d\.\d+ where it fails alone$| moved with the ", first["reason"])
    passing = next(v for v in loss if v["status"] == "pass")
    assert re.search(r" \(fails alone beyond \d\.\d+\)$", passing["reason"])


def test_no_report_speaks_of_scales_or_thresholds(pr: tuple[Path, Path, str]) -> None:
    for fmt in ("text", "json", "markdown", "junit", "github"):
        out = evaluate(pr, "--format", fmt, "--verbose")
        assert not re.search(r"\bscales?\b|threshold|within the false-alarm budget", out), fmt


def test_the_why_names_the_steps_that_moved_and_the_statistic_that_fired(pr: tuple[Path, Path, str]) -> None:
    [why] = [g["why"] for g in json.loads(evaluate(pr, "--format", "json"))["gates"] if g["why"]]

    assert re.match(r"steps 3\d-49 moved up \(\d+ of 50 steps\); fired: the mean ", why)
    assert re.search(
        r"steps( \d\d-\d\d)? \(\+\d+\.\d% on average\) went (at least )?\d\.\d\d spreads up", why
    )
    assert re.search(
        r"beyond \d\.\d\d that a clean night passes with probability 0\.01; worst step \d\d: ", why
    )


def test_every_format_states_the_failures_noise_alone_would_produce(pr: tuple[Path, Path, str]) -> None:
    expected = f"1 of 3 gates failed; {NOISE}"

    assert expected in flat(evaluate(pr))
    assert expected.capitalize() + "." in evaluate(pr, "--format", "markdown")
    assert f"; {expected}" in evaluate(pr, "--format", "github").splitlines()[-1]
    junit = ET.fromstring(evaluate(pr, "--format", "junit").split("\n", 1)[1])
    assert junit.find(".//property[@name='gatecfg.noise']").get("value") == expected  # type: ignore[union-attr]


def test_junit_fails_a_budget_gate_with_its_why_and_nothing_that_contradicts_it(
    pr: tuple[Path, Path, str],
) -> None:
    [why] = [g["why"] for g in json.loads(evaluate(pr, "--format", "json"))["gates"] if g["why"]]
    junit = ET.fromstring(evaluate(pr, "--format", "junit").split("\n", 1)[1])

    [failure] = junit.iter("failure")
    assert failure.get("message") == f"train/loss: {why}"
    assert "within the false-alarm budget" not in ET.tostring(junit, encoding="unicode")


def test_markdown_links_each_gate_to_its_line_when_the_ci_names_the_repository(
    pr: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = evaluate(pr, "--format", "markdown")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the reader of a GitHub job reads its links
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/train")
    monkeypatch.setenv("GITHUB_SHA", "0123abc")

    linked = evaluate(pr, "--format", "markdown")

    assert "](https://" not in plain
    url = "https://github.com/acme/train/blob/0123abc/gates/t.yaml"
    assert f"| [`gates/t.yaml:3`]({url}#L3) |" in linked
    assert f"| [`gates/t.yaml:7`]({url}#L7) |" in linked
    assert f"- ❌ `train/loss` ([`gates/t.yaml:3`]({url}#L3)): " in linked


def test_a_band_gate_reads_value_against_its_reference_and_edge_in_every_format(
    pr: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """A band gate (`rel_down`) says the same plain words as a budget gate: the value against the mean of
    its nights, the change, and which edge of the band it crossed by how much, in the metric's units."""
    gates, _, db = pr
    tonight = tmp_path / "accuracy.jsonl"
    moved = night(np.random.default_rng(6))
    moved["eval/accuracy"] = [[STEPS - 1, 0.7]]
    tonight.write_text(json.dumps(moved) + "\n", encoding="utf-8")
    pr = (gates, tonight, db)

    [accuracy] = [
        v for v in json.loads(evaluate(pr, "--format", "json"))["verdicts"] if v["metric"] == "eval/accuracy"
    ]
    match = re.fullmatch(
        r"0\.7 vs mean (0\.\d+) of 12 nights: (-\d+\.\d)%, below the band's edge (0\.\d+) by (0\.\d+)",
        accuracy["reason"],
    )
    assert match, accuracy["reason"]
    mean, change, edge, by = (float(match[i]) for i in range(1, 5))
    assert (mean, edge) == (pytest.approx(accuracy["ref"]), pytest.approx(accuracy["lo"]))
    assert change == pytest.approx((0.7 - mean) / mean * 100, abs=0.05)
    assert by == pytest.approx(accuracy["lo"] - 0.7, rel=1e-5)  # both shown to 6 digits
    for fmt in ("text", "markdown", "junit", "github"):
        out = flat(evaluate(pr, "--format", fmt, "--verbose").replace("&#x27;", "'").replace("%25", "%"))
        assert "below the band's edge" in out, fmt
        assert not re.search(r"cur=|mean=|\(n=\d+\)", out), fmt
