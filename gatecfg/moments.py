"""The mean, median and sample standard deviation of a few values, exact to the last bit where the float
range allows and finite wherever the statistic itself is: values near the float maximum (a diverged run
at 1.8e308) add up, or square, beyond it, where their mean and spread do not. There they are computed on
the values scaled by a power of two, which is exact, and scaled back. And which values of a window are
absurd: a broken logger's night at 1e300 among nights near 1 (`without_absurd`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Magnitudes beyond which a sum of a few values, or a square, may leave the float range.
LARGE = 2.0**450
# A value further than this many robust spreads from its window's median is absurd: no metric's own
# tails reach it (real histories show 5-10), a broken logger or a unit change does.
ABSURD_SPREADS = 50.0
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation per median absolute deviation


def mean(values: Sequence[float]) -> float:
    """The exactly rounded mean (math.fsum); the mean of identical values is that value."""
    if min(values) == max(values):
        return values[0]  # not n * v / n, rounded twice
    exponent = _exponent(values)
    if exponent is None:
        return math.fsum(values) / len(values)
    return math.ldexp(math.fsum(math.ldexp(v, -exponent) for v in values) / len(values), exponent)


def median(values: Sequence[float]) -> float:
    middle = statistics.median(values)
    if math.isinf(middle) and all(math.isfinite(v) for v in values):
        # The two middle values add up beyond the float range; their mean does not.
        ordered = sorted(values)
        middle = ordered[len(values) // 2 - 1] / 2 + ordered[len(values) // 2] / 2
    return middle


def stdev(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1) of two values or more; infinite only when it lies beyond
    the float range."""
    exponent = _exponent(values)
    if exponent is None:
        return _stdev(values)
    small = _stdev([math.ldexp(v, -exponent) for v in values])
    return math.ldexp(small, exponent) if math.frexp(small)[1] + exponent <= 1024 else math.inf


def _stdev(values: Sequence[float]) -> float:
    centre = mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


def _exponent(values: Sequence[float]) -> int | None:
    """The binary exponent of the largest magnitude when it is beyond LARGE (and finite), else None."""
    top = max(abs(v) for v in values)
    return math.frexp(top)[1] if LARGE < top < math.inf else None


def without_absurd(values: Sequence[float]) -> Sequence[float]:
    """The values without the absurd ones: those further from the median than ABSURD_SPREADS times the
    larger of the values' robust spread (the median absolute deviation, as a standard deviation) and the
    median's own size, so that a window holding still (half its nights alike) still has a scale. When
    both are 0 (most nights at 0) nothing is absurd: against 0, 5 and 1e300 are alike. The same sequence
    when no value is absurd."""
    low, high = min(values), max(values)
    # Every value lies within high - low of the median, and the median within [low, high]: a window whose
    # range is within ABSURD_SPREADS of its smallest magnitude (nearly every window) has no absurd value.
    size = low if low > 0 else -high if high < 0 else 0.0
    if high - low <= ABSURD_SPREADS * size:
        return values
    centre = median(values)
    deviations = [abs(v - centre) for v in values]
    reach = ABSURD_SPREADS * max(statistics.median(deviations) * MAD_TO_SD, abs(centre))
    if reach == 0:
        return values
    kept = [v for v, d in zip(values, deviations, strict=True) if d <= reach]
    return values if len(kept) == len(values) else kept
