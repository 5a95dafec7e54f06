"""The safe YAML loader: plain data, the position of every key and value, and what it refuses."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import run_cli, score_gates, table
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gatecfg.errors import InputError, Location
from gatecfg.yamlio import MAX_NODES, dotted, load_yaml, read_yaml


def problem_of(text: str | bytes) -> tuple[Location, str, str, str | None]:
    with pytest.raises(InputError) as caught:
        load_yaml(text, "f.yaml")
    [problem] = caught.value.problems
    return problem.location, problem.dotted, problem.message, problem.hint


# -- positions ----------------------------------------------------------------------------------------

BLOCK = """\
# comment
test: tests/x.py
gates:
  train/grad_norm:
    steps: [0, 100]
    constraint:
      rel_up: 0.5
"""


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        (("test",), True, (2, 1)),
        (("test",), False, (2, 7)),
        (("gates", "train/grad_norm"), True, (4, 3)),
        (("gates", "train/grad_norm", "steps"), True, (5, 5)),
        (("gates", "train/grad_norm", "steps"), False, (5, 12)),
        (("gates", "train/grad_norm", "steps", 1), False, (5, 16)),
        (("gates", "train/grad_norm", "constraint", "rel_up"), True, (7, 7)),
        (("gates", "train/grad_norm", "constraint", "rel_up"), False, (7, 15)),
    ],
    ids=["key", "value", "nested-key", "deep-key", "flow-list", "list-item", "deepest-key", "deepest-value"],
)
def test_block_style_positions_of_keys_and_values(
    path: tuple[str | int, ...], key: bool, expected: tuple[int, int]
) -> None:
    doc = load_yaml(BLOCK, "f.yaml")
    assert doc.location(path, key=key) == Location("f.yaml", *expected)


def test_flow_style_positions_point_inside_the_one_line() -> None:
    doc = load_yaml("{test: t, gates: {m: {steps: all, enforce: true}}}\n", "f.yaml")
    assert doc.location(("gates", "m", "enforce"), key=True) == Location("f.yaml", 1, 35)
    assert doc.location(("gates", "m", "enforce")) == Location("f.yaml", 1, 44)


def test_a_path_that_was_not_written_falls_back_to_its_nearest_written_ancestor_key() -> None:
    doc = load_yaml(BLOCK, "f.yaml")
    assert doc.location(("gates", "train/grad_norm", "limits", "min")) == Location("f.yaml", 4, 3)
    # nothing written at all: the start of the document (after the leading comment)
    assert doc.location(("nowhere",)) == Location("f.yaml", 2, 1)


def test_an_empty_value_is_located_at_its_key_not_on_the_next_line() -> None:
    doc = load_yaml("gates:\n  m:\n    enforce:\n  n:\n", "f.yaml")
    assert doc.data == {"gates": {"m": {"enforce": None}, "n": None}}
    assert doc.location(("gates", "m", "enforce")) == Location("f.yaml", 3, 5)
    assert doc.location(("gates", "n")) == Location("f.yaml", 4, 3)


def test_line_of_is_the_key_line() -> None:
    doc = load_yaml(BLOCK, "f.yaml")
    assert doc.line_of(("gates", "train/grad_norm", "constraint", "rel_up")) == 7


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("gates", "train/grad_norm", "constraint"), "gates.train/grad_norm.constraint"),
        (("gates", "m", "steps", 2), "gates.m.steps[2]"),
        (("rules", 0, "require"), "rules[0].require"),
        ((), ""),
    ],
    ids=["keys", "trailing-index", "inner-index", "root"],
)
def test_dotted_path_names_keys_with_dots_and_indices_with_brackets(
    path: tuple[str | int, ...], expected: str
) -> None:
    assert dotted(path) == expected


# -- merge keys and anchors ---------------------------------------------------------------------------

MERGE = """\
base: &b {steps: all, constraint: {rel_up: 0.5}, enforce: true}
before:
  <<: *b
  constraint: {rel_up: 0.2}
after:
  constraint: {rel_up: 0.3}
  <<: *b
