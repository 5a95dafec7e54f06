"""Fuzzing the inputs people and tools write: gate files, base files and records, random and mutated,
through the loaders and through the real entry point. Whatever the input, gatecfg never shows a
traceback: it accepts the input or rejects it with exit 2 and a `file:line` message.

CI runs a bounded number of examples per test (seconds). For a longer run:

    GATECFG_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py -p no:xdist

Hypothesis keeps the failing examples it finds in .hypothesis/ and replays them first on the next run.
"""

from __future__ import annotations

import json
import os
import re
import string
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import parse_record_text, run_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gatecfg.errors import InputError, Problem
from gatecfg.report.as_json import dumps_indented
from gatecfg.yamlio import load_yaml

LONG = int(os.environ.get("GATECFG_FUZZ_EXAMPLES", "0"))
# A warning from the YAML library would reach the user's terminal beside the verdict: none may escape.
pytestmark = [
    pytest.mark.filterwarnings("error::ruamel.yaml.error.YAMLWarning"),
    pytest.mark.filterwarnings("error::ruamel.yaml.error.YAMLFutureWarning"),
]


def fuzz(examples: int) -> Callable[[Any], Any]:
    """`examples` per CI run, or GATECFG_FUZZ_EXAMPLES when set; no deadline (CI machines are busy)."""
    return settings(
        max_examples=LONG or examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


TEST = "tests/e2e/test_fuzz_ci.py"
BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {rel_up: 0.5, abs_floor_up: 0.1}
  rollout/raw_reward:
    steps: all
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
policy:
  window: 20
  min_history: 1
"""
GATE_SEEDS = [
    f"test: {TEST}\ngates:\n  train/grad_norm:\n  rollout/raw_reward:\n    constraint: null\n",
    f"""\
# a gate file with most of the language in it
test: {TEST}
gates:
  train/grad_norm:                 # a one-liner
  eval/all/avg_score:
    steps: last
    constraint: {{rel_down: 0.1, sigma_down: 3}}
    limits: {{min: 0.50, max: 1.0}}
    enforce: true
    tolerate: 0
    trials: 16
  rollout/raw_reward:
    steps: [0, 1, 2]
    constraint:
      rel_down: 0.2
      abs_floor_down: 0.05
""",
    f"""\
common: &band {{rel_up: 0.5, abs_floor_up: 0.1}}
test: '{TEST}'
gates:
  "train/ppo_kl": {{steps: all, constraint: *band}}
  perf/mfu:
    <<: {{steps: last}}
    constraint: ~
""",
]
BASE_SEEDS = [
    BASE,
    """\
version: 1
extends: ../base.yaml
defaults:
  eval/score: {steps: last, constraint: {rel_down: 0.1}}
policy: {window: 10, min_history: 2, enforce: false, reference: median, baseline: nightly}
rules:
  - name: score-everywhere
    require: [eval/score]
    when: gated
    under: "team*/*"
    reason: every model reports its score
""",
]
# Pieces that mean something to a YAML parser or to gatecfg's schema.
YAML_TOKENS = [
    "\n", "  ", "\t", ": ", ":", "- ", "? ", "{", "}", "[", "]", ",", "'", '"', "#", "&a ", "*a", "<<: ",
    "!!str ", "!!python/object:os.system ", "!custom ", "!!binary ", "%YAML 1.1\n", "---\n", "...\n", "|\n",
    ">\n", "~", "null", "yes", "on", "true", ".nan", ".inf", "-.inf", "1e999", "-1", "0x10", "0o17", "1_000",
    "2024-01-01", "all", "last", "steps", "constraint", "limits", "enforce", "tolerate", "trials", "rel_up",
    "abs_floor_down", "sigma_up", "min", "max", "version", "extends", "defaults", "policy", "window", "rules",
    "test", "gates", "\x00", "\x07", "\ufeff", "\u2028", "é", "\U0001f600", "\\", "@", "`", "%",
]  # fmt: skip
JSON_TOKENS = [
    "{", "}", "[", "]", ",", ":", '"', "\n", " ", "_step", "step", '"_step": ', '"step": ', "NaN", "Infinity",
    "-Infinity", '"NaN"', '"inf"', "1e999", "-0", "0.5", "-1", "1.5", "null", "true", "false", "\\u0000",
    "\\ud800", '"\\u2028"', "9" * 40, "[[0, 1.0]]", '"train/grad_norm"', '"rollout/raw_reward"', "\x00",
    "\ufeff", "é",
]  # fmt: skip
LOCATED = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+)(:\d+)?: error: ")


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str], tokens: list[str]) -> str:
    """A seed with a few random edits: insert a token or a character, delete, duplicate or cut a span."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        end = draw(st.integers(at, min(len(text), at + 40)))
        edit = draw(st.sampled_from(["token", "char", "delete", "duplicate", "truncate"]))
        if edit == "token":
            text = text[:at] + draw(st.sampled_from(tokens)) + text[at:]
        elif edit == "char":
            text = text[:at] + draw(st.characters(codec="utf-8")) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[end:]
        elif edit == "duplicate":
            text = text[:end] + text[at:end] + text[end:]
        else:
            text = text[:at]
    return text


def random_text(tokens: list[str]) -> st.SearchStrategy[str]:
    return st.lists(
        st.one_of(st.sampled_from(tokens), st.text(string.printable, max_size=8)), max_size=40
    ).map("".join)


@pytest.fixture(scope="module")
def tree() -> Iterator[Path]:
    """One folder the examples of a test reuse: gates/ with base.yaml and t.yaml, a record, a store."""
    with tempfile.TemporaryDirectory(prefix="gatecfg-fuzz-") as folder:
        root = Path(folder)
        (root / "gates" / "team").mkdir(parents=True)
        (root / "gates" / "base.yaml").write_text(BASE, encoding="utf-8")
        (root / "gates" / "t.yaml").write_text(GATE_SEEDS[0], encoding="utf-8")
        (root / "record.jsonl").write_text('{"_step": 0, "train/grad_norm": 1.0}\n', encoding="utf-8")
        # evaluate without --write never creates a store: make the empty one the examples read.
        assert run_cli("db", "upgrade", "--db", f"sqlite:///{root / 'history.db'}").code == 0
        yield root


def problems(parse: Callable[[str, str], object], text: str, path: str) -> list[Problem]:
    """The problems `parse` rejects the text with; none when it accepts it. Any other exception escapes."""
    try:
        parse(text, path)
    except InputError as exc:
        return exc.problems
    return []


def assert_exit_0_or_located_2(code: int, out: str, err: str, path: str) -> None:
    """Exit 0 (accepted) or exit 2 with every error line `file:line[:col]: error: ...`, one of them in a
    file whose path starts with `path`."""
    output = out + err
    assert "Traceback" not in output
    assert code in (0, 2), output
    if code == 2:
        errors = [line for line in output.splitlines() if ": error: " in line]
        assert errors, output
        located = [LOCATED.match(line) for line in errors]
        assert all(located), output
        assert any(m and m["path"].startswith(path) for m in located), output


# --- gate files and base files ------------------------------------------------------------------------


@fuzz(150)
@given(text=st.one_of(mutated(GATE_SEEDS, YAML_TOKENS), random_text(YAML_TOKENS)))
def test_the_gate_file_loader_accepts_or_locates_any_text(text: str) -> None:
    assert all(
        p.location.path == "gates/t.yaml" and p.location.line
        for p in problems(load_yaml, text, "gates/t.yaml")
    )


@fuzz(60)
@given(text=st.one_of(mutated(GATE_SEEDS, YAML_TOKENS), random_text(YAML_TOKENS)))
def test_lint_of_a_mutated_gate_file_exits_0_or_2_at_a_line(
    tree: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    (tree / "gates" / "t.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    result = run_cli("lint", "--gates", "gates")
    assert_exit_0_or_located_2(result.code, result.out, result.err, "gates/t.yaml")


@fuzz(40)
@given(data=st.binary(max_size=300))
def test_lint_of_random_bytes_exits_0_or_2_at_a_line(
    tree: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    (tree / "gates" / "t.yaml").write_bytes(data)
    result = run_cli("lint", "--gates", "gates")
    assert_exit_0_or_located_2(result.code, result.out, result.err, "gates/t.yaml")


@fuzz(60)
@given(text=mutated(BASE_SEEDS, YAML_TOKENS))
def test_lint_of_a_mutated_base_file_exits_0_or_2_at_a_line(
    tree: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    (tree / "gates" / "t.yaml").write_text(GATE_SEEDS[0], encoding="utf-8")
    (tree / "gates" / "team" / "base.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    (tree / "gates" / "team" / "u.yaml").write_text(
        GATE_SEEDS[0].replace(TEST, "tests/u.py"), encoding="utf-8"
    )
    try:
        result = run_cli("lint", "--gates", "gates")
    finally:
        (tree / "gates" / "team" / "base.yaml").unlink()
        (tree / "gates" / "team" / "u.yaml").unlink()
    assert_exit_0_or_located_2(result.code, result.out, result.err, "gates/team/")


# --- records ------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=6),
        st.sampled_from(["NaN", "Infinity", "-inf", "nan"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(["_step", "step", "train/grad_norm", "rollout/raw_reward", "_runtime", "x", ""])
RECORD_LINES = st.lists(
    st.one_of(
        st.dictionaries(KEYS, JSON_VALUES, max_size=4).map(json.dumps),
        st.fixed_dictionaries({"_step": st.integers(-2, 5), "train/grad_norm": JSON_VALUES}).map(json.dumps),
        st.dictionaries(KEYS, st.lists(st.lists(JSON_VALUES, max_size=3), max_size=3), max_size=2).map(
            json.dumps
        ),
        JSON_VALUES.map(json.dumps),
    ),
    max_size=6,
).map("\n".join)
RECORD_SEEDS = [
    '{"_step": 0, "train/grad_norm": 1.0, "rollout/raw_reward": 0.2}\n'
    '{"_step": 1, "train/grad_norm": NaN, "rollout/raw_reward": "Infinity"}\n',
    '{"train/grad_norm": [[0, 1.0], [1, 1.5], [2, 2.0]]}\n'
    '{"rollout/raw_reward": [[0, 0.2]], "_runtime": 3}\n',
]


@fuzz(300)
@given(text=st.one_of(RECORD_LINES, mutated(RECORD_SEEDS, JSON_TOKENS), random_text(JSON_TOKENS)))
def test_the_record_parser_accepts_or_locates_any_text(text: str) -> None:
    located = problems(parse_record_text, text, "record.jsonl")
    assert all(p.location.path == "record.jsonl" and p.location.line for p in located)


@fuzz(40)
@given(text=st.one_of(RECORD_LINES, mutated(RECORD_SEEDS, JSON_TOKENS)))
def test_evaluate_of_a_mutated_record_exits_0_or_2_at_a_line(
    tree: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    (tree / "gates" / "t.yaml").write_text(GATE_SEEDS[0], encoding="utf-8")
    (tree / "record.jsonl").write_text(text, encoding="utf-8", errors="surrogatepass")
    result = run_cli("evaluate", "--gates", "gates", "--test", TEST, "--record", "record.jsonl",
                     "--db", "sqlite:///history.db", "--format", "json")  # fmt: skip
    # A record that parses is judged: exit 0, as no gate here is enforced.
    assert_exit_0_or_located_2(result.code, result.out, result.err, "record.jsonl")


@fuzz(30)
@given(data=st.binary(max_size=200))
@example(data=b"\x00\r\x00")  # found by this test: a lone \r in the first line crashed format detection
def test_evaluate_of_random_bytes_as_a_record_exits_0_or_2_at_a_line(
    tree: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    (tree / "gates" / "t.yaml").write_text(GATE_SEEDS[0], encoding="utf-8")
    (tree / "record.jsonl").write_bytes(data)
    result = run_cli("evaluate", "--gates", "gates", "--test", TEST, "--record", "record.jsonl",
                     "--db", "sqlite:///history.db", "--format", "json")  # fmt: skip
    assert_exit_0_or_located_2(result.code, result.out, result.err, "record.jsonl")


# --- what the fixes found -----------------------------------------------------------------------------


def test_aliases_nested_past_the_depth_limit_are_an_error_at_the_value() -> None:
    # Each alias wraps the one before: the text nests one level, the value 3,000.
    text = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 3000))
    with pytest.raises(InputError) as raised:
        load_yaml(text, "t.yaml")
    (problem,) = raised.value.problems
    assert problem.message == "nested more than 64 levels deep"
    assert (problem.location.path, problem.location.line) == ("t.yaml", 1)


# --- the JSON report's emitter ------------------------------------------------------------------------

JSON_DOCUMENTS = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=20,
)


@fuzz(300)
@given(document=JSON_DOCUMENTS)
def test_the_report_emitter_writes_what_json_dumps_writes(document: object) -> None:
    assert dumps_indented(document) == json.dumps(document, indent=2, allow_nan=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_the_report_emitter_refuses_non_finite_numbers_as_json_does(value: float) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps_indented({"value": [value]})
