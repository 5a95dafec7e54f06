"""The Python API refuses what the CLI refuses, through the same validators, naming the argument:
`write_override` (blank, a newline, a control character, a workflow command), `series` and `meta` labels
(a newline, a bidi override, over-long, None), a `write` or `require_history` that is not a bool, and
`metrics=None`. Nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
