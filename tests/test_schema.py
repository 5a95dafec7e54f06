"""The committed JSON Schema (what editors check) and the pydantic models (what lint checks) agree.

Every YAML file of the golden fixtures and of the example tree is checked by both. They must give the
same valid/invalid answer, except where JSON Schema cannot express a rule. Those exceptions are
named below, with the reason, and the tests fail if the list is stale in either direction:

* `SCHEMA_CANNOT_EXPRESS`: files the schema accepts and the model rejects;
* `YAML_LEVEL`: files that never become data (syntax, tags, duplicate keys, aliases), so neither
  validator sees them; the loader rejects them first;
* `LINT_ONLY`: cases whose every file is valid on its own; the error comes from inheritance or
  from comparing files (missing defaults, `extends`, rules, one test gated twice).

`gatecfg schema` writes and checks the committed files, and without arguments writes nothing outside
gatecfg's own checkout.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, run_cli
from jsonschema import Draft202012Validator

from gatecfg.commands.schema import GENERATED
from gatecfg.errors import InputError
from gatecfg.gate_files import is_base_file
from gatecfg.models import BaseFile, GateFile
from gatecfg.parse import parse_doc
from gatecfg.yamlio import LoadedDoc, read_yaml

SCHEMA_DIR = REPO / "schema"
FIXTURES = REPO / "tests" / "fixtures"
YAML_FILES = sorted(
    p
    for root in (FIXTURES / "valid", FIXTURES / "invalid", REPO / "gates")
    for p in root.rglob("*")
    if p.suffix in {".yaml", ".yml"}
)

_NOT_A_RELATION = "limits min <= max compares two values; JSON Schema has no relation between fields"
_NOT_FINITE = (
    "finite numbers: YAML's .nan/.inf load as floats, JSON has neither, and `minimum: 0` passes them "
    "(NaN compares false, +inf is >= 0)"
)
_WHOLE_FLOAT = "a step written 2.0: JSON Schema's `integer` is any number with a zero fraction"
SCHEMA_CANNOT_EXPRESS: dict[str, str] = {
    "invalid/limits-min-above-max/test_x.yaml": _NOT_A_RELATION,
    "invalid/many-errors-two-files/test_y.yaml": _NOT_A_RELATION,
    "invalid/constraint-nan/test_x.yaml": _NOT_FINITE,
    "invalid/constraint-inf/test_x.yaml": _NOT_FINITE,
    "invalid/steps-whole-float/test_x.yaml": _WHOLE_FLOAT,
}

YAML_LEVEL = {
    "invalid/alias-bomb/test_x.yaml",
    "invalid/comment-only-file/test_x.yaml",
    "invalid/custom-tag/test_x.yaml",
    "invalid/duplicate-key/test_x.yaml",
    "invalid/empty-file/test_x.yaml",
    "invalid/merge-key-non-mapping/test_x.yaml",
    "invalid/non-string-key/test_x.yaml",
    "invalid/non-utf8-bytes/test_x.yaml",
    "invalid/python-object-tag/test_x.yaml",
    "invalid/recursive-alias/test_x.yaml",
    "invalid/tab-indentation/test_x.yaml",
    "invalid/two-documents/test_x.yaml",
    "invalid/undefined-alias/test_x.yaml",
    "invalid/yaml-colon-in-plain-value/test_x.yaml",
    "invalid/yaml-syntax-error/test_x.yaml",
}

LINT_ONLY = {
    "extends-cycle",
    "extends-missing-file",
    "extends-outside-root",
    "one-liner-without-base",
    "one-liner-without-defaults",
    "partial-gate-without-constraint",
    "rule-mfu-tracked",
    "rule-under-violated",
    "two-gate-files-one-test",
}


def _name(path: Path) -> str:
    return (
        path.relative_to(FIXTURES).as_posix()
        if path.is_relative_to(FIXTURES)
        else path.relative_to(REPO).as_posix()
    )


def _validator(path: Path) -> Draft202012Validator:
    return _compiled("base.schema.json" if is_base_file(path) else "gatefile.schema.json")


@functools.cache
def _compiled(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _load(path: Path) -> LoadedDoc | None:
    try:
        return read_yaml(path)
    except InputError:
        return None


def _model_accepts(path: Path, doc: LoadedDoc) -> bool:
    try:
        parse_doc(doc, BaseFile if is_base_file(path) else GateFile)
    except InputError:
        return False
    return True


@functools.cache
def _verdicts() -> dict[str, tuple[bool, bool]]:
    """(schema accepts, model accepts) for every file that loads as data."""
    out: dict[str, tuple[bool, bool]] = {}
    for path in YAML_FILES:
        doc = _load(path)
        if doc is not None:
            out[_name(path)] = (_validator(path).is_valid(doc.data), _model_accepts(path, doc))
    return out


LOADABLE = [p for p in YAML_FILES if _name(p) not in YAML_LEVEL]


@pytest.mark.parametrize("path", LOADABLE, ids=[_name(p) for p in LOADABLE])
def test_schema_and_model_agree_on_each_file_unless_documented(path: Path) -> None:
    doc = _load(path)
    assert doc is not None, f"{_name(path)} does not load: add it to YAML_LEVEL"
    data: Any = doc.data
    schema_ok = _validator(path).is_valid(data)
    model_ok = _model_accepts(path, doc)
    if _name(path) in SCHEMA_CANNOT_EXPRESS:
        assert (schema_ok, model_ok) == (True, False), SCHEMA_CANNOT_EXPRESS[_name(path)]
    else:
        assert schema_ok == model_ok


def test_documented_disagreements_are_exactly_the_actual_ones() -> None:
    actual = {name for name, (schema_ok, model_ok) in _verdicts().items() if schema_ok != model_ok}
    assert actual == set(SCHEMA_CANNOT_EXPRESS)


def test_the_schema_is_never_stricter_than_the_model() -> None:
    stricter = [name for name, (schema_ok, model_ok) in _verdicts().items() if model_ok and not schema_ok]
    assert stricter == []


def test_files_rejected_before_any_schema_are_exactly_the_yaml_level_list() -> None:
    assert {_name(p) for p in YAML_FILES if _load(p) is None} == YAML_LEVEL


def test_cases_only_lint_can_reject_are_exactly_the_inheritance_list() -> None:
    verdicts = _verdicts()
    cases: dict[str, bool] = {}
    for path in YAML_FILES:
        name = _name(path)
        if not name.startswith("invalid/"):
            continue
        case = name.split("/")[1]
        ok = name in verdicts and verdicts[name] == (True, True)
        cases[case] = cases.get(case, True) and ok
    assert {case for case, every_file_ok in cases.items() if every_file_ok} == LINT_ONLY


def test_every_example_and_valid_fixture_passes_the_schema() -> None:
    checked = [p for p in YAML_FILES if not _name(p).startswith("invalid/")]
    assert len(checked) >= 20
    for path in checked:
        doc = _load(path)
        assert doc is not None
        errors = [e.message for e in _validator(path).iter_errors(doc.data)]
        assert errors == [], _name(path)


@pytest.fixture
def _from_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


@pytest.mark.usefixtures("_from_repo_root")
def test_schema_check_passes_on_the_committed_files() -> None:
    result = run_cli("schema", "--check")
    assert result.code == 0, result.err
    assert "up to date" in result.out


def test_schema_check_fails_with_exit_1_on_a_stale_copy_and_writes_nothing(tmp_path: Path) -> None:
    shutil.copytree(SCHEMA_DIR, tmp_path / "schema")
    stale = tmp_path / "schema" / "gatefile.schema.json"
    edited = stale.read_text(encoding="utf-8").replace('"minProperties": 1', '"minProperties": 0')
    assert edited != stale.read_text(encoding="utf-8")
    stale.write_text(edited, encoding="utf-8")

    result = run_cli("schema", "--check", "--dir", tmp_path / "schema")

    assert result.code == 1
    assert f"{stale}: error: stale or missing" in result.err
    assert "base.schema.json" not in result.err
    assert stale.read_text(encoding="utf-8") == edited


def test_schema_check_fails_with_exit_1_when_a_file_is_missing(tmp_path: Path) -> None:
    result = run_cli("schema", "--check", "--dir", tmp_path)
    assert result.code == 1
    assert "base.schema.json" in result.err
    assert "gatefile.schema.json" in result.err
    assert list(tmp_path.iterdir()) == []


def test_schema_writes_files_identical_to_the_committed_ones(tmp_path: Path) -> None:
    assert run_cli("schema", "--dir", tmp_path).code == 0
    for name in ("base.schema.json", "gatefile.schema.json"):
        assert (tmp_path / name).read_bytes() == (SCHEMA_DIR / name).read_bytes()


@pytest.mark.parametrize("name", ["base.schema.json", "gatefile.schema.json"], ids=["base", "gatefile"])
def test_committed_schema_carries_the_generated_marker(name: str) -> None:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    assert schema["$comment"] == GENERATED
    assert "Generated by `gatecfg schema`" in schema["$comment"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_without_arguments_writes_nothing_outside_gatecfgs_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("schema")
    assert result.code == 2
    assert "hint: `gatecfg schema --dir DIR`, or for an editor or check-jsonschema one file" in result.err
    assert list(tmp_path.iterdir()) == []
    assert run_cli("schema", "--dir", "out").code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "base.schema.json",
        "gatefile.schema.json",
    ]


def test_schema_without_arguments_still_writes_in_gatecfgs_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("schema")
    assert result.code == 0, result.err
