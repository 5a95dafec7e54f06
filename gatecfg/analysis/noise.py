"""The noise model of `changepoints` and its search: robust and long-run noise scales, outlier nights, and
ruptures' exact C PELT over a sum of squares.

A change of a nightly metric's level is measured against how much a regime's mean spreads, which for
real metrics is more than independent noise would say: neighbouring nights are alike (autocorrelation, a
weekly cycle, a slow trend, a random walk over a few nights). `long_run_pelt` finds the changes together
with that long-run scale; docs/analytics.md (step 2 of "How regimes are found") derives it.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gatecfg.distributions import binomial_log_tail

Array = np.ndarray[Any, np.dtype[np.float64]]

MIN_REGIME = 3


# Consistency factor of the MAD for the standard deviation of Gaussian noise (1 / Phi^-1(3/4)).
MAD_TO_SIGMA = 1.4826


# Differences below this fraction of the values' magnitude are float rounding (sqrt of machine epsilon).
NUMERIC_NOISE = float(np.sqrt(np.finfo(np.float64).eps))


# Rounds of `long_run_pelt`'s agreement between the changes found and the scale they leave; it settles
# in one or two on real series, the bound only stops a pathological series from cycling.
LONG_RUN_ROUNDS = 5


# Up to this many values, `statistics.median` (a plain sort) is quicker than a numpy partition, whose
# call costs more than the sort (most of `regimes --all`'s series are a few dozen nights).
SMALL = 32


def median(values: Array) -> float:
    """The median of a 1-D array: `np.median`'s value, by one partition, or for a few dozen values by
    `statistics.median` (`np.median` spends most of its time on checks and dispatch, and `regimes --all`
    takes a few dozen medians of each of thousands of short series)."""
    if values.size <= SMALL:
        return float(statistics.median(values.tolist()))
    n = values.size
    half = n // 2
    if n % 2:
        return float(np.partition(values, half)[half])
    low, high = np.partition(values, [half - 1, half])[half - 1 : half + 1]
    return (float(low) + float(high)) / 2


def mad(values: Array) -> float:
    """The median absolute deviation from the median."""
    return median(np.abs(values - median(values)))


def noise_scale(values: Array) -> float:
    """Robust standard deviation of the night-to-night noise (0 for a constant series)."""
    if values.size < 2:
        return 0.0
    diffs = np.diff(values)
    spread = mad(diffs)
    if spread > 0:
        return MAD_TO_SIGMA * spread / math.sqrt(2)
    # More than half the differences are equal (a metric that repeats exact values, such as a count):
    # fall back to the mean absolute deviation, which is its Gaussian-consistent cousin.
    mean_abs = float(np.mean(np.abs(diffs - median(diffs))))
    return mean_abs * math.sqrt(math.pi / 2) / math.sqrt(2)


def long_run_sd(residuals: Array) -> float:
    """Robust long-run standard deviation of `residuals` (0 when too short to tell): the Bartlett-kernel
    long-run variance at bandwidth `L = ceil(n^(1/3))`, from differences of adjacent `L`-night means.

    `L` times the variance of an `L`-night mean is `sum over |h| < L of (1 - |h|/L) gamma_h`, the
    Bartlett (Newey & West 1987) long-run variance, whose estimate is consistent when `L` grows more
    slowly than `n` (`n^(1/3)`, the rate of batch means; Carlstein 1986). The difference of two adjacent
    means cancels a level and, up to its median, a drift; its MAD ignores the few differences a change
    of level straddles. For independent noise it is the noise's standard deviation; for noise that
    wanders (autocorrelated, seasonal, a random walk over a few nights) it is larger, as the spread of a
    regime's mean is.
    """
    n = residuals.size
    bandwidth = max(2, math.ceil(n ** (1 / 3)))
    if n < 4 * bandwidth:
        return 0.0
    sums = np.concatenate([[0.0], np.cumsum(residuals)])
    means = (sums[bandwidth:] - sums[:-bandwidth]) / bandwidth
    steps = means[bandwidth:] - means[:-bandwidth]
    spread = MAD_TO_SIGMA * mad(steps)
    return spread * math.sqrt(bandwidth / 2)


def _ar1_sd(residuals: Array, short: float) -> float:
    """The long-run standard deviation of AR(1) noise whose night-to-night scale is `short`, its
    coefficient from the MADs of the residuals' lag-1 and lag-2 differences (infinite for a random
    walk or smoother).

    For AR(1) noise of variance `g0`, lag-k differences have variance `2 g0 (1 - phi^k)`, so the ratio
    of lag 2 to lag 1 is `1 + phi` (Romano et al. 2022 estimate DeCAFS' noise the same way); the MAD
    lets a few shifts and outliers by. `short^2 = g0 (1 - phi)` and the long-run variance is
    `g0 (1 + phi) / (1 - phi)`.
    """
    spread = []
    for lag in (1, 2):
        d = residuals[lag:] - residuals[:-lag]
        spread.append(mad(d) ** 2)
    if spread[0] <= 0:
        return short
    phi = max(spread[1] / spread[0] - 1, 0.0)
    return math.inf if phi >= 1 else short * math.sqrt((1 + phi) / (1 - phi))


def starting_scale(residuals: Array, short: float, ceiling: float) -> float:
    """The scale `long_run_pelt` searches at after its first look: the AR(1) noise of the `residuals`
    around the shifts it saw, between the night-to-night scale `short` and the series' long-run spread."""
    return max(short, min(ceiling, _ar1_sd(residuals, short)))


def long_run_pelt(values: Array, short: float, per_change: float) -> tuple[tuple[int, ...], float]:
    """PELT on `values` at the long-run noise scale, and that scale (never below `short`).

    Levels and noise that wanders cannot be told apart from one look: three shifts in fifty nights and
    AR(1) noise both make neighbouring nights alike. So the scale is found with the changes:
    a first search at the night-to-night scale `short` takes out every shift it can see; the AR(1) noise
    of what is left sets the scale, bounded by the long-run spread of the whole series (which shifts
    only inflate); then the search is repeated, and the scale raised to the long-run spread of the
    residuals around what it found, until they agree. Independent noise ends where it started; noise
    that wanders ends at its long-run scale, where a stretch without a change stays one regime.
    """
    centred = values - median(values)
    ceiling = max(short, long_run_sd(centred))
    starts = pelt(centred / short, per_change)
    sigma = starting_scale(level_residuals(values, starts), short, ceiling)
    if sigma > short:
        starts = pelt(centred / sigma, per_change)
    for _ in range(LONG_RUN_ROUNDS):
        wider = min(ceiling, long_run_sd(level_residuals(values, starts)))
        if wider <= sigma * 1.01:
            break
        sigma = wider
        starts = pelt(centred / sigma, per_change)
    return starts, sigma


@functools.lru_cache(maxsize=256)
def _windows(n: int, width: int) -> np.ndarray[Any, np.dtype[np.intp]]:
    """The indices of every full window of `width` nights among `n`, a row a window (what
    `sliding_window_view` gives, without its checks, which cost more than the medians on a short series)."""
    return np.arange(n - width + 1)[:, None] + np.arange(width)


# The positions of a window of `2 * MIN_REGIME - 1` nights other than its centre.
_OTHERS = np.array([i for i in range(2 * MIN_REGIME - 1) if i != MIN_REGIME - 1])


def outlier_nights(values: Array) -> tuple[np.ndarray[Any, np.dtype[np.bool_]], Array]:
    """Which nights stand out from their neighbourhood, and the neighbourhood's median to stand in.

    The neighbourhood is the `2 * MIN_REGIME - 1` nights around a night, itself included: its median is a
    normal night's value even beside two outliers in a row, and on the first night of a new level it is
    the new level (three nights of it against two), so a shift is never taken for an outlier. A night
    stands out beyond the universal threshold `s * sqrt(2 ln n)`, with `s` the robust (MAD) scale of every
    night's distance to the median of its neighbours without it: the distance an outlier has.
    """
    n = values.size
    half = MIN_REGIME - 1
    # Windows centred on each night, shrinking at the ends: the full ones at once (a plain median of an
    # array, many times faster than a NaN-padded one), the few at the ends one by one.
    windows = values[_windows(n, 2 * half + 1)]
    around = np.empty(n)
    others = np.empty(n)
    # Medians of 5 and of the 4 others by partition (what `np.median` does, without its overhead).
    around[half : n - half] = np.partition(windows, half, axis=1)[:, half]
    rest = np.partition(windows[:, _OTHERS], [half - 1, half], axis=1)
    others[half : n - half] = (rest[:, half - 1] + rest[:, half]) / 2
    for i in [*range(half), *range(n - half, n)]:
        window: list[float] = values[max(0, i - half) : i + half + 1].tolist()  # 3 or 4 nights: in Python
        around[i] = statistics.median(window)
        del window[i - max(0, i - half)]
        others[i] = statistics.median(window)
    distance = values - others
    scale = MAD_TO_SIGMA * mad(distance)
    return np.abs(values - around) > scale * math.sqrt(2 * math.log(n)), around


def pelt(standardised: Array, penalty: float) -> tuple[int, ...]:
    """Regime starts minimising squared deviations plus `penalty` per change (0 first)."""
    if standardised.size < 2 * MIN_REGIME:
        return (0,)
    path = _ekcpd_pelt_l2()(np.ascontiguousarray(standardised.reshape(-1, 1)), penalty, MIN_REGIME)
    ends: list[int] = []
    end = standardised.size
    while end > 0:
        ends.append(end)
        end = int(path[end])
    return (0, *sorted(ends)[:-1])


@functools.cache
def _ekcpd_pelt_l2() -> Callable[..., Any]:
    """ruptures' C PELT for the linear kernel (what `KernelCPD(kernel="linear").predict(pen=)` runs).

    `import ruptures` imports every detector and cost, and with them scipy.stats and scipy.spatial: 1.3 to
    1.7 s, against 0.01-0.02 s for the extension module alone, which the compiled search is; and
    tests/test_light_imports.py pins that `regimes` imports no scipy. Should a ruptures release move it,
    the public class is used instead.

    Kept for speed by benchmarks/bench.py (`gatecfg regimes` as a process); held equal to the public
    class by tests/test_regimes.py::test_the_public_ruptures_class_finds_what_the_c_search_finds.
    """
    name = "ruptures.detection._detection.ekcpd"
    package = importlib.util.find_spec("ruptures")
    if package is None or package.origin is None:
        return _public_pelt  # which says, when called, that ruptures is missing
    folder = Path(package.origin).parent / "detection" / "_detection"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"ekcpd{suffix}"
        spec = importlib.util.spec_from_file_location(
            name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path))
        )
        if spec is None or spec.loader is None or not path.is_file():
            continue
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            search: Callable[..., Any] = module.ekcpd_pelt_L2
        except (ImportError, AttributeError):
            break
        return search
    return _public_pelt


