"""Pydantic models of base files and gate files (docs/gate-language.md): what may be written, not what it
resolves to.

Every field of a gate is optional here because inheritance needs to know what was *written*
(`model_fields_set`), including an explicit `null`; `resolve` turns these into complete gates.
"""

from __future__ import annotations

import json
import math
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gatecfg.escape import invisible_characters
from gatecfg.membership import Baseline

# `all`, `last`, or distinct steps >= 0 (kept sorted).
Steps = Literal["all", "last"] | tuple[int, ...]
# The largest step the history store holds: its `step` column is a 32-bit INTEGER on PostgreSQL. Records,
# gate files, exports and --step are checked against it, so that both stores refuse a larger one alike.
MAX_STEP = 2**31 - 1
MAX_NAME_BYTES = 512

# Policy values: the centre of the band, and which stored runs form it.
Reference = Literal["mean", "median"]
# What a gate does about steps its baseline holds and tonight's run did not log (a crash, a rename).
Missing = Literal["fail", "warn", "ignore"]
# The harmful directions of a budget rule.
Direction = Literal["up", "down", "both"]

STEPS_HINT = "write `all`, `last`, or a list of logged steps such as [0, 100, 199]"


def _steps(value: Any) -> Steps | None:
    if value is None:  # unset; an explicit null is refused by GateSpec before this runs
        return None
    if value in ("all", "last"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, list):
        if not value:
            raise PydanticCustomError("steps", "the list of steps is empty")
        steps: set[int] = set()  # a set: a list's `in` made a 150,000-step list take minutes
        # `index` lets parse point at the offending item rather than at the whole list.
        for index, item in enumerate(value):
            if isinstance(item, float) and item.is_integer() and item >= 0:
                raise PydanticCustomError(
                    "steps",
                    "write step {item} as the integer {whole}",
                    {"item": _show(item), "whole": int(item), "index": index},
                )
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise PydanticCustomError(
                    "steps",
                    "steps are whole numbers >= 0, got {item}",
                    {"item": _show(item), "index": index},
                )
            if item > MAX_STEP:
                raise PydanticCustomError(
                    "steps",
                    "step {item} is beyond the largest step the history store holds ({max_step})",
                    {"item": item, "index": index, "max_step": MAX_STEP},
                )
            if item in steps:
                raise PydanticCustomError(
                    "steps", "step {item} is listed twice", {"item": item, "index": index}
                )
            steps.add(item)
        return tuple(sorted(steps))
    raise PydanticCustomError(
        "steps", "must be `all`, `last` or a list of steps, got {got}", {"got": _show(value)}
    )


