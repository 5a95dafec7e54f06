"""The models: what may be written in a gate or base file, with strict bool and number rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli, score_gates
from pydantic import BaseModel, ValidationError

from gatecfg.models import BaseFile, Constraint, GateFile, GateSpec, Limits, Policy, Rule


def error_types(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return [e["type"] for e in caught.value.errors()]


# -- enforce and other booleans are strictly true/false ------------------------------------------------


@pytest.mark.parametrize("value", [True, False], ids=["true", "false"])
def test_enforce_accepts_true_and_false(value: bool) -> None:
    assert GateSpec.model_validate({"enforce": value}).enforce is value


@pytest.mark.parametrize(
    "value", ["true", "yes", "on", 1, 0, 1.0], ids=["string-true", "yes", "on", "one", "zero", "float"]
)
def test_enforce_refuses_anything_that_only_looks_boolean(value: Any) -> None:
    assert error_types(GateSpec, {"enforce": value}) == ["bool_type"]


@pytest.mark.parametrize("value", ["false", 0], ids=["string", "zero"])
def test_policy_enforce_is_strict_too(value: Any) -> None:
    assert error_types(Policy, {"enforce": value}) == ["bool_type"]


# -- numbers in a constraint --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, 1, 0.25, 10**6], ids=["zero", "zero-float", "int", "float", "big"])
def test_constraint_values_are_numbers_at_or_above_zero(value: float) -> None:
    assert Constraint.model_validate({"rel_up": value}).literal() == {"rel_up": value}


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, "float_type"),
        (False, "float_type"),
        ("0.5", "float_type"),
        (-0.1, "greater_than_equal"),
        (float("nan"), "finite_number"),
        (float("inf"), "finite_number"),
        ([0.5], "float_type"),
    ],
    ids=["true", "false", "string", "negative", "nan", "inf", "list"],
)
def test_constraint_values_refuse_bools_strings_negatives_and_non_finite(value: Any, kind: str) -> None:
    assert error_types(Constraint, {"abs_floor_down": value}) == [kind]


def test_a_constraint_needs_at_least_one_key() -> None:
    assert error_types(Constraint, {}) == ["constraint_empty"]


def test_a_constraint_key_written_as_null_is_refused() -> None:
    assert error_types(Constraint, {"rel_up": None, "rel_down": 0.1}) == ["null_field"]


def test_constraint_literal_holds_only_the_written_keys() -> None:
    assert Constraint.model_validate({"rel_down": 0.2, "abs_floor_down": 0.05}).literal() == {
        "rel_down": 0.2,
        "abs_floor_down": 0.05,
    }


def test_an_unknown_constraint_key_is_refused() -> None:
    assert error_types(Constraint, {"rel_upp": 0.5}) == ["extra_forbidden"]


# -- limits ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [{"min": 0.5}, {"max": -3}, {"min": -1, "max": 1}, {"min": 2, "max": 2}],
    ids=["min-only", "negative-max", "both", "equal"],
)
def test_limits_take_any_finite_numbers_with_min_not_above_max(data: dict[str, float]) -> None:
    assert Limits.model_validate(data).literal() == data


@pytest.mark.parametrize(
    ("data", "kinds"),
    [
        ({}, ["limits_empty"]),
        ({"min": 2, "max": 1}, ["limits_order"]),
        ({"min": float("-inf")}, ["finite_number"]),
        ({"max": "1"}, ["float_type"]),
        ({"min": True}, ["float_type"]),
        ({"max": None}, ["null_field"]),
    ],
    ids=["empty", "min-above-max", "infinite", "string", "bool", "null"],
)
def test_limits_refuse(data: dict[str, Any], kinds: list[str]) -> None:
    assert error_types(Limits, data) == kinds


def test_limits_order_message_shows_whole_numbers_as_written() -> None:
    with pytest.raises(ValidationError, match=r"min \(2\) is above max \(1\)"):
        Limits.model_validate({"min": 2, "max": 1})


# -- steps ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "stored"),
    [("all", "all"), ("last", "last"), ([0], (0,)), ([100, 0, 5], (0, 5, 100))],
    ids=["all", "last", "one", "sorted"],
)
def test_steps_are_all_last_or_distinct_steps_kept_sorted(written: Any, stored: Any) -> None:
    assert GateSpec.model_validate({"steps": written}).steps == stored


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("alll", "must be `all`, `last` or a list of steps"),
        ("ALL", "must be `all`, `last` or a list of steps"),
        (3, "must be `all`, `last` or a list of steps"),
        ([], "the list of steps is empty"),
        ([0, -1], "steps are whole numbers >= 0, got -1"),
        ([0, 1.5], "steps are whole numbers >= 0, got 1.5"),
        ([0, 2.0], "write step 2.0 as the integer 2"),
        ([True], "steps are whole numbers >= 0, got true"),
        (["1"], "steps are whole numbers >= 0, got '1'"),
        ([1, 2, 1], "step 1 is listed twice"),
        (None, "`steps: null` has no meaning here"),
    ],
    ids=["typo", "upper-case", "bare-int", "empty", "negative", "fraction", "whole-float", "bool", "string",
         "duplicate", "null"],
)  # fmt: skip
def test_steps_refuse(written: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        GateSpec.model_validate({"steps": written})
    assert message in caught.value.errors()[0]["msg"]


def test_a_steps_error_carries_the_index_of_the_offending_item() -> None:
    with pytest.raises(ValidationError) as caught:
        GateSpec.model_validate({"steps": [0, 5, -2]})
    assert (caught.value.errors()[0].get("ctx") or {})["index"] == 2


# -- written vs unset -----------------------------------------------------------------------------------


def test_an_explicit_null_constraint_or_limits_counts_as_written() -> None:
    spec = GateSpec.model_validate({"constraint": None, "limits": None})
    assert spec.model_fields_set == {"constraint", "limits"}
    assert (spec.constraint, spec.limits) == (None, None)


def test_an_unwritten_field_is_not_in_the_fields_set() -> None:
    assert GateSpec.model_validate({}).model_fields_set == set()


@pytest.mark.parametrize("field", ["window", "min_history", "enforce"])
def test_policy_fields_written_as_null_are_refused(field: str) -> None:
    assert error_types(Policy, {field: None}) == ["null_field"]


@pytest.mark.parametrize(
    ("data", "kind"),
    [({"window": 0}, "greater_than_equal"), ({"min_history": -1}, "greater_than_equal"),
     ({"window": True}, "int_type"), ({"window": 2.0}, "int_type"), ({"window": "20"}, "int_type")],
    ids=["window-zero", "negative-min-history", "bool-window", "float-window", "string-window"],
)  # fmt: skip
def test_policy_numbers_are_strict_whole_numbers_in_range(data: dict[str, Any], kind: str) -> None:
    assert error_types(Policy, data) == [kind]


def test_models_are_frozen() -> None:
    spec = GateSpec.model_validate({"steps": "all"})
    with pytest.raises(ValidationError):
        spec.steps = "last"  # type: ignore[misc]


# -- files ----------------------------------------------------------------------------------------------


def test_a_gate_file_maps_metric_names_to_gates_or_null_one_liners() -> None:
    model = GateFile.model_validate({"test": "t", "gates": {"a": None, "b": {"steps": "last"}}})
    assert model.gates["a"] is None
    assert model.gates["b"] == GateSpec(steps="last")


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"test": "", "gates": {"a": None}}, "string_too_short"),
        ({"test": "t", "gates": {}}, "too_short"),
        ({"test": "t", "gates": {" a": None}}, "string_pattern_mismatch"),
        ({"test": "t", "gates": {"": None}}, "string_too_short"),
        ({"test": 1, "gates": {"a": None}}, "string_type"),
        ({"test": "t", "gates": {"a": None}, "gate": {}}, "extra_forbidden"),
    ],
    ids=["empty-test", "no-gates", "leading-space-metric", "empty-metric", "test-not-string", "unknown-key"],
)
def test_a_gate_file_refuses(data: dict[str, Any], kind: str) -> None:
    assert error_types(GateFile, data) == [kind]


def test_a_base_file_needs_version_1() -> None:
    assert BaseFile.model_validate({"version": 1}).defaults == {}
    assert error_types(BaseFile, {"version": 2}) == ["literal_error"]
    assert error_types(BaseFile, {}) == ["missing"]


def test_a_base_file_default_must_be_a_mapping_not_a_one_liner() -> None:
    assert error_types(BaseFile, {"version": 1, "defaults": {"m": None}}) == ["model_type"]


def test_rules_take_lists_and_refuse_an_empty_require() -> None:
    rule = Rule.model_validate({"name": "r", "require": ["m"], "when": "gated"})
    assert (rule.require, rule.when) == (("m",), "gated")
    assert error_types(Rule, {"name": "r", "require": []}) == ["too_short"]
    assert error_types(Rule, {"name": "r", "require": ["m"], "when": "sometimes"}) == ["literal_error"]


NFD = "eval/cafe\u0301"


NFC = "eval/caf\u00e9"


SPEC = "    steps: last\n    constraint: {rel_down: 0.1}\n"


@pytest.mark.parametrize(
    "gate_file",
    [
        f"test: tests/t_ci.py\ngates:\n  {NFD}:\n{SPEC}",
        f"test: tests/t_ci.py\ngates:\n  {NFC}:\n{SPEC}  {NFD}:\n",
        f"test: tests/t_ci.py\ngates:\n  eval/score:\n  {NFD}:\n{SPEC}",
    ],
    ids=["nfd-alone", "nfc-and-nfd", "nfd-beside-another"],
)
def test_a_metric_name_in_decomposed_unicode_is_a_lint_error_naming_its_nfc_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate_file: str
) -> None:
    score_gates(tmp_path, "")
    (tmp_path / "gates" / "t.yaml").write_text(gate_file)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert "is spelled in decomposed Unicode" in result.out
    assert f"write it as `{NFC}` (NFC)" in result.out
