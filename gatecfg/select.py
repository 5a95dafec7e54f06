"""Step selection (docs/evaluate.md): which of a metric's logged points a gate stores and judges, at which
step."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from gatecfg.errors import InputError, Location
from gatecfg.models import Steps
from gatecfg.records import Point, Record, shorten
from gatecfg.wording import did_you_mean

LAST_STEP = -1  # `steps: last` stores its point at this step, whatever step it was logged at
METRIC_MISSING = "metric missing from the record"


@dataclass(frozen=True)
class Selected:
    """One coordinate's value from the record, or why the record cannot give one."""

    step: int  # the stored step: the logged step for `all` and lists, -1 for `last`
    logged_step: int | None  # the record's step (for `last`, the last logged step); None when missing
    value: float | None  # finite value, or None when error is set
    error: str | None  # why this coordinate is an error, e.g. "value is NaN"
    location: Location | None  # where the value came from


class Selection(Sequence[Selected]):
    """The coordinates a gate selects from a record, as parallel lists: the evaluator reads steps and
    values in bulk, and a `Selected` is built when something asks for one. Equal to a sequence of
    equal `Selected`s."""

    def __init__(
        self,
        steps: Sequence[int],
        logged: Sequence[int | None],
        values: Sequence[float | None],
        errors: Sequence[str | None],
        locations: Sequence[Location | None],
        *,
        numbers: npt.NDArray[np.float64] | None = None,
    ) -> None:
        self.steps = steps
        self.logged = logged
        self.values = values  # finite, or None where errors holds why
        self.errors = errors
        self.locations = locations
        self._numbers = numbers  # the values as an array, when the caller has it

    @classmethod
    def of(cls, items: Iterable[Selected]) -> Selection:
        items = list(items)
        return cls(
            [s.step for s in items],
            [s.logged_step for s in items],
            [s.value for s in items],
            [s.error for s in items],
            [s.location for s in items],
        )

    def numbers(self) -> npt.NDArray[np.float64]:
        """The values as an array, NaN where a coordinate is an error."""
        if self._numbers is None:
            self._numbers = np.array(
                [
                    np.nan if v is None or e is not None else v
                    for v, e in zip(self.values, self.errors, strict=True)
                ],
                np.float64,
            )
        return self._numbers

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, index: int) -> Selected: ...
    @overload
    def __getitem__(self, index: slice) -> list[Selected]: ...
    def __getitem__(self, index: int | slice) -> Selected | list[Selected]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return Selected(
            self.steps[index],
            self.logged[index],
            self.values[index],
            self.errors[index],
            self.locations[index],
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Selection({list(self)!r})"


def select(record: Record, metric: str, steps: Steps, *, gated: bool) -> Selection:
    """The coordinates of `metric` under `steps`.

    A missing metric or step is an error coordinate whether or not the gate is gated: the evaluator decides
    what an error costs. A NaN or infinite value is an error at a gated coordinate and is dropped at a
    tracked one, since it can neither fail a band nor serve as a baseline. A value that is not a number at
    all (a string, null, an object) at a gated coordinate means the record does not hold what the gate
    declares, so it is an input error; at a tracked coordinate it is dropped.
    """
    column = record.column(metric)
    if column is None or not len(column):
        missing = steps if isinstance(steps, tuple) else (LAST_STEP,)
        error = _metric_missing(record, metric)
        return Selection.of(Selected(step, None, None, error, None) for step in missing)
    # The stored steps, and where each was logged in the column (-1: not logged).
    stored: Sequence[int]
    indices: Sequence[int]
    if steps == "all":
        stored, indices = column.steps, range(len(column))
    elif steps == "last":
        # The highest step whatever its value: skipping a NaN there would gate an older point silently.
        stored, indices = [LAST_STEP], [len(column) - 1]
    else:
        position = {step: i for i, step in enumerate(column.steps)}
        stored, indices = steps, [position.get(step, -1) for step in steps]
    whole = steps == "all"  # every logged point, in order: the column's own lists
    values = list(column.values) if whole else [column.values[i] if i >= 0 else None for i in indices]
    numbers = None if None in values else np.array(values, np.float64)
    if numbers is not None and np.isfinite(numbers).all():
        # Every step logged with a finite number: nearly always, and taken as whole lists.
        logged = list(column.steps) if whole else [column.steps[i] for i in indices]
        locations = list(column.locations) if whole else [column.locations[i] for i in indices]
        return Selection(stored, logged, values, [None] * len(values), locations, numbers=numbers)
    judged = [
        _judge(metric, step, column.point(i), gated=gated, last=steps == "last")
        if i >= 0
        else Selected(step, None, None, f"step {step} missing ({_describe_logged(column.steps)})", None)
        for step, i in zip(stored, indices, strict=True)
    ]
    return Selection.of(selected for selected in judged if selected is not None)


def _metric_missing(record: Record, metric: str) -> str:
    """Why a metric has no coordinate, naming a logged metric near it: a renamed metric (`train/ppo_KL`
    logged, `train/ppo_kl` declared) is the usual cause."""
    hint = did_you_mean(metric, (name for name, column in record.columns.items() if len(column)))
    return METRIC_MISSING if hint is None else f"{METRIC_MISSING}; {hint}"


def _judge(metric: str, step: int, point: Point, *, gated: bool, last: bool) -> Selected | None:
    """The Selected for one logged point, or None when a tracked coordinate drops it."""
    value = point.value
    if value is not None and math.isfinite(value):
        return Selected(step, point.step, value, None, point.location)
    if not gated:
        return None
    if value is None:
        which = f"step {point.step} (the last logged step)" if last else f"step {point.step}"
        raise InputError.at(
            point.location,
            f"{which} is {shorten(point.raw)}, not a number",
            dotted=metric,
            hint="log a JSON number here (NaN and Infinity are accepted and fail the gate), "
            "or track the metric without gating it with `constraint: null`",
        )
    reason = (
        "value is NaN" if math.isnan(value) else "value is Infinity" if value > 0 else "value is -Infinity"
    )
    return Selected(step, point.step, None, reason, point.location)


def step_ranges(steps: Iterable[int]) -> str:
    """Sorted steps as ranges, e.g. `0-999` or `0-3, 10, 20-29`; step -1 reads `last`."""
    ranges: list[tuple[int, int]] = []
    for step in sorted(steps):
        if ranges and step == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], step)
        else:
            ranges.append((step, step))
    texts = [("last" if lo == LAST_STEP else str(lo)) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges]
    if len(texts) > 5:
        # Hundreds of scattered steps help nobody at 2 am: the ends say enough.
        texts = [*texts[:3], "...", texts[-1]]
    return ", ".join(texts)


def _describe_logged(ordered: Sequence[int]) -> str:
    if len(ordered) == 1:
        return f"logged step {ordered[0]}"
    texts = step_ranges(ordered)
    if "..." in texts:
        return f"logged steps {texts}; {len(ordered)} steps in all"
    return f"logged steps {texts}"
