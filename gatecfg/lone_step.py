"""The lone step of the budget rule (`kind` "step", gatecfg/budget.py): how far one step must go on its
own, unclipped in the harmful direction, to fail. A step fails that is an explosion, at least STEP_FLOOR of
its scales out or, for a positive metric judged in logs, STEP_RATIO times its median, and beyond what the
window's own nights did (docs/calibration.md, "A step that explodes")."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gatecfg import distributions, standardise
from gatecfg.standardise import Space

FloatArray = npt.NDArray[np.float64]

# An explosion: STEP_FLOOR of its scales out or, in logs, STEP_RATIO times its median; and beyond the
# largest step any past night showed times the margin a tail fitted to the nights' largest steps gives
# (at least 1, at most STEP_MARGIN_MAX, so that a step far beyond every spike the metric has shown fails
# whatever its tail). The floors are what a window that has not shown this metric's spikes yet cannot
# tell: a gradient norm that spikes 3-10x on 0.5% of its steps goes 20 nights without a spike about once
# in seven windows at 20 steps.
STEP_FLOOR = 20.0
STEP_RATIO = 20.0
STEP_MARGIN_MAX = 3.0
# Steps whose scales differ no more than sampling does (at this upper point) share one pooled scale for
# the lone step's noise quantile, of at most POOLED_DF_MAX degrees of freedom (`lone_limits`).
SCALES_ALIKE = 0.01
POOLED_DF_MAX = 200


def lone_limits(
    excess: FloatArray, loo_scale: FloatArray, scale: FloatArray, space: Space, level: float
) -> FloatArray:
    """How far each step must go on its own to fail, in its scales (harmful direction up), at `level` per
    step, given the past nights' `excess` (steps x nights: each value less its median over the other
    nights, in the space the steps are judged in, harmful direction up) and their scales (`loo_scale`,
    steps x nights, over the other nights; `scale` over all of them). Beyond three things:

    * the step's noise: its Student t quantile at `level` (sqrt(1 + pi / 2n) for the median it is measured
      from). Where the steps' scales are alike (`alike`), the scale pooled over the steps is what each
      step's noise is: the quantile then has the degrees of freedom of every step's nights (at most
      POOLED_DF_MAX), where 19 nights' t quantile at a millionth is 70% wider than the normal's;
    * the largest step any past night showed: night to night the largest steps are exchangeable, so
      tonight's passes theirs with probability 1 / (n + 1) whatever the noise, and a spike like those the
      metric has shown does not fail. In logs a spike is a ratio, whatever the step's noise: the largest
      is measured as one (a 10x spike on a step whose 20 nights happen to look quiet is no larger than
      on any other step); in the metric's own units, in each step's scales;
    * an explosion: STEP_FLOOR scales at least, and the largest past step times a margin: a Frechet tail
      of index `a` fitted to the nights' largest steps (the tail index is pi / (sqrt(6) sd) of their
      logs) gives P(tonight's > c times the largest of n) = 1 / (1 + n c^a), and c follows for the lone
      step's share (level x steps), within [1, STEP_MARGIN_MAX]. For a metric judged in logs, STEP_RATIO
      times its median is an explosion too, whichever is nearer. A night whose largest step is an
      outlier among the nights' (5 robust scales of their logs) counts at that bound: one absurd night
      must not lift the limits out of reach."""
    m, nights = excess.shape
    pooled = alike(scale, nights)
    df = min(POOLED_DF_MAX, m * (nights - 1)) if pooled else nights - 1
    noise = np.full(m, distributions.t_quantile(level, df) * math.sqrt(1.0 + math.pi / (2.0 * nights)))
    if pooled:
        noise *= math.sqrt(float(np.mean(scale**2))) / scale
    # In logs a step's excess is its log ratio to its median; elsewhere its distance in its scales.
    unit = np.ones((m, 1)) if space == "log" else loo_scale
    per_night = (excess / unit).max(axis=0)
    logs = standardise.clip_outliers(np.log(np.maximum(per_night, 1e-300))[None, :])[0]
    spread = float(logs.std(ddof=1))
    margin = 1.0
    if spread > 0:
        tail = math.pi / (math.sqrt(6.0) * spread)
        # In logs: a window of nights that repeat one curve has a tail index in the millions, and the
        # power itself overflows.
        power = math.log(max((1.0 / (level * m) - 1.0) / nights, 1.0)) / tail
        margin = math.exp(min(power, math.log(STEP_MARGIN_MAX)))
    largest = math.exp(float(logs.max())) / (scale if space == "log" else np.ones(m))
    explosion = np.maximum(STEP_FLOOR, margin * largest)
    if space == "log":
        explosion = np.minimum(explosion, math.log(STEP_RATIO) / scale)
    limits: FloatArray = np.maximum(np.maximum(explosion, largest), noise)
    return limits


def alike(scale: FloatArray, nights: int) -> bool:
    """Whether the steps' scales differ no more than `nights` nights' sampling alone makes them differ:
    the variance of their logs within chance (its upper SCALES_ALIKE point) of what Gaussian noise of one
    spread gives, trigamma((n - 1) / 2) / 4 (two terms of its series)."""
    m = len(scale)
    if m < 2 or not (scale > 0).all():
        return False
    half = (nights - 1) / 2.0
    expected = (1.0 / half + 1.0 / (2.0 * half * half)) / 4.0
    observed = float(np.var(np.log(scale), ddof=1))
    return observed <= expected * distributions.chi2_upper(m - 1, SCALES_ALIKE) / (m - 1)
