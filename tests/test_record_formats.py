"""Logger formats for `--record`: each read from a file its own library wrote, and judged exactly as the
equivalent JSON Lines; their errors name the file and line (or record) and exit 2."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest
from helpers import event_file, run_cli, score_gates, table, write_score_record
from hypothesis import given, settings
from hypothesis import strategies as st

import gatecfg
from gatecfg.records import read_records

TEST = "tests/e2e/test_loggers_ci.py"
BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {rel_up: 0.5, abs_floor_up: 0.1, rel_down: 0.8, abs_floor_down: 0.1}
  rollout/raw_reward:
    steps: last
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
policy:
  window: 20
  min_history: 1
"""
GATES = f"test: {TEST}\ngates:\n  train/grad_norm:\n    enforce: true\n  rollout/raw_reward:\n"
STEPS = 6


def grad_norm(night: int, step: int) -> float:
    return 1.0 + 0.1 * step + 0.01 * night


def tonight(step: int) -> float:
    """The run under test: step 4 regressed."""
    return 3.0 if step == 4 else grad_norm(0, step) + 0.005


def reward(step: int) -> float:
    return 0.25 + 0.05 * step


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(BASE)
    (root / "loggers.yaml").write_text(GATES)
    return root


@pytest.fixture
def history(tmp_path: Path, gates: Path) -> str:
    db = f"sqlite:///{tmp_path}/history.db"
    for night in range(5):
        points = {
            "train/grad_norm": [(s, grad_norm(night, s)) for s in range(STEPS)],
            "rollout/raw_reward": [(s, reward(s)) for s in range(STEPS)],
        }
        assert gatecfg.evaluate(TEST, points, gates=gates, db=db, write=True, run_id=f"n{night}").run.written
    return db


def as_jsonl(path: Path, points: dict[str, list[tuple[int, float]]]) -> Path:
    with path.open("w") as handle:
        for metric, pairs in points.items():
            for step, value in pairs:
                handle.write(json.dumps({"_step": step, metric: value}) + "\n")
    return path


def judged(record: Path | str, gates: Path, db: str) -> str:
    document = gatecfg.evaluate(TEST, record, gates=gates, db=db, run_id="tonight", commit="c").to_dict()
    return json.dumps(document, sort_keys=True)


def test_tensorboard_events_from_summary_writer_judge_as_json_lines(
    tmp_path: Path, gates: Path, history: str
) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    np = pytest.importorskip("numpy")
    with tensorboardx.SummaryWriter(str(tmp_path / "tb")) as writer:
        for step in range(STEPS):
            writer.add_scalar("train/grad_norm", tonight(step), step)
            writer.add_scalar("rollout/raw_reward", reward(step), step)
            writer.add_histogram("weights", np.arange(4.0), step)  # not a scalar: not a metric
    (event_file,) = (tmp_path / "tb").glob("*tfevents*")
    # TensorBoard keeps a scalar as a float32: the equivalent JSON Lines logs the same float32 values.
    f32 = {
        "train/grad_norm": [(s, float(np.float32(tonight(s)))) for s in range(STEPS)],
        "rollout/raw_reward": [(s, float(np.float32(reward(s)))) for s in range(STEPS)],
    }
    expected = judged(as_jsonl(tmp_path / "f32.jsonl", f32), gates, history)
    assert judged(event_file, gates, history) == expected
    assert judged(tmp_path / "tb", gates, history) == expected  # the log folder
    renamed = event_file.rename(tmp_path / "run.bin")  # detected by content, not by name
    assert judged(renamed, gates, history) == expected
    assert '"exit_code": 1' in expected