def _show(value: Any) -> str:
    """A value as the reader wrote it in YAML, not as Python prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, list | dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse_null(value: Any, info: ValidationInfo) -> Any:
    # Only written values get here: `null` would read as "written", yet means nothing for these.
    if value is None:
        raise PydanticCustomError(
            "null_field", "`{name}: null` has no meaning here", {"name": info.field_name}
        )
    return value


def _drop_null(schema: dict[str, Any]) -> None:
    """The JSON Schema side of `_refuse_null`: a key may be left out, but not written as `null`."""
    options = [option for option in schema.pop("anyOf", []) if option != {"type": "null"}]
    if len(options) == 1:
        schema.update(options[0])
    elif options:
        schema["anyOf"] = options
    schema.pop("default", None)


# Optional to write, never `null` when written (a `null` would otherwise count as written).
NotNull = BeforeValidator(_refuse_null)
NotNullSchema = Field(json_schema_extra=_drop_null)

Finite = Annotated[float, Field(allow_inf_nan=False)]
FalseAlarm = Annotated[float, Field(gt=0, lt=0.5, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
OptionalFinite = Annotated[Finite | None, NotNull, NotNullSchema]
OptionalNonNegative = Annotated[NonNegative | None, NotNull, NotNullSchema]
_STEPS_SCHEMA: dict[str, Any] = {
    "description": "`all` (every logged step), `last` (the last logged point, stored as step -1), "
    "or a list of distinct steps >= 0. Part of the key.",
    "anyOf": [
        {"enum": ["all", "last"]},
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True},
    ],
}
StepsField = Annotated[Steps | None, BeforeValidator(_steps), WithJsonSchema(_STEPS_SCHEMA)]


def name_problem(value: str) -> str | None:
    """What is wrong with a name (test, metric, label, run id, commit), or None: docs/security.md.

    A name is printed in terminals, CI logs, annotations and reports, so it holds no control character (a
    newline in a name could start a forged `::error` line); it goes into the history store's indexes,
    which PostgreSQL bounds (an index row holds about 2,700 bytes), so it is at most MAX_NAME_BYTES long.
    """
    found = invisible_characters(value)
    if found:
        return f"holds the {_what(found)} {', '.join(found)}"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return f"is {size:,} bytes long; names are at most {MAX_NAME_BYTES} bytes (UTF-8)"
    return None


def _printable(value: Any) -> Any:
    found = invisible_characters(value) if isinstance(value, str) else []
    if isinstance(value, str) and not found and name_problem(value) is not None:
        raise PydanticCustomError("name_too_long", "{problem}", {"problem": name_problem(value)})
    if found and _what(found) != "control character":
        raise PydanticCustomError(
            "surrogate",
            "holds {chars}: UTF-16 surrogate halves, no characters of their own (YAML reads an escaped "
            "pair such as `\\ud83d\\ude00` as two halves, not as one character)",
            {"chars": ", ".join(found)},
        )
    if found:
        raise PydanticCustomError(
            "control_character",
            "holds the control character {chars}: names and paths are printed in reports and CI logs, "
            "where it could forge lines",
            {"chars": ", ".join(found)},
        )
    return value


def _what(found: list[str]) -> str:
    """What the characters `invisible_characters` found are: a surrogate half is no control character, and
    its fix differs (write the character itself, not its UTF-16 escapes)."""
    halves = all(0xD800 <= int(code[2:], 16) <= 0xDFFF for code in found)
    return "UTF-16 surrogate halves" if halves else "control character"


def _composed(value: Any) -> Any:
    """A metric name in Unicode NFC, the form loggers write: `é` typed as e + U+0301 (NFD, as some editors
    and macOS file names spell it) would be a second name for the same metric, a gate of its own that
    no record matches. Records are read in NFC too (records/builder.py)."""
    if isinstance(value, str) and not unicodedata.is_normalized("NFC", value):
        raise PydanticCustomError(
            "not_nfc",
            "is spelled in decomposed Unicode (a letter followed by combining marks); write it as "
            "`{composed}` (NFC), the one spelling gatecfg matches records against",
            {"composed": unicodedata.normalize("NFC", value)},
        )
    return value


# Last, so that it wraps (runs before) the pattern: a newline is named as what it is, not as a blank.
Printable = BeforeValidator(_printable)
# Printable last of all: before validators run last first, so a control character or a surrogate half is
# named before the spelling (NFC) is judged, whose message would quote the name back.
MetricName = Annotated[
    str, Field(min_length=1, pattern=r"^\S(.*\S)?$"), BeforeValidator(_composed), Printable
]


# pydantic puts a key pattern under `patternProperties`, which lets a blank key through unchecked.
_ONLY_METRICS: dict[str, Any] = {"additionalProperties": False}


class _Model(BaseModel):
    # defer_build: each model's validator is built on first use, as part of the file model that nests
    # it, instead of once per class at import: a third of `gatecfg lint`'s start-up (benchmarks/startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


def _one_of(*names: str) -> dict[str, Any]:
    return {"anyOf": [{"required": [name]} for name in names]}


MIN_CHANGE_HINT = (
    "write `min_change: 1%` (relative to the step's baseline), `min_change: 0.002` (absolute, in the "
    "metric's units) or `min_change: {rel: 0.01, abs: 0.002}` (the larger of the two)"
)


def _min_change(value: Any) -> Any:
    """`1%` -> {rel: 0.01}, a number -> {abs: number}; a mapping as written."""
    if isinstance(value, str):
        text = value.strip()
        try:
            share = Decimal(text[:-1]) / 100 if text.endswith("%") else None
        except InvalidOperation:
            share = None
        if share is None or not share.is_finite() or share < 0:
            raise PydanticCustomError(
                "min_change", "not a change: {got}; {hint}", {"got": _show(value), "hint": MIN_CHANGE_HINT}
            )
        return {"rel": float(share)}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"abs": value}
    return value


class MinChange(_Model):
    """The smallest change of a step that matters to a budget gate: a step fails only when its change is
    beyond its noise and beyond max(rel x |its baseline|, abs). Part of the key."""

    rel: OptionalNonNegative = None
    abs: OptionalNonNegative = None

    @model_validator(mode="after")
    def _some(self) -> MinChange:
        if self.rel is None and self.abs is None:
            raise PydanticCustomError(
                "min_change", "an empty minimum change; {hint}", {"hint": MIN_CHANGE_HINT}
            )
        return self


_MIN_CHANGE_SCHEMA: dict[str, Any] = {
    "description": "A budget gate's smallest change that matters: a step fails only beyond its noise and "
    "beyond this. `1%` (relative to the step's baseline), a number (absolute, in the metric's units), or "
    "{rel, abs} (the larger). Part of the key.",
    "anyOf": [
        {"type": "string", "pattern": r"^\s*[0-9]+(\.[0-9]+)?%\s*$"},
        {"type": "number", "minimum": 0},
        {
            "type": "object",
            "properties": {"rel": {"type": "number", "minimum": 0}, "abs": {"type": "number", "minimum": 0}},
            "additionalProperties": False,
            "minProperties": 1,
        },
    ],
}


class Constraint(_Model):
    """The history band. A side with none of its keys (rel, abs_floor, sigma) is open. Part of the key."""

    model_config = ConfigDict(
        json_schema_extra=_one_of(
            "rel_up", "abs_floor_up", "sigma_up", "rel_down", "abs_floor_down", "sigma_down", "budget"
        )
    )

    rel_up: OptionalNonNegative = None
    abs_floor_up: OptionalNonNegative = None
    rel_down: OptionalNonNegative = None
    abs_floor_down: OptionalNonNegative = None
    # Width sigma * s, with s the sample standard deviation of the baseline window (two values or more).
    sigma_up: OptionalNonNegative = None
    sigma_down: OptionalNonNegative = None
    # The false-alarm budget rule (gatecfg/budget.py) in these harmful directions, instead of a band.
    budget: Annotated[
        Direction | None,
        NotNull,
        NotNullSchema,
        Field(
            description="The false-alarm budget rule instead of a band: the harmful directions (up, down "
            "or both). Written alone; fails a clean night with probability policy.false_alarm."
        ),
    ] = None
    min_change: Annotated[
        MinChange | None, NotNull, BeforeValidator(_min_change), WithJsonSchema(_MIN_CHANGE_SCHEMA)
    ] = None

    @model_validator(mode="after")
    def _one_side(self) -> Constraint:
        written = self.literal()
        band = sorted(k for k in written if k not in ("budget", "min_change"))
        if self.budget is not None and band:
            raise PydanticCustomError(
                "constraint_budget",
                "`budget` replaces the band: write it alone (`{alone}`), without {others}",
                {"alone": f"{{budget: {self.budget}}}", "others": ", ".join(band)},
            )
        if self.min_change is not None and self.budget is None:
            raise PydanticCustomError(
                "constraint_min_change",
                "`min_change` goes with `budget: up|down|both`; a band's minimum change is its "
                "rel_*/abs_floor_* width",
            )
        if not written:
            raise PydanticCustomError(
                "constraint_empty",
                "a constraint needs at least one side (rel_up/abs_floor_up/sigma_up or "
                "rel_down/abs_floor_down/sigma_down) or a `budget: up|down|both`; "
                "write `constraint: null` to track the metric without gating it",
            )
        return self

    def literal(self) -> dict[str, float | str]:
        """The written keys only: what the constraint key is made of."""
        return self.model_dump(exclude_none=True)


class Limits(_Model):
    """Absolute bounds that read no history. Not part of the key."""

    model_config = ConfigDict(json_schema_extra=_one_of("min", "max"))

    min: OptionalFinite = None
    max: OptionalFinite = None

    @model_validator(mode="after")
    def _ordered(self) -> Limits:
        if self.min is None and self.max is None:
            raise PydanticCustomError("limits_empty", "limits need `min`, `max` or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise PydanticCustomError(
                "limits_order",
                "min ({min}) is above max ({max})",
                {"min": _bound(self.min), "max": _bound(self.max)},
            )
        return self

    def literal(self) -> dict[str, float]:
        return self.model_dump(exclude_none=True)


def _bound(value: float) -> str:
    # Limits are floats once validated; `min: 2` should read back as 2, not 2.0.
    return str(int(value)) if value.is_integer() else repr(value)


def _tolerate(value: Any) -> int | float | None:
    if value is None:  # unset; an explicit null is refused by GateSpec before this runs
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and 0.0 < value < 1.0:
        return value
    # `1.0` could mean one step or every step: a fraction is below 1, a count is written whole.
    raise PydanticCustomError(
        "tolerate",
        "tolerate is a count of steps (0, 1, 2, ...) or a fraction between 0 and 1, got {got}",
        {"got": _show(value)},
    )


_TOLERATE_SCHEMA: dict[str, Any] = {
    "description": "How many failing steps the gate lets pass: a count K >= 0, or a fraction in (0, 1) of "
    "the steps judged. The gate fails only when more steps fail. Not part of the key.",
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ],
}
Tolerate = Annotated[
    int | float | None, BeforeValidator(_tolerate), WithJsonSchema(_TOLERATE_SCHEMA), NotNullSchema
]


class GateSpec(_Model):
    """One metric's declaration, in a gate file or in a base file's defaults."""

    # `steps` and `constraint` are identity (they feed the key); `limits`, `enforce`, `tolerate` and
    # `trials` decide or explain verdicts and are not.

    steps: StepsField = None
    constraint: Annotated[
        Constraint | None,
        Field(description="The band around the history mean; `null` tracks the metric without gating it."),
    ] = None
    limits: Annotated[
        Limits | None, Field(description="Absolute `min`/`max` bounds that read no history.")
    ] = None
    enforce: Annotated[
        bool | None,
        WithJsonSchema({"type": "boolean", "description": "A failure fails the CI job (else: shadow)."}),
    ] = None
    tolerate: Tolerate = None
    trials: Annotated[
        Annotated[int, Field(ge=1)] | None,
        NotNullSchema,
        Field(
            description="The metric is the mean of this many Bernoulli trials (a reward over 16 "
            "rollouts): false-alarm estimates use exact binomial arithmetic. Not part of the key."
        ),
    ] = None

    false_alarm: Annotated[
        FalseAlarm | None,
        NotNull,
        NotNullSchema,
        Field(
            description="The share of clean nights a `budget` gate may fail (overrides "
            "`policy.false_alarm`). Not part of the key."
        ),
    ] = None

    @field_validator("steps", "enforce", "tolerate", "trials", mode="before")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        return _refuse_null(value, info)


_Names = Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1, strict=False)]


class WritePolicy(_Model):
    """Who may `evaluate --write` (store a run that forms baselines); docs/security.md."""

    # Branch names (shell patterns, e.g. `release/*`) allowed to write; unset: the CI's default branch.
    branches: (
        Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1, strict=False)] | None
    ) = None
    # CI events allowed to write (GitHub's `schedule`, `push`, ...); unset: every event but a pull request.
    events: (
        Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Field(min_length=1, strict=False)] | None
    ) = None


class Policy(_Model):
    """Evaluation policy; never part of a key."""

    window: Annotated[Annotated[int, Field(ge=1)] | None, NotNull, NotNullSchema] = None
    min_history: Annotated[Annotated[int, Field(ge=0)] | None, NotNull, NotNullSchema] = None
    enforce: Annotated[bool | None, NotNull, NotNullSchema] = None
    # The band's centre: the window's mean (docs/evaluate.md) or its median, which one outlier cannot move.
    reference: Annotated[Reference | None, NotNull, NotNullSchema] = None
    # `trusted`: runs no gated coordinate failed (or trusted by hand). `nightly`: every run not untrusted
    # by hand, so that failing draws still enter the baseline and it cannot ratchet away from the metric.
    baseline: Annotated[Baseline | None, NotNull, NotNullSchema] = None
    # Fail (exit 1) when the store holds no run at all of the evaluated series, rather than judging every
    # value cold and passing: for teams whose PR gate must never silently gate nothing.
    require_history: Annotated[bool | None, NotNull, NotNullSchema] = None
    # The share of clean nights a `budget` gate may fail, whatever the number of steps it judges.
    false_alarm: Annotated[FalseAlarm | None, NotNull, NotNullSchema] = None
    write: Annotated[WritePolicy | None, NotNull, NotNullSchema] = None
    # After a gate has failed this many nightlies in a row in one direction, on a new level the change
    # test confirms, the new level becomes its baseline (recorded in the store; `gatecfg shifts` lists and
    # undoes it). `never`: a failing night never rejoins its baseline, by itself (the behaviour before).
    accept_shift_after: Annotated[
        Annotated[int, Field(ge=1)] | Literal["never"] | None, NotNull, NotNullSchema
    ] = None
    # Warn when a gate has kept every value out of its baseline (or stayed cold) for this many nightlies.
    stale_after: Annotated[Annotated[int, Field(ge=1)] | None, NotNull, NotNullSchema] = None
    # Steps the baseline holds and the run lacks: `fail` (status `missing`, a failure), `warn` (reported,
    # not failing), `ignore`.
    missing: Annotated[Missing | None, NotNull, NotNullSchema] = None
    # A gate failing on the same code (commit, or `--meta build=`) as a stored run that passed it, in the
    # same environment: `warn` reports it and does not fail the job, `fail` fails it (gatecfg/same_code.py).
    same_code: Annotated[Literal["fail", "warn"] | None, NotNull, NotNullSchema] = None


class Rule(_Model):
    """A repo-wide rule checked by lint on every gate file that inherits the base file declaring it."""

    name: Annotated[str, Field(min_length=1)]
    require: Annotated[tuple[MetricName, ...], Field(min_length=1, strict=False)]
    when: Literal["always", "gated"] = "always"
    under: str | None = None
    reason: str | None = None


class BaseFile(_Model):
    version: Literal[1]
    extends: Annotated[str, Field(min_length=1), Printable] | None = None
    defaults: dict[MetricName, GateSpec] = Field(default_factory=dict, json_schema_extra=_ONLY_METRICS)
    policy: Policy = Field(default_factory=Policy)
    rules: Annotated[tuple[Rule, ...], Field(strict=False)] = ()


class GateFile(_Model):
    test: Annotated[str, Field(min_length=1), Printable]
    gates: Annotated[dict[MetricName, GateSpec | None], Field(min_length=1, json_schema_extra=_ONLY_METRICS)]
