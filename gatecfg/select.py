"""Step selection (SPEC §3, §4): which of a metric's logged points a gate stores and judges, at which step."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from gatecfg.errors import InputError, Location
from gatecfg.models import Steps
from gatecfg.records import Point, Record, shorten

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


def select(record: Record, metric: str, steps: Steps, *, gated: bool) -> tuple[Selected, ...]:
    """The coordinates of `metric` under `steps`.

    A missing metric or step is an error coordinate whether or not the gate is gated: the evaluator decides
    what an error costs. A NaN or infinite value is an error at a gated coordinate and is dropped at a
    tracked one, since it can neither fail a band nor serve as a baseline. A value that is not a number at
    all (a string, null, an object) at a gated coordinate means the record does not hold what the gate
    declares, so it is an input error; at a tracked coordinate it is dropped.
    """
    points = record.points(metric)
    if not points:
        stored = steps if isinstance(steps, tuple) else (LAST_STEP,)
        return tuple(Selected(step, None, None, METRIC_MISSING, None) for step in stored)
    if steps == "all":
        judged = [_judge(metric, point.step, point, gated=gated, last=False) for point in points]
    elif steps == "last":
        # The highest step whatever its value: skipping a NaN there would gate an older point silently.
        judged = [_judge(metric, LAST_STEP, points[-1], gated=gated, last=True)]
    else:
        by_step = {point.step: point for point in points}
        judged = [
            _judge(metric, step, by_step[step], gated=gated, last=False)
            if step in by_step
            else Selected(step, None, None, f"step {step} missing ({_describe_logged(points)})", None)
            for step in steps
        ]
    return tuple(selected for selected in judged if selected is not None)


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


def _describe_logged(points: tuple[Point, ...]) -> str:
    ordered = [point.step for point in points]
    if len(ordered) == 1:
        return f"logged step {ordered[0]}"
    texts = step_ranges(ordered)
    if "..." in texts:
        return f"logged steps {texts}; {len(ordered)} steps in all"
    return f"logged steps {texts}"
