"""The mean, median and sample standard deviation of a few values, exact to the last bit where the float
range allows and finite wherever the statistic itself is: values near the float maximum (a diverged run
at 1.8e308) add up, or square, beyond it, where their mean and spread do not. There they are computed on
the values scaled by a power of two, which is exact, and scaled back."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Magnitudes beyond which a sum of a few values, or a square, may leave the float range.
LARGE = 2.0**450


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
