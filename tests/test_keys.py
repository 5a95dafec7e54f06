"""Canonical keys (SPEC §4): what identifies a stored value, and what never may.

Identity: series (test + labels), metric, the resolved `steps` and `constraint` literals. Not identity:
`limits`, `enforce`, policy, which file wrote a literal, and YAML style (key order, flow vs block,
comments, anchors, `1` vs `1.0`). Keys are checked from YAML text through the real loader and models,
so a style that the loader treated differently would show up here.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatecfg import keys
from gatecfg.keys import (
    HASH_LENGTH,
    canonical_json,
    constraint_key,
    coordinate_hash,
    normalise,
    series_key,
    steps_key,
)
from gatecfg.models import Constraint, GateFile, GateSpec
from gatecfg.parse import parse_doc
from gatecfg.resolve import load_tree
from gatecfg.yamlio import load_yaml

CONSTRAINT_KEYS = ("rel_up", "abs_floor_up", "rel_down", "abs_floor_down")


def spec_of(text: str, metric: str = "m") -> GateSpec:
    """The written gate `metric` of a gate file given as YAML text."""
    model = parse_doc(load_yaml(text, "t.yaml"), GateFile)
    spec = model.gates[metric]
    assert spec is not None
    return spec


def keys_of(text: str, metric: str = "m") -> tuple[str, str]:
    spec = spec_of(text, metric)
    assert spec.steps is not None
    return steps_key(spec.steps), constraint_key(spec.constraint)


def resolved_keys(files: dict[str, str], metric: str = "m") -> tuple[str, str, str]:
    """(steps_key, constraint_key, coordinate) of the one test `t` of a gates tree given as texts."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        tree = load_tree(root)
        assert tree.problems == []
        gate = tree.test("t").gate(metric)
        assert gate is not None
        return gate.steps_key, gate.constraint_key, gate.coordinate(series_key("t"))


# -- SPEC §4 examples ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [("all", '"all"'), ("last", '"last"'), ("[0, 1]", "[0,1]"), ("[1, 0]", "[0,1]"), ("[ 7 ]", "[7]")],
    ids=["all-keeps-its-quotes", "last", "list-compact", "list-sorted", "one-step"],
)
def test_steps_key_is_canonical_json_of_the_literal(written: str, expected: str) -> None:
    steps, _ = keys_of(f"test: t\ngates:\n  m:\n    steps: {written}\n    constraint: null\n")
    assert steps == expected


def test_a_tracked_gate_has_the_constraint_key_null() -> None:
    _, constraint = keys_of("test: t\ngates:\n  m:\n    steps: all\n    constraint: null\n")
    assert constraint == "null"


def test_constraint_key_has_sorted_keys_and_no_whitespace() -> None:
    _, constraint = keys_of(
        "test: t\ngates:\n  m:\n    steps: all\n    constraint: {rel_up: 0.5, abs_floor_up: 0.1}\n"
    )
    assert constraint == '{"abs_floor_up":0.1,"rel_up":0.5}'


@pytest.mark.parametrize("spelling", ["1", "1.0", "1.00", "1e0", "10e-1", "+1", "1_0e-1"])
def test_one_written_any_way_in_yaml_gives_the_same_constraint_key(spelling: str) -> None:
    _, constraint = keys_of(
        f"test: t\ngates:\n  m:\n    steps: all\n    constraint: {{rel_up: {spelling}}}\n"
    )
    assert constraint == '{"rel_up":1}'


def test_a_default_keys_exactly_as_if_it_had_been_written_in_the_gate_file() -> None:
    base = (
        "version: 1\ndefaults:\n  m:\n    steps: [0, 5]\n"
        "    constraint: {rel_down: 0.2, abs_floor_down: 0.05}\n"
    )
    inherited = resolved_keys({"base.yaml": base, "t.yaml": "test: t\ngates:\n  m:\n"})
    written = resolved_keys(
        {
            "t.yaml": "test: t\ngates:\n"
            "  m: {steps: [5, 0], constraint: {abs_floor_down: 0.05, rel_down: 0.2}}\n"
        }
    )
    assert inherited == written


def test_an_open_side_is_absent_from_the_key_not_written_as_infinity() -> None:
    _, constraint = keys_of("test: t\ngates:\n  m:\n    steps: all\n    constraint: {rel_down: 0.1}\n")
    assert constraint == '{"rel_down":0.1}'