def test_mlflow_file_store_run_judges_as_json_lines(
    tmp_path: Path, gates: Path, history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.store.tracking.file_store import FileStore

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store opt-in
    store = FileStore(str(tmp_path / "mlruns"))
    experiment = store.create_experiment("nightly")
    run = store.create_run(experiment, user_id="ci", start_time=0, tags=[], run_name="tonight")
    points = {
        "train/grad_norm": [(s, tonight(s)) for s in range(STEPS)],
        "rollout/raw_reward": [(s, reward(s)) for s in range(STEPS)],
    }
    for metric, pairs in points.items():
        for step, value in pairs:
            store.log_metric(run.info.run_id, Metric(metric, value, 1_700_000_000_000 + step, step))
    run_dir = tmp_path / "mlruns" / experiment / run.info.run_id
    expected = judged(as_jsonl(tmp_path / "same.jsonl", points), gates, history)
    assert judged(run_dir, gates, history) == expected
    assert judged(run_dir / "metrics", gates, history) == expected
    assert '"exit_code": 1' in expected


def write_wandb_csv(path: Path, points: dict[str, list[tuple[int, float]]]) -> Path:
    """A run's history as the W&B export writes it: `_step`, metadata columns, an empty cell where a
    metric was not logged at that step."""
    metrics = list(points)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["_step", "_runtime", "_timestamp", *metrics])
        for step in range(STEPS):
            cells = [dict(points[m]).get(step, "") for m in metrics]
            writer.writerow([step, 10.5 * step, 1_700_000_000 + step, *cells])
    return path


def test_wandb_history_exports_judge_as_json_lines(tmp_path: Path, gates: Path, history: str) -> None:
    points = {
        "train/grad_norm": [(s, tonight(s)) for s in range(STEPS)],
        "rollout/raw_reward": [(s, reward(s)) for s in range(0, STEPS, 2)],  # logged every other step
    }
    expected = judged(as_jsonl(tmp_path / "same.jsonl", points), gates, history)
    assert judged(write_wandb_csv(tmp_path / "history.csv", points), gates, history) == expected
    rows = [
        {"_step": s, "_runtime": 1.5 * s, **{m: dict(p).get(s) for m, p in points.items()}}
        for s in range(STEPS)
    ]  # pandas' `to_json(orient="records")` writes a metric missing at a step as null
    export = tmp_path / "history.json"
    export.write_text(json.dumps(rows, indent=1))
    assert judged(export, gates, history) == expected


