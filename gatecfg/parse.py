"""Validate loaded YAML against the models and translate every pydantic error back to file:line:col."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gatecfg.errors import InputError, Problem
from gatecfg.models import STEPS_HINT, _show
from gatecfg.wording import did_you_mean
from gatecfg.yamlio import KeyPath, LoadedDoc, dotted

M = TypeVar("M", bound=BaseModel)


def parse_doc(doc: LoadedDoc, model: type[M]) -> M:
    """The validated model, or an InputError listing every problem with its position."""
    if not isinstance(doc.data, dict):
        kind = "a list" if isinstance(doc.data, list) else _got(doc.data)
        raise InputError(
            [
                Problem(
                    doc.location(()),
                    f"the file must be a mapping of keys, not {kind}",
                    hint="a gate file starts with `test:` and `gates:`; a base file with `version: 1`",
                )
            ]
        )
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        errors = _drop_missing_explained_by_typo(model, exc.errors())
        problems = [_problem(doc, model, err) for err in errors]
        raise InputError(sorted(_dedupe(problems), key=lambda p: p.location)) from None


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for p in problems:
        if p.text() not in seen:
            seen.add(p.text())
            out.append(p)
    return out


def _drop_missing_explained_by_typo(model: type[BaseModel], errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """`gate:` for `gates:` is one mistake: the did-you-mean says it, a second "missing `gates`" is noise."""
    suggested: set[tuple[KeyPath, str]] = set()
    for err in errors:
        if err["type"] == "extra_forbidden":
            parent = tuple(err["loc"][:-1])
            suggested.update((parent, key) for key in _close_keys(model, parent, str(err["loc"][-1])))
    return [
        err
        for err in errors
        if not (err["type"] == "missing" and (tuple(err["loc"][:-1]), str(err["loc"][-1])) in suggested)
    ]


def _close_keys(model: type[BaseModel], parent: KeyPath, key: str) -> list[str]:
    return difflib.get_close_matches(key, _allowed_keys(model, parent), n=1, cutoff=0.6)


def _problem(doc: LoadedDoc, model: type[BaseModel], err: ErrorDetails) -> Problem:
    path: KeyPath = tuple(err["loc"])
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        key = str(path[-1])
        close = _close_keys(model, path[:-1], key)
        allowed = ", ".join(_allowed_keys(model, path[:-1]))
        suggestion = f"did you mean `{close[0]}`?" if close else f"allowed keys: {allowed}"
        return Problem(doc.location(path, key=True), f"unknown key `{key}`", dotted(path), suggestion)
    if path and path[-1] == "[key]":
        # pydantic reports a bad mapping key as `<dict path>.<key>.[key]`: point at the key itself.
        message, hint = _message(kind, err, value)
        hint = hint or "write the metric as the training logger names it, e.g. `train/grad_norm`"
        return Problem(doc.location(path[:-1], key=True), f"metric name {message}", dotted(path[:-2]), hint)
    if kind == "missing":
        missing = str(path[-1])
        return Problem(
            doc.location(path[:-1], key=True),
            f"missing required key `{missing}`",
            dotted(path[:-1]) if path[:-1] else "",
            _MISSING_HINTS.get(missing),
        )
    ctx = err.get("ctx") or {}
    if kind == "steps" and "index" in ctx:
        path = (*path, ctx["index"])
    message, hint = _message(kind, err, value)
    if hint is None and kind in {"string_too_short", "too_short", "literal_error"}:
        hint = _MISSING_HINTS.get(str(path[-1]))
    return Problem(doc.location(path), message, dotted(path), hint)


_NULL_HINTS = {
    **dict.fromkeys(
        ("rel_up", "abs_floor_up", "rel_down", "abs_floor_down"),
        "leave the key out: a side with neither of its two keys is open",
    ),
    **dict.fromkeys(("min", "max"), "leave the key out: an unwritten bound is not checked"),
}

_MISSING_HINTS = {
    "test": "name the test this file gates, e.g. `test: tests/e2e/test_foo_ci.py`",
    "gates": "declare at least one metric under `gates:`",
    "version": "write `version: 1` at the top of the base file (the only version this gatecfg reads)",
    "require": "list the metrics the rule requires, e.g. `require: [perf/actor_train_mfu]`",
    "name": "give the rule a short name, e.g. `name: mfu-tracked`",
}


_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


def _got(value: Any) -> str:
    """`the string 'yes'` or `` `1.5` ``: a quoted string must not read as a bare YAML word."""
    return f"the string {_show(value)}" if isinstance(value, str) else f"`{_show(value)}`"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# Pydantic's own message, with the hint that says how to fix it.
_HINTS = {
    "name_too_long": "shorten the name",
    "control_character": "remove it; write the name as plain text",
    "surrogate": "write the character itself (YAML files are UTF-8), not its UTF-16 escapes",
}


def _message(kind: str, err: ErrorDetails, value: Any) -> tuple[str, str | None]:
    """The message and hint of one pydantic error: a value of the wrong type, else a value out of rule."""
    got = _got(value)
    typed = _type_message(kind, value, got)
    return typed if typed is not None else _rule_message(kind, err, value, got)


def _type_message(kind: str, value: Any, got: str) -> tuple[str, str | None] | None:
    """A value of the wrong YAML type (a number, a boolean, a string, a mapping, a list); None for
    another kind of error."""
    if kind in {"float_type", "int_type", "float_parsing", "int_parsing"}:
        what = "a whole number" if kind.startswith("int") else "a number"
        if isinstance(value, bool):
            return f"must be {what}, not a boolean ({got})", None
        if isinstance(value, str) and _is_number(value):
            return f"must be {what}, got {got}", "write the number without quotes"
        return f"must be {what}, got {got}", None
    if kind == "bool_type":
        if isinstance(value, str) and value.lower() in _YAML11_BOOLS:
            return f"must be true or false, got {got}", (
                "write `true` or `false` without quotes (YAML 1.2 reads yes/no/on/off as strings)"
            )
        return f"must be true or false, got {got}", None
    if kind == "string_type":
        return f"must be a string, got {got}", None
    if kind in {"dict_type", "model_type"}:
        if isinstance(value, list):
            return f"must be a mapping, got a list {got}", "write `key: value` lines, not `- ` list items"
        if value is None:
            return "must be a mapping, got nothing (`null`)", "write its fields indented below the key"
        return f"must be a mapping, got {got}", None
    if kind in {"tuple_type", "list_type"}:
        if isinstance(value, dict):
            return "must be a list, got a mapping", "start each item on its own line with `- `"
        return f"must be a list, got {got}", None
    return None


def _rule_message(kind: str, err: ErrorDetails, value: Any, got: str) -> tuple[str, str | None]:
    """A value of the right type that breaks a rule: not an allowed word, out of range, empty, ..."""
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        expected = str(ctx.get("expected", "one of the allowed values"))
        close = did_you_mean(value, re.findall(r"'([^']*)'", expected)) if isinstance(value, str) else None
        return f"must be {expected}, got {got}", close
    if kind in {"greater_than_equal", "greater_than"} and "ge" in ctx:
        return f"must be >= {ctx['ge']:g}, got {got}", None
    if kind == "finite_number":
        return f"must be a finite number, got {got}", None
    if kind == "steps":
        close = did_you_mean(value, ("all", "last")) if isinstance(value, str) else None
        return err["msg"], f"{close} ({STEPS_HINT})" if close else STEPS_HINT
    if kind == "null_field":
        return err["msg"], _NULL_HINTS.get(str(ctx.get("name")), "remove the line to inherit the default")
    if kind in {"string_too_short", "too_short"}:
        return "must not be empty", None
    if kind == "string_pattern_mismatch":
        return f"must not be blank or start/end with spaces, got {got}", None
    return err["msg"], _HINTS.get(kind)


def _allowed_keys(model: type[BaseModel], path: KeyPath) -> list[str]:
    """The field names of the model found by walking `path` down from `model`."""
    current: Any = model
    for part in path:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return []
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is tuple and isinstance(part, int):
            current = get_args(current)[0]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and `X | None` down to the one meaningful type."""
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation
