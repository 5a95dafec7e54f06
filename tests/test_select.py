"""Step selection (SPEC §3, §4): `all`, `last`, lists, missing metrics and steps, NaN, values not numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import parse_record_text

from gatecfg.errors import InputError, Location
from gatecfg.models import Steps
from gatecfg.records import Record, read_records
from gatecfg.select import Selected, select

FIXTURES = Path(__file__).parent / "fixtures" / "records"
SPEC_EXAMPLE = FIXTURES / "spec5_series.jsonl"
NON_NUMBER_HINT = (
    "  hint: log a JSON number here (NaN and Infinity are accepted and fail the gate), "
    "or track the metric without gating it with `constraint: null`"
)


def _record(text: str) -> Record:
    return parse_record_text(text, "run.jsonl")


def _at(line: int) -> Location:
    return Location("run.jsonl", line)


# --- the SPEC §8 example ----------------------------------------------------------------------------------


def test_all_fans_the_spec_example_out_to_steps_0_to_3() -> None:
    record = read_records([SPEC_EXAMPLE])
    selected = select(record, "rollout/raw_reward", "all", gated=True)
    assert [(s.step, s.logged_step, s.value, s.error) for s in selected] == [
        (0, 0, 0.2, None),
        (1, 1, 0.4, None),
        (2, 2, 0.6, None),
        (3, 3, 0.8, None),
    ]
    assert {s.location for s in selected} == {Location(str(SPEC_EXAMPLE), 1)}


def test_last_stores_the_spec_example_once_at_step_minus_1() -> None:
    record = read_records([SPEC_EXAMPLE])
    assert select(record, "rollout/raw_reward", "last", gated=True) == (
        Selected(-1, 3, 0.8, None, Location(str(SPEC_EXAMPLE), 1)),
    )


# --- all, last, lists -------------------------------------------------------------------------------------


def test_all_follows_step_order_not_line_order() -> None:
    record = _record('{"_step": 5, "m": 0.5}\n{"_step": 1, "m": 0.1}\n{"m": [[3, 0.3]]}')
    assert select(record, "m", "all", gated=True) == (
        Selected(1, 1, 0.1, None, _at(2)),
        Selected(3, 3, 0.3, None, _at(3)),
        Selected(5, 5, 0.5, None, _at(1)),
    )


def test_last_takes_the_highest_step_not_the_last_line() -> None:
    record = _record('{"_step": 9, "m": 0.9}\n{"_step": 2, "m": 0.2}')
    assert select(record, "m", "last", gated=True) == (Selected(-1, 9, 0.9, None, _at(1)),)


def test_list_picks_exactly_the_listed_steps() -> None:
    record = _record('{"m": [[0, 0.0], [1, 0.1], [2, 0.2], [3, 0.3]]}')
    assert select(record, "m", (1, 3), gated=True) == (
        Selected(1, 1, 0.1, None, _at(1)),
        Selected(3, 3, 0.3, None, _at(1)),
    )


# --- missing metrics and steps ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "expected_steps"),
    [("all", [-1]), ("last", [-1]), ((0, 5), [0, 5])],
    ids=["all", "last", "list"],
)
@pytest.mark.parametrize("gated", [True, False], ids=["gated", "tracked"])
def test_missing_metric_is_an_error_at_each_stored_step(
    steps: Steps, expected_steps: list[int], *, gated: bool
) -> None:
    record = _record('{"other": [[0, 1.0]]}')
    assert select(record, "m", steps, gated=gated) == tuple(
        Selected(step, None, None, "metric missing from the record", None) for step in expected_steps
    )


def test_a_missing_metric_names_a_logged_metric_near_it() -> None:
    record = _record('{"train/ppo_KL": [[0, 0.1]], "train/grad_norm": [[0, 2.0]]}')
    [selected] = select(record, "train/ppo_kl", "all", gated=True)
    assert selected.error == "metric missing from the record; did you mean `train/ppo_KL`?"


@pytest.mark.parametrize(
    ("logged", "wanted", "error"),
    [
        ([0, 1, 2, 3], 7, "step 7 missing (logged steps 0-3)"),
        ([4], 7, "step 7 missing (logged step 4)"),
        ([0, 5, 10, 11], 7, "step 7 missing (logged steps 0, 5, 10-11)"),
        ([0, 5, 10, 11, 20, 30], 7, "step 7 missing (logged steps 0, 5, 10-11, 20, 30)"),
        (list(range(1000)), 7000, "step 7000 missing (logged steps 0-999)"),
        (list(range(0, 1000, 10)), 7, "step 7 missing (logged steps 0, 10, 20, ..., 990; 100 steps in all)"),
    ],
    ids=["range", "one-step", "few-ranges", "five-ranges", "thousand-steps", "scattered-steps"],
)
@pytest.mark.parametrize("gated", [True, False], ids=["gated", "tracked"])
def test_missing_listed_step_is_an_error_naming_the_logged_steps(
    logged: list[int], wanted: int, error: str, *, gated: bool
) -> None:
    record = _record(json.dumps({"m": [[step, 1] for step in logged]}))
    assert select(record, "m", (wanted,), gated=gated) == (Selected(wanted, None, None, error, None),)


# --- NaN and infinities -----------------------------------------------------------------------------------

NON_FINITE = [
    ("NaN", "value is NaN"),
    ("Infinity", "value is Infinity"),
    ("-Infinity", "value is -Infinity"),
    ('"NaN"', "value is NaN"),
    ('"Infinity"', "value is Infinity"),
    ('"-Infinity"', "value is -Infinity"),
    ('"inf"', "value is Infinity"),
    ('"-INF"', "value is -Infinity"),
    ('"nan"', "value is NaN"),
]
NON_FINITE_IDS = [
    "NaN-token",
    "Infinity-token",
    "-Infinity-token",
    "NaN-string",
    "Infinity-string",
    "-Infinity-string",
    "inf-string",
    "-INF-string",
    "nan-string",
]


@pytest.mark.parametrize(("logged", "error"), NON_FINITE, ids=NON_FINITE_IDS)
def test_non_finite_value_at_a_gated_coordinate_is_an_error(logged: str, error: str) -> None:
    record = _record(f'{{"_step": 0, "m": 1.0}}\n{{"_step": 1, "m": {logged}}}')
    assert select(record, "m", "all", gated=True) == (
        Selected(0, 0, 1.0, None, _at(1)),
        Selected(1, 1, None, error, _at(2)),
    )


@pytest.mark.parametrize(("logged", "error"), NON_FINITE, ids=NON_FINITE_IDS)
def test_non_finite_value_at_a_tracked_coordinate_is_dropped(logged: str, error: str) -> None:
    record = _record(f'{{"_step": 0, "m": 1.0}}\n{{"_step": 1, "m": {logged}}}')
    assert select(record, "m", "all", gated=False) == (Selected(0, 0, 1.0, None, _at(1)),)


def test_non_finite_value_at_a_listed_gated_step_is_an_error() -> None:
    record = _record('{"m": [[0, 1.0], [4, NaN]]}')
    assert select(record, "m", (4,), gated=True) == (Selected(4, 4, None, "value is NaN", _at(1)),)


def test_nan_at_the_last_step_is_an_error_not_skipped_to_an_earlier_step() -> None:
    record = _record('{"m": [[0, 1.0], [1, 2.0], [2, "NaN"]]}')
    assert select(record, "m", "last", gated=True) == (Selected(-1, 2, None, "value is NaN", _at(1)),)


def test_nan_at_the_last_step_of_a_tracked_gate_stores_nothing() -> None:
    record = _record('{"m": [[0, 1.0], [1, 2.0], [2, NaN]]}')
    assert select(record, "m", "last", gated=False) == ()


# --- values that are not numbers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logged", "shown"),
    [
        ('"abc"', '"abc"'),
        ('"0.5"', '"0.5"'),
        ("null", "null"),
        ("true", "true"),
        ('{"_type": "histogram"}', '{"_type": "histogram"}'),
        (
            '{"_type": "histogram", "bins": [' + ", ".join(["0.5"] * 40) + "]}",
            '{"_type": "histogram", "bins": [0.5, 0.5, 0.5, 0.5, 0.5, ...',
        ),
    ],
    ids=["string", "quoted-number", "null", "bool", "object", "long-object"],
)
def test_non_numeric_value_at_a_gated_coordinate_is_an_input_error(logged: str, shown: str) -> None:
    record = _record(f'{{"_step": 0, "m": 1.0}}\n{{"_step": 3, "m": {logged}}}')
    with pytest.raises(InputError) as info:
        select(record, "m", "all", gated=True)
    assert str(info.value) == f"run.jsonl:2: error: m: step 3 is {shown}, not a number\n{NON_NUMBER_HINT}"


def test_non_numeric_value_at_the_last_step_says_it_is_the_last() -> None:
    record = _record('{"m": [[0, 1.0], [8, "pending"]]}')
    with pytest.raises(InputError) as info:
        select(record, "m", "last", gated=True)
    assert str(info.value) == (
        f'run.jsonl:1: error: m: step 8 (the last logged step) is "pending", not a number\n{NON_NUMBER_HINT}'
    )


@pytest.mark.parametrize(
    ("steps", "kept"), [("all", [0]), ("last", []), ((0, 3), [0])], ids=["all", "last", "list"]
)
def test_non_numeric_value_at_a_tracked_coordinate_is_dropped(steps: Steps, kept: list[int]) -> None:
    record = _record('{"m": [[0, 1.0], [3, "abc"]]}')
    assert select(record, "m", steps, gated=False) == tuple(
        Selected(step, step, 1.0, None, _at(1)) for step in kept
    )


def test_non_numeric_value_at_an_unselected_step_is_no_error() -> None:
    record = _record('{"m": [[0, "warming up"], [1, 0.5]]}')
    assert select(record, "m", (1,), gated=True) == (Selected(1, 1, 0.5, None, _at(1)),)
