"""`gatecfg evaluate` end to end through the real entry point, on SQLite and (when configured) PostgreSQL.

These are the "done means" of the evaluate issue: the seeds' numbers come out exactly.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import run_cli
from rekey_helpers import git

TEST = "tests/e2e/test_reward_ci.py"
BASE = """\
version: 1
defaults:
  rollout/raw_reward:
    steps: all
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
policy:
  window: 20
  min_history: 1
"""
# Twenty step-1 rewards (means of 16 coin flips) that average 0.521875.
NIGHTLY_STEP1 = [0.5, 0.5625, 0.4375, 0.5, 0.625, 0.5625, 0.4375, 0.5, 0.5, 0.5625,
                 0.5, 0.5625, 0.4375, 0.5, 0.625, 0.5625, 0.4375, 0.5, 0.5625, 0.5625]  # fmt: skip


def write_gates(root: Path, gate_body: str = "  rollout/raw_reward:\n") -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "reward.yaml").write_text(f"test: {TEST}\ngates:\n{gate_body}", encoding="utf-8")
    return gates


def write_record(path: Path, rows: dict[str, list[tuple[int, float]]]) -> Path:
    path.write_text("".join(json.dumps({m: [list(p) for p in pts]}) + "\n" for m, pts in rows.items()))
    return path


def seed_nightlies(tmp_path: Path, gates: Path, db: str) -> None:
    for night, value in enumerate(NIGHTLY_STEP1):
        record = write_record(
            tmp_path / f"night{night}.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, value)]}
        )
        result = run_cli(
            "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--write",
            "--run-id", f"night-{night:02d}", "--commit", f"c{night:02d}",
        )  # fmt: skip
        assert result.code == 0, result.err


def evaluate_json(gates: Path, record: Path, db: str, *extra: str) -> tuple[int, dict[str, object]]:
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--format", "json", *extra)  # fmt: skip
    return result.code, json.loads(result.out)


def step1(report: dict[str, object]) -> dict[str, object]:
    verdicts = report["verdicts"]
    assert isinstance(verdicts, list)
    return next(v for v in verdicts if v["step"] == 1)


def test_regressed_reward_fails_with_the_seed_band(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    code, report = evaluate_json(gates, record, db)
    verdict = step1(report)
    assert code == 0  # a shadow gate: reported, not fatal
    assert verdict["status"] == "fail"
    assert verdict["ref"] == 0.521875
    assert verdict["n"] == 20
    assert verdict["lo"] == 0.4175
    assert verdict["hi"] is None
    assert verdict["steps_key"] == '"all"'
    assert verdict["reason"] == (
        "0.3125 vs mean 0.521875 of 20 nights: -40.1%, below the band's edge 0.4175 by 0.105"
    )
    [gate] = report["gates"]  # type: ignore[misc]
    assert gate["why"] == (
        "1 of 2 steps failing (step 1); worst: step 1 "
        "0.3125 vs mean 0.521875 of 20 nights: -40.1%, below the band's edge 0.4175 by 0.105"
    )
    assert report["run"] == {
        "run_id": report["run"]["run_id"],  # type: ignore[index]
        "commit": None, "branch": None, "url": None,
        "written": False, "already_stored": False, "trusted": False,
    }  # fmt: skip


def test_tracked_gate_reports_against_history_and_exits_0(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    write_gates(tmp_path, "  rollout/raw_reward:\n    constraint: null\n")
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    code, report = evaluate_json(gates, record, db)
    verdict = step1(report)
    assert code == 0
    assert verdict["status"] == "tracked"
    assert verdict["constraint_key"] == "null"
    assert verdict["lo"] is None
    assert verdict["hi"] is None


@pytest.mark.parametrize(("enforce_env", "expected"), [(None, 1), ("0", 0)], ids=["enforced", "enforce-off"])
def test_enforced_failure_exit_code_and_the_enforce_switch(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch, enforce_env: str | None, expected: int
) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    enforce: true\n")
    seed_nightlies(tmp_path, gates, db)
    if enforce_env is not None:
        monkeypatch.setenv("GATECFG_ENFORCE", enforce_env)
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    code, report = evaluate_json(gates, record, db)
    assert code == expected
    assert report["exit_code"] == expected
    assert step1(report)["enforced"] is (expected == 1)


def stored_rows(db: str) -> list[tuple[str, str, int, float]]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT run_id, steps_key, step, value FROM metric_values ORDER BY step")
            )
            return [tuple(r) for r in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


FOUR_STEPS = {"rollout/raw_reward": [(0, 0.2), (1, 0.4), (2, 0.6), (3, 0.8)]}


def test_all_steps_written_nightly_store_four_rows(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "n.jsonl", FOUR_STEPS)
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--write", "--run-id", "n1")  # fmt: skip
    assert result.code == 0, result.err
    assert stored_rows(db) == [("n1", '"all"', s, v) for s, v in FOUR_STEPS["rollout/raw_reward"]]


def test_last_step_written_nightly_stores_one_row_at_minus_one(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    steps: last\n")
    record = write_record(tmp_path / "n.jsonl", FOUR_STEPS)
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--write", "--run-id", "n1")  # fmt: skip
    assert result.code == 0, result.err
    assert stored_rows(db) == [("n1", '"last"', -1, 0.8)]


def test_rewriting_a_run_id_changes_nothing_and_says_so(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "n.jsonl", FOUR_STEPS)
    args = ("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--write",
            "--run-id", "n1", "--format", "json")  # fmt: skip
    first, second = run_cli(*args), run_cli(*args)
    assert json.loads(first.out)["run"]["written"] is True
    assert json.loads(second.out)["run"]["already_stored"] is True
    assert json.loads(second.out)["run"]["written"] is False
    assert len(stored_rows(db)) == 4


def test_failing_nightly_is_stored_untrusted_and_never_enters_baselines(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    bad = write_record(tmp_path / "bad.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.0)]})
    code, report = evaluate_json(gates, bad, db, "--write", "--run-id", "bad-night")
    assert code == 0
    assert report["run"]["written"] is True  # type: ignore[index]
    assert report["run"]["trusted"] is False  # type: ignore[index]
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    _, after = evaluate_json(gates, record, db)
    assert step1(after)["ref"] == 0.521875
    assert step1(after)["n"] == 20


def test_untrust_by_commit_removes_runs_from_the_baseline(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    result = run_cli("untrust", "--commit", "c19", "--db", db, "--reason", "bad runner")
    assert result.code == 0
    assert "1 now untrusted" in result.out
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    _, report = evaluate_json(gates, record, db)
    assert step1(report)["n"] == 19
    again = run_cli("untrust", "--commit", "c19", "--db", db)
    assert "0 now untrusted, 1 already untrusted" in again.out


@pytest.mark.parametrize(
    ("selector", "near"),
    [
        pytest.param(
            ("--commit", "c1"), "did you mean `c10` or `c11` or `c12`? (give the full commit)", id="prefix"
        ),
        pytest.param(("--run-id", "nigth-03"), "did you mean one of `night-03`, ", id="run-id"),
        pytest.param(
            ("--ci-run-id", "nope"), "20 stored runs; `gatecfg history` lists them", id="nothing-near"
        ),
    ],
)
def test_trust_of_a_run_nothing_matches_is_exit_2_with_the_near_matches(
    tmp_path: Path, db: str, selector: tuple[str, str], near: str
) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    for command in ("trust", "untrust"):
        result = run_cli(command, *selector, "--db", db)
        assert result.code == 2
        assert f"{selector[0]}: error: no stored run has {' '.join(selector)}: nothing changed" in result.err
        assert near in result.err


def test_trust_of_a_metric_no_run_holds_names_the_stored_metric(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    result = run_cli("untrust", "--run-id", "night-03", "--metric", "rollout/raw_rewad", "--db", db)
    assert result.code == 2
    assert "--metric: error: no stored run with --run-id night-03 holds rollout/raw_rewad" in result.err
    assert "hint: did you mean `rollout/raw_reward`?" in result.err


def test_cold_coordinate_never_fails(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    enforce: true\n")
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.0), (1, 0.0)]})
    code, report = evaluate_json(gates, record, db)
    assert code == 0
    assert {v["status"] for v in report["verdicts"]} == {"cold"}  # type: ignore[attr-defined]


def test_limits_fail_without_history(tmp_path: Path, db: str) -> None:
    gates = write_gates(
        tmp_path, "  rollout/raw_reward:\n    steps: last\n    limits: {min: 0.5}\n    enforce: true\n"
    )
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.45)]})
    code, report = evaluate_json(gates, record, db)
    assert code == 1
    verdict = report["verdicts"][0]  # type: ignore[index]
    assert verdict["status"] == "fail"
    assert verdict["reason"] == "0.45 below the limit limits.min 0.5 by 0.05"


def test_nan_at_a_gated_coordinate_is_an_error_that_untrusts(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    (tmp_path / "nan.jsonl").write_text('{"rollout/raw_reward": [[0, 0.2], [1, NaN]]}\n')
    code, report = evaluate_json(gates, tmp_path / "nan.jsonl", db, "--write", "--run-id", "nan")
    assert code == 0
    assert step1(report)["status"] == "error"
    assert step1(report)["reason"] == "value is NaN"
    assert report["run"]["trusted"] is False  # type: ignore[index]


def test_missing_gate_file_is_exit_2_naming_the_gates_searched(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "pr.jsonl", FOUR_STEPS)
    result = run_cli(
        "evaluate", "--gates", gates, "--test", "tests/e2e/unknown.py", "--record", record, "--db", db
    )
    assert result.code == 2
    assert "no gate file declares `test: tests/e2e/unknown.py`" in result.err
    assert TEST in result.err


@pytest.mark.parametrize("spelling", ["./", "absolute", "detour"])
def test_a_test_path_spelled_another_way_is_the_declared_test(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "n.jsonl", FOUR_STEPS)
    monkeypatch.chdir(tmp_path)
    given = {"./": f"./{TEST}", "absolute": str(tmp_path / TEST), "detour": f"tests/../{TEST}"}[spelling]
    code, report = evaluate_json(gates, record, db, "--write", "--run-id", "n1", "--test", given)  # last wins
    assert code == 0
    assert report["test"] == TEST  # stored under the declared name: one series, whatever the spelling
    history = run_cli(
        "history", "--test", TEST, "--metric", "rollout/raw_reward", "--db", db, "--format", "json"
    )
    assert len(json.loads(history.out)) == 4


def test_an_unknown_test_names_the_declared_test_near_it(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "pr.jsonl", FOUR_STEPS)
    typo = TEST.replace("reward", "rewrd")
    result = run_cli("evaluate", "--gates", gates, "--test", typo, "--record", record, "--db", db)
    assert result.code == 2
    assert f"no gate file declares `test: {typo}`; did you mean `{TEST}`?" in result.err


def test_a_local_run_takes_its_commit_from_git(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("GITHUB_SHA", "CI_COMMIT_SHA", "GIT_COMMIT"):
        monkeypatch.delenv(variable, raising=False)
    gates = write_gates(tmp_path)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "gates")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    record = write_record(tmp_path / "n.jsonl", FOUR_STEPS)
    code, report = evaluate_json(gates, record, db, "--write", "--run-id", "local-1")
    assert code == 0
    assert report["run"]["commit"] == head  # type: ignore[index]
    code, given = evaluate_json(gates, record, db, "--commit", "abc123")
    assert given["run"]["commit"] == "abc123"  # type: ignore[index]  # the flag wins


def test_malformed_record_is_exit_2_with_file_and_line(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rollout/raw_reward": [[0, 0.2]]}\n{"_step": 1, oops}\n')
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", bad, "--db", db, "--write")
    assert result.code == 2
    assert result.err.startswith(f"{bad}:2:")
    assert "Traceback" not in result.err


def test_unreachable_store_is_exit_3_and_writes_nothing(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "pr.jsonl", FOUR_STEPS)
    url = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", url, "--write")
    assert result.code == 3
    assert "cannot connect" in result.err or "connect" in result.err
    assert "Traceback" not in result.err


def test_reports_in_every_format(tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    enforce: true\n")
    seed_nightlies(tmp_path, gates, db)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]})
    junit = tmp_path / "out" / "gatecfg.xml"
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--format", "github", "--report", f"junit={junit}")  # fmt: skip
    assert result.code == 1
    assert "::error file=" in result.out
    assert ",line=3" in result.out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "1"
    case = suite.find("testcase")
    assert case is not None
    assert case.get("name") == "rollout/raw_reward"
    assert "### gatecfg" in summary.read_text()
    text = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db)
    assert "FAIL" in text.out
    assert "result: exit 1" in text.out


def test_rekey_prints_a_banner_and_a_warning_in_the_report(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    seed_nightlies(tmp_path, gates, db)
    (gates / "base.yaml").write_text(BASE.replace("rel_down: 0.2", "rel_down: 0.25"))
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    result = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--format", "json"
    )
    assert "RE-KEY" in result.err
    warning = json.loads(result.out)["warnings"][0]
    assert warning["kind"] == "rekey"
    assert warning["metric"] == "rollout/raw_reward"
    assert warning["orphaned"] == 40  # 20 nightlies x 2 steps
    assert warning["differences"] == [{"field": "constraint.rel_down", "old": 0.2, "new": 0.25}]
    assert warning["old"]["constraint_key"] == '{"abs_floor_down":0.05,"rel_down":0.2}'
    assert warning["new"]["constraint_key"] == '{"abs_floor_down":0.05,"rel_down":0.25}'
