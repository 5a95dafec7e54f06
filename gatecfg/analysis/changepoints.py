"""Regimes of one nightly series read as levels: level shifts, drifts and changes of spread, with penalties
from the model (`readings` weighs this reading against a random walk).

Penalised likelihood segmentation under a Gaussian model (between changes a level or a line, one noise
scale per stretch), every search over all nights being ruptures' exact C PELT over a sum of squares; the
richer models are fitted on the candidates it returns. Every price is derived from the model (MBIC, Zhang &
Siegmund 2007), none tuned to data. The steps, numbered as the comments below cite them, and why each is
as it is: docs/analytics.md, "How regimes are found".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from gatecfg.analysis.noise import (
    MIN_REGIME,
    NUMERIC_NOISE,
    Array,
    fit_residuals,
    long_run_pelt,
    long_run_sd,
    median,
    median_beyond,
    noise_scale,
    outlier_nights,
    pelt,
    starting_scale,
)
from gatecfg.analysis.spread import spread_stretches
from gatecfg.analysis.sums import LOCATION_LR_95, Sums
from gatecfg.distributions import chi2_upper

MBIC_CHANGE = 3.0  # ln n units per change point (Zhang & Siegmund 2007), not a tuning knob
# 95% quantile of chi-square(1).
CHI2_1_95 = 3.841458820694124
Kind = Literal["level", "spread", "drift"]


@dataclass(frozen=True)
class Segment:
    """One regime: where it starts, what opened it, and the model it holds."""

    start: int
    stop: int  # exclusive
    kind: Kind  # the first segment: "drift" when it moves along a line, else "level"
    slope: float  # per night; 0 unless a drift
    scale: float  # the long-run noise scale of its stretch: what a change of its mean is measured against
    spread_change: bool  # it starts where the noise scale changes
    interval: tuple[int, int]  # the likely nights of its start, inclusive; (0, 0) for the first
    noise: float = 0.0  # the night-to-night noise scale of its stretch: what a change of spread compares


@dataclass(frozen=True)
class Detection:
    """The regimes of a series, and what the detection rested on."""

    segments: tuple[Segment, ...]
    sigma: float  # robust noise scale of the newest stretch of one noise scale
    penalty: float  # cost of one change point, in the series' units squared, at that scale
    outliers: tuple[int, ...]  # indices replaced by their neighbourhood's median before detection
    # Read in logs (noise in proportion to the level, step 12); its figures are in the metric's units.
    in_logs: bool = False

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(s.start for s in self.segments)


def levels(values: Array, coordinates: int) -> Detection:
    """The levels reading: regimes that hold a level or move along a line, in noise that does not
    accumulate from night to night (steps 1-7).

    A change costs `3 ln n + 2 ln m` in units of the noise variance over `m` coordinates: MBIC's price
    for one series, plus what keeps the chance that noise alone opens a regime somewhere among `m` from
    growing with `m`. A change passes where its likelihood ratio `2 ln LR` exceeds the price, and the
    tail of that statistic falls as `e^(-x/2)` (chi-square's, and the maximum over places of a
    chi-square process alike), so `2 ln m` more divides each coordinate's false-alarm rate by `m`:
    Bonferroni's correction, in the currency of the penalty."""
    n = values.size
    if n < 2 * MIN_REGIME:
        return Detection((_first(n, 0.0),) if n else (), 0.0, 0.0, ())
    sigma = noise_scale(values)
    if sigma <= NUMERIC_NOISE * float(np.max(np.abs(values))):
        # Every night-to-night difference is the same up to float rounding: a constant or a noiseless
        # ramp. With no noise to measure a change against, there is no change to report.
        return Detection((_first(n, 0.0),), 0.0, 0.0, ())
    per_night = MBIC_CHANGE * math.log(n) + 2 * math.log(max(1, coordinates))  # in noise variances
    stretches, stretch_intervals = spread_stretches(values, per_night)
    cleaned = values.copy()
    outliers: list[int] = []
    models: list[_Stretch] = []
    for start, stop in itertools.pairwise([*stretches, n]):
        part = values[start:stop]
        too_short = part.size < 2 * MIN_REGIME  # no neighbourhood to stand out from
        outlying, neighbours = (np.zeros(part.size, dtype=bool), part) if too_short else outlier_nights(part)
        cleaned[start:stop] = np.where(outlying, neighbours, part)
        outliers += [start + int(i) for i in np.flatnonzero(outlying)]
        models.append(_fit_stretch(cleaned, noise_scale(part), start, stop, per_night))
    segments = _one_change(cleaned, _classify(cleaned, models, stretch_intervals, per_night), per_night)
    segments = _merge(cleaned, segments, per_night, values)
    newest = models[-1].scale
    return Detection(segments, newest, per_night * newest**2, tuple(outliers))


