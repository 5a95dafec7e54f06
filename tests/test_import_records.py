"""`gatecfg import` of a folder (or glob, or list) of `evaluate --record` files: one run per file, in name
order, with run id, date and commit from the file name, or dates from --start; stored as `evaluate
--write` would have stored each night."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import count, run_cli
from test_evaluate_cli import TEST, write_gates, write_record

NIGHTS = {"2024-05-01_3f2a9c1": 0.50, "2024-05-02_a1b2c3d": 0.56, "2024-05-03_0badf00": 0.44}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    records = tmp_path / "records"
    records.mkdir()
    for name, reward in NIGHTS.items():
        write_record(records / f"{name}.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, reward)]})
    (records / ".DS_Store").write_text("junk")
    return records


def stored_runs(db: str) -> list[tuple[str, str, str]]:
    result = run_cli("history", "--test", TEST, "--metric", "rollout/raw_reward", "--step", "1", "--db", db,
                     "--format", "json")  # fmt: skip
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    return [(row["run_id"], row["commit"], row["created_at"][:10]) for row in reversed(rows)]


def test_a_folder_of_records_is_one_run_per_file_named_by_its_file(tmp_path: Path, folder: Path) -> None:
    gates = write_gates(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = run_cli("import", "--gates", gates, "--test", TEST, folder, "--db", db)
    assert result.code == 0, result.err
    assert "imported 3 run(s)" in result.out
    assert stored_runs(db) == [
        ("2024-05-01_3f2a9c1", "3f2a9c1", "2024-05-01"),
        ("2024-05-02_a1b2c3d", "a1b2c3d", "2024-05-02"),
        ("2024-05-03_0badf00", "0badf00", "2024-05-03"),
    ]
    assert count(db, "SELECT count(*) FROM metric_points") == 6  # steps 0 and 1 of each night
    again = run_cli("import", "--gates", gates, "--test", TEST, folder, "--db", db)
    assert "3 run(s) already stored, skipped" in again.out


def test_a_quoted_glob_and_a_list_of_files_read_alike(tmp_path: Path, folder: Path) -> None:
    gates = write_gates(tmp_path)
    by_glob, by_list = (f"sqlite:///{tmp_path / name}" for name in ("glob.db", "list.db"))
    assert (
        run_cli(
            "import", "--gates", gates, "--test", TEST, f"{folder}/2024-05-0[12]*.jsonl", "--db", by_glob
        ).code
        == 0
    )
    files = [folder / "2024-05-02_a1b2c3d.jsonl", folder / "2024-05-01_3f2a9c1.jsonl"]  # name order wins
    assert run_cli("import", "--gates", gates, "--test", TEST, *files, "--db", by_list).code == 0
    assert stored_runs(by_glob) == stored_runs(by_list)
    assert [run_id for run_id, _, _ in stored_runs(by_list)] == ["2024-05-01_3f2a9c1", "2024-05-02_a1b2c3d"]


def test_names_without_dates_need_start_and_take_a_day_each_in_name_order(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    for n in (1, 2):
        write_record(records / f"night{n}.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    db = f"sqlite:///{tmp_path / 'h.db'}"
    refused = run_cli("import", "--gates", gates, "--test", TEST, records, "--db", db)
    assert refused.code == 2
    assert f"{records.name}/night1.jsonl: error: the file name holds no date" in refused.err
    assert "--start DATE" in refused.err
    result = run_cli("import", "--gates", gates, "--test", TEST, records, "--db", db, "--start", "2024-06-01")
    assert result.code == 0, result.err
    assert stored_runs(db) == [("night1", None, "2024-06-01"), ("night2", None, "2024-06-02")]


def test_a_name_pattern_gives_run_id_and_commit(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    records = tmp_path / "records"
    records.mkdir()
    write_record(records / "run-42.c0ffee1.2024-07-01.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    db = f"sqlite:///{tmp_path / 'h.db'}"
    pattern = r"run-(?P<run_id>\d+)"
    result = run_cli("import", "--gates", gates, "--test", TEST, records, "--db", db,
                     "--name-pattern", pattern, "--start", "2024-07-01")  # fmt: skip
    assert result.code == 0, result.err
    assert stored_runs(db) == [("42", None, "2024-07-01")]
    wrong = run_cli("import", "--gates", gates, "--test", TEST, records, "--db", db, "--name-pattern", "x(")
    assert wrong.code == 2
    assert "--name-pattern: error: is not a regular expression" in wrong.err


def test_a_bad_record_names_its_file_and_line_and_nothing_is_written(tmp_path: Path, folder: Path) -> None:
    gates = write_gates(tmp_path)
    (folder / "2024-05-04_1234567.jsonl").write_text('{"_step": 0, "rollout/raw_reward": }\n')
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = run_cli("import", "--gates", gates, "--test", TEST, folder, "--db", db)
    assert result.code == 2
    assert "2024-05-04_1234567.jsonl:1" in result.err
    assert not (tmp_path / "h.db").exists()