def _public_pelt(signal: Array, penalty: float, min_size: int) -> list[int]:
    import ruptures

    ends = ruptures.KernelCPD(kernel="linear", min_size=min_size, jump=1).fit(signal).predict(pen=penalty)
    path = [0] * (signal.shape[0] + 1)
    previous = 0
    for end in ends:
        path[end] = previous
        previous = end
    return path


def level_residuals(values: Array, starts: Sequence[int]) -> Array:
    out = values.copy()
    for a, b in itertools.pairwise([*starts, values.size]):
        out[a:b] -= float(np.add.reduce(values[a:b])) / (b - a)
    return out


def fit_residuals(values: Array, a: int, b: int, line: bool) -> tuple[Array, float]:
    """Residuals of the nights `a:b` around their least-squares level or line, and the line's slope."""
    y = values[a:b]
    if not line or y.size < 3:
        return y - float(np.mean(y)), 0.0
    t = np.arange(y.size, dtype=np.float64)
    slope, intercept = np.polyfit(t, y, 1)
    return y - (intercept + slope * t), float(slope)


def median_beyond(regime: Array, rest: Array, noise: float, pool: Array) -> float:
    """The evidence, in the currency of the penalty (`-2 ln` of a p-value), that the nights of `regime`
    hold a level away from `rest`'s that the noise's own tail does not explain.

    `pool` is the noise as it is, tails and skew included: every night's distance to its own regime, in
    units of its stretch's night-to-night scale, sorted. `p` is the share of it at or beyond the
    distance of `regime`'s median from `rest`'s. Were the `k` nights of `regime` noise around `rest`'s
    level, half of them or more would lie that far out with the binomial probability
    `P(Binomial(k, p) >= k/2)`, doubled for the direction read off the nights. Against Gaussian noise a
    real step pays this as it pays the Gaussian price; against a long tail on one side (a timing's slow
    nights), a few nights of the tail together do not. Where no night of the noise reaches that far, the
    noise has no tail to explain the step with (infinite evidence): the Gaussian price alone decides.
    """
    distance = (median(regime) - median(rest)) / max(noise, 1e-300)
    if distance >= 0:
        beyond = pool.size - int(np.searchsorted(pool, distance, side="left"))
    else:
        beyond = int(np.searchsorted(pool, distance, side="right"))
    if beyond == 0:
        return math.inf  # no night of the noise reaches that far: only the Gaussian price can say
    p = beyond / pool.size
    if p >= 0.5:
        return 0.0
    return -2 * (math.log(2) + binomial_log_tail(regime.size, (regime.size + 1) // 2, p))