def _first(n: int, scale: float) -> Segment:
    return Segment(0, n, "level", 0.0, scale, False, (0, 0))


# --- steps 2-6, within a stretch: levels, drifts, their places ----------------------------------------


@dataclass(frozen=True)
class _Stretch:
    """The level and drift segments of one stretch of one noise scale."""

    start: int
    stop: int
    scale: float  # long-run
    noise: float  # night to night
    bounds: tuple[int, ...]  # segment starts, the stretch's start first
    drifting: tuple[bool, ...]
    slopes: tuple[float, ...]
    intervals: tuple[tuple[int, int], ...]


def _fit_stretch(cleaned: Array, sigma: float, start: int, stop: int, per_night: float) -> _Stretch:
    """Levels and drifts of the nights `start:stop` (outliers replaced), `sigma` their raw noise scale
    (measured before outliers were replaced: a replaced night's difference to its neighbours is no noise
    sample)."""
    part = cleaned[start:stop]
    if part.size < 2 * MIN_REGIME or sigma <= NUMERIC_NOISE * float(np.max(np.abs(part))):
        return _Stretch(start, stop, sigma, sigma, (start,), (False,), (0.0,), ((start, start),))
    noise = sigma
    centred = part - float(np.add.reduce(part)) / part.size
    if _quiet(centred, sigma, per_night):
        # What most of the thousands of quiet coordinates `--all` scans come to, without a search.
        return _Stretch(
            start, stop, _quiet_scale(centred, sigma), noise, (start,), (False,), (0.0,), ((start, start),)
        )
    starts, sigma = long_run_pelt(part, sigma, per_night)
    within = _residual_scale(part, starts)
    if within > sigma:
        sigma = within
        starts = pelt((part - median(part)) / sigma, per_night)
    y = (part - median(part)) / sigma
    costs = _Costs(y, per_night)
    blocked = np.zeros(y.size, dtype=bool)
    while True:
        bounds = _best_subset(list(starts), y.size, costs.unit, per_night)
        bounds = _add_splits(costs.expand(bounds)[0], y.size, costs.cost, per_night)
        bounds, drifting, turns = costs.expand(_best_subset(bounds, y.size, costs.unit, per_night))
        bounds, intervals = _localise(bounds, y.size, costs.cost, turns)
        ends = [*bounds[1:], y.size]
        # A turn keeps its model; the other segments are asked again where they now lie.
        drifting = [
            d if i in turns else bool(costs.cost(a, b)[1])
            for i, (a, b, d) in enumerate(zip(bounds, ends, drifting, strict=True))
        ]
        stepped = _stepped_drifts(y, bounds, drifting, turns, starts)
        if not stepped:
            break
        for a, b in stepped:
            blocked[a:b] = True
        costs.no_line[1:] = np.cumsum(blocked)
    slopes = [
        float(costs.sums.line(a, b)[1]) * sigma if d else 0.0
        for a, b, d in zip(bounds, ends, drifting, strict=True)
    ]
    return _Stretch(
        start,
        stop,
        sigma,
        noise,
        tuple(start + b for b in bounds),
        tuple(drifting),
        tuple(slopes),
        tuple((start + lo, start + hi) for lo, hi in intervals),
    )


