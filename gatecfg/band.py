"""The band arithmetic (docs/evaluate.md), pure: reference, spread, band edges, and absolute limits.

Band edges are rounded to 12 significant digits before they are compared or shown, so the number
a report prints is the number the verdict used (0.521875 - 0.2 * 0.521875 is 0.4175, not
0.41750000000000004) and float noise never decides a verdict. The reference is rounded too, so a value
that rounds to it is inside, even a zero-width band (`rel_up: 0`, `sigma_up` over identical nights).
An absurd value of the window (moments.without_absurd: a night at 1e300 among nights near 1) is left out
of the reference and the spread, which it would otherwise own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gatecfg import moments
from gatecfg.budget import MIN_NIGHTS
from gatecfg.models import Constraint, Limits, Reference

# A sample standard deviation needs two values; below that a sigma term is left out of the width.
SIGMA_MIN_VALUES = 2

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


def near(x: float, spread: float) -> str:
    """A number to the decimals its spread makes meaningful (two significant digits of the spread): 6.60
    beside a spread of 0.10, 2.1934 beside 0.0012; the shortest form when the spread is none or huge."""
    if not math.isfinite(x):
        return fmt(x)
    if spread > 0 and math.isfinite(spread):
        decimals = 1 - math.floor(math.log10(spread))
        if 0 <= decimals <= 12 and abs(x) < 1e15:
            return f"{x:.{decimals}f}"
    return f"{x:.3g}"


@dataclass(frozen=True)
class Band:
    """Reference and edges at one coordinate: `lo`/`hi` None for an open side, `ref` None with no history."""

    ref: float | None
    n: int
    lo: float | None
    hi: float | None
    sd: float | None = None  # the window's sample standard deviation a sigma term used, else None
    absurd: int = 0  # the window's absurd values, left out of the reference and the spread

    def contains(self, value: float) -> bool:
        # A value equal to the reference at the reference's 12 digits is inside, even a zero-width side
        # whose edge is that rounded reference (nothing else rounds to it, so no other edge moves).
        return ((self.lo is None or self.lo <= value) and (self.hi is None or value <= self.hi)) or (
            self.ref is not None and tidy(value) == self.ref
        )

    def interval(self) -> str:
        lo = "-inf" if self.lo is None else fmt(self.lo)
        hi = "inf" if self.hi is None else fmt(self.hi)
        return f"[{lo}, {hi}]"

    def versus(self, value: float, how: Reference) -> str:
        """A band gate's value against this reference, in the metric's units, and the change as a share of
        it: `3.1 vs mean 1.505 of 4 nights: +106.0%` (docs/evaluate.md, "Reading a band gate")."""
        if self.ref is None:
            return fmt(value)
        text = f"{fmt(value)} vs {how} {fmt(self.ref)} of {self.n} night{'s' * (self.n != 1)}"
        if self.absurd:
            text += f" ({self.absurd} absurd left out)"
        if self.ref != 0 and math.isfinite(value - self.ref):
            text += f": {(value - self.ref) / abs(self.ref) * 100.0:+.1f}%"
        return text

    def crossed(self, value: float) -> str:
        """Which edge a value outside the band crossed, and by how much in the metric's units."""
        if self.hi is not None and value > self.hi:
            return f"beyond the band's edge {fmt(self.hi)} by {fmt(tidy(value - self.hi))}"
        assert self.lo is not None  # outside a band: above its upper edge or below its lower one
        return f"below the band's edge {fmt(self.lo)} by {fmt(tidy(self.lo - value))}"

    def span(self) -> str:
        """The band a value must stay in, in words: `the band 0.4175 to 0.6`, `the band from 0.4175 up`."""
        if self.lo is not None and self.hi is not None:
            return f"the band {fmt(self.lo)} to {fmt(self.hi)}"
        if self.lo is not None:
            return f"the band from {fmt(self.lo)} up"
        if self.hi is not None:
            return f"the band up to {fmt(self.hi)}"
        return "an open band"


def reference(values: Sequence[float], how: Reference = "mean") -> float:
    """The mean (docs/evaluate.md) or, with `policy.reference: median`, the median of the window."""
    return tidy(moments.median(values) if how == "median" else moments.mean(values))


def spread(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1), around the mean whichever reference the policy picks; infinite
    when the values lie further apart than the float range."""
    if len(values) < SIGMA_MIN_VALUES:
        return None
    return tidy(moments.stdev(values))


def _width(
    rel: float | None, floor: float | None, sigma: float | None, ref: float, sd: float | None
) -> float | None:
    if rel is None and floor is None and sigma is None:
        return None
    # max(rel*|ref|, floor, sigma*sd), an absent term 0; written out, since a backtest and a 40,000-step
    # evaluation call this for every step.
    width = rel * abs(ref) if rel is not None else 0.0
    if floor is not None and floor > width:
        width = floor
    if sigma is not None and sd is not None and sigma * sd > width:
        width = sigma * sd
    return width


def min_values(constraint: Constraint | None) -> int:
    """Values a band needs before it can gate: two when a side is written with `sigma_*` alone,
    since such a side has no width at all until the window has a spread; a budget rule's MIN_NIGHTS."""
    if constraint is None:
        return 1
    if constraint.budget is not None:
        return MIN_NIGHTS
    sigma_only = (
        constraint.sigma_up is not None and constraint.rel_up is None and constraint.abs_floor_up is None
    ) or (
        constraint.sigma_down is not None
        and constraint.rel_down is None
        and constraint.abs_floor_down is None
    )
    return SIGMA_MIN_VALUES if sigma_only else 1