# -- normalise and hashing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.0, 1), (-0.0, 0), (0.5, 0.5), (True, True), (None, None), ((2.0, 1), [2, 1]), ({"b": 1.0}, {"b": 1})],
    ids=["whole-float", "negative-zero", "fraction", "bool-stays-bool", "none", "tuple", "mapping"],
)
def test_normalise_gives_one_spelling_per_number(value: Any, expected: Any) -> None:
    assert normalise(value) == expected
    assert type(normalise(value)) is type(expected)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_a_key_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        canonical_json({"rel_up": value})


def test_the_coordinate_hash_is_sha256_of_the_versioned_canonical_literal() -> None:
    series = series_key("tests/e2e/test_x_ci.py")
    literal = json.dumps(
        {"constraint": "null", "metric": "m", "series": series, "steps": '"all"', "v": keys.KEY_VERSION},
        sort_keys=True,
        separators=(",", ":"),
    )
    expected = hashlib.sha256(literal.encode()).hexdigest()[:12]
    assert coordinate_hash(series, "m", '"all"', "null") == expected


def test_the_key_version_is_part_of_what_is_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    before = coordinate_hash(series_key("t"), "m", '"all"', "null")
    monkeypatch.setattr(keys, "KEY_VERSION", keys.KEY_VERSION + 1)
    assert coordinate_hash(series_key("t"), "m", '"all"', "null") != before


def test_series_labels_are_identity_and_their_order_is_not() -> None:
    plain = coordinate_hash(series_key("t"), "m", '"all"', "null")
    h100 = coordinate_hash(series_key("t", {"hw": "h100", "backend": "fsdp"}), "m", '"all"', "null")
    same = coordinate_hash(series_key("t", {"backend": "fsdp", "hw": "h100"}), "m", '"all"', "null")
    assert plain != h100
    assert h100 == same


# -- properties: YAML style never changes a key -------------------------------------------------------

numbers = st.integers(min_value=0, max_value=10**6) | st.floats(
    min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False
)
constraints = st.dictionaries(st.sampled_from(CONSTRAINT_KEYS), numbers, min_size=1, max_size=4)
steps_values = st.sampled_from(["all", "last"]) | st.lists(
    st.integers(min_value=0, max_value=10**6), min_size=1, max_size=6, unique=True
)


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return value if isinstance(value, str) else repr(value)


def _block(value: Any, indent: int, comments: bool) -> str:
    pad = " " * indent
    note = "  # why" if comments else ""
    if isinstance(value, dict):
        return "".join(
            f"\n{pad}{k}:{_block(v, indent + 2, comments)}"
            if isinstance(v, dict | list)
            else f"\n{pad}{k}: {_flow(v)}{note}"
            for k, v in value.items()
        )
    if isinstance(value, list):
        return "".join(f"\n{pad}- {_flow(v)}{note}" for v in value)
    return f" {_flow(value)}"


def _reordered(mapping: dict[str, Any], order: list[str]) -> dict[str, Any]:
    return {k: mapping[k] for k in order if k in mapping}