class _Costs:
    """The cost of a segment of one stretch's nights `y` (in sigma units) as a level, a line or a level
    that turns into a line; `no_line` counts, as prefix sums, the nights where no line may lie."""

    def __init__(self, y: Array, per_night: float) -> None:
        self.y = y
        self.per_night = per_night
        self.sums = Sums(y)
        self.no_line = np.zeros(y.size + 1)

    def cost(self, a: Any, b: Any) -> tuple[Any, Any]:
        """A segment's cost (sum of squares in sigma^2 units, a line's slope priced like a change)."""
        level = self.sums.level_sse(a, b)
        line = self.sums.line(a, b)[0] + _slope_price(a, b, self.y.size, self.per_night)
        line = np.where(self.no_line[b] > self.no_line[a], np.inf, line)
        return np.minimum(level, line), line < level

    def turn(self, a: int, b: int) -> tuple[float, int, tuple[int, int]]:
        """The best level on `a:b` that turns into a line from it: cost, the night it turns, likely nights.
        Its turn and slope are the two parameters of a level shift, its place and size: one change."""
        if b - a < 2 * MIN_REGIME or self.no_line[b] > self.no_line[a]:
            return math.inf, a, (a, a)
        sse, turns = self.sums.turning(a, b)
        k = int(np.argmin(sse))
        likely = turns[sse - sse[k] <= LOCATION_LR_95]
        price = float(_slope_price(a, b, self.y.size, self.per_night))
        return float(sse[k]) + price, int(turns[k]), (int(likely.min()), int(likely.max()))

    def unit(self, a: Any, b: int) -> Any:
        """The cost of the nights from each of `a` to `b` as a level, a line or a level that turns."""
        turned = np.array([self.turn(int(x), b)[0] for x in a])
        return np.asarray(np.minimum(self.cost(a, b)[0], turned))

    def expand(self, bounds: list[int]) -> tuple[list[int], list[bool], dict[int, tuple[int, int]]]:
        """Each segment's model: the bounds with every turn added, which segments are drifts, and the
        turns (by position) with their likely nights."""
        out: list[int] = []
        drifts: list[bool] = []
        turns: dict[int, tuple[int, int]] = {}
        for a, b in itertools.pairwise([*bounds, self.y.size]):
            plain, line = self.cost(a, b)
            turned, at, likely = self.turn(a, b)
            if turned < float(plain):
                turns[len(out) + 1] = likely
                out += [a, at]
                drifts += [False, True]
            else:
                out.append(a)
                drifts.append(bool(line))
        return out, drifts, turns


def _stepped_drifts(
    y: Array,
    bounds: list[int],
    drifting: list[bool],
    turns: dict[int, tuple[int, int]],
    starts: Sequence[int],
) -> list[tuple[int, int]]:
    """The drifting segments (`first`, `stop`) that are staircases of the level changes `starts` rather
    than lines: `_fit_stretch` fits them again with lines barred."""
    stepped = []
    ends = [*bounds[1:], y.size]
    for i, (a, b) in enumerate(zip(bounds, ends, strict=True)):
        if not drifting[i]:
            continue
        first = bounds[i - 1] if i in turns else a  # a turning level is tested with its level
        steps = [first, *(s for s in starts if first + MIN_REGIME <= s <= b - MIN_REGIME)]
        if _staircase(y[first:b], [s - first for s in steps], a - first):
            stepped.append((first, b))
    return stepped


def _quiet(centred: Array, sigma: float, per_night: float) -> bool:
    """Whether the search of `_fit_stretch` would find one level in these nights (`centred` on their mean),
    known without it. Every model it weighs saves at most the whole sum of squares, in units of a scale
    never below `sigma`, and each change, slope or turn costs a price: below one price nothing pays;
    below two, only a model with a single priced part could, and each of those (one change of level,
    one line, one level that turns into a line) is measured here at `sigma`, where it saves the most."""
    n = centred.size
    total = float(np.dot(centred, centred)) / sigma**2
    price = min(per_night, float(_slope_price(0, n, n, per_night)))
    if total <= price:
        return True
    if total > 2 * price:
        return False
    sums = Sums(centred / sigma)
    splits = np.arange(MIN_REGIME, n - MIN_REGIME + 1)
    split = total - float(np.min(sums.level_sse(0, splits) + sums.level_sse(splits, n)))
    line = total - float(sums.line(0, n)[0])
    turn = total - float(np.min(sums.turning(0, n)[0]))
    return max(split, line, turn) < price


