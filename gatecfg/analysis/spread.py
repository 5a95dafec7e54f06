"""Step 1 of the regimes' detection (docs/analytics.md): the stretches of a series that hold one noise scale,
each change of scale confirmed by a rank test and placed by its ranks."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from gatecfg.analysis.noise import MIN_REGIME, NUMERIC_NOISE, Array, long_run_pelt, median, outlier_nights
from gatecfg.analysis.sums import LOCATION_LR_95, Sums

# Long-run variance of `log((d[2k]^2 + d[2k+1]^2) / 2)` for first differences `d` of unit Gaussian noise
# (variance 1.793 plus twice the lag-1 covariance 0.181), from a 4-million-night simulation;
# `tests/test_regimes.py` recomputes it.
LOG_POWER_LRV = 2.156
# The long-run factor `1 + 2 rho` of Blom's normal scores of the pairs' mean squares at its largest over
# noise distributions: 1.228 for Gaussian noise, 1.34 for Student-t(3), 1.46 for Cauchy, and 1.543 in
# the limit of ever heavier tails, where a pair's mean square is set by the wildest of its three nights
# and neighbouring pairs share one; `tests/test_regimes.py` recomputes the limit and the others.
SCORE_LRV = 1.543


def spread_stretches(values: Array, per_night: float) -> tuple[list[int], list[tuple[int, int]]]:
    """Starts of the stretches of one noise scale, each with its likely nights (inclusive).

    The series searched is `log` of the mean square of consecutive pairs of first differences: a pair's
    mean square is a two-degree-of-freedom variance estimate, whose log has a light enough left tail
    that three calm nights in a row do not pass for a calmer regime (the log of a single squared
    difference does: one near-zero difference in 20 is far below its mean).
    """
    diffs = np.diff(values)
    if median(np.abs(diffs)) <= NUMERIC_NOISE * float(np.max(np.abs(values))):
        # Half the nights repeat the previous value (a count, a quantised metric): the log of a zero
        # difference carries no scale, and the Gaussian noise model this rests on does not hold.
        return [0], [(0, 0)]
    power = np.mean(diffs[: diffs.size // 2 * 2].reshape(-1, 2) ** 2, axis=1)
    if power.size < 2 * MIN_REGIME:
        return [0], [(0, 0)]
    logs = np.log(np.maximum(power, float(np.min(power[power > 0]))))
    outlying, neighbours = outlier_nights(logs)
    logs = np.where(outlying, neighbours, logs)
    # Neighbouring pairs share a night, so the logs are correlated at lag 1 (and only at lag 1): a
    # segment mean's variance is the long-run variance `g0 + 2 g1`, not `g0`. Both come from lag-1 and
    # lag-2 differences, which cancel the shifts being looked for: E(d2^2) = 2 g0, E(d1^2) = 2 (g0 - g1).
    # Not the MAD, whose Gaussian consistency factor does not hold for the log of a variance estimate.
    g0 = float(np.mean((logs[2:] - logs[:-2]) ** 2)) / 2
    g1 = g0 - float(np.mean(np.diff(logs) ** 2)) / 2
    # Never below its value under Gaussian noise (estimated from a few dozen pairs, it can come out low
    # by chance; heavier tails only raise it); sharing a night never makes the logs anticorrelated.
    scale = math.sqrt(max(g0 + 2 * g1, g0, LOG_POWER_LRV))
    centred = logs - float(np.add.reduce(logs)) / logs.size
    if float(np.dot(centred, centred)) <= per_night * scale**2:
        return [0], [(0, 0)]  # no change of scale could pay its price, at any scale the search would use
    found = long_run_pelt(logs, scale, per_night)[0]
    blocks = _rank_confirmed(power, list(found), per_night)
    # Pair k holds the differences into nights 2k+1 and 2k+2: a stretch of pairs from k is of nights 2k+1.
    starts = [0, *(2 * k + 1 for k in blocks[1:])]
    return _localise_spread(diffs, starts)


def _rank_confirmed(power: Array, blocks: list[int], per_night: float) -> list[int]:
    """The changes of scale among `blocks` (stretch starts, in pairs, 0 first) that a rank test
    confirms at the price PELT charged for them; the weakest is dropped first, until every one left pays.

    PELT on the logs prices a change for Gaussian noise, under which the logs have light tails; with
    heavy-tailed noise (Student-t(3) nights) a few wild pairs in a stretch pass for a noisier regime. The
    rank-transform test (Conover & Iman 1981) does not care how the noise is distributed: the pairs'
    mean squares between a change's neighbours are replaced by Blom's normal scores of their ranks, whose
    distribution is the same whatever the noise, and the two-sample statistic on them (the squared
    difference of means over its variance) must exceed `per_night`, as the log-likelihood ratio must in
    PELT. Neighbouring pairs share a night, so the variance of a mean is the within-stretch variance times
    the long-run factor `1 + 2 rho` of the scores. That factor depends on the noise's tails (the ranks do
    not), and estimated from a few dozen pairs it is too noisy to hold the test's level: it is taken at
    its largest over noise distributions, `SCORE_LRV`, so the test is as distribution-free as its ranks.
    """
    if len(blocks) < 2:
        return blocks
    blocks = list(blocks)
    while len(blocks) > 1:
        bounds = [*blocks, power.size]
        tests = []
        for left, at, right in zip(bounds, bounds[1:], bounds[2:], strict=False):
            local = _normal_scores(power[left:right])
            before, after = local[: at - left], local[at - left :]
            squares = float(np.sum((before - before.mean()) ** 2) + np.sum((after - after.mean()) ** 2))
            variance = squares / (local.size - 2) * SCORE_LRV * (1 / before.size + 1 / after.size)
            tests.append(float(after.mean() - before.mean()) ** 2 / max(variance, 1e-12))
        weakest = int(np.argmin(tests))
        if tests[weakest] > per_night:
            break
        del blocks[weakest + 1]
    return blocks


def _ranks(values: Array) -> Array:
    """Ranks from 1, tied values sharing their mean rank."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.asarray(below + (counts + 1) / 2, dtype=np.float64)[inverse]