@st.composite
def gate_texts(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A gate body and two YAML gate files declaring it as `m`, each in a style drawn at random."""
    body = {"steps": draw(steps_values), "constraint": draw(constraints)}

    def styled() -> str:
        order = draw(st.permutations(CONSTRAINT_KEYS))
        fields = draw(st.permutations(["steps", "constraint"]))
        gate = _reordered({**body, "constraint": _reordered(body["constraint"], order)}, fields)
        style = draw(st.sampled_from(["flow", "block", "block-comments", "anchor", "merge"]))
        if style == "flow":
            return f"{{test: t, gates: {{m: {_flow(gate)}}}}}"
        if style == "anchor":
            other = {"steps": "all", "constraint": "&c " + _flow(gate["constraint"])}
            mine = {**gate, "constraint": "*c"}
            return f"test: t\ngates:\n  other: {_flow(other)}\n  m: {_flow(mine)}\n"
        if style == "merge":
            return f"test: t\ngates:\n  other: &g {_flow(gate)}\n  m:\n    <<: *g\n"
        comments = style == "block-comments"
        head = "# gate file\ntest: t  # the test\n" if comments else "test: t\n"
        return f"{head}gates:\n  m:{_block(gate, 4, comments)}\n"

    return body, styled(), styled()


@given(gate_texts())
@settings(max_examples=80, deadline=None)
def test_key_order_flow_block_comments_and_anchors_never_change_a_key(
    texts: tuple[dict[str, Any], str, str],
) -> None:
    body, first, second = texts
    steps = tuple(sorted(body["steps"])) if isinstance(body["steps"], list) else body["steps"]
    expected = (steps_key(steps), canonical_json(body["constraint"]))
    assert keys_of(first) == keys_of(second) == expected


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(CONSTRAINT_KEYS))
def test_integer_and_float_spellings_of_a_whole_number_agree(number: int, key: str) -> None:
    spellings = [str(number), f"{number}.0", f"{number}.000", f"{number}e0", f"{number}.0e+0"]
    found = {
        keys_of(f"test: t\ngates:\n  m: {{steps: all, constraint: {{{key}: {spelling}}}}}\n")[1]
        for spelling in spellings
    }
    assert found == {f'{{"{key}":{number}}}'}


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_spellings_of_one_float_agree(number: float) -> None:
    shortest = repr(number)
    mantissa, _, exponent = f"{number:.17e}".partition("e")
    spellings = [shortest, f"{number:.17g}", f"{mantissa}00e{exponent}"]
    if "e" not in shortest and "." in shortest:
        spellings.append(shortest + "000")
    found = {
        keys_of(f"test: t\ngates:\n  m: {{steps: all, constraint: {{rel_up: {spelling}}}}}\n")[1]
        for spelling in spellings
    }
    assert len(found) == 1


# -- properties: the coordinate hash ------------------------------------------------------------------

identities = st.fixed_dictionaries(
    {
        "test": st.text(min_size=1, max_size=20),
        "labels": st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=5), max_size=2),
        "metric": st.text(min_size=1, max_size=20),
        "steps": steps_values.map(lambda s: tuple(sorted(s)) if isinstance(s, list) else s),
        "constraint": st.none() | constraints.map(lambda c: Constraint(**c)),
    }
)


def _hash(identity: dict[str, Any]) -> str:
    return coordinate_hash(
        series_key(identity["test"], identity["labels"]),
        identity["metric"],
        steps_key(identity["steps"]),
        constraint_key(identity["constraint"]),
    )


@given(identities)
def test_the_coordinate_hash_is_12_lowercase_hex_characters(identity: dict[str, Any]) -> None:
    assert HASH_LENGTH == 12
    assert re.fullmatch(r"[0-9a-f]{12}", _hash(identity))


@given(identities, identities, st.sampled_from(["test", "labels", "metric", "steps", "constraint"]))
def test_the_coordinate_hash_changes_when_any_identity_field_changes(
    first: dict[str, Any], other: dict[str, Any], field: str
) -> None:
    changed = {**first, field: other[field]}
    same_literal = (
        steps_key(first["steps"]) == steps_key(changed["steps"])
        and constraint_key(first["constraint"]) == constraint_key(changed["constraint"])
        and series_key(first["test"], first["labels"]) == series_key(changed["test"], changed["labels"])
        and first["metric"] == changed["metric"]
    )
    assert (_hash(first) == _hash(changed)) == same_literal


verdict_only = st.fixed_dictionaries(
    {
        "limits": st.none() | st.sampled_from(["{min: 0.1}", "{max: 9}", "{min: -1, max: 1}"]),
        "enforce": st.none() | st.booleans(),
        "window": st.none() | st.integers(min_value=1, max_value=100),
        "min_history": st.none() | st.integers(min_value=0, max_value=10),
        "policy_enforce": st.none() | st.booleans(),
    }
)


@given(verdict_only)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_limits_enforce_and_policy_never_change_the_coordinate(extra: dict[str, Any]) -> None:
    gate = "    steps: all\n    constraint: {rel_up: 0.5}\n"
    if extra["limits"] is not None:
        gate += f"    limits: {extra['limits']}\n"
    if extra["enforce"] is not None:
        gate += f"    enforce: {str(extra['enforce']).lower()}\n"
    policy = "".join(
        f"  {name}: {str(value).lower()}\n"
        for name, value in (
            ("window", extra["window"]),
            ("min_history", extra["min_history"]),
            ("enforce", extra["policy_enforce"]),
        )
        if value is not None
    )
    base = "version: 1\n" + (f"policy:\n{policy}" if policy else "")
    plain = resolved_keys(
        {"t.yaml": "test: t\ngates:\n  m:\n    steps: all\n    constraint: {rel_up: 0.5}\n"}
    )
    assert resolved_keys({"base.yaml": base, "t.yaml": f"test: t\ngates:\n  m:\n{gate}"}) == plain