def _quiet_scale(centred: Array, short: float) -> float:
    """The scale `_fit_stretch` ends at where its search finds one level (`_quiet`): `long_run_pelt`'s
    with no change found, or the nights' standard deviation where that is larger."""
    ceiling = max(short, long_run_sd(centred))
    sigma = starting_scale(centred, short, ceiling)
    if ceiling > sigma * 1.01:
        sigma = ceiling
    return max(sigma, _residual_scale(centred, (0,)))


def _slope_price(a: Any, b: Any, n: int, per_night: float) -> Any:
    """What a line's slope on the nights `a:b` of a stretch of `n` costs, in units of the noise variance:
    MBIC's price of a change, whatever the segment's length (step 5). One function, so that the
    validation grid can measure other prices (`benchmarks/regimes_grid.py --line-price`)."""
    return np.full(np.broadcast(a, b).shape, per_night)


Cost = Callable[[Any, Any], tuple[Any, Any]]


def _best_subset(
    candidates: list[int], n: int, cost: Callable[[Any, int], Any], per_change: float
) -> list[int]:
    """The subset of candidate starts with the least penalised cost: exact dynamic programming."""
    points = [*candidates, n]
    best = [0.0] + [math.inf] * (len(points) - 1)
    back = [0] * len(points)
    for j in range(1, len(points)):
        earlier = np.array([i for i in range(j) if points[j] - points[i] >= MIN_REGIME], dtype=np.int64)
        if earlier.size == 0:
            continue
        starts = np.array(points, dtype=np.int64)[earlier]
        total = np.array(best)[earlier] + cost(starts, points[j]) + np.where(earlier > 0, per_change, 0.0)
        k = int(np.argmin(total))
        best[j], back[j] = float(total[k]), int(earlier[k])
    chosen: list[int] = []
    j = len(points) - 1
    while j > 0:
        j = back[j]
        chosen.append(points[j])
    return sorted(chosen)


def _add_splits(bounds: list[int], n: int, cost: Cost, per_change: float) -> list[int]:
    """Binary segmentation with the level-or-line costs: split a segment where a split pays its price."""
    pending = list(itertools.pairwise([*bounds, n]))
    found = set(bounds)
    while pending:
        a, b = pending.pop()
        splits = np.arange(a + MIN_REGIME, b - MIN_REGIME + 1)
        if splits.size == 0:
            continue
        total = cost(a, splits)[0] + cost(splits, b)[0] + per_change
        k = int(np.argmin(total))
        if total[k] < float(cost(a, b)[0]):
            split = int(splits[k])
            found.add(split)
            pending += [(a, split), (split, b)]
    return sorted(found)


def _localise(
    bounds: list[int], n: int, cost: Cost, pinned: dict[int, tuple[int, int]]
) -> tuple[list[int], list[tuple[int, int]]]:
    """Each change point at its maximum-likelihood night between its neighbours, with its LR interval.
    A `pinned` one (by position: a level's turn into a line, placed and bounded by its own profile
    likelihood) stays where it is."""
    bounds = list(bounds)
    intervals = [pinned.get(i, (0, 0)) for i in range(len(bounds))]
    for _ in range(2):  # a second sweep lets each point see its neighbours' final places
        for i in range(1, len(bounds)):
            if i in pinned:
                continue
            left, right = bounds[i - 1], bounds[i + 1] if i + 1 < len(bounds) else n
            splits = np.arange(left + MIN_REGIME, right - MIN_REGIME + 1)
            total = cost(left, splits)[0] + cost(splits, right)[0]
            k = int(np.argmin(total))
            bounds[i] = int(splits[k])
            likely = splits[total - total[k] <= LOCATION_LR_95]
            intervals[i] = (int(likely.min()), int(likely.max()))
    intervals[0] = (bounds[0], bounds[0])
    return bounds, intervals


