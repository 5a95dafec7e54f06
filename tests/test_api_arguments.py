"""The Python API refuses what the CLI refuses, through the same validators, naming the argument:
`write_override` (blank, a newline, a control character, a workflow command), `series` and `meta` labels
(a newline, a bidi override, over-long, None), a `write` or `require_history` that is not a bool, and
`metrics=None`. Nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli, score_gates, table

import gatecfg
from gatecfg.errors import InputError

TEST = "tests/t_ci.py"
POINTS = {"eval/score": [(0, 0.5)]}


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (root / "t.yaml").write_text(json.dumps(gate))
    return root


def _refused(gates: Path, where: str, **kwargs: Any) -> str:
    db = gates.parent / "h.db"
    arguments: dict[str, Any] = {"gates": gates, "db": str(db), "write": True, **kwargs}
    metrics = arguments.pop("metrics", POINTS)
    with pytest.raises(InputError) as refused:
        gatecfg.evaluate(TEST, metrics, **arguments)
    assert refused.value.file == where, refused.value
    assert not db.exists()
    return str(refused.value)


OVERRIDES = [
    "",
    "   ",
    "\n::error::FORGED",
    "::error::FORGED",
    "ok\r::warning::x",
    "a\x1b[31mb",
    "a\u202eb",
    5,
]


@pytest.mark.parametrize("reason", OVERRIDES, ids=repr)
def test_a_write_override_that_is_blank_or_forges_log_lines_is_refused(gates: Path, reason: Any) -> None:
    _refused(gates, "write_override", write_override=reason)


def test_a_forged_override_on_a_pull_request_job_is_refused_not_stored(
    gates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"CIRCLECI": "true", "CIRCLE_BRANCH": "feat", "CIRCLE_PULL_REQUEST": "u/5"}.items():
        monkeypatch.setenv(key, value)
    message = _refused(gates, "write_override", write_override="\n::error::FORGED")
    assert "control character U+000A" in message


def test_an_override_without_a_write_names_the_api_words(gates: Path) -> None:
    message = _refused(gates, "write_override", write=False, write_override="backfill")
    assert "only means something with write=True" in message


LABELS = [
    ({"hw": "a\nb"}, "series['hw']"),
    ({"hw": "a\u202eb"}, "series['hw']"),
    ({"hw": "x" * 600}, "series['hw']"),
    ({"hw": None}, "series['hw']"),
    ({"h\nw": "x"}, "series"),
    ({"test": "x"}, "series"),
]


@pytest.mark.parametrize(("series", "where"), LABELS, ids=[repr(s) for s, _ in LABELS])
def test_series_labels_the_cli_refuses_are_refused(gates: Path, series: Any, where: str) -> None:
    _refused(gates, where, series=series)


@pytest.mark.parametrize(
    ("meta", "where"),
    [
        ({"image": None}, "meta['image']"),
        ({"image": "26.04\n::error::x"}, "meta['image']"),
        ({"image": "a\u202eb"}, "meta['image']"),
        ({"image": "x" * 600}, "meta['image']"),
        ({"k" * 600: "v"}, "meta"),
        ({5: "v"}, "meta"),
    ],
    ids=["none", "newline", "bidi", "long-value", "long-key", "int-key"],
)
def test_meta_values_the_cli_refuses_are_refused(gates: Path, meta: Any, where: str) -> None:
    _refused(gates, where, meta=meta)


def test_series_from_the_environment_are_checked_as_the_cli_checks_them(
    gates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATECFG_SERIES", "hw=a\u202eb")
    _refused(gates, "series['hw']")


@pytest.mark.parametrize("value", ["false", 0, None], ids=repr)
def test_a_write_that_is_not_a_bool_is_refused(gates: Path, value: Any) -> None:
    message = _refused(gates, "write", write=value)
    assert "not True or False" in message


def test_require_history_that_is_not_a_bool_is_refused(gates: Path) -> None:
    _refused(gates, "require_history", require_history="no")


def test_metrics_none_is_an_input_error_naming_the_argument(gates: Path) -> None:
    message = _refused(gates, "metrics", metrics=None)
    assert "None is NoneType" in message


def test_valid_labels_and_meta_are_stored(gates: Path) -> None:
    report = gatecfg.evaluate(
        TEST,
        POINTS,
        gates=gates,
        db=str(gates.parent / "h.db"),
        write=True,
        series={"hw": "h100", "empty": ""},
        meta={"image": "26.04"},
        write_override="backfill of March",
    )
    assert report.run.written
    assert report.series == {"hw": "h100", "empty": ""}


@pytest.mark.parametrize("reason", ["", "  ", "a\x00b"], ids=["empty", "blank", "nul"])
def test_the_api_refuses_a_blank_or_unprintable_override_and_writes_nothing(
    tmp_path: Path, reason: str
) -> None:
    gates = score_gates(tmp_path, "")
    with pytest.raises(InputError, match="write_override"):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"),
                         write=True, write_override=reason)  # fmt: skip
    assert not (tmp_path / "h.db").exists()


API_CASES = [
    ("int-name", {5: [(0, 0.5)]}, {}, "RecordError", "a metric name is 5 (int), not a string"),
    ("none-name", {None: [(0, 0.5)]}, {}, "RecordError", "a metric name is None (NoneType), not a string"),
    ("bytes-name", {b"eval/score": [(0, 0.5)]}, {}, "RecordError", "(bytes), not a string"),
    ("none-points", {"eval/score": None}, {}, "RecordError", "eval/score: the points are None"),
    ("int-points", {"eval/score": 3}, {}, "RecordError", "the points are 3, not a sequence"),
    ("str-points", {"eval/score": "0.5"}, {}, "RecordError", "the points are '0.5', not a sequence"),
    ("dict-points", {"eval/score": {0: 0.5}}, {}, "RecordError", "not a sequence of (step, value) pairs"),
    ("none-point", {"eval/score": [None]}, {}, "RecordError", "point 1 is None, not a (step, value) pair"),
    ("triple", {"eval/score": [(0, 1, 2)]}, {}, "RecordError", "not a (step, value) pair"),
    ("fractional-step", {"eval/score": [(0.5, 0.5)]}, {}, "RecordError", "step is 0.5, not a whole number"),
    ("np-bool-step", {"eval/score": [("np.bool_", 0.5)]}, {}, "RecordError", "not a whole number"),
    ("np-bool-value", {"eval/score": [(0, "np.bool_")]}, {}, "InputError", "not a number"),
    ("bool-value", {"eval/score": [(0, True)]}, {}, "InputError", "is true, not a number"),
    ("complex-value", {"eval/score": [(0, 1j)]}, {}, "InputError", "not a number"),
    ("commit-int", {"eval/score": [(0, 0.5)]}, {"commit": 5}, "InputError", "--commit: error: 5 is int"),
    ("run-id-int", {"eval/score": [(0, 0.5)]}, {"run_id": 5}, "InputError", "--run-id: error: 5 is int"),
    ("branch-bytes", {"eval/score": [(0, 0.5)]}, {"branch": b"main"}, "InputError", "is bytes, not a string"),
    ("label-int", {"eval/score": [(0, 0.5)]}, {"series": {"gpu": 8}}, "InputError", "8 is int, not a string"),
    ("gates-int", {"eval/score": [(0, 0.5)]}, {"gates": 5}, "InputError", "gates: error: 5 is int"),
    ("db-int", {"eval/score": [(0, 0.5)]}, {"db": 5}, "InputError", "db: error: 5 is int"),
    ("nfd-and-nfc", {"eval/caf\u00e9": [(0, 0.5)], "eval/cafe\u0301": [(0, 0.6)]}, {}, "RecordError",
     "step 0 is logged twice"),
]  # fmt: skip


def _numpy_values(points: dict[object, object]) -> dict[object, object]:
    import numpy as np

    def swap(x: object) -> object:
        return np.bool_(True) if x == "np.bool_" else x

    return {
        name: [tuple(swap(x) for x in pair) if isinstance(pair, tuple) else pair for pair in pts]
        if isinstance(pts, list)
        else pts
        for name, pts in points.items()
    }


@table(("points", "kwargs", "error", "words"), API_CASES)
def test_every_bad_api_input_is_an_input_error_with_the_clis_message(
    tmp_path: Path, points: dict[object, object], kwargs: dict[str, object], error: str, words: str
) -> None:
    gates = score_gates(tmp_path, "")
    call: dict[str, object] = {"gates": gates, "db": str(tmp_path / "h.db"), "write": True, **kwargs}
    with pytest.raises(InputError) as caught:
        gatecfg.evaluate("tests/t_ci.py", _numpy_values(points), **call)  # type: ignore[arg-type]
    assert type(caught.value).__name__ == error
    assert words in str(caught.value)
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize(
    "step",
    ["np.float64(2.0)", "np.float32(2.0)", "np.int64(2)", "np.uint8(2)", "2.0"],
)
def test_a_whole_number_step_of_any_numeric_type_is_a_step(tmp_path: Path, step: str) -> None:
    import numpy as np

    gates = score_gates(tmp_path, "")
    (gates / "t.yaml").write_text("test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: [2]\n")
    given = eval(step, {"np": np})  # the parametrized spellings above
    report = gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(given, 0.5)]}, gates=gates,
                              db=str(tmp_path / "h.db"), write=True)  # fmt: skip
    assert report.run.written
    assert [v.step for r in report.results for v in r] == [2]


def test_a_400_digit_integer_is_judged_as_the_cli_judges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = score_gates(tmp_path, "")
    db = str(tmp_path / "a.db")
    api = gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 10**400)]}, gates=gates, db=db, write=True)
    (tmp_path / "big.jsonl").write_text('{"_step": 0, "eval/score": ' + "1" + "0" * 400 + "}\n")
    monkeypatch.chdir(tmp_path)
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", "big.jsonl", "--db", "c.db"]
    cli = run_cli(*argv, "--write", "--format", "json")
    assert cli.code == api.exit_code
    [verdict] = json.loads(cli.out)["verdicts"]
    assert [v.status for r in api.results for v in r] == [verdict["status"]]
