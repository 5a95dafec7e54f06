"""The few quantiles the budget rule needs, without scipy: Student t (exact, by bisection of its closed-form
CDF), chi-square (Wilson-Hilferty) and the normal; and the binomial tail that says whether a gate's own
record breaks its promise. scipy would cost every evaluate a second of imports and the core install over
100 MB for them; tests/test_budget.py checks the quantiles against scipy, tests/test_regimes.py the tail
against the exact sum."""

from __future__ import annotations

import math
from functools import cache
from statistics import NormalDist


def chi2_upper(df: int, level: float) -> float:
    """Chi-square's upper `level` point with `df` degrees of freedom, by Wilson and Hilferty's (1931) cube
    root normal approximation: within 0.5% of the exact value from 4 degrees of freedom, within 3% at 1
    (scipy.stats would cost a command a second of imports for it)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + NORMAL.inv_cdf(1.0 - level) * math.sqrt(c)) ** 3


@cache
def chi_upper(df: int, level: float) -> float:
    """sqrt(chi2 / df) at its upper `level` point: a spread with df degrees of freedom exceeds the true
    one by this factor with probability `level`."""
    return math.sqrt(chi2_upper(df, level) / df)


@cache
def t_quantile(upper: float, df: int) -> float:
    """The Student t value a draw with `df` degrees of freedom exceeds with probability `upper`.

    Exact for the integer degrees of freedom this rule uses: the closed-form CDF inverted by bisection.
    It keeps scipy (over 100 MB) out of the core install, where every budget gate needs this one number;
    tests/test_budget.py checks it against `scipy.special.stdtrit`.
    """
    if upper >= 0.5:
        return -t_quantile(1.0 - upper, df) if upper > 0.5 else 0.0
    lo, hi = 0.0, 1.0
    while t_upper_tail(hi, df) > upper:
        lo, hi = hi, hi * 2.0
    for _ in range(200):  # the interval halves each time: far below a float's resolution at the end
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_upper_tail(mid, df) > upper:
            lo = mid
        else:
            hi = mid
    return hi


def t_upper_tail(t: float, df: int) -> float:
    """P(T > t) for t >= 0 and a Student T with integer `df` (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for k in range(2, df, 2):  # 1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ... up to cos^(df-2)
            term *= cos2 * (k - 1) / k
            total += term
        within = sin * total
    else:
        term = total = 0.0
        if df > 1:
            term = total = math.cos(theta)
            for k in range(3, df - 1, 2):  # cos + 2/3 cos^3 + 2*4/(3*5) cos^5 + ... up to cos^(df-2)
                term *= cos2 * (k - 1) / k
                total += term
        within = 2.0 / math.pi * (theta + sin * total)
    return (1.0 - within) / 2.0  # `within` is P(|T| <= t)


NORMAL = NormalDist()


def binomial_log_tail(k: int, at_least: int, p: float) -> float:
    """`ln P(X >= at_least)` for `X ~ Binomial(k, p)`, with `at_least` above the mean `k p` (the terms
    then fall from the first on: with `p < 1/2` and `at_least >= k/2` each is at most `p / (1 - p)` times
    the one before), so the sum stops once they are below double precision beside the first."""
    log_p, log_q = math.log(p), math.log1p(-p)
    whole = math.lgamma(k + 1)
    terms: list[float] = []
    for i in range(at_least, k + 1):
        terms.append(whole - math.lgamma(i + 1) - math.lgamma(k - i + 1) + i * log_p + (k - i) * log_q)
        if terms[-1] < terms[0] - 40:  # e^-40: below double precision beside the first
            break
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


# How unlikely a gate's record must be under its promise before a report says it breaks it.
BREAKS_PROMISE_ALPHA = 0.01


def breaks_promise(failures: int, nights: int, promise: float) -> bool:
    """Whether `failures` of `nights` is more than twice the share `promise` allows, and more than chance
    would give (one-sided binomial at BREAKS_PROMISE_ALPHA)."""
    if nights <= 0 or failures <= 2 * promise * nights:
        return False
    return binomial_log_tail(nights, failures, promise) < math.log(BREAKS_PROMISE_ALPHA)
