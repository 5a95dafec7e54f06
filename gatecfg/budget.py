"""The false-alarm budget rule (`constraint: {budget: up|down|both}`): a gate fails a clean night with
probability at most `false_alarm`, however many steps it judges and however they are correlated.

One entry point, `decide`. The method (docs/calibration.md, "The budget rule"):

1. Standardise every step by its own window: `z = (value - median) / scale`, the scale a standard
   deviation of the window with values beyond 5 MADs clipped (a spike in the window does not widen it).
   The space: Anscombe's arcsine for a mean of `trials` Bernoulli draws (the binomial spread a floor),
   log for a positive metric whose window is more symmetric there, else the metric's own units. With
   more than one step each z is clipped to +-CLIP_Z.
2. Combine the steps, in each harmful direction, into a few statistics of the night: the mean z over all
   steps (a sustained shift), and scans for a shift confined to part of the run that one spiking step
   cannot imitate, which depend on how strongly neighbouring steps move together (`rho`, the pooled
   lag-1 correlation of the window's standardised steps):
   * always, the mean z over each contiguous block of 10% of the steps at half-block strides, without
     the block's largest z (a block of two, which would keep only its smaller step, counts its larger one
     up to CAP_Z above the smaller: a spike is capped, two shifted steps keep nearly all of their signal);
     with `trials` (a mean of Bernoulli draws: binomial noise, no heavy tail to guard against) the
     block's plain mean;
   * when `rho >= EDGES_RHO` (AR-like noise, where a block's mean is barely quieter than one step and
     the run holds few independent values), also two statistics of the whitened steps
     (`e_i = (z_i - rho z_{i-1}) / sqrt(1 - rho^2)`, nearly independent step to step):
     - the block's edges: a shift over steps a..b is a jump up at a and down at b + 1 standing far out of
       the noise, whatever the block's width. The statistic is the largest
       `min(up jump at a, down jump at j)` over a <= j - 2: a block of at least two steps, so a single
       spike (up at t, down at t + 1) does not count. It enters as a normal score, its tail being known
       exactly for independent jumps;
     - a trend: the whitened steps' projection on a whitened ramp (0 at the first step, 1 at the last),
       each jump clipped to +-JUMP_CLIP, so that a spike, even on the last step where no jump back
       follows it, moves the trend by at most JUMP_CLIP of its weights. Under AR noise a drift's signal
       sits mostly in the run's last steps; the ramp collects all of it.
3. Take each statistic's null distribution from the window's own nights, leave-one-out: every past night
   is standardised by the other nights exactly as tonight is by all of them. Correlation between steps
   (a shift shared by a night, AR(1) noise) is thereby in the spread, measured, not assumed away.
4. A statistic fails when it exceeds its past nights' mean by a Student t quantile times their spread
   (times sqrt(1 + 1/n): a new night, not a mean), the quantile at `false_alarm` split Bonferroni-style
   over the directions, ALL_SHARE to the mean over all steps and the rest evenly over the scans; under
   AR-like noise CORRELATED_SHARES: half to the mean, the rest evenly to the blocks, the trend and the
   edges (few independent values: the mean carries most of what the run says, and a block needs little
   budget to show its edges). The trend's spread is pooled from its jumps' autocovariance
   (`correlated.trend_spread`). The blocks' share is divided by the number of independent tests they are
   worth (Li and Ji's eigenvalue count on their correlation across the past nights), and they share one
   pooled spread; blocks of two take the quantile of the spike mixture the window shows
   (`_spiked_quantile`). A gate of one value judged on a stretch of its history longer than the window
   is held to the tail that stretch has shown instead (gatecfg/tail.py).
5. Where the steps' noise has a model (`trials`: independent binomial steps; rho >= EDGES_RHO: AR(1)),
   the split is scaled up, every share alike, until the statistics' joint null under that model spends
   the whole budget (`_joint_scale`, cached per shape). With `trials`, where the window agrees with
   binomial noise, the spread binomial noise gives a statistic is used with the normal quantile
   (`_binomial_spreads`) instead of the measured one with the t quantile.

A night fails when any statistic does. The steps reported failing are those that moved
(`Null._attributed`): a step that exploded on its own, and among the steps of the fired statistics (every
block that fired, the edges' block; all steps when only the mean or the trend did) those beyond their own
noise; the statistic described is the one that went furthest toward its threshold.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
import numpy.typing as npt

from gatecfg import correlated, distributions, moments, standardise, tail
from gatecfg.lone_step import POOLED_DF_MAX, lone_limits
from gatecfg.models import MinChange
from gatecfg.standardise import Space

Direction = Literal["up", "down", "both"]
Kind = Literal["mean", "edges", "trend", "step"]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

MIN_NIGHTS = 5  # a leave-one-out spread from fewer past nights is meaningless; below this the gate is cold
CLIP_Z = 5.0  # one step moves a many-step statistic by at most this many of its scales
BLOCK_SHARE = 0.1  # a block is a tenth of the steps
# The share of the budget spent on the mean over all steps; the rest goes to the scans. The mean's power
# saturates early (a 2 sigma shift of 20 steps is caught at any share), a narrow block's does not.
ALL_SHARE = 0.25
CAP_Z = 1.0  # a two-step block's larger z counts at most this far above its smaller one
EDGES_RHO = 0.5  # neighbouring steps this correlated (or more) are scanned for edges and a trend too
# Under such noise the mean over all steps gets this share of the budget, the blocks, the trend and the
# edges the rest evenly. Twenty steps at rho 0.9 hold about as much as two independent values: a shift of
# every step is the mean's to find, and a block's edges stand out far enough to need little
# (docs/calibration.md).
CORRELATED_SHARES = (0.5, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0)
# Block statistics share one pooled spread; its degrees of freedom are capped, since neighbouring blocks
# of one night are correlated and do not each bring n - 1 independent ones.
POOLED_DF_BLOCKS = 4
# The joint null (`_joint_scale`): per RHO_BUCKET of rho, JOINT_NIGHTS draws of the statistics of a clean
# night from one fixed seed.
RHO_BUCKET = 0.05
# With `trials`, a statistic's spread is taken for binomial noise's unless the spread measured on the
# past nights exceeds it by more than chance does this rarely (its upper BINOMIAL_CHECK point), and the
# whole gate's unless its mean over all steps passes the stricter MEAN_CHECK: a shift shared by a night
# shows there first (a looser check let a tenth of such windows through, doubling their false alarms).
BINOMIAL_CHECK = 0.01
MEAN_CHECK = 0.05
JOINT_NIGHTS = 20000
JOINT_SEED = 12
# The lone step (`kind` "step", gatecfg/lone_step.py) gets STEP_SHARE of the budget, taken off the others'.
STEP_SHARE = 0.05
# A fired statistic over several steps blames, among its steps, those beyond their own noise: a clean
# step among them with probability at most this (docs/evaluate.md, "Which steps fail").
ATTRIBUTION = 0.05
# A single step's past values beyond this many robust spreads of their median are absurd (see Null.of).
ABSURD_MADS = moments.ABSURD_SPREADS


@dataclass(frozen=True)
class Decision:
    """The night's outcome. `failing` marks the steps of every block statistic that fired, or all steps
    when only the mean over all of them did (all False on a pass); `loc`/`scale` are each step's baseline
    location and scale; the other fields describe the statistic that went furthest toward its threshold,
    fired or not: a mean of the steps' z (`kind` "mean"), the normal score of a block's edges ("edges")
    or the trend along the run ("trend", in units of its clean spread when the steps are independent)."""

    failing: BoolArray
    z: FloatArray  # each step's standardised distance from its baseline (harmful or not), unclipped
    loc: FloatArray
    scale: FloatArray
    direction: Literal["up", "down"]
    first: int  # index range [first, last] of the statistic's steps among those judged
    last: int
    distance: float  # its value: a mean z, the edges' normal score or the trend (harmful direction positive)
    threshold: float  # the value a clean night exceeds with probability alpha / (statistics x sides)
    nights: int
    severity: float  # (statistic - its past mean) / (threshold - past mean): the night fails above 1
    pct: float | None  # mean relative change of those steps against their baselines, percent
    kind: Kind = "mean"
    rho: float = 0.0  # the correlation of neighbouring steps measured on the window
    # In the metric's units, per step: its night-to-night spread, and on each judged side the edge
    # beyond which that step alone fails (None for a side not judged).
    spread: FloatArray | None = None
    lo: FloatArray | None = None
    hi: FloatArray | None = None

    @property
    def fired(self) -> bool:
        return bool(self.failing.any())


def sides(direction: Direction) -> tuple[Literal["up", "down"], ...]:
    return ("up", "down") if direction == "both" else (direction,)


def decide(
    values: FloatArray,
    history: FloatArray,
    *,
    direction: Direction,
    alpha: float,
    trials: int | None = None,
    min_change: MinChange | None = None,
    stretch: FloatArray | None = None,
) -> Decision:
    """Judge one night: `values` (m judged steps, all finite) against `history` (m x n: the same steps'
    values in the n newest past nights, newest first, all finite, n >= MIN_NIGHTS). With `min_change`
    a step's change counts only beyond it. `stretch` (one step: its values over the stable stretch,
    newest first, `history`'s first) prices a one-value gate's tail on it (gatecfg/tail.py).

    A window beyond moments.LARGE in magnitude (a diverged run near the float maximum) is judged scaled by a
    power of two, which is exact: its squares would leave the float range, the rule's z-scores do not
    depend on the unit, and the figures in the metric's units are scaled back."""
    top = float(np.max(np.abs(history)))
    if not moments.LARGE < top < math.inf:
        null = Null.of(history, direction=direction, alpha=alpha, trials=trials, stretch=stretch)
        return null.judge(values, min_change)
    exponent = math.frexp(top)[1]
    if min_change is not None and min_change.abs is not None:
        min_change = min_change.model_copy(update={"abs": math.ldexp(min_change.abs, -exponent)})
    stretch = None if stretch is None else np.ldexp(stretch, -exponent)
    null = Null.of(
        np.ldexp(history, -exponent), direction=direction, alpha=alpha, trials=trials, stretch=stretch
    )
    with np.errstate(over="ignore", under="ignore"):
        found = null.judge(np.ldexp(values, -exponent), min_change)

    def back(x: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):
            scaled: FloatArray = np.ldexp(x, exponent)
        return scaled

    return dataclasses.replace(
        found,
        loc=back(found.loc),
        scale=back(found.scale) if null.space == "linear" else found.scale,
        spread=None if found.spread is None else back(found.spread),
        lo=None if found.lo is None else back(found.lo),
        hi=None if found.hi is None else back(found.hi),
    )