def _staircase(y: Array, steps: list[int], turn: int) -> bool:
    """Whether nights the search fits with a line (from night `turn` on; a level before it) are rather
    the staircase of level shifts at `steps`: flat steps that jump, tested in the model that nests both
    readings once the steps are placed jointly with the slope (step 6)."""
    if len(steps) < 2:
        return False
    sums = Sums(y, np.maximum(0.0, np.arange(y.size, dtype=np.float64) - (turn - 1)))
    steps = list(steps)

    def inside(pairs: Sequence[tuple[int, int]]) -> tuple[Any, Any, Any]:
        """Within-step sums of squares and cross-products, summed over the steps `pairs`."""
        parts = [sums.centred(a, b) for a, b in pairs]
        return sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)

    for _ in range(2):
        for i in range(1, len(steps)):
            pairs = list(itertools.pairwise([*steps, y.size]))
            left, right = pairs[i - 1][0], pairs[i][1]
            places = np.arange(left + MIN_REGIME, right - MIN_REGIME + 1)
            yy, xx, xy = inside(pairs[: i - 1] + pairs[i + 1 :])
            before, after = sums.centred(left, places), sums.centred(places, right)
            xx = np.maximum(xx + before[1] + after[1], 1e-12)
            xy = xy + before[2] + after[2]
            total = yy + before[0] + after[0] - xy * xy / xx
            steps[i] = int(places[int(np.argmin(total))])
    yy, xx, xy = inside(list(itertools.pairwise([*steps, y.size])))
    if float(xx) <= 1e-12:
        return False
    slope_gain = float(xy * xy / xx)  # the slope, given the steps
    line = float(sums.line(0, y.size)[0])
    jumps_gain = line - (float(yy) - slope_gain)  # the jumps, given the slope
    return slope_gain <= CHI2_1_95 and jumps_gain > chi2_upper(len(steps) - 1, 0.05)


def _residual_scale(values: Array, starts: Sequence[int]) -> float:
    """Standard deviation around each regime's mean, with one degree of freedom per regime."""
    bounds = [*starts, values.size]
    squares = sum(
        float(np.sum((values[a:b] - np.mean(values[a:b])) ** 2)) for a, b in itertools.pairwise(bounds)
    )
    return math.sqrt(squares / max(1, values.size - len(starts)))


# --- kinds ----------------------------------------------------------------------------------------------


def _classify(
    cleaned: Array,
    stretches: Sequence[_Stretch],
    stretch_intervals: Sequence[tuple[int, int]],
    per_night: float,
) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    for number, stretch in enumerate(stretches):
        ends = [*stretch.bounds[1:], stretch.stop]
        for j, (a, b) in enumerate(zip(stretch.bounds, ends, strict=True)):
            drift = stretch.drifting[j]
            opens_stretch = j == 0 and number > 0
            if not segments:
                kind: Kind = "drift" if drift else "level"
            elif drift:
                kind = "drift"
            elif opens_stretch and not _jumps(cleaned, segments[-1], (a, b), stretch.scale, per_night):
                kind = "spread"
            else:
                kind = "level"
            interval = stretch.intervals[j] if j else stretch_intervals[number]
            segments.append(
                Segment(a, b, kind, stretch.slopes[j], stretch.scale, opens_stretch, interval, stretch.noise)
            )
    return tuple(segments)


