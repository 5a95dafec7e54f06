"""`gatecfg rebaseline`: limits from the current regime only, with evidence; `--write` edits numbers only."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli, score_gates, table
from test_import import EVAL, GATE_FILE, REWARD, TEST, Scenario, import_scenario, write_scenario
from test_regimes import _steps_gates, _store_steps

import gatecfg
from gatecfg.analysis import limits_edit
from gatecfg.analysis.limits_edit import COMMENT_PREFIX, LimitsEdit, apply_edit, write_limits
from gatecfg.analysis.rebaseline import outward
from gatecfg.errors import InputError
from gatecfg.resolve import load_tree

NUMBER = re.compile(r"\d+\.\d+")


def _shape(line: str) -> str:
    """A line with its numbers blanked and the padding before its comment squeezed."""
    return re.sub(r" +#", " #", NUMBER.sub("N", line))


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Scenario, str]:
    monkeypatch.chdir(tmp_path)
    found = write_scenario(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    import_scenario(found, db)
    return found, db


def _values(found: Scenario, metric: str, nights: range) -> list[float]:
    wanted = {found.run_id(n) for n in nights}
    with found.export.open() as handle:
        return [float(row[metric]) for row in csv.DictReader(handle) if row["run_id"] in wanted]


def _rebaseline(found: Scenario, db: str, *args: str) -> tuple[int, str, str]:
    result = run_cli("rebaseline", "--test", TEST, "--gates", found.gates, "--db", db, *args)
    return result.code, result.out, result.err


def test_done_means_write_changes_only_the_numbers_and_keeps_every_comment(
    scenario: tuple[Scenario, str],
) -> None:
    found, db = scenario
    before = found.gate_file.read_text()
    code, out, err = _rebaseline(found, db, "--write")
    assert code == 0, err
    after = found.gate_file.read_text()
    added = [line for line in after.splitlines() if line.lstrip().startswith(COMMENT_PREFIX)]
    assert len(added) == 2
    kept = [line for line in after.splitlines() if not line.lstrip().startswith(COMMENT_PREFIX)]
    old = before.splitlines()
    assert len(kept) == len(old)
    changed = [(a, b) for a, b in zip(old, kept, strict=True) if a != b]
    assert len(changed) == 2
    for a, b in changed:
        # Same text around the number, the trailing comment in the same column.
        assert _shape(a) == _shape(b)
        assert a.index("#") == b.index("#")
    for line in old:
        if "#" in line:
            assert line[line.index("#") :] in after
    # The evidence comment sits right above `limits:`, at its indentation, and names the regime.
    lines = after.splitlines()
    for comment in added:
        below = lines[lines.index(comment) + 1]
        assert below.lstrip().startswith("limits:")
        assert comment.index("#") == len(below) - len(below.lstrip())
        assert f"78 runs {found.run_id(271)}..{found.run_id(348)} ({found.commit(271)[:7]}.." in comment
    assert f"wrote {found.gate_file.relative_to(found.root)}" in out


def test_limits_come_from_the_current_regime_only(scenario: tuple[Scenario, str]) -> None:
    found, db = scenario
    code, out, _ = _rebaseline(found, db, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    by_metric = {g["metric"]: g for g in doc["gates"]}
    for metric in (EVAL, REWARD):
        values = _values(found, metric, range(271, 349))
        gate = by_metric[metric]
        assert gate["regime"]["first_run"] == found.run_id(271)
        assert gate["regime"]["runs"] == 78
        count = 5 if metric == EVAL else 4
        assert gate["regime"]["source"] == f"detected: regime {count} of {count}"
        assert gate["evidence"]["min"] == min(values)
        assert gate["new"] == {"min": outward(min(values) * 0.95, "min")}
        assert gate["would_fail"] == 0
        assert gate["band"]["long_enough"] is True
    assert by_metric[EVAL]["old"] == {"min": 0.5}
    assert doc["written"] is False
    # The old floor 0.50 sat below regime 3 (0.41) for 81 nights; the new one is the current level's.
    assert 0.52 < by_metric[EVAL]["new"]["min"] < 0.56


def test_dry_run_writes_nothing_and_says_how_to_write(scenario: tuple[Scenario, str]) -> None:
    found, db = scenario
    before = found.gate_file.read_bytes()
    code, out, _ = _rebaseline(found, db)
    assert code == 0
    assert found.gate_file.read_bytes() == before
    assert "limits  {min: 0.5} -> {min: 0." in out
    assert "dry run: add --write to edit the gate file in place" in out


@pytest.mark.parametrize(
    ("args", "first", "runs", "source"),
    [
        (("--last", "20"), 329, 20, "--last 20"),
        (("--since", "2024-12-01"), 336, 13, "--since 2024-12-01"),
        (("--since", "COMMIT"), 214, 135, "--since COMMIT"),
    ],
    ids=["last-n", "since-date", "since-commit-prefix"],
)
def test_the_regime_can_be_given_by_hand(
    scenario: tuple[Scenario, str], args: tuple[str, str], first: int, runs: int, source: str
) -> None:
    found, db = scenario
    commit = found.commit(214)[:9]
    args = tuple(a.replace("COMMIT", commit) for a in args)
    code, out, err = _rebaseline(found, db, "--metric", EVAL, "--format", "json", *args)
    assert code == 0, err
    gate = json.loads(out)["gates"][0]
    assert gate["regime"]["first_run"] == found.run_id(first)
    assert gate["regime"]["runs"] == runs
    assert gate["regime"]["source"] == source.replace("COMMIT", commit)


def test_quantile_limits_ignore_the_extremes(scenario: tuple[Scenario, str]) -> None:
    found, db = scenario
    code, out, _ = _rebaseline(
        found, db, "--metric", EVAL, "--method", "quantile", "--allowance", "0", "--format", "json"
    )
    assert code == 0
    gate = json.loads(out)["gates"][0]
    values = sorted(_values(found, EVAL, range(271, 349)))
    assert values[0] < gate["evidence"]["low"] < values[10]
    assert gate["new"]["min"] == outward(gate["evidence"]["low"], "min")
    assert gate["would_fail"] == sum(v < gate["new"]["min"] for v in values) > 0


def test_a_regime_shorter_than_the_window_is_called_out_for_band_gates(
    scenario: tuple[Scenario, str],
) -> None:
    found, db = scenario
    code, out, _ = _rebaseline(found, db, "--metric", REWARD, "--last", "8")
    assert code == 0
    assert "band    only 8 runs of the regime in its baseline < window 20" in out
    assert "averages up to 12 runs from before" in out


def test_an_unknown_since_exits_2_with_what_to_pass(scenario: tuple[Scenario, str]) -> None:
    found, db = scenario
    code, _, err = _rebaseline(found, db, "--since", "not-a-rev-or-date")
    assert code == 2
    assert "--since: error: `not-a-rev-or-date`: it is not a date, git does not know it" in err
    assert "hint: pass a commit a stored run ran" in err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")
def test_since_a_merge_without_its_own_nightly_starts_at_the_first_nightly_containing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)

    def git(*args: str) -> str:
        env = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, env={**env, "PATH": "/usr/bin:/bin"}
        )
        return done.stdout.strip()

    git("init", "-q")
    shas = []
    for name in ("a", "merge", "c"):
        git("commit", "-q", "--allow-empty", "-m", name)
        shas.append(git("rev-parse", "HEAD"))
    git("tag", "the-merge", shas[1])
    gates = repo / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    (gates / "t.yaml").write_text(GATE_FILE)
    rows = [f"n{i},2024-05-0{i},{shas[0] if i <= 3 else shas[2]},{0.5 + 0.001 * i},0.3" for i in range(1, 8)]
    export = repo / "e.csv"
    export.write_text(f"run_id,date,commit,{EVAL},{REWARD}\n" + "\n".join(rows) + "\n")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    assert run_cli("import", "--test", TEST, export, "--gates", gates, "--db", db).code == 0
    result = run_cli(
        "rebaseline",
        "--test",
        TEST,
        "--metric",
        EVAL,
        "--since",
        "the-merge",
        "--gates",
        gates,
        "--db",
        db,
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    gate = json.loads(result.out)["gates"][0]
    assert gate["regime"]["first_run"] == "n4"
    assert gate["regime"]["source"] == "--since the-merge (first nightly containing it)"


EDIT = LimitsEdit("m", {"min": 0.25, "max": 0.75}, "2024-12-14: evidence")
NOTE = "# gatecfg rebaseline 2024-12-14: evidence\n"


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        (
            "  m:                 # a one-liner\n",
            "  m:                 # a one-liner\n    # gatecfg rebaseline 2024-12-14: evidence\n"
            "    limits: {min: 0.25, max: 0.75}\n",
        ),
        (
            "  m: null\n",
            "  m:\n    # gatecfg rebaseline 2024-12-14: evidence\n    limits: {min: 0.25, max: 0.75}\n",
        ),
        (
            "  m:\n    steps: last   # why\n    constraint: null\n    enforce: true\n",
            "  m:\n    steps: last   # why\n    constraint: null\n"
            f"    {NOTE}    limits: {{min: 0.25, max: 0.75}}\n    enforce: true\n",
        ),
        (
            "  m: {steps: last, constraint: null}\n",
            f"  {NOTE}  m: {{limits: {{min: 0.25, max: 0.75}}, steps: last, constraint: null}}\n",
        ),
        (
            "  m:\n    steps: last\n    constraint: null\n    limits:\n      min: 0.1\n      max: 0.9\n",
            f"  m:\n    steps: last\n    constraint: null\n    {NOTE}    limits:\n      min: 0.25\n"
            "      max: 0.75\n",
        ),
        (
            "  m:\n    steps: last\n    constraint: null\n    # gatecfg rebaseline 2024-01-01: old\n"
            "    limits: {min: 0.1, max: 0.9}  # keep me\n",
            # Two digits more than two spaces of padding: the comment keeps one space, not its column.
            f"  m:\n    steps: last\n    constraint: null\n    {NOTE}"
            "    limits: {min: 0.25, max: 0.75} # keep me\n",
        ),
    ],
    ids=["one-liner", "null", "block-without-limits", "flow-gate", "block-limits", "replaces-old-evidence"],
)
def test_write_limits_in_every_shape_a_gate_is_written(tmp_path: Path, gate: str, expected: str) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\ndefaults:\n  m:\n    steps: last\n    constraint: null\n")
    head = "# header comment\ntest: t\ngates:\n"
    path = gates / "t.yaml"
    path.write_text(head + gate + "  other: {steps: last, constraint: null}  # after\n")
    write_limits(path, "gates/t.yaml", gates, "t", [EDIT])
    assert path.read_text() == head + expected + "  other: {steps: last, constraint: null}  # after\n"
    limits = load_tree(gates).test("t").gate("m").limits  # type: ignore[union-attr]
    assert limits is not None
    assert limits.literal() == {"min": 0.25, "max": 0.75}


def test_a_side_the_limits_lack_is_added_to_a_flow_mapping() -> None:
    text = "test: t\ngates:\n  m:\n    limits: {min: 0.1}  # c\n"
    edited = apply_edit(text, "t.yaml", LimitsEdit("m", {"max": 2.0}, "e"))
    assert (
        edited == "test: t\ngates:\n  m:\n    # gatecfg rebaseline e\n    limits: {min: 0.1, max: 2.0}  # c\n"
    )


def test_an_edit_that_would_not_resolve_leaves_the_file_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    path = gates / "t.yaml"
    original = "test: t\ngates:\n  m:\n    steps: last\n    constraint: null\n    limits: {min: 0.1}\n"
    path.write_text(original)
    monkeypatch.setattr(limits_edit, "number_text", lambda value: "oops")
    with pytest.raises(Exception, match="would not give `m` the limits"):
        write_limits(path, "gates/t.yaml", gates, "t", [LimitsEdit("m", {"min": 0.2}, "e")])
    assert path.read_text() == original
    assert sorted(p.name for p in gates.iterdir()) == ["base.yaml", "t.yaml"]


def test_outward_rounding_never_tightens_a_limit() -> None:
    assert outward(0.527441, "min") == 0.5274
    assert outward(0.527441, "max") == 0.5275
    assert outward(-1234.56, "min") == -1235.0
    assert outward(1234.0, "max") == 1234.0
    assert outward(0.0, "min") == 0.0


def test_a_drifting_current_regime_gets_no_limits_and_the_reason_in_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(31)
    values = 1.0 + 0.01 * (np.r_[np.zeros(60), np.arange(1, 141) * 10 / 140] + rng.normal(0, 1, 200))
    db = f"sqlite:///{tmp_path / 'h.db'}"
    _store_steps(db, {0: list(values)})
    args = ("rebaseline", "--test", TEST, "--metric", "train/grad_norm", "--gates", _steps_gates(tmp_path))
    result = run_cli(*args, "--db", db)
    assert result.code == 0, result.err
    refusal = [line for line in result.out.splitlines() if "no limits proposed" in line]
    assert len(refusal) == 1
    assert re.search(
        r"^train/grad_norm: no limits proposed: the current regime \(\d+ runs since r\d+ at c\d+\) "
        r"drifts by \+[0-9.e-]+/night \(\+[0-9.e-]+ so far\)",
        refusal[0],
    )
    assert "--last N or --since REV" in refusal[0]
    assert "limits  " not in result.out
    chosen = run_cli(*args, "--db", db, "--last", "10", "--format", "json")
    assert json.loads(chosen.out)["gates"][0]["new"]  # runs chosen by hand: the proposal is made


MERGED_LIMITS = [
    ("block-merge-in-limits", "  o:\n    limits: &l {min: 0.1}\n  m:\n    limits:\n      <<: *l\n"
     "      max: 5\n", {"min": 0.4}, "t.yaml:6:5", "take `min` through a `<<` merge key"),
    ("block-merge-edit-own-side", "  o:\n    limits: &l {min: 0.1}\n  m:\n    limits:\n      <<: *l\n"
     "      max: 5\n", {"max": 6.0}, "t.yaml:6:5", "take `min` through a `<<` merge key"),
    ("flow-merge-in-limits", "  o:\n    limits: &l {min: 0.1, max: 2}\n  m:\n    limits: {<<: *l}\n",
     {"min": 0.4, "max": 3.0}, "t.yaml:6:5", "take `min`, `max` through a `<<` merge key"),
    ("merge-list-in-limits", "  o:\n    limits: &a {min: 0.1}\n  p:\n    limits: &b {max: 2}\n  m:\n"
     "    limits: {<<: [*a, *b]}\n", {"min": 0.4}, "t.yaml:8:5", "through a `<<` merge key"),
    ("anchored-number", "  o:\n    limits: {min: &n 0.1}\n  m:\n    limits: {min: *n}\n", {"min": 0.4},
     "t.yaml:4:19", "cannot edit the value here in place"),
]  # fmt: skip


@table(("gates", "new", "where", "words"), MERGED_LIMITS)
def test_limits_that_come_through_a_merge_key_are_an_input_error_at_their_line(
    gates: str, new: dict[str, float], where: str, words: str
) -> None:
    from gatecfg.analysis.limits_edit import LimitsEdit, apply_edit

    text = f"test: t\ngates:\n{gates}"
    with pytest.raises(InputError) as caught:
        apply_edit(text, "t.yaml", LimitsEdit("m", new, "e"))
    assert str(caught.value).startswith(f"{where}: error: ")
    assert words in str(caught.value)


def test_rebaseline_write_of_merged_limits_exits_2_and_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = score_gates(tmp_path, "  min_history: 1\n")
    (gates / "t.yaml").write_text(
        "test: tests/t_ci.py\ngates:\n  eval/other:\n    steps: last\n    constraint: {rel_down: 0.5}\n"
        "    limits: &l {min: 0.1}\n  eval/score:\n    limits:\n      <<: *l\n      max: 5\n"
    )
    before = (gates / "t.yaml").read_text()
    db = f"sqlite:///{tmp_path / 'h.db'}"
    for night in range(6):
        points = {"eval/score": [(0, 0.4 + night / 20)], "eval/other": [(0, 0.5)]}
        gatecfg.evaluate("tests/t_ci.py", points, gates=gates, db=db, write=True, run_id=f"n{night}")
    result = run_cli("rebaseline", "--test", "tests/t_ci.py", "--metric", "eval/score", "--gates", gates,
                     "--db", db, "--write")  # fmt: skip
    assert result.code == 2
    assert "t.yaml:8:5: error: gates.eval/score.limits: these limits take `min` through a `<<` merge key" in (
        result.err
    )
    assert (gates / "t.yaml").read_text() == before
