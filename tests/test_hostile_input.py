"""Hostile and unlucky input against the surfaces that need a stored history: `import`'s nightly replay,
`compare`, and which stored values form a baseline (gatecfg/membership.py) as the CLI's views show it.
The cases that need no store are in tests/catalogue/surfaces.txt; faults and load in
tests/test_store_faults.py."""

from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

import pytest
from helpers import run_cli
from ruamel.yaml import YAML

TEST = "t.py"
BASE = """\
version: 1
defaults:
  m/score:
    steps: last
    constraint: {rel_down: 0.5}
policy:
  window: 4
"""
DB = "sqlite:///h.db"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Gates for one band gate and a store of six nightlies n0..n5, as the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "base.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "gates" / "t.yaml").write_text(f"test: {TEST}\ngates:\n  m/score:\n", encoding="utf-8")
    rows = ["run_id,date,commit,m/score"] + [
        f"n{k},2024-01-0{k + 1}T00:00:00,c{k},{0.5 + k / 10}" for k in range(6)
    ]
    (tmp_path / "nights.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert run_cli("import", "--test", TEST, "--db", DB, "nights.csv").code == 0
    (tmp_path / "run.jsonl").write_text(json.dumps({"m/score": [[0, 0.9]]}) + "\n", encoding="utf-8")
    return tmp_path


def _runs() -> list[str]:
    history = run_cli(
        "history", "--test", TEST, "--metric", "m/score", "--limit", "0", "--db", DB, "--format", "json"
    )
    return sorted(row["run_id"] for row in json.loads(history.out))


class TestImportReplay:
    @pytest.mark.parametrize(
        ("row", "expect"),
        [
            ('"x\n1",2024-02-01T00:00:00,c,0.7', "run_id: 'x\\n1' holds the control character U+000A"),
            ("x\u202e1,2024-02-01T00:00:00,c,0.7", "run_id: 'x\\u202e1' holds the control character U+202E"),
            ("x1,2024-02-01T00:00:00,c\x1b[2J,0.7", "commit: 'c\\x1b[2J' holds the control character U+001B"),
            ("x1,2999-01-01T00:00:00,c,0.7", "date: 2999-01-01T00:00:00+00:00 is in the future"),
            ("x1,2024-02-01_00:00,c,0.7", "date: `2024-02-01_00:00` is not an ISO 8601 date"),
        ],
        ids=["run-id-newline", "run-id-bidi-override", "commit-escape-sequence", "date-in-the-future",
             "date-any-separator"],
    )  # fmt: skip
    def test_a_run_the_export_cannot_store_is_exit_2_at_its_row_and_nothing_is_imported(
        self, store: Path, row: str, expect: str
    ) -> None:
        # Before: the run id with a newline and the escape sequence were stored as they were, and the run
        # dated 2999 became every baseline's newest night, ahead of every later nightly.
        (store / "x.csv").write_text(f"run_id,date,commit,m/score\nok,2024-01-20T00:00:00,c,0.7\n{row}\n")
        before = _runs()

        result = run_cli("import", "--test", TEST, "--db", DB, "x.csv")

        assert result.code == 2, result.err
        assert result.err.splitlines()[0].startswith(f"x.csv:3: error: {expect}"), result.err
        assert _runs() == before  # one transaction: not even the good row

    def test_an_evaluate_write_after_a_replayed_import_counts_the_import_once(self, store: Path) -> None:
        again = run_cli("import", "--test", TEST, "--db", DB, "nights.csv")
        assert again.code == 0, again.err
        assert again.out.startswith("imported 0 run(s)")
        assert _runs() == [f"n{k}" for k in range(6)]


class TestCompare:
    @pytest.mark.parametrize(
        ("run_id", "expect"),
        [
            (
                "n1\n::error::forged",
                "RUN_A: error: 'n1\\n::error::forged' holds the control character U+000A",
            ),
            ("n1\x1b[2J", "RUN_A: error: 'n1\\x1b[2J' holds the control character U+001B"),
            ("x" * 100_000, "RUN_A: error: 'xxx"),
            ("%", f"RUN_A: error: no stored run has run id % ({DB})"),
        ],
        ids=["workflow-command", "escape-sequence", "100-kB", "sql-wildcard"],
    )
    def test_a_hostile_run_id_is_refused_on_one_short_line(
        self, store: Path, run_id: str, expect: str
    ) -> None:
        # Before: a 100 kB run id was echoed whole in the error, and the others reached the store's lookup.
        result = run_cli("compare", run_id, "n2", "--db", DB)
        assert result.code == 2
        first, *rest = result.err.splitlines()
        assert first.startswith(expect), result.err
        assert len(first) < 200
        assert all(line.startswith("  hint: ") for line in rest), result.err


class TestBaselineMembershipThroughTheCli:
    def test_evaluate_and_history_agree_on_the_baseline_after_untrust_and_trust(self, store: Path) -> None:
        for argv in (
            ("untrust", "--run-id", "n5", "--reason", "bad node"),
            ("untrust", "--run-id", "n3", "--reason", "bad node"),
            ("trust", "--run-id", "n3", "--reason", "was fine"),
            ("untrust", "--commit", "c1", "--reason", "bad commit"),
        ):
            assert run_cli(*argv, "--db", DB).code == 0

        history = run_cli("history", "--test", TEST, "--metric", "m/score", "--db", DB, "--format", "json")
        judged = run_cli("evaluate", "--test", TEST, "--record", "run.jsonl", "--db", DB, "--format", "json")

        rows = json.loads(history.out)  # newest first
        in_baseline = [row["value"] for row in rows if row["in_baseline"]]
        assert [row["run_id"] for row in rows if row["in_baseline"]] == ["n4", "n3", "n2", "n0"]
        [verdict] = json.loads(judged.out)["verdicts"]
        assert verdict["n"] == len(in_baseline) == 4
        assert verdict["ref"] == pytest.approx(statistics.fmean(in_baseline), rel=1e-12)


def _run_lines(node: object) -> list[str]:
    """Every shell line of a workflow: GitHub's `run:` and GitLab's `script:` entries."""
    if isinstance(node, dict):
        found: list[str] = []
        for key, value in node.items():
            if key in ("run", "script"):
                for entry in value if isinstance(value, list) else [value]:
                    found += str(entry).splitlines()
            else:
                found += _run_lines(value)
        return found
    if isinstance(node, list):
        return [line for item in node for line in _run_lines(item)]
    return []


class TestInitCiFiles:
    @pytest.mark.parametrize("ci", ["github", "gitlab"])
    @pytest.mark.parametrize(
        "test",
        [
            "a b.py",
            "a'b.py",
            'a"b.py',
            "a: b.py #c",
            "$(touch PWNED).py",
            "a;b|c&&d.py",
            "*[x]{y}.py",
            "ü\u00a0.py",
        ],
        ids=[
            "blank",
            "quote",
            "double-quote",
            "yaml-indicators",
            "command",
            "shell-operators",
            "globs",
            "unicode",
        ],
    )
    def test_a_test_name_of_shell_and_yaml_syntax_is_written_as_one_word_that_lints(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str, test: str
    ) -> None:
        monkeypatch.chdir(tmp_path)
        result = run_cli(
            "init", "--test", test, "--write-ci", "--ci", ci, "--install", "git+https://github.com/o/g@v1"
        )
        assert result.code == 0, result.err
        workflow = tmp_path / (
            ".github/workflows/gatecfg.yml" if ci == "github" else ".gitlab/ci/gatecfg.yml"
        )
        lines = [
            line
            for line in _run_lines(YAML(typ="safe").load(workflow.read_text(encoding="utf-8")))
            if "--test" in line
        ]
        assert lines, workflow.read_text(encoding="utf-8")
        for line in lines:
            words = shlex.split(line)
            assert words[words.index("--test") + 1] == test, line
        assert run_cli("lint").code == 0
        assert not (tmp_path / "PWNED").exists()