def _one_change(cleaned: Array, segments: tuple[Segment, ...], per_night: float) -> tuple[Segment, ...]:
    """A level shift beside a change of scale, inside its likely nights, is that same change, at the
    shift's night: a jump is placed to the night, a change of scale only roughly, and noisy nights on the
    calm side of a misplaced split look like a shift of their own. Whether the one change is a level shift
    or a spread change is then asked again, of the regimes on either side of it."""
    merged = list(segments)
    i = 1
    while i < len(merged):
        spread = merged[i]
        low, high = spread.interval
        before = merged[i - 1] if i > 1 else None
        after = merged[i + 1] if i + 1 < len(merged) else None
        if not spread.spread_change or spread.kind == "drift":
            i += 1
            continue
        if before and before.kind == "level" and not before.spread_change and low <= before.start <= high:
            one = replace(
                before, stop=spread.stop, scale=spread.scale, noise=spread.noise, spread_change=True
            )
            merged[i - 1 : i + 1] = [one]
            i -= 1
        elif after and after.kind == "level" and not after.spread_change and low <= after.start <= high:
            one = replace(after, scale=spread.scale, noise=spread.noise, spread_change=True)
            merged[i - 1 : i + 2] = [replace(merged[i - 1], stop=after.start), one]
        else:
            i += 1
            continue
        jumps = _jumps(cleaned, merged[i - 1], (one.start, one.stop), one.scale, per_night)
        merged[i] = replace(one, kind="level" if jumps else "spread")
        i += 1
    return tuple(merged)


def _jumps(cleaned: Array, before: Segment, after: tuple[int, int], scale: float, per_night: float) -> bool:
    """Whether the mean jumps where the noise scale changes: the jump, in units of its standard error,
    against the MBIC price of a change."""
    a, b = after
    left = cleaned[before.start : before.stop]
    t = np.arange(left.size, dtype=np.float64)
    if before.kind == "drift" and left.size > 2:
        slope, intercept = np.polyfit(t, left, 1)
        at = float(intercept + slope * left.size)
        centred = left.size - float(t.mean())
        left_var = before.scale**2 * (1 / left.size + centred**2 / float(np.sum((t - t.mean()) ** 2)))
    else:
        at = float(np.mean(left))
        left_var = before.scale**2 / left.size
    jump = float(np.mean(cleaned[a:b])) - at
    return jump**2 / (left_var + scale**2 / (b - a)) > per_night


# --- step 10: every change judged again against the residuals of the whole fit -------------------------


def _noise_pool(values: Array, segments: Sequence[Segment]) -> Array:
    """Every night's distance to its own regime (its median, or its line), in units of its stretch's
    night-to-night scale, sorted: the noise's own distribution, tails and skew included."""
    parts = []
    for s in segments:
        part = values[s.start : s.stop]
        centred = (
            fit_residuals(values, s.start, s.stop, True)[0] if s.kind == "drift" else part - median(part)
        )
        parts.append(centred / max(s.noise, 1e-300))
    return np.sort(np.concatenate(parts))


def _spread_gain(cleaned: Array, before: Segment, after: Segment) -> float:
    """`2 ln LR` of a change of the noise scale at `after.start`, measured on the night-to-night
    differences of the residuals around each side's own level or line: a drift's slope is no part of the
    spread, and differences leave out the slow bend a line misses on a curve. Each side's variance is
    half the mean square of its differences. For Gaussian noise neighbouring differences correlate at
    -1/2, so their squares at 1/4, and a log-variance's variance is `1 + 2/4 = 1.5` times an independent
    sample's; heavier tails raise both the squares' kurtosis, by `(kappa - 1) / 2` (Box 1953), and their
    correlation. The statistic is divided by that long-run factor, measured, and never below 1.5."""
    left = np.diff(fit_residuals(cleaned, before.start, before.stop, before.kind == "drift")[0])
    right = np.diff(fit_residuals(cleaned, after.start, after.stop, after.kind == "drift")[0])
    v_left, v_right = float(np.mean(left**2)), float(np.mean(right**2))
    if min(v_left, v_right) <= 0 or min(left.size, right.size) < 2:
        return math.inf if min(v_left, v_right) <= 0 else 0.0
    pooled = (left.size * v_left + right.size * v_right) / (left.size + right.size)
    lr = (left.size + right.size) * math.log(pooled)
    lr -= left.size * math.log(v_left) + right.size * math.log(v_right)
    squares = [left**2 / v_left, right**2 / v_right]  # mean 1 on each side
    kurtosis = float(np.mean(np.concatenate(squares) ** 2))
    lag1 = sum(float(np.sum((q[1:] - 1) * (q[:-1] - 1))) for q in squares)
    lag0 = sum(float(np.sum((q - 1) ** 2)) for q in squares)
    factor = (kurtosis - 1) / 2 * (1 + 2 * max(0.0, lag1 / lag0 if lag0 > 0 else 0.0))
    return lr / max(1.5, factor)