def band(constraint: Constraint | None, history: Sequence[float], how: Reference = "mean") -> Band:
    """`hi = ref + max(rel_up*|ref|, abs_floor_up, sigma_up*sd)`, and `lo` likewise with the `_down` keys.

    `sd` is the sample standard deviation of the window; a sigma term needs two values.
    """
    if not history:
        return Band(None, 0, None, None)
    kept = moments.without_absurd(history)
    absurd = len(history) - len(kept)
    ref = reference(kept, how)
    if constraint is None:
        return Band(ref, len(history), None, None, absurd=absurd)
    # Only a sigma term needs the spread; a backtest builds millions of bands that have none.
    has_sigma = constraint.sigma_up is not None or constraint.sigma_down is not None
    sd = spread(kept) if has_sigma else None
    up = _width(constraint.rel_up, constraint.abs_floor_up, constraint.sigma_up, ref, sd)
    down = _width(constraint.rel_down, constraint.abs_floor_down, constraint.sigma_down, ref, sd)
    return Band(ref, len(history), _edge(ref, down, -1.0), _edge(ref, up, 1.0), _finite(sd), absurd)


def _edge(ref: float, width: float | None, sign: float) -> float | None:
    """`ref + sign * width`, rounded; None for a side with no width, or one so wide that it leaves the
    float range (nothing finite lies beyond it, so it is as open as a side with no keys)."""
    if width is None:
        return None
    return _finite(tidy(ref + sign * width))


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def limits_breach(value: float, limits: Limits | None) -> str | None:
    """Why `value` breaks the absolute limits, or None."""
    if limits is None:
        return None
    if limits.min is not None and value < limits.min:
        by = fmt(tidy(limits.min - value))
        return f"{fmt(value)} below the limit limits.min {fmt(limits.min)} by {by}"
    if limits.max is not None and value > limits.max:
        by = fmt(tidy(value - limits.max))
        return f"{fmt(value)} beyond the limit limits.max {fmt(limits.max)} by {by}"
    return None


# ------------------------------------------------------------------------------------ bands in bulk

# Powers of ten that a double holds exactly (10**22 is the largest): a 12-digit integer divided or
# multiplied by one of them is rounded once, exactly as float() rounds the decimal text `tidy` builds.
_EXACT_POWERS = 22
_EPSILON = 2.0**-52