def _normal_scores(values: Array) -> Array:
    """Blom's normal scores: `Phi^-1((rank - 3/8) / (n + 1/4))`, tied values sharing their mean rank."""
    quantile = NormalDist().inv_cdf
    fractions = (_ranks(values) - 0.375) / (values.size + 0.25)
    return np.fromiter((quantile(q) for q in fractions), np.float64, values.size)


def _localise_spread(diffs: Array, starts: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
    """Each change of scale at the night that best splits the ranks between its neighbours, with the
    likely nights around it.

    What is ranked is the sum of squares of every two consecutive differences (a local two-degree-of-
    freedom variance estimate over three nights; overlapping, so every night is a candidate), and the
    split is the least-squares one on their ranks within the neighbours: a two-sample rank statistic
    maximised over the split, as Pettitt (1979) locates a change. Ranks do not let a heavy-tailed night
    drag the split the way it drags a variance or even a log; the pair halves the weight of a single
    near-zero difference. The likely nights are the splits within `LOCATION_LR_95` of the best in units
    of the ranks' long-run variance (pairs three or more apart share no night: lags 1 and 2 count).
    """
    power = diffs[:-1] ** 2 + diffs[1:] ** 2  # pair j: differences j and j+1, over nights j..j+2
    n = diffs.size + 1
    intervals = [(0, 0)] * len(starts)
    for i in range(1, len(starts)):
        left, right = starts[i - 1], starts[i + 1] if i + 1 < len(starts) else n
        splits = np.arange(left + MIN_REGIME, right - MIN_REGIME + 1)
        if splits.size == 0:
            intervals[i] = (starts[i], starts[i])
            continue
        ranks = _ranks(power[left : right - 2])  # the pairs wholly within the nights left..right-1
        # g0 + 2 g1 + 2 g2 from differences at lags 1-3, which a change moves only a few times:
        # E((x[t+k] - x[t])^2) = 2 (g0 - gk), and g3 = 0.
        semi = [float(np.mean((ranks[k:] - ranks[:-k]) ** 2)) / 2 for k in (1, 2, 3)]
        long_run = max(5 * semi[2] - 2 * semi[0] - 2 * semi[1], semi[2])
        if long_run <= 0:  # every pair alike: nothing tells one night from another
            intervals[i] = (starts[i], starts[i])
            continue
        sums = Sums(ranks / math.sqrt(long_run))
        # Night p starts the new scale: pairs over nights up to p-1 (j < p-2) before, from p (j >= p) after.
        total = sums.level_sse(0, splits - 2 - left) + sums.level_sse(splits - left, ranks.size)
        k = int(np.argmin(total))
        starts[i] = int(splits[k])
        likely = splits[total - total[k] <= LOCATION_LR_95]
        intervals[i] = (int(likely.min()), int(likely.max()))
    return starts, intervals