def _merge(
    cleaned: Array, segments: tuple[Segment, ...], per_night: float, values: Array
) -> tuple[Segment, ...]:
    """Backward elimination: the change that saves least, judged on the finished fit, is removed while it
    saves less than its price.

    Steps 4-7 search each stretch of one noise scale at that stretch's long-run scale, which is
    measured around levels; once the whole series is fitted (levels, lines, turns, stretches), the
    residuals around that fit say how much a segment's mean still wanders. A change of level or slope
    must save more than `per_night` in units of the larger of that wander (the long-run scale of the
    fit's residuals, as step 2 measures one) and the two segments' own scales. Where the noise scale
    changes, the change may pay instead as a change of the variance of the residuals around each side's
    level or line (`_spread_gain`), so that a change of slope, which a first difference's square
    carries, is not read as a change of spread. A step between two levels must besides be more than
    the noise's own tail (`noise.median_beyond` on the nights as they are, `values`): the Gaussian price
    takes a few nights of a long one-sided tail (a timing's slow nights) for a level. The merged nights
    take the better of a level and a priced line."""
    merged = list(segments)
    if len(merged) < 2:
        return segments

    def cost(a: int, b: int, line: bool, scale: float) -> float:
        """The nights `a:b`' sum of squares in units of `scale^2`, a line's slope priced as in step 5."""
        residuals = fit_residuals(cleaned, a, b, line)[0]
        price = float(_slope_price(a, b, cleaned.size, per_night)) if line else 0.0
        return float(np.dot(residuals, residuals)) / scale**2 + price

    residuals = np.concatenate(
        [fit_residuals(cleaned, s.start, s.stop, s.kind == "drift")[0] for s in merged]
    )
    # The AR(1) long-run scale of the residuals, bounded by the series' own long-run spread, as step 2
    # starts its search; or their Bartlett long-run scale, if larger.
    ceiling = long_run_sd(cleaned - median(cleaned))
    wander = max(long_run_sd(residuals), starting_scale(residuals, noise_scale(residuals), ceiling))
    while len(merged) > 1:
        gains = []
        pool = _noise_pool(values, merged)
        for before, after in itertools.pairwise(merged):
            scale = max(wander, before.scale, after.scale)
            apart = cost(before.start, before.stop, before.kind == "drift", scale)
            apart += cost(after.start, after.stop, after.kind == "drift", scale)
            together = min(cost(before.start, after.stop, line, scale) for line in (False, True))
            # Where the noise scale changes, the change stays if either its spread or its mean pays.
            spread = _spread_gain(cleaned, before, after) if after.spread_change else 0.0
            gain = max(together - apart, spread)
            if not after.spread_change and before.kind != "drift" and after.kind != "drift":
                # A step between two levels must pay at the Gaussian price...
                short, long_ = sorted((before, after), key=lambda seg: seg.stop - seg.start)
                # ... and be more than the noise's own tail: the short side's median, against the
                # distribution of every night around its own regime (`noise.median_beyond`).
                away = median_beyond(
                    values[short.start : short.stop], values[long_.start : long_.stop], long_.noise, pool
                )
                gain = min(gain, away)
            gains.append(gain)
        k = int(np.argmin(gains))
        if gains[k] > per_night:
            break
        before, after = merged[k], merged[k + 1]
        scale = max(before.scale, after.scale)
        line = cost(before.start, after.stop, True, scale) < cost(before.start, after.stop, False, scale)
        kind: Kind = "drift" if line else ("spread" if before.kind == "spread" else "level")
        slope = fit_residuals(cleaned, before.start, after.stop, True)[1] if line else 0.0
        merged[k : k + 2] = [replace(before, stop=after.stop, kind=kind, slope=slope, scale=scale)]
    return tuple(merged)
