"""Which reading of a nightly series holds: levels and lines in noise (`changepoints.levels`), a random
walk whose drift and step size change, each in the metric's units or in logs, chosen by Vuong's (1989)
one-sided test of their penalised likelihoods; `detect`, the regimes `gatecfg regimes` reports
(docs/analytics.md, "How regimes are found", steps 11 and 12).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from gatecfg import moments
from gatecfg.analysis.changepoints import MBIC_CHANGE, Detection, Kind, Segment, levels
from gatecfg.analysis.noise import MIN_REGIME, NUMERIC_NOISE, Array, fit_residuals, median

# One-sided 5% point of the standard normal.
Z_95 = NormalDist().inv_cdf(0.95)


def detect(series: Sequence[float], coordinates: int = 1) -> Detection:
    """Regimes of `series` (finite values in time order), one of `coordinates` series scanned together.

    Two readings of the nights compete (step 11 of docs/analytics.md): levels and lines in noise that
    does not accumulate (`changepoints.levels`), and a random walk whose drift and step size change
    (`_walk`, the same search on the night-to-night differences). The walk is reported only where its
    penalised likelihood is better by Vuong's test. A positive metric is then read in logs as well, and
    reported as read there where that is likelier by the same test (step 12).

    A series beyond `moments.LARGE` in magnitude (a diverged run near the float maximum), whose squares
    leave the float range, is read scaled by a power of two (exact), and its figures are scaled back."""
    values = np.asarray(series, dtype=np.float64)
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if moments.LARGE < top < math.inf:
        exponent = math.frexp(top)[1]
        return _scaled(_detect(np.ldexp(values, -exponent), coordinates), exponent)
    return _detect(values, coordinates)


def _scaled(found: Detection, exponent: int) -> Detection:
    """A detection's figures in the metric's units times `2**exponent`."""

    def up(x: float, power: int = 1) -> float:
        with np.errstate(over="ignore"):  # a penalty in units squared may leave the float range
            return float(np.ldexp(x, power * exponent))

    segments = tuple(
        replace(s, slope=up(s.slope), scale=up(s.scale), noise=up(s.noise)) for s in found.segments
    )
    return replace(found, segments=segments, sigma=up(found.sigma), penalty=up(found.penalty, 2))


def _detect(values: Array, coordinates: int) -> Detection:
    found = levels(values, coordinates)
    if len(found.segments) < 2:
        # One regime already: the walk reading could only add changes of drift to a series that the
        # levels reading, which prices noise that wanders, reads as one stretch, and logs only reshape
        # noise that holds one scale (skipping both keeps `--all` over thousands of quiet coordinates
        # at one search each).
        return found
    in_units = _reading(values, coordinates, found)
    if not bool(np.all(values > 0)):
        return in_units.detection
    logs = np.log(values)
    in_logs = _reading(logs, coordinates, levels(logs, coordinates))
    # A night's density in the metric's units is its density in logs over the value: `-2 ln` of it is
    # the one in logs plus `2 ln y` (the Jacobian), taken where the reading judged the night (an outlier
    # at its neighbourhood's median), and the two readings compare as any two models do.
    if _beats(replace(in_logs, terms=in_logs.terms + 2 * in_logs.kept[1:]), in_units):
        return _in_metric_units(in_logs.detection, values)
    return in_units.detection


@dataclass(frozen=True)
class _Reading:
    """A reading of the nights: `-2 ln` of each night's likelihood after the first, the reading's price,
    and the nights as judged (outliers at their neighbourhood's median)."""

    detection: Detection
    terms: Array
    price: float
    kept: Array


def _beats(challenger: _Reading, standing: _Reading) -> bool:
    """Vuong's (1989) test of non-nested models, penalised: the challenger must fit better by more than
    noise in the nights' likelihood ratios would make it, one-sided at 5%. Short of that the standing
    reading stays."""
    gains = standing.terms - challenger.terms
    spread = float(np.std(gains)) * math.sqrt(gains.size)
    favour = float(np.sum(gains)) - (challenger.price - standing.price)
    return spread > 0 and favour > Z_95 * spread


def _reading(values: Array, coordinates: int, found: Detection) -> _Reading:
    """The levels reading `found` of the nights, or their walk reading where that is likelier."""
    per_night = MBIC_CHANGE * math.log(values.size) + 2 * math.log(max(1, coordinates))
    # Both are judged on the same nights, with the outliers the levels reading set aside in its
    # neighbourhood's median (step 3): a crashed night is no evidence for either reading.
    kept = values.copy()
    for i in found.outliers:
        kept[i] = median(values[max(0, i - MIN_REGIME + 1) : i + MIN_REGIME])
    level = _Reading(found, *_pointwise(kept, found, per_night, walk=False), kept)
    if len(found.segments) < 2:
        return level
    walk = _walk(values, coordinates)
    as_walk = _Reading(walk, *_pointwise(kept, walk, per_night, walk=True), kept)
    # A staircase of a few shifts is both readings, and stays levels, the model of a metric that holds
    # a level.
    return as_walk if _beats(as_walk, level) else level


def _in_metric_units(found: Detection, values: Array) -> Detection:
    """A reading made in logs, its figures put back in the metric's units: a noise scale in logs is a
    relative one, so times the regime's median; a drift's slope is its least-squares line's."""

    def back(s: Segment) -> Segment:
        level = median(values[s.start : s.stop])
        slope = fit_residuals(values, s.start, s.stop, True)[1] if s.kind == "drift" else 0.0
        return replace(s, slope=slope, scale=s.scale * level, noise=s.noise * level)

    segments = tuple(back(s) for s in found.segments)
    sigma = found.sigma * median(values[found.segments[-1].start :])
    per_night = found.penalty / found.sigma**2 if found.sigma > 0 else 0.0
    return replace(found, segments=segments, sigma=sigma, penalty=per_night * sigma**2, in_logs=True)


def _walk(values: Array, coordinates: int) -> Detection:
    """The walk reading: the nights accumulate their steps (a yearly economic figure, a count that
    grows), so what changes is the drift (the mean step) or the size of the steps. It is the levels
    reading's search run on the differences `d[k] = y[k+1] - y[k]`: a level of the differences is a
    drift of the nights, a change of their spread a change of the walk's spread, and differences `a:b`
    carry the nights `a+1..b` (the first regime keeps night 0). A regime drifts where its mean step
    pays a slope's price (`per_night` in units of the steps' variance over the regime's steps, as step 5
    prices a line); otherwise it is a level that wanders. A night is an outlier where both differences
    around it are: one wild difference alone is a jump of the walk, not a night out of place."""
    differences = np.diff(values)
    steps = levels(differences, coordinates)
    n = values.size
    per_night = MBIC_CHANGE * math.log(n) + 2 * math.log(max(1, coordinates))
    wild = set(steps.outliers)
    segments: list[Segment] = []
    for inner in steps.segments:
        start = inner.start + 1 if segments else 0
        # A line in the steps (a drift that speeds up) is read by its mean step: the kinds say whether
        # a regime moves, not how its speed bends, and the likelihood of step 11 is taken the same way.
        mean = float(np.mean(differences[inner.start : inner.stop]))
        drifts = inner.scale > 0 and mean**2 * (inner.stop - inner.start) > per_night * inner.scale**2
        # As in the levels reading, a regime that moves is a drift whatever opened it.
        kind: Kind = "drift" if drifts else ("spread" if inner.kind == "spread" else "level")
        low, high = inner.interval
        segments.append(
            Segment(
                start,
                inner.stop + 1,
                kind,
                mean if drifts else 0.0,
                inner.scale,
                inner.spread_change,
                (low + 1, high + 1) if segments else (0, 0),
                inner.noise,
            )
        )
    outliers = tuple(k for k in range(1, n - 1) if k - 1 in wild and k in wild)
    return Detection(tuple(segments), steps.sigma, steps.penalty, outliers)


def _pointwise(values: Array, detection: Detection, per_night: float, *, walk: bool) -> tuple[Array, float]:
    """`-2 ln` of each night's likelihood after the first (given the nights before it) under a reading,
    and the reading's price.

    Both readings are Gaussian models of the same nights, so their likelihoods compare directly (the
    walk's is that of the differences: differencing has a unit Jacobian). In both, the noise of each
    stretch of one noise scale is AR(1), its coefficient fitted by least squares and its variance by
    maximum likelihood: levels in AR(1) noise (which at a coefficient of 1 is a walk) against a walk
    whose steps are AR(1) (growth that persists from one night to the next, as a yearly economic
    figure's does). Neither reading is held to white noise, which would hand the comparison to
    whichever one's noise happens to be the less autocorrelated. Prices: `per_night` per change and
    per line's slope (steps 4-5), `ln n` per AR(1) coefficient (BIC's price of a regular parameter; a
    place of change is no regular parameter, whence MBIC's larger one)."""
    n = values.size
    y = np.diff(values) if walk else values
    offset = 1 if walk else 0  # differences `a:b` carry the nights `a+1..b`
    price = per_night * (len(detection.segments) - 1)
    residuals = np.empty(y.size)
    for s in detection.segments:
        a, b = max(0, s.start - offset), s.stop - offset
        line = s.kind == "drift" and not walk  # the walk's drift is its differences' level
        price += per_night if line else 0.0
        residuals[a:b] = fit_residuals(y, a, b, line)[0]
    innovations = residuals.copy()
    variances = np.empty(y.size)
    starts = [max(0, s.start - offset) for s in detection.segments if s.spread_change or s.start == 0]
    floor = (NUMERIC_NOISE * float(np.max(np.abs(y)))) ** 2 or 1e-300
    for a, b in itertools.pairwise([*starts, y.size]):
        # Each value from the stretch's second on is predicted from the one before it.
        first = max(a, 1)
        now, before = residuals[first:b], residuals[first - 1 : b - 1]
        phi = float(np.dot(now, before)) / max(float(np.dot(before, before)), 1e-300)
        innovations[first:b] = now - min(max(phi, -1.0), 1.0) * before
        price += math.log(n)
        part = innovations[max(a, 1 - offset) : b]  # night 0 is given
        variances[a:b] = max(float(np.dot(part, part)) / max(1, part.size), floor)
    kept = slice(1 - offset, y.size)
    return np.log(variances[kept]) + innovations[kept] ** 2 / variances[kept], price
