"""What a record reader refuses before it judges: files that are not regular or cannot be read, and
inputs whose shape would make the reading slow; each an exit 2 naming the file."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from helpers import lines_run, run_cli, special_file, write_score_record

import gatecfg

TEST = "t.py"
GATES = "test: t.py\ngates:\n  loss:\n    steps: last\n    constraint: {rel_up: 0.5}\n    enforce: true\n"
BASE = "version: 1\ndefaults: {}\npolicy: {window: 20}\n"


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "t.yaml").write_text(GATES, encoding="utf-8")
    return root


def _evaluate(gates: Path, record: str | Path, tmp_path: Path) -> tuple[int, str]:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db)
    return result.code, result.err.strip().split("\n")[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_a_regular_file_that_cannot_be_read_is_exit_2_naming_it(gates: Path, tmp_path: Path) -> None:
    code, first = _evaluate(gates, "/proc/self/mem", tmp_path)
    assert (code, first) == (2, "/proc/self/mem: error: cannot read the record file: Input/output error")


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_record_that_is_no_regular_file_is_exit_2_naming_it(gates: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    code, first = _evaluate(gates, path, tmp_path)
    assert code == 2
    assert first.startswith(f"{path}: error: ")


def test_a_wide_wandb_header_over_short_rows_reads_in_work_proportional_to_its_size(
    gates: Path, tmp_path: Path
) -> None:
    # 200,000 columns above 3,000 rows of one cell each (1.5 MB): csv.DictReader filled every missing cell
    # of every row (6e8 cells, a line of csv.py each) and checked the header for duplicates pairwise;
    # `evaluate` ran for minutes. Counted in lines run, not seconds: today about one line per two bytes.
    header = "_step,loss," + ",".join(f"m{i}" for i in range(200_000))
    path = tmp_path / "history.csv"
    path.write_text(header + "\n" + "".join(f"{i},1.0\n" for i in range(3000)), encoding="utf-8")
    with lines_run(gatecfg, csv, budget=path.stat().st_size):
        code, first = _evaluate(gates, path, tmp_path)
    assert code == 3, first  # read and judged; the store does not exist yet
    assert "no history store" in first


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("loss,acc\n0.1,0.2\n",
         "PATH:1: error: _step: is a CSV whose header has no `_step` column (it starts loss, acc)"),
        ("_step,loss\r0,1.0\r0,2.0\r", "PATH:3: error: loss: step 0 is logged twice, first at PATH:2"),
        ("_step,loss\n0," + "[" * 100_000 + "\n",
         'PATH:2: error: loss: step 0 (the last logged step) is "[[[['),
    ],
    ids=["no-step-column", "carriage-returns", "nested-cell"],
)  # fmt: skip
def test_a_csv_is_read_and_reported_as_the_csv_it_is(
    gates: Path, tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "history.csv"
    path.write_bytes(content.encode())
    code, first = _evaluate(gates, path, tmp_path)
    assert code == 2
    assert first.startswith(expected.replace("PATH", str(path)))


def test_a_wandb_header_longer_than_the_sniffed_head_is_still_a_csv(gates: Path, tmp_path: Path) -> None:
    header = ",".join(f"_meta{i}" for i in range(2000)) + ",_step,loss"  # `_step` beyond byte 4,096
    path = tmp_path / "history.csv"
    path.write_text(header + "\n" + "," * 2000 + "0,1.0\n" + "," * 2000 + "0,2.0\n", encoding="utf-8")
    code, first = _evaluate(gates, path, tmp_path)
    assert (code, first) == (2, f"{path}:3: error: loss: step 0 is logged twice, first at {path}:2")


SPECIAL_RECORDS = [
    ("fifo", "is a named pipe (FIFO), not a record file"),
    ("fifo-with-a-writer", "is a named pipe (FIFO), not a record file"),
    ("socket", "is a socket, not a record file"),
    ("dev-zero", "is a device, not a record file"),
    ("link-to-dev-zero", "is a device, not a record file"),
    ("sparse-2gib", "the record file is 2,147.5 MB; gatecfg reads a record file of at most 256.0 MB"),
]


@pytest.mark.parametrize(("kind", "words"), SPECIAL_RECORDS, ids=[c[0] for c in SPECIAL_RECORDS])
@pytest.mark.parametrize(
    "suffix", [".jsonl", ".csv", ".json", "tfevents.1"], ids=["jsonl", "csv", "json", "tb"]
)
def test_a_record_that_is_no_regular_file_or_too_large_is_refused_before_it_is_read(
    tmp_path: Path, kind: str, words: str, suffix: str
) -> None:
    record = special_file(kind, tmp_path / f"events.out{suffix}")
    result = write_score_record(tmp_path, record)
    assert result.code == 2
    assert f"{record}: error: {words}" in result.err
    assert not (tmp_path / "h.db").exists()


def test_a_fifo_in_a_log_folder_is_refused_not_skipped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "events.out.tfevents.1")
    result = write_score_record(tmp_path, logs)
    assert result.code == 2
    assert "events.out.tfevents.1: error: is a named pipe (FIFO)" in result.err
