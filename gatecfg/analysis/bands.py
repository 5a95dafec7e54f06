"""What a chart draws around a value: the band it sits in, on the metric's own scale, and the view that
shows it (docs/analytics.md, "gatecfg report --html"). The interactive charts and the PNG ones both
draw from here.

A band gate's band is its decision, `lo` to `hi`. A budget gate decides over all its steps at once; the
only per-step edges it stores are where a step fails alone, which sit far out (a gradient norm near 2
fails alone beyond 20 to 70): drawn as the band, they flatten the values against the chart's floor and a
+25% shift cannot be seen. So a budget gate's band is its normal noise, the usual value plus or minus
NOISE_SPREADS of its night-to-night spreads, and the lone-step edges are marked apart where they fall in
the view; they never set it. A metric that was never below zero gets no band below zero.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass

# A clean night's value falls within two spreads of its usual value about 95% of the time (normal noise).
NOISE_SPREADS = 2.0
# The largest magnitude on an axis: matplotlib's tick arithmetic overflows much beyond it (and no
# browser draws a pixel there either).
PLOTTABLE = sys.float_info.max / 64
MARGIN = 0.08  # of the view's height, above and below what it must show


@dataclass(frozen=True)
class Drawn:
    """The band drawn at one point: None where there is none (no history, a tracked gate); an open side
    is infinite. `lone_lo`/`lone_hi`: where a budget gate's step fails alone, None for a band gate."""

    lo: float | None
    hi: float | None
    lone_lo: float | None
    lone_hi: float | None


NONE = Drawn(None, None, None, None)


def floor_of(values: Iterable[float]) -> float | None:
    """0 for a metric none of whose finite values is below zero (a norm, a rate, a loss): its band stops
    there; else None."""
    finite = [v for v in values if math.isfinite(v)]
    return 0.0 if finite and min(finite) >= 0 else None


def drawn(
    ref: float | None, lo: float | None, hi: float | None, sd: float | None, *, floor: float | None
) -> Drawn:
    """The band at one point judged against `ref` with edges `lo`/`hi` (None: an open side) and, for a
    budget gate, its spread `sd`."""
    if ref is None or not math.isfinite(ref) or (lo is None and hi is None and sd is None):
        return NONE  # no history, or nothing judged it (a cold or tracked value)
    if sd is None or not math.isfinite(sd):
        low, high = (-math.inf if lo is None else lo), (math.inf if hi is None else hi)
        lone_lo = lone_hi = None
    else:
        low, high = ref - NOISE_SPREADS * sd, ref + NOISE_SPREADS * sd
        lone_lo, lone_hi = lo, hi
    if floor is not None:
        low = max(low, floor)
        high = max(high, floor)
        # An edge below what the metric can take is no edge a chart can show.
        lone_lo = None if lone_lo is None or lone_lo < floor else lone_lo
    return Drawn(low, high, lone_lo, lone_hi)


def view(shown: Iterable[float | None], *, floor: float | None) -> tuple[float, float]:
    """The y range that shows every finite value of `shown` (values, references, bands, limits; never the
    lone-step edges) with a margin, not below `floor`, within what can be drawn."""
    points = [v for v in shown if v is not None and math.isfinite(v)]
    if not points:
        return (0.0, 1.0)
    low, high = padded(min(points), max(points))
    if floor is not None and min(points) >= floor:
        low = max(low, floor)
    return low, high


def padded(low: float, high: float) -> tuple[float, float]:
    """`low` to `high` with a margin, within the range a chart can place ticks in: values nearer the float
    maximum (a diverged run at 1.8e308) are drawn at the chart's edge."""
    margin = (high / 2 - low / 2) * 2 * MARGIN or abs(high) * 0.05 or 1.0
    low, high = (min(max(x, -PLOTTABLE), PLOTTABLE) for x in (low - margin, high + margin))
    if low == high:  # everything beyond the drawable range, on one side
        return (PLOTTABLE / 2, PLOTTABLE) if high > 0 else (-PLOTTABLE, -PLOTTABLE / 2)
    return low, high


def lone_label(drawn: Iterable[Drawn], low: float, high: float) -> str:
    """The key's words for the lone-step edges; when none falls in the view, how far out they are."""
    edges = [e for d in drawn for e in (d.lone_lo, d.lone_hi) if e is not None]
    label = "fails alone beyond (one step)"
    if edges and not any(low <= e <= high for e in edges):
        near = min(edges, key=lambda e: min(abs(e - low), abs(e - high)))
        label += f": off the chart, the nearest at {near:.4g}"
    return label
