"""What a record's points are: the format told from the content and each error at its own line, a
non-scalar TensorBoard summary, a null step, and metric names that hold line breaks or decomposed
Unicode."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from helpers import event_file, run_cli, score_gates, write_score_record
from hypothesis import given, settings
from hypothesis import strategies as st

import gatecfg
from gatecfg.records import read_records

TEST = "t.py"
BASE = "version: 1\ndefaults: {}\npolicy: {window: 20, min_history: 1}\n"


def _gates(root: Path, metric: str = "loss") -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    body = f'  "{metric}":\n    steps: last\n    constraint: {{rel_up: 0.5}}\n    enforce: true\n'
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n{body}", encoding="utf-8")
    return gates


def _evaluate(tmp_path: Path, record: Path, *extra: str, gates: Path | None = None) -> tuple[int, str, str]:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gates = gates or _gates(tmp_path)
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, *extra)
    return result.code, result.out, result.err.strip().split("\n")[0]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("1 0.5 0\n2 0.5 1\n3 0.5 2 x y z\n", 3),
        ("1 0.5 0\r2 0.5 1\r3 0.5 2 x y z\r", 3),
        ("1 0.5 0\r\n2 0.5 1\r\n3 0.5 2 x y z\r\n", 3),
        ("\n\n1 0.5 0 x y z\n", 3),
    ],
    ids=["lf", "cr", "crlf", "first-line"],
)
def test_a_six_field_metric_line_is_named_at_its_own_line(tmp_path: Path, content: str, line: int) -> None:
    path = tmp_path / "loss"
    path.write_bytes(content.encode())
    code, _, first = _evaluate(tmp_path, path)
    assert (code, first) == (2, f"{path}:{line}: error: loss: has 6 fields, not `timestamp value step`")


def test_a_json_lines_record_with_carriage_returns_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"_step": 0, "loss": 1}\r{"_step": 1, "loss": 1}\r{"_step": 2 "loss": 1}\r')
    code, _, first = _evaluate(tmp_path, path)
    assert (code, first) == (2, f"{path}:3:13: error: malformed JSON: Expecting ',' delimiter")


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("r.jsonl", '{"_step": 0, "loss": 1.0}\n{"_step": null, "loss": 2.0}\n', 2),
        ("wandb.json", '[{"_step": 0, "loss": 1.0},\n {"_step": null, "loss": 2.0}]', 2),
        ("wandb.csv", "_step,loss\n0,1.0\nnull,2.0\n", 3),
    ],
    ids=["jsonl", "wandb-json", "wandb-csv"],
)
def test_a_null_step_is_exit_2_at_its_row(tmp_path: Path, name: str, content: str, line: int) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    code, _, first = _evaluate(tmp_path, path)
    assert (code, first) == (2, f"{path}:{line}: error: _step: is null, not a whole number >= 0")


def test_a_tensorboard_histogram_where_a_scalar_is_gated_is_an_error_not_a_pass(tmp_path: Path) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    import numpy as np

    with tensorboardx.SummaryWriter(str(tmp_path / "tb")) as writer:
        writer.add_scalar("loss", 1.0, 0)
        writer.add_histogram("loss", np.arange(4.0), 1)  # the last step is no scalar
        writer.add_histogram("weights", np.arange(4.0), 1)  # no gate reads it: ignored
    (event_file,) = (tmp_path / "tb").glob("*tfevents*")
    code, _, first = _evaluate(tmp_path, event_file)
    assert code == 2
    assert first == (
        f'{event_file}:3: error: loss: step 1 (the last logged step) is "a TensorBoard histogram summary", '
        "not a number"
    )


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"], ids=["U+2028", "U+2029", "U+0085"])
def test_a_line_break_character_in_a_gate_file_is_exit_2_never_folded(tmp_path: Path, char: str) -> None:
    gates = _gates(tmp_path, f"eval/a{char}b")
    result = run_cli("lint", "--gates", gates)
    assert result.code == 2
    code = f"U+{ord(char):04X}"
    assert f"t.yaml:3:10: error: the file holds {code} (" in result.out
    assert "which YAML readers take for a line break" in result.out


@pytest.mark.parametrize("char", ["\u2028", "\x85"], ids=["U+2028", "U+0085"])
def test_a_line_break_character_in_a_record_key_stays_one_name(tmp_path: Path, char: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({f"a{char}b": [[0, 1.0]], "loss": [[0, 1.0]]}, ensure_ascii=False) + "\n")
    assert set(read_records([path]).columns) == {f"a{char}b", "loss"}


def test_a_metric_logged_in_decomposed_unicode_is_judged_under_its_composed_gate(tmp_path: Path) -> None:
    composed = "eval/caf\u00e9"
    decomposed = unicodedata.normalize("NFD", composed)
    gates = _gates(tmp_path, composed)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({decomposed: [[0, 1.0]]}, ensure_ascii=False) + "\n", encoding="utf-8")
    code, out, _ = _evaluate(tmp_path, path, "--format", "json", "--write", gates=gates)
    report = json.loads(out)
    [verdict] = report["verdicts"]
    assert (code, verdict["metric"], verdict["status"]) == (0, composed, "cold")
    assert report["notes"][-1] == (
        "the record logs `eval/caf\u00e9` decomposed (`eval/cafe\\u0301`); judged as the gate's composed "
        "`eval/caf\u00e9` (`eval/caf\\xe9`)"
    )


def test_a_jsonl_file_that_mentions_brain_event_is_read_as_json_lines(tmp_path: Path) -> None:
    from gatecfg.records.formats import sniff

    for name, line in {
        "a.jsonl": '{"_step": 0, "note": "brain.Event:2", "eval/score": 0.5}\n',
        "b.jsonl": '{"brain.Event:": 1, "_step": 0, "eval/score": 0.5}\n',
        "c.jsonl": '\n\n{"_step": 0, "x": "........brain.Event:"}\n',
    }.items():
        (tmp_path / name).write_text(line)
        assert sniff(str(tmp_path / name)) == "jsonl", name


def test_a_tensorboard_folder_under_a_folder_named_metrics_is_read_as_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from gatecfg.records.formats import sniff

    logs = tmp_path / "metrics" / "runs"
    logs.parent.mkdir()
    event_file(logs, [0.5])
    assert sniff(str(logs)) == "tensorboard"
    score_gates(tmp_path, "")
    assert write_score_record(tmp_path, logs).code == 0


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=200), st.integers(0, 64))
def test_no_text_sniffs_as_a_tensorboard_event_file_wherever_it_mentions_brain_event(
    text: str, at: int
) -> None:
    from gatecfg.records.formats import _is_event_file

    data = text.encode("utf-8")
    head = data[:at] + b"brain.Event:2" + data[at:]
    assert not _is_event_file(head)


NFD = "eval/cafe\u0301"


NFC = "eval/caf\u00e9"


def test_a_record_that_logs_the_nfd_spelling_feeds_the_nfc_gate(tmp_path: Path) -> None:
    gates = score_gates(tmp_path, "")
    (gates / "t.yaml").write_text(
        f"test: tests/t_ci.py\ngates:\n  {NFC}:\n    steps: last\n    constraint: {{rel_down: 0.1}}\n"
    )
    report = gatecfg.evaluate(
        "tests/t_ci.py", {NFD: [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"), write=True
    )
    [result] = report.results
    assert [v.value for v in result] == [0.5]  # not missing
