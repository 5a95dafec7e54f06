"""Each step against its own window: the space a metric is judged in (its units, logs, Anscombe's arcsine
for a mean of Bernoulli trials), and robust locations and spreads per row (the nights in the last axis),
extreme values clipped at OUTLIER_MADS robust spreads of the median."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

Space = Literal["linear", "log", "binomial"]
FloatArray = npt.NDArray[np.float64]

OUTLIER_MADS = 5.0  # window values this far from the median are clipped before the scale is taken


MAD_TO_SD = 1.4826


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


def clip_outliers(stats: FloatArray) -> FloatArray:
    """Each row's values (the past nights in the columns) clipped to OUTLIER_MADS robust scales of the
    row's median, as a step's window values are before its scale is taken."""
    loc, mad = median_mad(stats)
    reach = np.where(mad > 0, OUTLIER_MADS * mad, np.inf)
    clipped: FloatArray = np.clip(stats, (loc - reach)[..., None], (loc + reach)[..., None])
    return clipped
