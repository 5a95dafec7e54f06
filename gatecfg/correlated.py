"""Statistics of steps whose noise is correlated from one step to the next (AR(1)-like, rho the pooled
lag-1 correlation): the whitened jumps, a shifted block's edges, the trend along the run and its pooled
spread. Pure functions of arrays, steps in the rows and nights in the columns (gatecfg/budget.py uses them
when rho >= EDGES_RHO)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gatecfg.distributions import NORMAL, t_upper_tail

FloatArray = npt.NDArray[np.float64]

JUMP_CLIP = 2.0  # a whitened jump counts at most this much in the trend (a clean one passes 2 once in 44)


# The trend's spread pools its jumps over steps and nights (`trend_spread`): its degrees of freedom are
# capped here, where the t quantile is within 1.5% of the normal one at the trend's share (conservative,
# and the exact quantile costs time in proportion to them).
TREND_DF_MAX = 200


RHO_MAX = 0.95  # whitening by a nearer-1 estimate would divide by almost nothing


def neighbour_correlation(z: FloatArray) -> float:
    """The correlation of neighbouring steps, pooled over the steps and nights of `z` (standardised
    steps x nights), within [0, RHO_MAX]; 0 for fewer than 3 steps."""
    if z.shape[0] < 3:
        return 0.0
    before, after = z[:-1], z[1:]
    norm = math.sqrt(float(np.sum(before * before)) * float(np.sum(after * after)))
    return min(max(float(np.sum(before * after)) / norm, 0.0), RHO_MAX) if norm > 0 else 0.0


def edges_score(
    z: FloatArray, rho: float, df: int
) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per column of `z` (steps x nights, m >= 3): the normal score of the strongest block's edges, and
    that block's first and last step.

    Whitened, the steps' jumps `e` are nearly independent unit normals on a clean night; a block a..b
    shifted up jumps up at a and down at b + 1. The statistic is the largest min(e_a, -e_j) over
    a <= j - 2 (a block of two or more steps: a spike's own up and down jumps are neighbours). For
    independent jumps it exceeds t with probability 1 - (1 - p)^(m-2) (1 + (m-2) p), p = P(e > t)
    (a three-state chain: no up jump yet, one just now, one two or more steps back), which maps it to a
    normal score; p is a Student t tail with `df` degrees of freedom, the steps' scales being estimated
    from that many nights. The past nights then measure how far the real noise departs from that."""
    m = z.shape[0]
    jumps = whiten(z, rho)
    rises = np.maximum.accumulate(jumps, axis=0)  # the largest up jump at or before each step
    pairs = np.minimum(rises[:-2], -jumps[2:])  # row i: the largest up jump by step i, down at i + 2
    row = np.argmax(pairs, axis=0)
    columns = np.arange(z.shape[1])
    best = pairs[row, columns]
    first = np.array([int(np.argmax(jumps[: r + 1, c])) for c, r in enumerate(row)], np.int64)
    p = np.array([t_upper_tail(float(t), df) if t >= 0 else 1.0 - t_upper_tail(-float(t), df) for t in best])
    k = m - 2
    with np.errstate(divide="ignore"):
        tail = -np.expm1(k * np.log1p(-p) + np.log1p(k * p))
    tail = np.clip(tail, 1e-300, 1.0 - 1e-16)
    score = np.array([-NORMAL.inv_cdf(float(q)) for q in tail])
    return score, first, (row + 1).astype(np.int64)


def whiten(z: FloatArray, rho: float) -> FloatArray:
    """The steps' jumps (rows of `z`, nights in the columns) under AR(1) noise of correlation rho: the
    first step as it is, then `(z_i - rho z_{i-1}) / sqrt(1 - rho^2)`, unit normal and independent on a
    clean night of that noise."""
    jumps = z.copy()
    jumps[1:] = (z[1:] - rho * z[:-1]) / math.sqrt(1.0 - rho * rho)
    return jumps


def trend(z: FloatArray, rho: float) -> FloatArray:
    """Per column of `z` (steps x nights, m >= 3): the drift along the run, the whitened steps' jumps
    (each clipped to +-JUMP_CLIP) projected on the whitened ramp from 0 at the first step to 1 at the
    last, scaled to unit norm (a clean night's trend is then about a unit normal).

    Under AR(1) noise that projection is the best linear test of a ramp (generalised least squares),
    and it weighs the last step most: a drift has reached its largest there, and the jump into the last
    step is the news. Clipping the jumps bounds what one spiking step can add, even the last one, whose
    jump back is never seen."""
    return np.asarray(unit_ramp(len(z), rho) @ np.clip(whiten(z, rho), -JUMP_CLIP, JUMP_CLIP), np.float64)


def unit_ramp(m: int, rho: float) -> FloatArray:
    """The trend's weights on the whitened jumps: the whitened ramp from 0 at the first of m steps to 1 at
    the last, scaled to unit norm."""
    ramp = whiten(np.linspace(0.0, 1.0, m)[:, None], rho)[:, 0]
    return ramp / float(np.linalg.norm(ramp))


def trend_spread(z: FloatArray, rho: float) -> tuple[float, int]:
    """The clean spread of `trend` on the nights of `z` (steps x nights), and its degrees of freedom.

    The trend is a weighted sum of the clipped whitened jumps, so its variance is a weighted sum of the
    jumps' autocovariances at every lag. Those are pooled over every step and night (the jumps are taken
    as stationary along the run: the steps' own scales already absorb a spread that varies), so the
    spread rests on the steps x nights jumps, not on the n nights' trend scores alone. Every lag counts,
    unweighted: a shift shared by a night's steps (jumps correlated at any distance) is in the spread,
    not assumed away.

    Degrees of freedom: the jumps' count less their steps' means, at most TREND_DF_MAX. That is
    generous (the long lags rest on few pairs; Satterthwaite's count from the nights' scatter is 20-130
    at 20-1,000 steps): alone, the trend fails about a quarter more clean AR(1) nights than its share
    (0.26% of 20,000 at 20 steps for a share of 0.21%; 0.12% with the past scores' spread and t quantile),
    within what the mean and the blocks leave of theirs (they spend about half: leave-one-out spreads
    are conservative), so the whole gate stays within budget (0.67% of those nights; docs/calibration.md)."""
    m, n = z.shape
    ramp = unit_ramp(m, rho)
    jumps = np.clip(whiten(z, rho), -JUMP_CLIP, JUMP_CLIP)
    centred = jumps - jumps.mean(axis=1, keepdims=True)
    size = 1 << (2 * m - 1).bit_length()  # zero-padded: a circular product would wrap lags around
    spectrum = np.fft.rfft(centred, size, axis=0)
    lagged = np.fft.irfft(spectrum * spectrum.conj(), size, axis=0)[:m]  # lag x night: sum_i d_i d_i+k
    pairs = np.correlate(ramp, ramp, "full")[m - 1 :]  # sum_i r_i r_i+k
    weights = pairs * np.where(np.arange(m) > 0, 2.0, 1.0) / (m - np.arange(m))
    # Over the nights, n / (n - 1): every step's jumps are centred on their mean over those nights.
    variance = float((weights @ lagged).mean()) * n / (n - 1)
    return math.sqrt(max(variance, 0.0)), min(m * (n - 1), TREND_DF_MAX)
