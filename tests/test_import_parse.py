"""JSON Lines exports are read by orjson where that provably reads what `json` reads, and by `json`
elsewhere: on any line, the runs read (or the error named) must be those of `json` alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatecfg.analysis import importer
from gatecfg.analysis.importer import read_export
from gatecfg.errors import InputError

NUMBERS = st.one_of(
    st.integers(-5, 2_000_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(10**18, 10**25),  # beyond 64 bits: orjson reads a float where json reads an int
)
ITEMS = st.one_of(NUMBERS, st.none(), st.booleans(), st.sampled_from(["NaN", "0.5", "-Infinity"]))
PAIRS = st.lists(
    st.one_of(st.tuples(st.integers(0, 30), ITEMS).map(list), st.lists(NUMBERS, max_size=3)),
    max_size=6,
)
METRICS = st.dictionaries(
    st.sampled_from(["m/a", "m/b", 'm/"q"', "m/é", "true", "null"]),
    st.one_of(PAIRS, NUMBERS, st.sampled_from(["NaN", "x", None])),
    max_size=4,
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    obj: dict[str, Any] = {
        "run_id": draw(st.sampled_from(["r1", "r 2", "", "null"])),
        "date": draw(st.sampled_from(["2024-05-01", "2024-05-02T03:04:05Z", "nope"])),
        "metrics": draw(METRICS),
    }
    if draw(st.booleans()):
        obj["commit"] = draw(st.sampled_from(["abc", None, "123456789012345678901234"]))
    if draw(st.booleans()):
        obj["trusted"] = draw(st.sampled_from([True, False, "yes"]))
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if obj["metrics"] and draw(st.booleans()):  # a metric given twice on the line
        name = json.dumps(next(iter(obj["metrics"])))
        text = text.replace('"metrics": {', f'"metrics": {{{name}: 1, ', 1)
    return text


def read(path: Path) -> object:
    """What the import reads of the export: each run's fields and columns, or the error it names."""
    try:
        export = read_export(path, "x.jsonl")
        return [
            (run.run_id, run.created_at, run.commit, run.trusted, sorted(run.single),
             {m: (c.steps, repr(c.values)) for m, c in run.record.columns.items()})
            for run in export.runs()
        ]  # fmt: skip
    except InputError as exc:
        return str(exc)


@settings(max_examples=300, deadline=None)
@given(line=lines())
def test_a_line_reads_as_json_alone_reads_it(tmp_path_factory: pytest.TempPathFactory, line: str) -> None:
    path = tmp_path_factory.mktemp("parse") / "x.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    fast = read(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importer, "_fast_object", lambda line: None)
        assert fast == read(path)


def test_plain_lines_are_read_by_orjson(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.jsonl"
    line = {"run_id": "a", "date": "2024-05-01", "commit": None, "metrics": {"m": [[0, 0.5], [1, 2]]}}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    monkeypatch.setattr(json.JSONDecoder, "decode", lambda *_: pytest.fail("read by json"))
    [run] = read_export(path, "x.jsonl").runs()
    assert run.record.columns["m"].values == [0.5, 2.0]


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ('{"m": 1, "m": [[0, 0.5]]}', 'key "m" appears twice in one object'),
        ('{"m": [[0, 0.5], [1, null]]}', "null is not a number"),
        ('{"m": [[123456789012345678901234, 0.5]]}', "item 0 has step 123456789012345678901234, not a whole"),
    ],
    ids=["duplicate-key", "null-value", "long-integer-step"],
)
def test_what_orjson_would_read_otherwise_is_named_as_json_names_it(
    tmp_path: Path, metrics: str, expected: str
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(f'{{"run_id": "a", "date": "2024-05-01", "metrics": {metrics}}}\n', encoding="utf-8")
    with pytest.raises(InputError, match=expected):
        read_export(path, "x.jsonl")
