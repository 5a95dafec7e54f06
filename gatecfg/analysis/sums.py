"""Least squares over any segment of a series in O(1), and how far a split's place can be trusted: the
arithmetic that the regimes' searches (`changepoints`, `spread`) share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gatecfg.analysis.noise import MIN_REGIME, Array

# Bound of a 95% likelihood-ratio interval for the place of a change. Not chi-square(1)'s 3.84: a place is
# no regular parameter. Around the true place the log-likelihood ratio of the others is a two-sided random
# walk with drift, whose maximum M has P(M > x) = 1 - (1 - e^-x)^2 (Hinkley 1970, in its Brownian limit);
# 2x for a 5% tail is -2 ln(1 - sqrt(0.95)).
LOCATION_LR_95 = -2 * math.log(1 - math.sqrt(0.95))


class Sums:
    """Prefix sums that give any segment's least-squares level or line in O(1), vectorised.

    The line is on `x`, the night's index unless given (`changepoints`' staircase test uses a line
    that starts at a turn)."""

    def __init__(self, y: Array, x: Array | None = None) -> None:
        t = np.arange(y.size, dtype=np.float64) if x is None else x
        self._c = [
            np.concatenate([[0.0], np.cumsum(v)]) for v in (np.ones_like(y), t, t * t, y, y * y, t * y)
        ]

    def _moments(self, a: Any, b: Any) -> tuple[Any, ...]:
        return tuple(c[b] - c[a] for c in self._c)

    def centred(self, a: Any, b: Any) -> tuple[Any, Any, Any]:
        """Sums of squares and cross-products of `y` and `x` about the segment's means."""
        n, st, stt, sy, syy, sty = self._moments(a, b)
        return np.maximum(syy - sy * sy / n, 0.0), np.maximum(stt - st * st / n, 0.0), sty - st * sy / n

    def level_sse(self, a: Any, b: Any) -> Any:
        return self.centred(a, b)[0]

    def line(self, a: Any, b: Any) -> tuple[Any, Any]:
        """Residual sum of squares of the least-squares line, and its slope."""
        syy, sxx, sxy = self.centred(a, b)
        sxx = np.maximum(sxx, 1e-12)
        return np.maximum(syy - sxy * sxy / sxx, 0.0), sxy / sxx

    def turning(self, a: int, b: int) -> tuple[Any, Any]:
        """For each night `c` a level can turn at: the residual sum of squares of a level on `a:c` that
        turns at `c` into a line continuing from it (no jump) to `b`; and those nights."""
        turns = np.arange(a + MIN_REGIME, b - MIN_REGIME + 1)
        n, _, _, sy, syy, _ = self._moments(a, b)
        m, st, stt, sym, _, sty = self._moments(turns, b)
        # The line's regressor is u = t - (c - 1) from night c on, 0 before: 0 on the level's last night.
        at = (turns - 1).astype(np.float64)
        su = st - at * m
        suu = stt - 2 * at * st + at * at * m
        suy = sty - at * sym
        sxx = np.maximum(suu - su * su / n, 1e-12)
        sxy = suy - su * sy / n
        return np.maximum(syy - sy * sy / n - sxy * sxy / sxx, 0.0), turns
