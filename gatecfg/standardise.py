"""Each step against its own window: the space a metric is judged in (its units, logs, Anscombe's arcsine
for a mean of Bernoulli trials), and robust locations and spreads per row (the nights in the last axis),
extreme values clipped at OUTLIER_MADS robust spreads of the median."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from gatecfg.moments import MAD_TO_SD

Space = Literal["linear", "log", "binomial"]
FloatArray = npt.NDArray[np.float64]

OUTLIER_MADS = 5.0  # window values this far from the median are clipped before the scale is taken


LOO_CHUNK = 1 << 21  # values of the clipped leave-one-out array held at once (16 MB)


def transform(values: FloatArray, space: Space, trials: int | None) -> FloatArray:
    """Into the space where a metric's noise is near symmetric: log for a positive metric (norms, KLs,
    lognormal noise), Anscombe's arcsine for a mean of `trials` Bernoulli draws (whose spread is then
    1 / (2 sqrt(trials)) whatever p), as is for the rest."""
    if space == "log":
        with np.errstate(divide="ignore"):  # tonight at 0 (or below) among positive nights: -inf
            return np.log(np.maximum(values, 0.0))
    if space == "binomial":
        assert trials is not None
        share = np.clip(values, 0.0, 1.0)
        return np.arcsin(np.sqrt((share * trials + 0.375) / (trials + 0.75)))
    return values


def space_of(history: FloatArray) -> Space:
    """Log space for a positive metric whose window is more symmetric there (norms, KLs: right-skewed),
    else the metric's own units (a bounded reward near 0.5 is symmetric as it is, and skewed in logs)."""
    if not (history > 0).all():
        return "linear"
    return "log" if abs(skew(np.log(history))) < abs(skew(history)) else "linear"


def skew(history: FloatArray) -> float:
    """The pooled skewness of the steps' standardised values (each clipped to +-OUTLIER_MADS, so that one
    spike does not decide it)."""
    loc, scale = location_scale(history, 0.0)
    z = np.clip((history - loc[:, None]) / scale[:, None], -OUTLIER_MADS, OUTLIER_MADS)
    return float(np.mean(z**3))


def binomial_scale(trials: int) -> float:
    return 0.5 / math.sqrt(trials + 0.5)


def location_scale(history: FloatArray, floor: float) -> tuple[FloatArray, FloatArray]:
    """Per row (the last axis holds the nights): the median, and `location_spread`'s standard deviation
    never below `floor` (the binomial spread), never zero."""
    loc, spread = location_spread(history)
    return loc, floored(loc, spread, floor)


