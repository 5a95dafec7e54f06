"""Inheritance: the numbered precedence list in `gatecfg/resolve.py`, pair by adjacent pair, with sources.

The list (highest first): 1 the gate file (an explicit `null` included) > 2 the nearest base.yaml's
`defaults` > 3 the `defaults` of the base files it extends, nearer first > 4 for `enforce` only,
`policy.enforce` along the chain, nearest first > 5 built-in. Each test builds a tiny gates root and
asserts both the winning value and the `file:line` that `sources` names; expected lines are found by
reading the files, never typed in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import REPO, run_cli

import gatecfg.resolve
from gatecfg.models import Constraint, Limits
from gatecfg.resolve import BUILTIN, GateTree, ResolvedGate, load_tree

METRIC = "train/grad_norm"
FIELDS = ("steps", "constraint", "limits", "enforce")  # the fields the precedence list orders


def sources(resolved: ResolvedGate) -> dict[str, str]:
    return {name: resolved.sources[name] for name in FIELDS}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sources are shown relative to the working directory: `gates/base.yaml:4`.
    monkeypatch.chdir(tmp_path)


def write(files: dict[str, str]) -> None:
    for name, text in files.items():
        path = Path("gates") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def at(name: str, needle: str, *, after: str | None = None) -> str:
    """`gates/<name>:<line>` of the one line containing `needle` (the first after the line containing
    `after`, when given)."""
    lines = (Path("gates") / name).read_text(encoding="utf-8").splitlines()
    start = 0
    if after is not None:
        start = next(i for i, line in enumerate(lines) if after in line) + 1
    hits = [i for i, line in enumerate(lines) if i >= start and needle in line]
    assert hits, f"{needle!r} not in gates/{name}"
    if after is None:
        assert len(hits) == 1, f"{needle!r} is ambiguous in gates/{name}"
    return f"gates/{name}:{hits[0] + 1}"


def tree() -> GateTree:
    loaded = load_tree(Path("gates"))
    assert loaded.problems == []
    return loaded


def gate(test: str = "t", metric: str = METRIC) -> ResolvedGate:
    found = tree().test(test).gate(metric)
    assert found is not None
    return found


# -- 1 (gate file) over 2 (nearest base.yaml defaults) ------------------------------------------------


def test_1_over_2_a_field_written_in_the_gate_file_beats_the_nearest_default() -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5}\n    limits: {max: 9}\n    enforce: false\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n    steps: last\n    constraint: {{rel_up: 0.1}}\n"
            "    limits: {max: 1}\n    enforce: true\n",
        }
    )
    resolved = gate()
    assert (resolved.steps, resolved.constraint, resolved.limits, resolved.enforce) == (
        "last",
        Constraint(rel_up=0.1),
        Limits(max=1),
        True,
    )
    assert sources(resolved) == {
        "steps": at("t.yaml", "steps: last"),
        "constraint": at("t.yaml", "rel_up: 0.1"),
        "limits": at("t.yaml", "max: 1"),
        "enforce": at("t.yaml", "enforce: true"),
    }


@pytest.mark.parametrize("field", ["constraint", "limits"], ids=["constraint-null", "limits-null"])
def test_1_over_2_an_explicit_null_in_the_gate_file_beats_the_default(field: str) -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5}\n    limits: {min: 0.1}\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n    {field}: null\n",
        }
    )
    resolved = gate()
    assert getattr(resolved, field) is None
    assert resolved.sources[field] == at("t.yaml", f"{field}: null")
    assert resolved.sources["steps"] == at("base.yaml", "steps: all")


def test_1_over_2_is_field_by_field_unwritten_fields_still_come_from_the_default() -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5}\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n    steps: [0, 5]\n",
        }
    )
    resolved = gate()
    assert (resolved.steps, resolved.constraint) == ((0, 5), Constraint(rel_up=0.5))
    assert resolved.sources["steps"] == at("t.yaml", "steps: [0, 5]")
    assert resolved.sources["constraint"] == at("base.yaml", "constraint:")


# -- 2 (nearest base.yaml) over 3 (the base files it extends) -----------------------------------------


def test_2_over_3_the_nearest_default_beats_the_one_in_the_file_it_extends() -> None:
    write(
        {
            "shared.base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.9}\n    enforce: false\n",
            "base.yaml": f"version: 1\nextends: shared.base.yaml\ndefaults:\n  {METRIC}:\n"
            "    constraint: {rel_up: 0.2}\n    enforce: true\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n",
        }
    )
    resolved = gate()
    assert (resolved.constraint, resolved.enforce, resolved.steps) == (Constraint(rel_up=0.2), True, "all")
    assert sources(resolved) == {
        "steps": at("shared.base.yaml", "steps: all"),
        "constraint": at("base.yaml", "rel_up: 0.2"),
        "limits": BUILTIN,
        "enforce": at("base.yaml", "enforce: true"),
    }


def test_3_within_the_chain_the_nearer_extended_file_beats_the_farther_one() -> None:
    write(
        {
            "root.base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.9}\n",
            "mid.base.yaml": f"version: 1\nextends: root.base.yaml\ndefaults:\n  {METRIC}:\n"
            "    constraint: {rel_up: 0.5}\n",
            "base.yaml": "version: 1\nextends: mid.base.yaml\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n",
        }
    )
    resolved = gate()
    assert resolved.constraint == Constraint(rel_up=0.5)
    assert resolved.sources["constraint"] == at("mid.base.yaml", "rel_up: 0.5")
    assert resolved.sources["steps"] == at("root.base.yaml", "steps: all")
    assert tree().test("t").bases == ("gates/base.yaml", "gates/mid.base.yaml", "gates/root.base.yaml")


# -- 3 (defaults anywhere in the chain) over 4 (policy.enforce) ---------------------------------------


def test_3_over_4_a_default_enforce_in_the_farthest_base_beats_the_nearest_policy() -> None:
    write(
        {
            "root.base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5}\n    enforce: false\n",
            "base.yaml": "version: 1\nextends: root.base.yaml\npolicy:\n  enforce: true\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n  other/metric: {{steps: last, constraint: null}}\n",
        }
    )
    assert gate().enforce is False
    assert gate().sources["enforce"] == at("root.base.yaml", "enforce: false")
    # the policy is not ignored: a gate without an enforce default takes it
    assert gate(metric="other/metric").enforce is True
    assert gate(metric="other/metric").sources["enforce"] == at("base.yaml", "enforce: true")


# -- 4 (policy.enforce) over 5 (built-in) -------------------------------------------------------------


def test_4_over_5_policy_enforce_beats_the_built_in_false() -> None:
    write(
        {
            "base.yaml": "version: 1\npolicy:\n  enforce: true\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}: {{steps: all, constraint: {{rel_up: 0.5}}}}\n",
        }
    )
    assert gate().enforce is True
    assert gate().sources["enforce"] == at("base.yaml", "enforce: true")


def test_4_within_the_chain_the_nearest_policy_enforce_wins() -> None:
    write(
        {
            "root.base.yaml": "version: 1\npolicy:\n  enforce: true\n  window: 50\n",
            "base.yaml": "version: 1\nextends: root.base.yaml\npolicy:\n  enforce: false\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}: {{steps: all, constraint: {{rel_up: 0.5}}}}\n",
        }
    )
    assert gate().enforce is False
    assert gate().sources["enforce"] == at("base.yaml", "enforce: false")
    policy = tree().test("t").policy
    assert (policy.window, policy.sources["window"]) == (50, at("root.base.yaml", "window: 50"))


def test_5_built_ins_apply_when_nothing_is_written() -> None:
    write({"t.yaml": f"test: t\ngates:\n  {METRIC}: {{steps: all, constraint: {{rel_up: 0.5}}}}\n"})
    resolved = gate()
    policy = tree().test("t").policy
    assert (resolved.enforce, resolved.limits) == (False, None)
    assert (resolved.sources["enforce"], resolved.sources["limits"]) == (BUILTIN, BUILTIN)
    assert (policy.window, policy.min_history, policy.enforce) == (20, 1, False)
    assert set(policy.sources.values()) == {BUILTIN}


@pytest.mark.parametrize("missing", ["steps", "constraint"], ids=["no-steps", "no-constraint"])
def test_5_steps_and_constraint_have_no_built_in(missing: str) -> None:
    written = {"steps": "steps: all", "constraint": "constraint: {rel_up: 0.5}"}
    del written[missing]
    body = "".join(f"    {line}\n" for line in written.values())
    write({"t.yaml": f"test: t\ngates:\n  {METRIC}:\n{body}"})
    problems = load_tree(Path("gates")).problems
    assert [p.location.path for p in problems] == ["gates/t.yaml"]
    assert f"`{missing}` not written here and not inherited" in problems[0].message


def test_the_documented_list_has_the_five_levels_these_tests_check() -> None:
    doc = gatecfg.resolve.__doc__ or ""
    assert re.findall(r"^(\d)\. ", doc, flags=re.MULTILINE) == ["1", "2", "3", "4", "5"]


# -- a field is taken whole ---------------------------------------------------------------------------


def test_a_constraint_written_in_the_gate_file_replaces_the_default_whole_never_merged() -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5, abs_floor_up: 0.1, rel_down: 0.8}\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n    constraint: {{rel_down: 0.1}}\n",
        }
    )
    resolved = gate()
    assert resolved.constraint is not None
    assert resolved.constraint.literal() == {"rel_down": 0.1}
    assert resolved.constraint_key == '{"rel_down":0.1}'


def test_a_constraint_in_a_nearer_base_replaces_the_extended_one_whole() -> None:
    write(
        {
            "root.base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: {rel_up: 0.5, abs_floor_up: 0.1}\n",
            "base.yaml": f"version: 1\nextends: root.base.yaml\ndefaults:\n  {METRIC}:\n"
            "    constraint: {abs_floor_down: 0.2}\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n",
        }
    )
    resolved = gate()
    assert resolved.constraint is not None
    assert resolved.constraint.literal() == {"abs_floor_down": 0.2}


def test_limits_are_taken_whole_too() -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
            "    constraint: null\n    limits: {min: 0, max: 10}\n",
            "t.yaml": f"test: t\ngates:\n  {METRIC}:\n    limits: {{min: 1}}\n",
        }
    )
    resolved = gate()
    assert resolved.limits is not None
    assert resolved.limits.literal() == {"min": 1.0}


# -- cycles and the nearest base ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"base.yaml": "version: 1\nextends: base.yaml\n"},
        {
            "base.yaml": "version: 1\nextends: a.base.yaml\n",
            "a.base.yaml": "version: 1\nextends: base.yaml\n",
        },
        {
            "base.yaml": "version: 1\nextends: a.base.yaml\n",
            "a.base.yaml": "version: 1\nextends: b.base.yaml\n",
            "b.base.yaml": "version: 1\nextends: a.base.yaml\n",
        },
    ],
    ids=["self", "two-files", "cycle-behind-the-first-file"],
)
def test_an_extends_cycle_is_reported_and_the_gate_file_is_not_resolved(files: dict[str, str]) -> None:
    write({**files, "t.yaml": f"test: t\ngates:\n  {METRIC}: {{steps: all, constraint: null}}\n"})
    loaded = load_tree(Path("gates"))
    cycles = [p for p in loaded.problems if "cycle" in p.message]
    assert len(cycles) == 1
    assert cycles[0].dotted == "extends"
    assert "t" not in loaded.tests


def test_the_nearest_base_yaml_wins_and_is_not_merged_with_the_one_above() -> None:
    write(
        {
            "base.yaml": f"version: 1\ndefaults:\n  {METRIC}: {{steps: all, constraint: {{rel_up: 0.5}}}}\n"
            "  other/metric: {steps: all, constraint: null}\n",
            "team/base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n"
            "    {steps: last, constraint: {rel_up: 0.1}}\n",
            "team/deep/er/t.yaml": f"test: t\ngates:\n  {METRIC}:\n",
            "team/u.yaml": "test: u\ngates:\n  other/metric:\n",
            "v.yaml": f"test: v\ngates:\n  {METRIC}:\n",
        }
    )
    loaded = load_tree(Path("gates"))
    deep = loaded.tests["t"].gate(METRIC)
    top = loaded.tests["v"].gate(METRIC)
    assert deep is not None
    assert top is not None
    assert (deep.steps, deep.sources["steps"]) == ("last", at("team/base.yaml", "steps: last"))
    assert (top.steps, top.sources["steps"]) == ("all", at("base.yaml", f"{METRIC}:"))
    # team/base.yaml does not extend the root base file: its folder never sees `other/metric`
    where = [(p.location.path, p.dotted) for p in loaded.problems]
    assert where == [("gates/team/u.yaml", "gates.other/metric")]


def test_extends_is_relative_to_the_folder_of_the_base_file() -> None:
    write(
        {
            "common/defaults.base.yaml": f"version: 1\ndefaults:\n  {METRIC}:\n"
            "    {steps: all, constraint: null}\n",
            "team/base.yaml": "version: 1\nextends: ../common/defaults.base.yaml\n",
            "team/t.yaml": f"test: t\ngates:\n  {METRIC}:\n",
        }
    )
    assert gate().sources["steps"] == at("common/defaults.base.yaml", "steps: all")


# -- the example tree ---------------------------------------------------------------------------------


def _line(path: Path, needle: str, *, after: str | None = None) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if line.startswith(after)) + 1
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


@pytest.mark.parametrize(
    "name", ["test_kimi_k3_4layer_ci.yaml", "test_kimi_k3_4layer_lora_ci.yaml"], ids=["full", "lora"]
)
def test_example_tree_4_layer_raw_reward_is_tracked_with_sources(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("resolve", "--format", "json")
    assert result.code == 0, result.err
    gate_file = f"gates/megatron/{name}"
    rows = [
        row
        for row in json.loads(result.out)
        if (row["file"], row["metric"]) == (gate_file, "rollout/raw_reward")
    ]
    assert len(rows) == 1
    base = REPO / "gates" / "base.yaml"
    steps_line = _line(base, "steps:", after="  rollout/raw_reward:")
    enforce_line = _line(base, "enforce:", after="policy:")
    constraint_line = _line(REPO / gate_file, "constraint: null", after="  rollout/raw_reward:")
    row = rows[0]
    assert (row["steps"], row["constraint"], row["enforce"], row["limits"]) == ("all", None, False, None)
    assert (row["steps_key"], row["constraint_key"]) == ('"all"', "null")
    assert {name: row["sources"][name] for name in FIELDS} == {
        "steps": f"gates/base.yaml:{steps_line}",
        "constraint": f"{gate_file}:{constraint_line}",
        "limits": BUILTIN,
        "enforce": f"gates/base.yaml:{enforce_line}",
    }