def bulk_bands(
    constraint: Constraint | None, windows: npt.NDArray[np.float64], how: Reference = "mean"
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
    """`band()` for every row of `windows` (one step's values per row, all rows as long, at least one
    value each): ref, lo and hi as arrays, NaN for an open side; None where the arithmetic is not done in
    bulk (a median, a sigma term), so that the caller calls `band` per step.

    Kept for speed by benchmarks/bench.py (evaluate of 40 gates x 1,000 steps); held equal to `band` by
    tests/test_bulk_verdicts.py::test_bulk_bands_are_band_bit_for_bit.

    Bit for bit what `band` returns: a row whose mean or edge lies so near a 12-digit rounding boundary
    that the bulk sum's rounding could move it across, or that may hold an absurd value, is computed by
    `band` itself.
    """
    if how != "mean" or (
        constraint is not None and (constraint.sigma_up is not None or constraint.sigma_down is not None)
    ):
        return None
    n = windows.shape[1]
    with np.errstate(all="ignore"):
        mean = windows.sum(axis=1) / n
        # What the pairwise sum may be off by, against math.fsum's exactly rounded one.
        error = np.abs(windows).sum(axis=1) / n * (n + 2) * _EPSILON
        ref, close = _bulk_tidy(mean, error)
        close |= may_hold_absurd(windows)
        lo = np.full(len(ref), np.nan)
        hi = np.full(len(ref), np.nan)
        if constraint is not None:
            for edges, rel, floor, sign in (
                (hi, constraint.rel_up, constraint.abs_floor_up, 1.0),
                (lo, constraint.rel_down, constraint.abs_floor_down, -1.0),
            ):
                width = widths(rel, floor, None, ref, None)
                if width is None:
                    continue
                edge, inexact = _bulk_tidy(ref + sign * width, np.zeros_like(ref))
                edges[:] = np.where(np.isfinite(edge), edge, np.nan)
                close |= inexact
    for row in np.flatnonzero(close).tolist():
        exact = band(constraint, windows[row].tolist(), how)
        ref[row] = np.nan if exact.ref is None else exact.ref
        lo[row] = np.nan if exact.lo is None else exact.lo
        hi[row] = np.nan if exact.hi is None else exact.hi
    return ref, lo, hi


def ragged_bands(
    constraint: Constraint | None,
    windows: npt.NDArray[np.float64],
    sizes: npt.NDArray[np.int64],
    how: Reference = "mean",
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`band()` of each row's first `sizes[i]` values (none: no reference, no edges): ref, lo and hi as
    arrays, NaN for none, computed in bulk per row length and by `band` where bulk_bands does not."""
    ref, lo, hi = (np.full(len(sizes), np.nan) for _ in range(3))
    for size in sorted(set(sizes.tolist())):  # not np.unique, which imports numpy.ma
        if size == 0:
            continue
        rows = np.flatnonzero(sizes == size)
        # Every row as long (nearly always): a view, not a copy of the whole matrix.
        found = bulk_bands(
            constraint, windows[:, :size] if len(rows) == len(sizes) else windows[rows, :size], how
        )
        if found is not None:
            ref[rows], lo[rows], hi[rows] = found
            continue
        for row in rows.tolist():
            exact = band(constraint, windows[row, :size].tolist(), how)
            ref[row], lo[row], hi[row] = (np.nan if x is None else x for x in (exact.ref, exact.lo, exact.hi))
    return ref, lo, hi


def may_hold_absurd(windows: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Rows that may hold an absurd value (moments.without_absurd), for `band` to judge: those with a
    value beyond half the reach, so that numpy's rounding of the median can never hide one."""
    low, high = windows.min(axis=1), windows.max(axis=1)
    size = np.where(low > 0, low, np.where(high < 0, -high, 0.0))
    suspect: npt.NDArray[np.bool_] = ~(high - low <= moments.ABSURD_SPREADS * size)
    rows = np.flatnonzero(suspect)
    if len(rows):
        centre = np.median(windows[rows], axis=1)
        deviations = np.abs(windows[rows] - centre[:, None])
        scale = np.maximum(np.median(deviations, axis=1) * moments.MAD_TO_SD, np.abs(centre))
        # A scale of 0 (most nights at 0) holds nothing absurd.
        far = (scale > 0) & (deviations > moments.ABSURD_SPREADS / 2 * scale[:, None]).any(axis=1)
        suspect[rows] = far | ~np.isfinite(scale)
    return suspect


def widths(
    rel: float | None, floor: float | None, sigma: float | None, ref: np.ndarray, sd: np.ndarray | None
) -> np.ndarray | None:
    """`max(rel*|ref|, floor, sigma*sd)` per row, an absent term 0 (`_width` in arrays)."""
    if rel is None and floor is None and sigma is None:
        return None
    width = np.abs(ref) * rel if rel is not None else np.zeros_like(ref)
    if floor is not None:
        width = np.maximum(width, floor)
    if sigma is not None and sd is not None:
        width = np.maximum(width, sd * sigma)
    return width


def _bulk_tidy(
    x: npt.NDArray[np.float64], error: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """`tidy` of each element of x, which may be off by up to `error`; and where that is not certain, for
    the caller to redo: near a rounding boundary by more than `error`, beyond 1e12 or below 1e-11 in
    magnitude, or not finite.

    x * 10**k is computed with its exact rounding error (Dekker's product), so that a value that lies
    exactly on, or a hair beside, a decimal midpoint rounds as `tidy` rounds it: an edge 0.5 * ref of a
    12-digit ref has 13 digits ending in 5, and half of a backtest's edges are such.
    """
    magnitude = np.abs(x)
    exponent = np.floor(np.log10(np.where(magnitude > 0, magnitude, 1.0)))
    shift = np.clip((SIGNIFICANT - 1) - exponent, 0, _EXACT_POWERS)  # x * 10**shift has 12 digits
    power = 10.0**shift
    scaled = x * power
    digits = np.rint(scaled)
    # scaled + residue is x * power exactly.
    x_hi, x_lo = _split(x)
    p_hi, p_lo = _split(power)
    residue = ((x_hi * p_hi - scaled) + x_hi * p_lo + x_lo * p_hi) + x_lo * p_lo
    offset = scaled - digits  # exact: both lie within one unit of each other
    # On a midpoint as computed, the residue's sign says which side x * 10**shift lies on (none: a tie,
    # which rint breaks to even, as `tidy` does).
    tie = np.abs(offset) == 0.5
    digits = np.where(tie & (offset * residue > 0), digits + np.sign(offset), digits)
    result = digits / power
    close = ~np.isfinite(x) | (
        (magnitude > 0)
        & (
            ~np.isfinite(scaled)
            | ((SIGNIFICANT - 1) - exponent > _EXACT_POWERS)
            | ((SIGNIFICANT - 1) - exponent < 0)
            # The error of x moves it across a midpoint of the decimal grid.
            | ((error > 0) & (np.abs(np.abs(offset) - 0.5) <= error * power + np.abs(scaled) * 2 * _EPSILON))
            | (np.abs(digits) < 10.0 ** (SIGNIFICANT - 1))
            | (np.abs(digits) >= 10.0**SIGNIFICANT)
        )
    )
    return result, close


def _split(a: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Veltkamp's split of each double into two halves of 26 bits whose sum it is."""
    c = 134217729.0 * a  # 2**27 + 1
    high = c - (c - a)
    return high, a - high