class UnusableWindowError(ValueError):
    """The window cannot be judged against (its values overflow, or its spreads are not finite): the gate
    errs, saying so, rather than pass or fail on arithmetic that went wrong."""


@dataclass(frozen=True)
class _Side:
    sign: float
    ranges: tuple[tuple[int, int], ...]  # the steps of each statistic: all of them, then each block, then
    # when scanned the trend's (all) and the edges' (wherever tonight's block is: judge locates them)
    centres: FloatArray  # each statistic's mean over the past nights
    thresholds: FloatArray
    # How far each step must go on its own, in its scales (empty for a single step: the mean over all
    # steps is that step): see `lone_step.lone_limits`.
    lone: FloatArray


@dataclass(frozen=True)
class _Night:
    """Tonight's statistics on one side, in the order of that side's thresholds (the mean over all steps,
    each block, then the trend and the edges when scanned, then the lone step's largest), how far each
    went toward its threshold (`severity`, 1 at the threshold), their steps and thresholds, and every
    step's severity as a lone step (`lone`, empty for a single step)."""

    stats: FloatArray
    severity: FloatArray
    ranges: list[tuple[int, int]]
    thresholds: FloatArray
    lone: FloatArray


@dataclass(frozen=True)
class Null:
    """What a window says about a clean night: each step's location and scale, and each statistic's
    threshold. Built once per window (a backtest judges several variants of one night against it)."""

    loc: FloatArray  # each step's median, in the metric's units (what reports show)
    scale: FloatArray  # each step's scale, in the space the steps are standardised in
    centre: FloatArray  # each step's median in that space
    space: Space
    trials: int | None
    nights: int
    clip: float
    starts: npt.NDArray[np.int64]
    width: int
    rho: float
    edges: bool  # scanned for a block's edges and a trend too (rho >= EDGES_RHO)
    sides: tuple[tuple[Literal["up", "down"], _Side], ...]
    # Per direction, the budget of the mean over all steps, the blocks (together), the trend, the edges
    # and the lone step.
    budgets: tuple[float, float, float, float, float]
    # Per direction ("up", "down"), each step's largest harmful z over the past nights (leave-one-out):
    # what attribution's edge must also pass (`_attributed`).
    peaks: dict[Literal["up", "down"], FloatArray]

    @classmethod
    def of(
        cls,
        history: FloatArray,
        *,
        direction: Direction,
        alpha: float,
        trials: int | None,
        stretch: FloatArray | None = None,
    ) -> Null:
        """The window's null; UnusableWindowError when its arithmetic does not hold (values that overflow)."""
        with np.errstate(all="ignore"):
            try:
                null = cls._of(history, direction=direction, alpha=alpha, trials=trials, stretch=stretch)
            # Python's float arithmetic (the quantiles, the tail's margin) raises where numpy's warns: a
            # window it cannot handle is the gate's error, never a traceback out of evaluate.
            except (np.linalg.LinAlgError, ArithmeticError) as exc:
                raise UnusableWindowError(f"the window's statistics cannot be computed ({exc})") from None
        finite = [null.scale, null.centre, np.array([null.rho])]
        finite += [side.thresholds for _, side in null.sides]
        if not all(np.isfinite(x).all() for x in finite):
            raise UnusableWindowError(
                "the window's values are too large to standardise (their spreads are not finite numbers); "
                "untrust the runs that logged them or re-key the gate"
            )
        return null

    @classmethod
    def _of(
        cls,
        history: FloatArray,
        *,
        direction: Direction,
        alpha: float,
        trials: int | None,
        stretch: FloatArray | None,
    ) -> Null:
        m, n = history.shape
        space: Space = "binomial" if trials is not None else standardise.space_of(history)
        # A one-value gate's stretch in the window's space (none where a log cannot take it: values <= 0)
        deep = None
        if stretch is not None and m == 1 and (space != "log" or bool((stretch > 0).all())):
            deep = standardise.transform(np.asarray(stretch, np.float64).reshape(-1), space, trials)
        raw_loc = np.median(history, axis=-1)
        history = standardise.transform(history, space, trials)
        floor = standardise.binomial_scale(trials) if trials is not None else 0.0
        loc, spread = standardise.location_spread(history)
        scale = standardise.floored(loc, spread, floor)
        # Leave-one-out: night j standardised by the other n - 1 nights, as tonight is by all n.
        loo_loc, loo_scale = standardise.leave_one_out(history, floor)
        z_past = (history - loo_loc) / loo_scale  # m x n
        starts, width = _blocks(m)
        clip = CLIP_Z if m > 1 else math.inf
        rho = correlated.neighbour_correlation(np.clip(z_past, -clip, clip))
        edges = rho >= EDGES_RHO and m >= 3
        directions = sides(direction)
        # The lone step's share comes off the others' (with one step the mean over all steps is that step).
        lone_share = STEP_SHARE if m > 1 else 0.0
        a_step = alpha * lone_share / len(directions)
        alpha = alpha * (1.0 - lone_share)
        inflate = math.sqrt(1.0 + 1.0 / n)
        blocks = len(starts)
        shares = _shares(edges, blocks > 0)
        # Where the steps' noise has a model (binomial with `trials`, AR(1) when rho >= EDGES_RHO), the
        # shares are scaled up together until the statistics' joint null spends the whole budget.
        joint = (trials is not None or edges) and blocks > 0
        scale_up = (
            _joint_scale(
                m,
                _rho_bucket(rho),
                edges=edges,
                shares=shares,
                directions=len(directions),
                alpha=alpha,
            )
            if joint
            else 1.0
        )
        per_side = alpha / len(directions) * scale_up
        a_all, a_blocks, a_trend, a_edges = (per_side * share for share in shares)
        budgets = (a_all, a_blocks, a_trend, a_edges, a_step)
        # With `trials` the binomial noise of every step is known, if the window agrees: the steps' own
        # spreads, pooled, no larger than it beyond chance (each side then checks its statistics too).
        # Under AR-like noise the steps are not independent draws: measured spreads as before.
        binomial = (
            trials is not None
            and not edges
            and float(np.mean(spread**2))
            <= (floor * distributions.chi_upper(m * (n - 1), BINOMIAL_CHECK)) ** 2
        )
        found = []
        for side in directions:
            sign = 1.0 if side == "up" else -1.0
            lone = (
                lone_limits(sign * (history - loo_loc), loo_scale, scale, space, a_step / m)
                if m > 1
                else np.empty(0)
            )
            z = np.clip(sign * z_past, -clip, clip)
            # Statistics x nights, each statistic's absurd nights clipped: one night at 1e300 in the window
            # must not widen every threshold out of reach. A statistic over several clipped steps is near
            # normal, and OUTLIER_MADS robust spreads out is absurd; a single step keeps the metric's own
            # tails, which real histories show at 5-10 robust spreads (clipped there, the asv replay of
            # benchmarks/real_baselines.py alerted twice as often): it is clipped only at ABSURD_MADS.
            matrix = standardise.clip_outliers(
                _statistics(z, starts, width, spikes=trials is None),
                standardise.OUTLIER_MADS if m > 1 else ABSURD_MADS,
            )
            ranges = [(0, m - 1)] + [(int(s), int(s) + width - 1) for s in starts]
            centre = matrix.mean(axis=1)
            spread = np.maximum(matrix.std(axis=1, ddof=1), 1e-12)
            measured, dfs, levels = [spread[0] * inflate], [n - 1], [a_all]
            if blocks:
                pooled = math.sqrt(float(np.mean(spread[1:] ** 2)))
                correlation = _block_correlation(matrix[1:])
                a_block = a_blocks / (blocks if joint else _effective_tests(correlation))
                # The pooled spread brings n - 1 degrees of freedom per independent block: the mean of
                # `blocks` variance estimates correlated by r (r squared between the estimates) is worth
                # blocks^2 / sum(r^2) of them.
                worth = blocks * blocks / float(np.sum(correlation**2))
                df = (n - 1) * min(POOLED_DF_BLOCKS, max(1, m // width), max(1, int(worth)))
                measured += [pooled * inflate] * blocks
                dfs += [df] * blocks
                levels += [a_block] * blocks
            # The spreads binomial noise alone gives the statistics, each used (with the normal quantile)
            # when the statistic's spread measured on the past nights does not exceed it beyond chance.
            known = _binomial_spreads(floor, scale, starts, width, n) if binomial else None
            # The past nights are standardised against medians of n - 1 nights (and their spreads then
            # inflated by sqrt(1 + 1/n)): what binomial noise gives them is that much wider.
            loo = math.sqrt((1.0 + math.pi / (2.0 * (n - 1))) / (1.0 + math.pi / (2.0 * n))) * inflate
            # A mean over all steps that moves more than coins do (a shift shared by a night) rules the
            # known spreads out for the whole gate.
            if known is not None and measured[0] > known[0] * loo * distributions.chi_upper(
                n - 1, MEAN_CHECK
            ):
                known = None
            thresholds = [
                c
                + _quantile(
                    a,
                    df,
                    x,
                    None
                    if known is None or x > known[k] * loo * distributions.chi_upper(df, BINOMIAL_CHECK)
                    else float(known[k]),
                )
                for k, (c, a, df, x) in enumerate(zip(centre, levels, dfs, measured, strict=True))
            ]
            if deep is not None:
                # One value: tonight's score against the tail the stretch has shown, where it holds enough
                # past nights (gatecfg/tail.py); the window's t quantile prices a normal spread.
                priced = tail.limit(deep, nights=n, sign=sign, alpha=a_all, floor=floor)
                if priced is not None:  # in MADs of the window; tonight itself must lean the harmful way
                    mad = standardise.floored(loc, standardise.median_mad(history)[1], floor)
                    thresholds[0] = max(priced * float(mad[0] / scale[0]), float(centre[0]) + 1e-3)
            spiked = 2.0 * float(np.mean(sign * z_past > CLIP_Z)) if width == 2 and trials is None else 0.0
            if blocks and spiked > 0:
                # A spike on one step of a block of two lifts the block by up to CAP_Z / 2 (its larger
                # step counts at most CAP_Z above the smaller): a tail of its own, which the normal
                # quantile of the measured spread does not price (on a gradient norm spiking at 0.5% of
                # its steps, as likely as the block's normal tail). The share of past steps beyond
                # CLIP_Z scales in the harmful direction is the spike rate; the blocks share one
                # pooled spread and level, so one quantile of the mixture serves them all.
                block_centre = float(centre[1:].mean())
                lift = _spiked_quantile(levels[1], dfs[1], measured[1], block_centre, spiked)
                thresholds[1:] = [max(t, c + lift) for t, c in zip(thresholds[1:], centre[1:], strict=True)]
            if edges:
                # The trend's spread pooled over steps and nights, the edges' measured on the nights.
                edge = standardise.clip_outliers(correlated.edges_score(z, rho, n - 1)[0])
                for score, a_scan, (spread_scan, df) in (
                    (
                        standardise.clip_outliers(correlated.trend(z, rho)),
                        a_trend,
                        correlated.trend_spread(z, rho),
                    ),
                    (edge, a_edges, (float(edge.std(ddof=1)), n - 1)),
                ):
                    centre = np.append(centre, score.mean())
                    ranges.append((0, m - 1))
                    quantile = distributions.t_quantile(a_scan, df)
                    thresholds.append(centre[-1] + quantile * max(spread_scan, 1e-12) * inflate)
            found.append((side, _Side(sign, tuple(ranges), centre, np.array(thresholds), lone)))
        # A step constant on the other nights has an infinite z where it moved: no edge to pass.
        finite = np.where(np.isfinite(z_past), z_past, np.nan)
        peaks = {side: np.nan_to_num(np.nanmax(s.sign * finite, axis=1), nan=-np.inf) for side, s in found}
        return cls(
            raw_loc,
            scale,
            loc,
            space,
            trials,
            n,
            clip,
            starts,
            width,
            rho,
            edges,
            tuple(found),
            budgets,
            peaks,
        )

    def judge(self, values: FloatArray, min_change: MinChange | None = None) -> Decision:
        m = len(values)
        with np.errstate(over="ignore"):  # a step far beyond a tiny scale is an infinite z: it fails
            z_now = self.standardise(values if min_change is None else self.beyond(values, min_change))
        best: Decision | None = None
        failing = np.zeros(m, bool)
        edges: dict[str, FloatArray] = {}
        for side, null in self.sides:
            night = self.statistics(z_now, null)
            blamed = self._attributed(null.sign * z_now, night, self.peaks[side])
            if min_change is not None:
                # Beyond the noise AND beyond the minimum: a step within its minimum never fails, however
                # the statistics of a night moved onto its medians compare with the past nights' (a
                # deterministic window's edges and trend are not those of a night at its medians).
                blamed &= null.sign * (values - self.loc) > self.least(min_change)
            failing |= blamed
            alone = null.lone if m > 1 else null.thresholds[:1]
            edges[side] = self.in_units(self.centre + null.sign * alone * self.scale)
            ranges = night.ranges
            k = int(np.argmax(night.severity))
            if best is None or night.severity[k] > best.severity:
                first, last = ranges[k]
                loc = self.loc
                best = Decision(
                    failing=failing,
                    z=z_now,
                    loc=loc,
                    scale=self.scale,
                    direction=side,
                    first=first,
                    last=last,
                    distance=float(night.stats[k]),
                    threshold=float(night.thresholds[k]),
                    nights=self.nights,
                    severity=float(night.severity[k]),
                    pct=_pct(values[first : last + 1], loc[first : last + 1]),
                    kind=_kind(self.edges, k, len(night.stats), lone=m > 1),
                    rho=self.rho,
                )
        assert best is not None  # at least the mean over all steps in one direction
        spread = np.abs(self.in_units(self.centre + self.scale) - self.in_units(self.centre - self.scale)) / 2
        return dataclasses.replace(
            best, failing=failing, spread=spread, lo=edges.get("down"), hi=edges.get("up")
        )

    def beyond(self, values: FloatArray, min_change: MinChange) -> FloatArray:
        """Each step moved toward its baseline median by its minimum change (and no further): a change
        within it counts as none, a larger one only for what exceeds it. The statistics then see a step
        as moved only beyond its noise and beyond the minimum (a deterministic metric's constant window
        has no noise: there the minimum alone decides)."""
        least = self.least(min_change)
        change = values - self.loc
        moved: FloatArray = self.loc + np.sign(change) * np.maximum(np.abs(change) - least, 0.0)
        return moved

    def least(self, min_change: MinChange) -> FloatArray:
        """Each step's minimum relevant change, in the metric's units: the larger of its relative part (of
        the step's baseline median) and its absolute part."""
        least: FloatArray = np.maximum(
            (min_change.rel or 0.0) * np.abs(self.loc), np.full(len(self.loc), min_change.abs or 0.0)
        )
        return least

    def in_units(self, transformed: FloatArray) -> FloatArray:
        """Values of the space the steps are judged in, back in the metric's units."""
        with np.errstate(over="ignore"):
            if self.space == "log":
                return np.asarray(np.exp(transformed), np.float64)
            if self.space == "binomial":
                assert self.trials is not None
                angle = np.clip(transformed, 0.0, math.pi / 2.0)
                share = (np.sin(angle) ** 2 * (self.trials + 0.75) - 0.375) / self.trials
                return np.asarray(np.clip(share, 0.0, 1.0), np.float64)
        return transformed

    def _attributed(self, harmful: FloatArray, night: _Night, peaks: FloatArray) -> BoolArray:
        """The steps a night's fired statistics blame (`harmful`: each step's z, harmful direction up;
        `peaks`: each step's largest over the past nights): every step that exploded on its own, and
        within the steps of the statistics over several steps that fired (the blocks, the edges' block
        or the trend where any fired, else the mean's: all), the steps that moved beyond their own noise,
        so that a clean step among them is blamed with probability at most ATTRIBUTION. Where none did
        on its own, the one that moved most: a fired gate always names a step.

        Beyond their own noise: past their t quantile at ATTRIBUTION split over those steps, which holds
        for noise with normal tails. Heavier tails (a Student t of 3 degrees of freedom crosses it ten
        times as often) show in the past nights at those steps, whose largest value normal noise reaches
        with probability ATTRIBUTION only (the quantile split over those steps and nights): then a step
        must also pass that largest. Night to night the largest of those steps are exchangeable, so a
        clean night's passes all of theirs with probability 1 / (nights + 1), under ATTRIBUTION from 20
        nights, whatever the noise."""
        m = len(harmful)
        blamed = night.lone > 1.0 if len(night.lone) else np.zeros(m, bool)
        several = len(night.severity) - (len(night.lone) > 0)  # the lone step's entry comes last
        fired = np.flatnonzero(night.severity[:several] > 1.0).tolist()
        covered = np.zeros(m, bool)
        for first, last in [night.ranges[k] for k in fired if k > 0] or [night.ranges[k] for k in fired]:
            covered[first : last + 1] = True
        if covered.any():
            count = int(covered.sum())
            median = math.sqrt(1.0 + math.pi / (2.0 * self.nights))  # the spread of a median's distance
            edge = distributions.t_quantile(ATTRIBUTION / count, self.nights - 1) * median
            largest = float(peaks[covered].max())
            if (
                largest
                > distributions.t_quantile(ATTRIBUTION / (count * self.nights), self.nights - 1) * median
            ):
                edge = max(edge, largest)
            moved = covered & (harmful > edge)
            if not moved.any():
                moved[int(np.argmax(np.where(covered, harmful, -np.inf)))] = True
            blamed |= moved
        return blamed

    def statistics(self, z_now: FloatArray, null: _Side) -> _Night:
        """Tonight's statistics on one side (`z_now`: each judged step's standardised value)."""
        harmful = null.sign * z_now
        now = np.clip(harmful, -self.clip, self.clip)[:, None]
        stats = _statistics(now, self.starts, self.width, spikes=self.trials is None)[:, 0]
        ranges = list(null.ranges)
        if self.edges:
            score, first_edge, last_edge = correlated.edges_score(now, self.rho, self.nights - 1)
            stats = np.append(stats, [correlated.trend(now, self.rho)[0], score[0]])
            ranges[-1] = (int(first_edge[0]), int(last_edge[0]))
        severity = (stats - null.centres) / (null.thresholds - null.centres)
        thresholds = null.thresholds
        lone = np.empty(0)
        if len(z_now) > 1:
            limits = null.lone
            lone = harmful / limits
            k = int(np.argmax(lone))
            stats, severity = np.append(stats, harmful[k]), np.append(severity, lone[k])
            thresholds = np.append(thresholds, limits[k])
            ranges.append((k, k))
        return _Night(stats, severity, ranges, thresholds, lone)

    def standardise(self, values: FloatArray) -> FloatArray:
        """Each judged step's distance from its baseline in its scales, in the space it is judged in."""
        return (standardise.transform(values, self.space, self.trials) - self.centre) / self.scale


def _binomial_spreads(
    floor: float, scale: FloatArray, starts: npt.NDArray[np.int64], width: int, nights: int
) -> FloatArray:
    """Each statistic's spread (the mean over all steps, then each block's mean) on a night whose steps
    carry binomial noise alone, of spread `floor` in arcsine space, standardised by `scale` against
    medians of `nights` nights (a median's variance is pi / 2 of a mean's)."""
    inverse = (floor / scale) ** 2
    spreads = [math.sqrt(float(inverse.sum())) / len(scale)]
    spreads += [math.sqrt(float(inverse[s : s + width].sum())) / width for s in starts]
    return np.array(spreads) * math.sqrt(1.0 + math.pi / (2.0 * nights))


def _quantile(upper: float, df: int, spread: float, known: float | None) -> float:
    """How far above its centre a statistic fails: its Student t quantile times its spread measured on
    the past nights (`df` degrees of freedom), or with a `known` spread the normal quantile times that."""
    if known is None:
        return distributions.t_quantile(upper, df) * spread
    return distributions.NORMAL.inv_cdf(1.0 - upper) * known


def _spiked_quantile(upper: float, df: int, spread: float, centre: float, spiked: float) -> float:
    """How far above its centre a block of two fails when a share `spiked` of such blocks holds a spike:
    clean, its Student t (`df` degrees of freedom) times its measured `spread`; spiked, its other step
    (a unit normal z, the block centred at `centre`) plus CAP_Z / 2. The distance at which the mixture
    is exceeded with probability `upper`, by bisection."""
    spiked = min(spiked, 0.5)
    df = min(df, POOLED_DF_MAX)  # beyond, the t is the normal to a part in a thousand; its tail's cost grows

    def tail(q: float) -> float:
        clean = distributions.t_upper_tail(q / spread, df)
        lifted = 1.0 - distributions.NORMAL.cdf(centre + q - CAP_Z / 2.0)
        return (1.0 - spiked) * clean + spiked * lifted

    lo, hi = 0.0, distributions.t_quantile(upper, df) * spread + CAP_Z + 10.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if tail(mid) > upper else (lo, mid)
    return hi


def _shares(edges: bool, blocks: bool) -> tuple[float, float, float, float]:
    """The budget's split over the mean over all steps, the block means (together), the trend and the
    edges."""
    if edges:
        return CORRELATED_SHARES
    return (ALL_SHARE, 1.0 - ALL_SHARE, 0.0, 0.0) if blocks else (1.0, 0.0, 0.0, 0.0)


def _rho_bucket(rho: float) -> float:
    """The window's rho rounded down to a multiple of RHO_BUCKET: the joint null is drawn (and cached)
    per bucket, and a smaller rho makes neighbouring statistics less alike, so rounding down errs toward
    the Bonferroni side."""
    return math.floor(rho / RHO_BUCKET + 1e-9) * RHO_BUCKET


@cache
def _joint_scale(
    m: int,
    rho: float,
    *,
    edges: bool,
    shares: tuple[float, float, float, float],
    directions: int,
    alpha: float,
) -> float:
    """How far the budget split of `Null.of` can be scaled up, every statistic's share alike, before a
    clean night of the model fails with probability alpha / directions in one direction: the
    statistics' joint null, where the split assumes the worst (Bonferroni: disjoint failures).

    The model is the one the rule whitens by: m steps of unit AR(1) noise of correlation `rho` (the
    window's, rounded down; near 0 for independent binomial steps), under which the statistics are
    drawn (`_gaussian_statistics`), each held to the normal quantile of its share as the rule holds it
    to the Student t quantile of that share. The mean, the block means (each a 1 / blocks part of
    their share) and the trend of a correlated run are strongly alike (the mean and the trend about
    0.87 at 20 steps, rho 0.9), so the split wastes much of the budget; this gives it back. At least 1
    (the split is never tightened), at most what takes the largest share to the whole budget."""
    starts, width = _blocks(m)
    weights = [shares[0]] + [shares[1] / len(starts)] * len(starts) + list(shares[2:]) * edges
    target = alpha / directions
    u = _gaussian_statistics(m, rho, starts, width, trend=edges)
    w = np.array(weights)

    def rate(scale_up: float) -> float:
        # P(any fails) = the sum of each one's P(fails), exact at its normal quantile, less the overlaps
        # E[(number failing - 1)+] of the drawn ones; the edges, the one statistic not linear in the
        # steps, are counted as if they never failed together with another (Bonferroni). Counting the
        # draws with any failure instead rests the whole rate on a hundred-odd draws in the tail, and
        # moved the scale by 10-20% from one rho bucket to the next.
        shares_up = scale_up * target * w
        q = np.array([distributions.NORMAL.inv_cdf(1.0 - x) for x in shares_up[: len(u)]])
        failing = (u > q[:, None]).sum(axis=0)
        return float(shares_up.sum() - np.mean(np.maximum(failing - 1, 0)))

    lo, hi = 0.0, math.log(1.0 / float(w.max()))
    if rate(math.exp(hi)) <= target:
        return math.exp(hi)
    for _ in range(30):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if rate(math.exp(mid)) <= target else (lo, mid)
    return math.exp(lo)


def _gaussian_statistics(
    m: int, rho: float, starts: npt.NDArray[np.int64], width: int, *, trend: bool
) -> FloatArray:
    """JOINT_NIGHTS draws of the statistics of a clean night, standardised: the mean over all steps, the
    block means and with `trend` the trend. Each is a weighted sum of the steps (a spike-guarded block
    nearly so: its largest step dropped or capped, which tests check moves its correlations by little;
    the trend's jumps clipped at JUMP_CLIP, which a clean jump passes once in 22), so under unit AR(1)
    noise of correlation `rho` they are jointly normal with covariance `A S A'` (`A` their weights, `S`
    the steps' covariance `rho^|i - j|`) and are drawn as such, at any number of steps in milliseconds."""
    weights = np.zeros((1 + len(starts) + trend, m))
    weights[0] = 1.0 / m
    for row, start in enumerate(starts, start=1):
        weights[row, start : start + width] = 1.0 / width
    if trend:  # the whitened ramp's projection of the whitened steps, as weights on the steps
        weights[-1] = correlated.unit_ramp(m, rho) @ correlated.whiten(np.eye(m), rho)
    lags = np.abs(np.subtract.outer(np.arange(m), np.arange(m)))
    covariance = weights @ (rho**lags if rho > 0 else np.eye(m)) @ weights.T
    sd = np.sqrt(np.diag(covariance))
    # Cholesky of the correlation, nudged onto the positive definite side (identical blocks are possible)
    factor = np.linalg.cholesky(covariance / np.outer(sd, sd) + 1e-12 * np.eye(len(sd)))
    draws: FloatArray = factor @ np.random.default_rng(JOINT_SEED).standard_normal((len(sd), JOINT_NIGHTS))
    return draws


def _kind(edges: bool, k: int, count: int, *, lone: bool) -> Kind:
    """Which statistic the k-th of `count` is: the trend and the edges come after the blocks when
    scanned, the lone step last when judged."""
    if lone:
        if k == count - 1:
            return "step"
        count -= 1
    if edges and k == count - 1:
        return "edges"
    return "trend" if edges and k == count - 2 else "mean"


def _statistics(
    z: FloatArray, starts: npt.NDArray[np.int64], width: int, *, spikes: bool = True
) -> FloatArray:
    """Per column of `z` (steps x nights): the mean over all steps, then each block's mean without its
    largest value, so that one step alone cannot carry a block. A block of two would keep only its
    smaller step: there the larger counts, up to CAP_Z above the smaller. A block of one keeps it.
    Without `spikes` (a mean of Bernoulli trials, whose binomial noise has no heavy tail to guard
    against) every block keeps all of its steps."""
    stats = [z.mean(axis=0)]
    if len(starts):
        stack = np.array([z[starts + k] for k in range(width)])  # width x blocks x nights
        total = stack.sum(axis=0)
        if not spikes:
            stats += list(total / width)
        elif width == 2:
            smaller, larger = stack.min(axis=0), stack.max(axis=0)
            stats += list((smaller + np.minimum(larger, smaller + CAP_Z)) / 2.0)
        elif width > 2:
            stats += list((total - stack.max(axis=0)) / (width - 1))
        else:
            stats += list(total)
    return np.array(stats)


def _block_correlation(blocks: FloatArray) -> FloatArray:
    """The correlation matrix of the block statistics (rows; the past nights in the columns). The noise
    along a run is taken as stationary: the correlation of two blocks is the mean over all pairs the same
    number of strides apart (a matrix from 20 nights alone is mostly noise)."""
    count = len(blocks)
    centred = blocks - blocks.mean(axis=1, keepdims=True)
    norms = np.sqrt((centred**2).sum(axis=1, keepdims=True))
    centred = centred / np.where(norms > 0, norms, 1.0)
    pairs = centred @ centred.T
    by_lag = np.array([1.0] + [float(np.mean(np.diagonal(pairs, lag))) for lag in range(1, count)])
    return by_lag[np.abs(np.subtract.outer(np.arange(count), np.arange(count)))]


def _effective_tests(correlation: FloatArray) -> float:
    """How many independent tests statistics with this correlation matrix are worth: Li and Ji's (2005)
    count over its eigenvalues, each adding 1 if it is at least 1 plus its fractional part. Overlapping
    blocks, and steps correlated by AR noise or a shift shared by the night, are worth fewer tests than
    there are blocks, and the Bonferroni split over them is that much less conservative. Between 1 and
    the number of statistics."""
    count = len(correlation)
    # Rounded: an eigenvalue a hair under an integer (19 - 1e-14) must not lose almost 1 to the floor.
    eigen = np.round(np.abs(np.linalg.eigvalsh(correlation)), 9)
    return float(np.clip(np.sum((eigen >= 1.0) + eigen - np.floor(eigen)), 1.0, count))


def _blocks(m: int) -> tuple[npt.NDArray[np.int64], int]:
    """Start indices of the blocks of BLOCK_SHARE of m steps at half-block strides (the last block ends at
    the last step), and their width; no blocks for a single step."""
    if m < 2:
        return np.array([], np.int64), 1
    width = max(1, round(m * BLOCK_SHARE))
    stride = max(1, width // 2)
    starts = list(range(0, m - width + 1, stride))
    if starts[-1] != m - width:
        starts.append(m - width)
    return np.array(starts, np.int64), width


def _pct(values: FloatArray, loc: FloatArray) -> float | None:
    nonzero = loc != 0
    if not nonzero.any():
        return None
    return float(np.mean((values[nonzero] - loc[nonzero]) / np.abs(loc[nonzero]))) * 100.0
