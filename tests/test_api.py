"""The Python API (`import gatecfg`): the CLI's results and errors by the same code path; docs/api.md."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, run_cli
from test_evaluate_cli import TEST, seed_nightlies, write_gates, write_record

import gatecfg


def canonical(document: object) -> str:
    return json.dumps(document, sort_keys=True)


def test_api_and_cli_give_the_same_json_document(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    enforce: true\n")
    seed_nightlies(tmp_path, gates, db)
    points = {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]}
    record = write_record(tmp_path / "pr.jsonl", points)
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                  "--format", "json", "--run-id", "pr-1", "--commit", "abc")  # fmt: skip
    from_mapping = gatecfg.evaluate(TEST, points, gates=gates, db=db, run_id="pr-1", commit="abc")
    from_file = gatecfg.evaluate(TEST, record, gates=gates, db=db, run_id="pr-1", commit="abc")
    assert cli.code == from_mapping.exit_code == 1
    assert canonical(json.loads(cli.out)) == canonical(from_file.to_dict())
    # Points given in Python are judged as the same points in a file: only where they came from differs.
    assert canonical(from_mapping.to_dict()) == canonical(from_file.to_dict())
    assert from_file.render("json") == cli.out
    assert [v.status for v in from_file.verdicts] == ["pass", "fail"]


def test_api_write_stores_the_run_like_the_cli(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    report = gatecfg.evaluate(TEST, {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}, gates=gates, db=db,
                              write=True, run_id="n-1")  # fmt: skip
    assert report.run.written
    history = run_cli(
        "history", "--test", TEST, "--metric", "rollout/raw_reward", "--db", db, "--format", "json"
    )
    assert [row["run_id"] for row in json.loads(history.out)] == ["n-1", "n-1"]


def test_render_rejects_an_unknown_format(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    report = gatecfg.evaluate(TEST, {"rollout/raw_reward": [(0, 0.2)]}, gates=gates, db=db)
    with pytest.raises(ValueError, match="unknown report format 'yaml'"):
        report.render("yaml")


def test_gate_file_error_carries_the_cli_message_and_position(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    steps: sometimes\n")
    record = write_record(tmp_path / "r.jsonl", {"rollout/raw_reward": [(0, 0.2)]})
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db)
    with pytest.raises(gatecfg.GateFileError) as caught:
        gatecfg.evaluate(TEST, record, gates=gates, db=db)
    error = caught.value
    assert cli.code == error.exit_code == 2
    assert (error.file, error.line, error.column) == (str(gates / "reward.yaml"), 4, 12)
    assert cli.err.strip() == str(error)


def test_record_error_names_the_file_and_line(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    record = tmp_path / "bad.jsonl"
    record.write_text('{"rollout/raw_reward": [[0, 0.2]]}\n{"rollout/raw_reward": [[0, 0.3]]}\n')
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db)
    with pytest.raises(gatecfg.RecordError) as caught:
        gatecfg.evaluate(TEST, record, gates=gates, db=db)
    assert (caught.value.file, caught.value.line) == (str(record), 2)
    assert cli.err.strip() == str(caught.value)


def test_store_error_carries_the_cli_message(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "r.jsonl", {"rollout/raw_reward": [(0, 0.2)]})
    (tmp_path / "file").write_text("")
    db = f"sqlite:///{tmp_path}/file/history.db"  # below a file: cannot be created
    cli = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db)
    with pytest.raises(gatecfg.StoreError) as caught:
        gatecfg.evaluate(TEST, record, gates=gates, db=db)
    assert cli.code == caught.value.exit_code == 3
    assert cli.err.strip() == str(caught.value)


def test_numpy_numbers_count_as_the_numbers_they_are(tmp_path: Path, db: str) -> None:
    np = pytest.importorskip("numpy")
    gates = write_gates(tmp_path)
    plain = gatecfg.evaluate(TEST, {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}, gates=gates, db=db)
    numpy = gatecfg.evaluate(
        TEST, {"rollout/raw_reward": [(np.int64(0), np.float32(0.2)), (np.int32(1), np.float64(0.5))]},
        gates=gates, db=db,
    )  # fmt: skip
    assert [v.value for v in numpy.verdicts] == [float(np.float32(0.2)), 0.5]
    assert [v.status for v in numpy.verdicts] == [v.status for v in plain.verdicts]


def test_a_point_that_is_not_a_pair_is_a_record_error(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    with pytest.raises(gatecfg.RecordError, match=r"<logged metrics>:2: error: rollout/raw_reward: point 2"):
        gatecfg.evaluate(TEST, {"rollout/raw_reward": [(0, 0.2), 0.5]}, gates=gates, db=db)


def test_lint_returns_the_problems_the_cli_prints(tmp_path: Path) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    steps: sometimes\n")
    cli = run_cli("lint", "--gates", gates, "--format", "json")
    problems = gatecfg.lint(gates=gates)
    assert cli.code == 2
    assert [p.as_json() for p in problems] == json.loads(cli.out)
    assert problems
    assert gatecfg.lint([gates / "base.yaml"], gates=gates) == problems  # a base file checks its tree


def test_load_gates_resolves_with_sources_or_raises(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    gate = gatecfg.load_gates(gates).tests[TEST].gates[0]
    assert gate.sources["constraint"] == f"{gates}/base.yaml:5"
    (gates / "reward.yaml").write_text(f"test: {TEST}\ngates:\n  rollout/raw_reward:\n    stepz: all\n")
    with pytest.raises(gatecfg.GateFileError) as caught:
        gatecfg.load_gates(gates)
    assert (caught.value.line, caught.value.column) == (4, 5)


def test_every_public_name_resolves_and_none_is_a_submodule() -> None:
    for name in gatecfg.__all__:
        assert getattr(gatecfg, name) is not None
        # A submodule of the same name would rebind the attribute when imported.
        assert importlib.util.find_spec(f"gatecfg.{name}") is None, name
    assert set(gatecfg.__all__) <= set(dir(gatecfg))
    with pytest.raises(AttributeError):
        gatecfg.verdicts_of  # noqa: B018


def test_import_gatecfg_loads_nothing_heavy() -> None:
    code = "import sys, gatecfg; print(sorted(m for m in sys.modules if m.startswith(('gatecfg.', 'sqlalchemy', 'numpy', 'pydantic', 'ruamel'))))"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------ docs/api.md

BLOCK = re.compile(r"```(yaml|python|text)\n(.*?)```", re.DOTALL)


def test_docs_api_examples_run_and_print_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    namespace: dict[str, object] = {}
    printed = ""
    blocks = BLOCK.findall((REPO / "docs" / "api.md").read_text(encoding="utf-8"))
    assert [kind for kind, _ in blocks].count("python") == 2
    for kind, text in blocks:
        if kind == "yaml":
            path = tmp_path / text.split("\n", 1)[0].removeprefix("# ")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        elif kind == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(text, "docs/api.md", "exec"), namespace)
            printed = out.getvalue()
        else:
            assert printed == text, f"docs/api.md shows:\n{text}\nthe example printed:\n{printed}"


def test_results_have_a_readable_repr(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    enforce: true\n")
    seed_nightlies(tmp_path, gates, db)
    report = gatecfg.evaluate(TEST, {"rollout/raw_reward": [(0, 0.2), (1, 0.3125)]}, gates=gates, db=db,
                              run_id="pr-1")  # fmt: skip
    assert repr(report) == f"<RunReport {TEST} run pr-1: exit 1, 1 of 1 gate failed>"
    [result] = report.results
    gate = result.gate
    assert repr(result) == f"<GateVerdicts rollout/raw_reward ({gate.file}:{gate.line}) fail: 1 fail, 1 pass>"
