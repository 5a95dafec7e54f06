"""The band arithmetic of SPEC §4, pure: reference, band edges, and absolute limits.

Band edges are rounded to 12 significant digits before they are compared or shown, so the number
a report prints is the number the verdict used (0.521875 - 0.2 * 0.521875 is 0.4175, not
0.41750000000000004) and float noise never decides a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gatecfg.models import Constraint, Limits

SIGNIFICANT = 12
SHOWN = 6  # digits a person reads; JSON reports carry the full numbers


def tidy(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}")


def fmt(x: float | None) -> str:
    """A number as reports print it: shortest form, `inf`/`-inf` for an open side."""
    if x is None:
        return "null"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{SHOWN}g}"


@dataclass(frozen=True)
class Band:
    """Reference and edges at one coordinate: `lo`/`hi` None for an open side, `ref` None with no history."""

    ref: float | None
    n: int
    lo: float | None
    hi: float | None

    def contains(self, value: float) -> bool:
        return (self.lo is None or self.lo <= value) and (self.hi is None or value <= self.hi)

    def interval(self) -> str:
        lo = "-inf" if self.lo is None else fmt(self.lo)
        hi = "inf" if self.hi is None else fmt(self.hi)
        return f"[{lo}, {hi}]"


def reference(values: Sequence[float]) -> float:
    return tidy(math.fsum(values) / len(values))


def _width(rel: float | None, floor: float | None, ref: float) -> float | None:
    if rel is None and floor is None:
        return None
    return max(rel * abs(ref) if rel is not None else 0.0, floor if floor is not None else 0.0)


def band(constraint: Constraint | None, history: Sequence[float]) -> Band:
    """`hi = ref + max(rel_up*|ref|, abs_floor_up)`, `lo = ref - max(rel_down*|ref|, abs_floor_down)`."""
    if not history:
        return Band(None, 0, None, None)
    ref = reference(history)
    if constraint is None:
        return Band(ref, len(history), None, None)
    up = _width(constraint.rel_up, constraint.abs_floor_up, ref)
    down = _width(constraint.rel_down, constraint.abs_floor_down, ref)
    return Band(
        ref,
        len(history),
        None if down is None else tidy(ref - down),
        None if up is None else tidy(ref + up),
    )


def limits_breach(value: float, limits: Limits | None) -> str | None:
    """Why `value` breaks the absolute limits, or None."""
    if limits is None:
        return None
    if limits.min is not None and value < limits.min:
        return f"cur={fmt(value)} below limits.min={fmt(limits.min)}"
    if limits.max is not None and value > limits.max:
        return f"cur={fmt(value)} above limits.max={fmt(limits.max)}"
    return None