def _error(*args: str | Path) -> tuple[int, str]:
    result = run_cli("evaluate", *args)
    return result.code, result.err.strip()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("wandb.csv", "_step,loss\n0,1.0\n1,2.0,3.0\n",
         "PATH:3: error: the row has more cells than the header's 2"),
        ("wandb.csv", "_step,loss\n0,1.0\n,2.0\n", "PATH:3: error: _step: the row has no `_step`"),
        ("wandb.csv", "_step,loss\n0,1.0\n0,2.0\n",
         "PATH:3: error: loss: step 0 is logged twice, first at PATH:2"),
        ("wandb.csv", "_step,loss\n-1,1.0\n", "PATH:2: error: _step: is -1, not a whole number >= 0"),
        ("wandb.json", '[{"_step": 0, "loss": 1}, 5]', "PATH:2: error: record 2 is not a row with `_step`"),
        ("wandb.json", '[{"_step": 0, "loss": 1},\n {"_step": 1 "loss": 2}]',
         "PATH:2:14: error: malformed JSON: Expecting ',' delimiter"),
        ("metrics/loss", "1700 0.5 0\n1701 0.6 1\n1702 0.7 2 9\n",
         "PATH:3: error: loss: has 4 fields, not `timestamp value step`"),
        ("metrics/loss", "1700 0.5 0\n1701 0.6 1.5\n",
         'PATH:2: error: loss: step is "1.5", not a whole number >= 0'),
        ("metrics/loss", "1700 0.5 0\n1701 0.6 0\n",
         "PATH:2: error: loss: step 0 is logged twice, first at PATH:1"),
    ],
    ids=["csv-ragged", "csv-no-step", "csv-duplicate", "csv-negative", "json-not-row", "json-malformed",
         "mlflow-fields", "mlflow-step", "mlflow-duplicate"],
)  # fmt: skip
def test_bad_logger_file_is_exit_2_naming_file_and_line(
    tmp_path: Path, gates: Path, name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    code, err = _error("--gates", gates, "--test", TEST, "--record", path, "--db", tmp_path / "h.db")
    assert code == 2
    assert err.split("\n")[0] == expected.replace("PATH", str(path))


def test_tensorboard_duplicate_step_names_file_and_record(tmp_path: Path, gates: Path) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    with tensorboardx.SummaryWriter(str(tmp_path / "tb")) as writer:
        writer.add_scalar("train/grad_norm", 1.0, 3)
        writer.add_scalar("train/grad_norm", 1.5, 3)  # a restarted run wrote step 3 again
    (event_file,) = (tmp_path / "tb").glob("*tfevents*")
    code, err = _error("--gates", gates, "--test", TEST, "--record", event_file, "--db", tmp_path / "h.db")
    assert code == 2
    assert err.split("\n")[0] == (
        f"{event_file}:3: error: train/grad_norm: step 3 is logged twice, first at {event_file}:2"
    )


def test_tensorboard_without_its_extra_names_the_extra(
    tmp_path: Path, gates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    with tensorboardx.SummaryWriter(str(tmp_path / "tb")) as writer:
        writer.add_scalar("train/grad_norm", 1.0, 0)
    (event_file,) = (tmp_path / "tb").glob("*tfevents*")
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    code, err = _error("--gates", gates, "--test", TEST, "--record", event_file, "--db", tmp_path / "h.db")
    assert code == 2
    assert err == (
        f"{event_file}: error: is a TensorBoard event record, and the tensorboard extra is not installed\n"
        "  hint: pip install 'gatecfg[tensorboard]' (TensorBoard's own reader reads the event files)"
    )


def test_mlflow_non_finite_values_read_as_in_json_lines(tmp_path: Path) -> None:
    metrics = tmp_path / "run" / "metrics"
    (metrics / "train").mkdir(parents=True)
    (metrics / "train" / "loss").write_text("1 nan 0\n2 inf 1\n3 -inf 2\n4 0.5 3\n")
    column = read_records([tmp_path / "run"]).columns["train/loss"]
    assert column.steps == [0, 1, 2, 3]
    assert math.isnan(column.values[0])  # type: ignore[arg-type]
    assert column.values[1:] == [math.inf, -math.inf, 0.5]


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_event_file_is_an_error_at_its_record(tmp_path: Path, gates: Path, damage: str) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    with tensorboardx.SummaryWriter(str(tmp_path / "tb")) as writer:
        for step in range(3):
            writer.add_scalar("train/grad_norm", 1.0 + step, step)
    (event_file,) = (tmp_path / "tb").glob("*tfevents*")
    data = bytearray(event_file.read_bytes())
    if damage == "truncated":
        del data[
            -5:
        ]  # a writer killed in the middle of the last record (the 4th: one per step after the 1st)
    else:
        data[-6] ^= 0xFF  # a flipped byte in the last record's payload fails its CRC
    event_file.write_bytes(bytes(data))
    code, err = _error("--gates", gates, "--test", TEST, "--record", event_file, "--db", tmp_path / "h.db")
    assert code == 2
    assert err == (
        f"{event_file}:4: error: event record 4 is {damage}\n"
        "  hint: a writer killed mid-write, or a damaged copy; the run's metrics are not all there"
    )


def _record_header(length: int) -> bytes:
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", length)
    return header + struct.pack("<I", masked_crc32c(header))


@pytest.mark.parametrize(
    ("length", "words"),
    [(2**62, "is truncated"), (2**64 - 1, "is truncated"), (10**9, "is truncated"), (5, "is truncated")],
    ids=["2^62", "2^64-1", "1e9", "short"],
)
def test_a_tensorboard_record_length_past_the_end_of_the_file_is_a_truncated_record(
    tmp_path: Path, length: int, words: str
) -> None:
    pytest.importorskip("tensorboard")
    path = event_file(tmp_path / "tb", [0.5], _record_header(length) + b"ab")
    result = write_score_record(tmp_path, tmp_path / "tb")
    assert result.code == 2
    assert f"{path}:3: error: event record 3 {words}" in result.err


@pytest.mark.parametrize(
    ("value", "kind"),
    [("abc", "string"), (b"\x00\x01", "string"), (1 + 2j, "complex"), (True, "boolean")],
    ids=["str", "bytes", "complex", "bool"],
)
def test_a_tensorboard_scalar_that_is_no_number_is_an_error_at_its_record(
    tmp_path: Path, value: object, kind: str
) -> None:
    pytest.importorskip("tensorboard")
    path = event_file(tmp_path / "tb", [value])
    result = write_score_record(tmp_path, tmp_path / "tb")
    assert result.code == 2
    assert f"{path}:2: error: eval/score: the scalar is a {kind} tensor, not a number" in result.err


FORMAT_CASES = [
    ("wandb-json-duplicate", "w.json", '[{"_step": 0, "eval/score": 9.0, "eval/score": 1.0}]',
     "w.json:1: error: eval/score: key \"eval/score\" appears twice in one row"),
    ("wandb-json-duplicate-later-row", "w.json",
     '[\n  {"_step": 0, "eval/score": 0.5},\n  {"_step": 1,\n   "eval/score": 9.0, "eval/score": 1.0}\n]',
     "w.json:4: error: eval/score: key \"eval/score\" appears twice"),
    ("wandb-json-duplicate-step", "w.json", '[{"_step": 0, "_step": 1, "eval/score": 0.5}]',
     "w.json:1: error: _step: key \"_step\" appears twice in one row"),
    ("wandb-csv-duplicate-column", "w.csv", "_step,eval/score,eval/score\n0,9.0,1.0\n",
     "w.csv:1: error: eval/score: column `eval/score` appears twice in the header (columns 2 and 3)"),
    ("wandb-csv-duplicate-step-column", "w.csv", "_step,_step,eval/score\n0,1,0.5\n",
     "w.csv:1: error: _step: column `_step` appears twice"),
    ("wandb-csv-huge-field", "w.csv", "_step,eval/score,note\n0,0.5," + "a" * 200_000 + "\n",
     "w.csv:2: error: malformed CSV: field larger than field limit (131072)"),
    ("wandb-csv-nul", "w.csv", "_step,eval/score\n0,0.\x005\n",
     'w.csv:2: error: eval/score: step 0 (the last logged step) is "0.\\u00005", not a number'),
    ("jsonl-duplicate", "r.jsonl", '{"_step": 0, "eval/score": 9.0, "eval/score": 1.0}\n',
     'r.jsonl:1: error: key "eval/score" appears twice in one JSON object'),
]  # fmt: skip


@table(("name", "text", "expected"), FORMAT_CASES)
def test_a_record_that_would_lose_a_value_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, expected: str
) -> None:
    score_gates(tmp_path, "")
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    result = run_cli(
        "evaluate", "--gates", "gates", "--test", "tests/t_ci.py", "--record", name, "--db", "h.db"
    )
    assert result.code == 2
    assert expected in result.err


@settings(max_examples=100, deadline=None)
@given(
    key=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(
        lambda k: k != "_step"
    ),
    rows=st.integers(0, 3),
)
def test_a_repeated_key_in_any_row_of_a_wandb_export_is_an_error_at_that_row(key: str, rows: int) -> None:
    from gatecfg.records.formats import _line_of

    good = "".join(f'  {{"_step": {i}, {json.dumps(key)}: 1.0}},\n' for i in range(rows))
    text = f'[\n{good}  {{"_step": {rows}, {json.dumps(key)}: 9.0, {json.dumps(key)}: 1.0}}\n]'
    assert _line_of(text, key) == rows + 2