"""


@pytest.mark.parametrize("name", ["before", "after"], ids=["merge-first", "merge-last"])
def test_an_explicit_key_wins_over_a_merged_one_in_value_and_position(name: str) -> None:
    doc = load_yaml(MERGE, "f.yaml")
    line = 4 if name == "before" else 6
    assert doc.data[name]["constraint"] == {"rel_up": 0.2 if name == "before" else 0.3}
    assert doc.location((name, "constraint"), key=True).line == line
    assert doc.location((name, "constraint", "rel_up")).line == line


def test_a_merged_key_is_located_where_the_anchor_wrote_it() -> None:
    doc = load_yaml(MERGE, "f.yaml")
    assert doc.data["before"]["steps"] == "all"
    assert doc.location(("before", "steps"), key=True) == Location("f.yaml", 1, 11)


def test_in_a_list_of_merges_the_earlier_mapping_wins() -> None:
    doc = load_yaml("a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc:\n  <<: [*a, *b]\n", "f.yaml")
    assert doc.data["c"] == {"x": 1, "y": 2}


def test_an_alias_expands_to_plain_data_that_is_not_shared() -> None:
    doc = load_yaml("a: &a [1, 2]\nb: *a\n", "f.yaml")
    assert doc.data == {"a": [1, 2], "b": [1, 2]}
    assert doc.data["a"] is not doc.data["b"]


def test_merging_a_non_mapping_is_refused() -> None:
    location, path, message, hint = problem_of("a:\n  <<: [1]\n")
    assert (location, path, message) == (Location("f.yaml", 2, 8), "a", "`<<` merges mappings only")
    assert hint is not None


# -- budgets and recursion ----------------------------------------------------------------------------


def _bomb(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_stopped_by_the_node_budget_at_the_key_that_explodes() -> None:
    location, path, message, _ = problem_of(_bomb(6))
    assert message == f"the value expands to more than {MAX_NODES} values through aliases and merge keys"
    assert (location, path) == (Location("f.yaml", 5, 1), "l4")


def test_a_document_within_the_node_budget_loads() -> None:
    doc = load_yaml(_bomb(4), "f.yaml")
    assert len(doc.data["l3"]) == 10
    assert doc.data["l3"][9][9][9][9] == "x"


@pytest.mark.parametrize(
    "text", ["a: &a [1, *a]\n", "a: &a {b: *a}\n"], ids=["list-contains-itself", "mapping-contains-itself"]
)
def test_a_recursive_alias_is_refused(text: str) -> None:
    _, _, message, _ = problem_of(text)
    assert message == "an alias refers to the mapping or list that contains it"


# -- tags and scalars ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("a: !!python/object/apply:os.system [ls]\n", "!!python/object/apply:os.system"),
        ("a: !!python/name:os.system\n", "!!python/name:os.system"),
        ("a: !include other.yaml\n", "!include"),
        ("a: !!binary aGVsbG8=\n", "!!binary"),
        ("a: !!set {x: null}\n", "!!set"),
        ("a: !!omap [x: 1]\n", "!!omap"),
        ("a: !custom {x: 1}\n", "!custom"),
    ],
    ids=["python-apply", "python-name", "include", "binary", "set", "omap", "custom-mapping"],
)
def test_tags_that_would_build_objects_are_refused(text: str, tag: str) -> None:
    location, path, message, _ = problem_of(text)
    assert message == f"YAML tag `{tag}` is not allowed"
    assert (location.line, location.col, path) == (1, 4, "a")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: !!str 1\n", "1"),
        ("a: !!int '3'\n", 3),
        ("a: 2024-01-01\n", "2024-01-01"),
        ("a: yes\n", "yes"),
        ("a: on\n", "on"),
        ("a: 0o17\n", 15),
        ("a: 0x10\n", 16),
        ("a: 1_000\n", 1000),
        ("a: .inf\n", float("inf")),
        ("a: ~\n", None),
        ("a: True\n", True),
    ],
    ids=["explicit-str", "explicit-int", "date-kept-as-text", "yes", "on", "octal", "hex", "underscore",
         "inf", "tilde", "capital-true"],
)  # fmt: skip
def test_standard_scalars_mean_what_yaml_1_2_says(text: str, value: object) -> None:
    assert load_yaml(text, "f.yaml").data == {"a": value}


@pytest.mark.parametrize(
    ("text", "shown"),
    [("1: x\n", "1"), ("null: x\n", "null"), ("true: x\n", "true"), ("[a, b]: x\n", "SequenceNode")],
    ids=["int", "null", "bool", "list"],
)
def test_keys_must_be_strings(text: str, shown: str) -> None:
    location, _, message, hint = problem_of(text)
    assert message == f"keys must be strings, got `{shown}`"
    assert location == Location("f.yaml", 1, 1)
    assert hint == "quote the key"


def test_a_duplicate_key_names_the_line_of_the_first() -> None:
    location, path, message, _ = problem_of("a:\n  b: 1\n  c: 2\n  b: 3\n")
    assert (location, path) == (Location("f.yaml", 4, 3), "a.b")
    assert message == "duplicate key `b` (first written on line 2)"


def test_the_same_key_in_two_different_mappings_is_not_a_duplicate() -> None:
    assert load_yaml("a: {x: 1}\nb: {x: 2}\n", "f.yaml").data == {"a": {"x": 1}, "b": {"x": 2}}


# -- text, encoding and syntax ------------------------------------------------------------------------


def test_a_utf8_bom_is_accepted() -> None:
    assert load_yaml("\ufeffa: é\n".encode(), "f.yaml").data == {"a": "é"}


def test_a_non_utf8_byte_is_located_by_line_and_column() -> None:
    location, _, message, _ = problem_of(b"a: 1\nbb: caf\xe9\n")
    assert location == Location("f.yaml", 2, 8)
    assert message == "the file is not UTF-8 (byte 0xe9)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("\n  \n", "the file is empty"),
        ("# only\n", "the file holds only comments"),
    ],
    ids=["empty", "blank-lines", "comments"],
)
def test_a_file_without_a_document_says_so(text: str, message: str) -> None:
    location, _, found, _ = problem_of(text)
    assert (location, found) == (Location("f.yaml", 1, 1), message)


def test_an_unclosed_flow_mapping_points_at_where_it_opens() -> None:
    location, _, message, _ = problem_of("a: 1\nb: {x: 1\n")
    assert location == Location("f.yaml", 2, 4)
    assert message.startswith("invalid YAML: ")
    assert "flow mapping that starts here" in message
    assert "<stream end>" not in message


def test_a_syntax_error_inside_a_construct_names_where_it_started() -> None:
    location, _, message, _ = problem_of("a: [1, 2\nb: 3\n")
    assert location == Location("f.yaml", 2, 2)
    assert message.endswith("(while parsing a flow sequence that starts at 1:4)")


def test_a_tab_in_indentation_has_a_plain_message() -> None:
    location, _, message, hint = problem_of("a:\n\tb: 1\n")
    assert (location.line, message) == (2, "invalid YAML: a tab character in indentation")
    assert hint is not None


def test_a_second_document_is_refused() -> None:
    location, _, message, _ = problem_of("a: 1\n---\nb: 2\n")
    assert (location.line, message) == (2, "invalid YAML: more than one YAML document")


def test_read_yaml_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_yaml(tmp_path / "missing.yaml", "gates/missing.yaml")
    [problem] = caught.value.problems
    assert problem.location == Location("gates/missing.yaml")
    assert problem.message == "YAML file not found"


def test_read_yaml_shows_the_display_path_in_positions(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text("a: 1\n", encoding="utf-8")
    doc = read_yaml(tmp_path / "g.yaml", "gates/g.yaml")
    assert doc.location(("a",)) == Location("gates/g.yaml", 1, 4)


YAML_CASES = [
    ("yaml-1.1", "%YAML 1.1\n---\ntest: tests/t_ci.py\n", "1:7", "`%YAML 1.1` is not a YAML version"),
    ("yaml-1.0", "%YAML 1.0\n---\ntest: tests/t_ci.py\n", "1:7", "`%YAML 1.0` is not a YAML version"),
    ("yaml-1.1-later", "# c\n%YAML 1.1\n---\ntest: tests/t_ci.py\n", "2:7", "`%YAML 1.1`"),
    ("null-with-text", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!null xyz\n", "4:14",
     "`!!null xyz` is not a valid null in YAML 1.2"),
    ("bool-yes", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!bool yes\n", "4:14",
     "`!!bool yes` is not a valid bool"),
    ("bool-on", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!bool On\n", "4:14",
     "`!!bool On`"),
    ("int-sexagesimal", "test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: [!!int 1:30]\n", "4:13",
     "`!!int 1:30` is not a valid int"),
    ("float-word", "test: tests/t_ci.py\ngates:\n  eval/score:\n    limits: {min: !!float abc}\n", "4:19",
     "`!!float abc` is not a valid float"),
    ("null-tag-on-key-value", "test: !!null tests/t_ci.py\n", "1:7", "`!!null tests/t_ci.py`"),
]  # fmt: skip


@table(("text", "where", "words"), YAML_CASES)
def test_a_yaml_version_or_tag_gatecfg_would_misread_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str, words: str
) -> None:
    score_gates(tmp_path, "")
    (tmp_path / "gates" / "t.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert f"gates/t.yaml:{where}: error: " in result.out
    assert words in result.out


TAGGED = ["null", "bool", "int", "float"]


@settings(max_examples=400, deadline=None)
@given(
    tag=st.sampled_from(TAGGED),
    text=st.one_of(
        st.sampled_from(["~", "null", "Null", "", "true", "yes", "on", "0", "07", "0x1f", "0o17", "1_000",
                         "1:30", "1e3", ".inf", "-.Inf", ".nan", "3.5", "+12", "abc", "y", "NULL", "False"]),
        st.from_regex(r"[-+]?[0-9a-fA-Fx._:eo]{1,8}", fullmatch=True),
    ),
)  # fmt: skip
def test_an_explicit_scalar_tag_means_what_the_untagged_text_means_or_is_an_error(
    tag: str, text: str
) -> None:
    from gatecfg.yamlio import load_yaml

    try:
        plain = load_yaml(f"v: {text}\n", "t.yaml").data["v"]
    except InputError:
        assume(False)  # not a plain scalar at all (`:`)
    try:
        tagged = load_yaml(f"v: !!{tag} {text}\n", "t.yaml").data["v"]
    except InputError as exc:
        error = str(exc)
    else:
        if tag == "float" and type(plain) is int:
            plain = float(plain)
        assert type(tagged) is type(plain)
        assert tagged == plain or (math.isnan(tagged) and math.isnan(plain))
        return
    assert error.startswith("t.yaml:1:4: error: v: ")