def leave_one_out(history: FloatArray, floor: float) -> tuple[FloatArray, FloatArray]:
    """Per row (steps x nights) and night j: `location_scale` of the row without night j, each m x n.

    The same numbers as `location_scale(history[:, others], floor)`, the others of each night gathered
    (m x n x n - 1, medians by partition: 170 ms a window at 1,000 steps and 60 nights), computed from
    each row sorted once: without one value, the median of the rest is one of two or three neighbours
    of the middle of the sorted row, chosen by the left-out value's rank; so is the median of the
    deviations from each of those centres. Only the clipped spread sums over every night for each j."""
    m, n = history.shape
    order = np.argsort(history, axis=1)
    rank = _ranks(order)
    ranked = np.take_along_axis(history, order, axis=1)
    # The medians a row takes without one night, and which one each night's leaving out gives.
    centres, which = _centres(ranked, rank)
    loc = np.take_along_axis(np.stack(centres, axis=1), which, axis=1)
    mad = np.zeros((m, n))
    for k, centre in enumerate(centres):
        deviations = np.abs(history - centre[:, None])
        by_size = np.argsort(deviations, axis=1)
        median = _median_without(np.take_along_axis(deviations, by_size, axis=1), _ranks(by_size))
        mad = np.where(which == k, median, mad)
    reach = np.where(mad > 0, OUTLIER_MADS * mad * MAD_TO_SD, np.inf)
    spread = np.empty((m, n))
    # In chunks of rows: the clipped nights are rows x n x n (10,000 steps at 60 nights would be 288 MB).
    rows = max(1, LOO_CHUNK // (n * n))
    for first in range(0, m, rows):
        part = slice(first, first + rows)
        spread[part] = _spread_without(history[part], loc[part], reach[part])
    return loc, floored(loc, spread, floor)


def _spread_without(history: FloatArray, loc: FloatArray, reach: FloatArray) -> FloatArray:
    """Per row and night j: the standard deviation of the other nights, each clipped to night j's reach
    of its centre `loc[:, j]`."""
    n = history.shape[1]
    # clipped[i, j, k]: night k of row i clipped to night j's reach; night j itself is taken out after.
    clipped = (
        np.clip(history[:, None, :], (loc - reach)[..., None], (loc + reach)[..., None]) - loc[..., None]
    )
    own = np.diagonal(clipped, axis1=1, axis2=2)
    mean = (clipped.sum(axis=-1) - own) / (n - 1)
    squares = ((clipped - mean[..., None]) ** 2).sum(axis=-1) - (own - mean) ** 2
    spread: FloatArray = np.sqrt(np.maximum(squares, 0.0) / (n - 2))
    return spread


def _ranks(order: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Each value's position in its row's sorted order, from the argsort `order`."""
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(order.shape[1])[None, :], axis=1)
    return rank


def _median_without(ranked: FloatArray, rank: npt.NDArray[np.intp]) -> FloatArray:
    """Per row of `ranked` (sorted) and column j: the median of the row without its value of rank
    rank[:, j]. The i-th of the rest is ranked[i] below the left-out rank, ranked[i + 1] from it on."""
    rest = ranked.shape[1] - 1

    def kth(i: int) -> FloatArray:
        return np.where(i < rank, ranked[:, [i]], ranked[:, [i + 1]])

    if rest % 2:
        return kth(rest // 2)
    median: FloatArray = (kth(rest // 2 - 1) + kth(rest // 2)) / 2.0
    return median


def _centres(ranked: FloatArray, rank: npt.NDArray[np.intp]) -> tuple[list[FloatArray], npt.NDArray[np.intp]]:
    """The medians a row takes without one of its values (two when the rest are odd in number, three when
    even), and for each value left out the index of the one it gives (see `_median_without`)."""
    rest = ranked.shape[1] - 1
    k = rest // 2
    if rest % 2:
        return [ranked[:, k], ranked[:, k + 1]], np.where(k < rank, 0, 1)
    centres = [
        (ranked[:, k - 1] + ranked[:, k]) / 2.0,
        (ranked[:, k - 1] + ranked[:, k + 1]) / 2.0,
        (ranked[:, k] + ranked[:, k + 1]) / 2.0,
    ]
    return centres, np.where(k < rank, 0, np.where(k == rank, 1, 2))


def location_spread(history: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per row (the last axis holds the nights): the median, and a standard deviation with values beyond
    OUTLIER_MADS robust scales clipped."""
    loc, mad = median_mad(history)
    reach = np.where(mad > 0, OUTLIER_MADS * mad, np.inf)
    clipped = np.clip(history, (loc - reach)[..., None], (loc + reach)[..., None])
    spread: FloatArray = clipped.std(axis=-1, ddof=1)
    return loc, spread


def median_mad(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per row (the last axis holds the nights): the median, and the median absolute deviation as a
    normal standard deviation."""
    loc = np.median(values, axis=-1)
    return loc, np.median(np.abs(values - loc[..., None]), axis=-1) * MAD_TO_SD


def floored(loc: FloatArray, spread: FloatArray, floor: float) -> FloatArray:
    """A spread as a scale: never below `floor`, and for a constant step not zero but a size relative to
    its value (any change is a change, not a division by 0)."""
    scale: FloatArray = np.maximum(np.maximum(spread, floor), np.maximum(np.abs(loc) * 1e-9, 1e-300))
    return scale


def clip_outliers(stats: FloatArray, mads: float = OUTLIER_MADS) -> FloatArray:
    """Each row's values (the past nights in the columns) clipped to `mads` robust scales of the row's
    median, as a step's window values are before its scale is taken."""
    loc, mad = median_mad(stats)
    reach = np.where(mad > 0, mads * mad, np.inf)
    clipped: FloatArray = np.clip(stats, (loc - reach)[..., None], (loc + reach)[..., None])
    return clipped
