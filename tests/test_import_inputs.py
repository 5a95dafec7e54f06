"""What `gatecfg import` refuses in an export before it stores anything: a bad `metric@step` column, a NUL
byte anywhere, a file that is no regular file; each an error at its file, line and column, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CliResult, run_cli, score_gates, special_file, table

BAD_HEADERS = [
    ("negative", "eval/score@-1", "`-1` is not a step"),
    ("23-digits", "eval/score@12345678901234567890123", "beyond the largest step"),
    ("past-max-step", "eval/score@2147483648", "beyond the largest step"),
    ("word", "eval/score@last", "`last` is not a step"),
    ("float", "eval/score@1.5", "`1.5` is not a step"),
    ("exponent", "eval/score@1e3", "`1e3` is not a step"),
    ("non-ascii-digits", "eval/score@\u0663", "is not a step"),
    ("empty-step", "eval/score@", "no step follows `@`"),
    ("no-metric", "@5", "names no metric"),
]


def _import(tmp_path: Path, csv_text: str | bytes) -> CliResult:
    gates = score_gates(tmp_path, "")
    path = tmp_path / "export.csv"
    if isinstance(csv_text, bytes):
        path.write_bytes(csv_text)
    else:
        path.write_text(csv_text)
    db = f"sqlite:///{tmp_path / 'i.db'}"
    return run_cli("import", path, "--test", "tests/t_ci.py", "--gates", gates, "--db", db)


@table(("column", "words"), BAD_HEADERS)
def test_a_bad_metric_at_step_header_is_an_error_at_its_cell(tmp_path: Path, column: str, words: str) -> None:
    result = _import(tmp_path, f"run_id,date,commit,{column}\nr1,2024-01-01,c1,0.5\n")
    assert result.code == 2
    assert f"export.csv:1:20: error: column `{column}`: " in result.err
    assert words in result.err
    assert not (tmp_path / "i.db").exists()


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"run_id,date,commit,eval/score\nr1,2024-01-01,c\x001,0.5\n", "export.csv:2:16"),
        (b"run_id,date,commit,eval/score\nr\x00,2024-01-01,c1,0.5\n", "export.csv:2:2"),
        (b'run_id,date,commit,eval/score\n"r1",2024-01-01,c1,"0.5\x00"\n', "export.csv:2:24"),
        (b"run_id,date,commit,eval/\x00score\nr1,2024-01-01,c1,0.5\n", "export.csv:1:25"),
    ],
    ids=["commit", "run-id", "quoted-value", "header"],
)
def test_a_nul_byte_anywhere_in_an_export_is_an_error_at_its_column(
    tmp_path: Path, data: bytes, where: str
) -> None:
    result = _import(tmp_path, data)
    assert result.code == 2
    assert f"{where}: error: a NUL byte" in result.err
    assert not (tmp_path / "i.db").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse-2gib"])
def test_an_import_export_that_is_no_regular_file_is_refused_before_it_is_read(
    tmp_path: Path, kind: str
) -> None:
    gates = score_gates(tmp_path, "")
    path = special_file(kind, tmp_path / "export.csv")
    result = run_cli("import", path, "--test", "tests/t_ci.py", "--gates", gates, "--db", tmp_path / "i.db")
    expected = {
        "fifo": f"{path}: error: is a named pipe (FIFO), not an export file",
        "dev-zero": f"{path}: error: is a device, not an export file",
        # Under the 8 GB an export may hold, but no line of it is a run: the first is refused at 64 MB.
        "sparse-2gib": f"{path}:1: error: the line is longer than 64,000,000 bytes",
    }
    assert result.code == 2
    assert expected[kind] in result.err
    assert not (tmp_path / "i.db").exists()
