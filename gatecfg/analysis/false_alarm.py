"""False-alarm estimates: how likely a gate is to fail tomorrow's nightly when nothing regressed.

The probability that a new value, drawn from the metric's own distribution (binomial when it is a mean of
`trials`, else a smoothed empirical density; a budget gate's own `false_alarm`), falls outside what the
gate lets pass today. The distribution is read from the newest values nobody untrusted by hand, not from
the trusted baseline, which the gate itself has cleared of low draws. Why each choice:
docs/calibration.md, "False-alarm estimates".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gatecfg.band import Band, band
from gatecfg.resolve import Policy, ResolvedGate, ResolvedTest
from gatecfg.store import Store
from gatecfg.verdicts import allowed_failures, needed_history

Method = Literal["binomial", "empirical", "budget"]
TrialsSource = Literal["declared", "detected"]

MIN_VALUES = 5  # fewer nightly values than this: no estimate, the distribution is unknown
MAX_TRIALS = 1000  # detection looks for a mean of at most this many trials
GRID_TOLERANCE = 1e-6  # how close v*n must be to a whole number for v to count as k/n
# Two-sided level of the dispersion test a detected binomial must pass: values rounded to two decimals
# are multiples of 1/100 too, but far less spread than a mean of 100 coin flips.
DISPERSION_ALPHA = 0.001


@dataclass(frozen=True)
class Estimate:
    method: Method
    probability: float
    values: int  # nightly values the distribution rests on (the fewest over the steps combined)
    steps: int = 1
    trials: int | None = None
    trials_source: TrialsSource | None = None
    p: float | None = None  # the binomial success probability, for one step

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "probability": self.probability,
            "values": self.values,
            "steps": self.steps,
            "trials": self.trials,
            "trials_source": self.trials_source,
            "p": self.p,
        }

    def describe(self) -> str:
        if self.method == "binomial" and self.trials is not None:
            what = f"binomial, {self.trials} trials ({self.trials_source})"
            if self.p is not None:
                what += f", p={self.p:.4g}"
        else:
            what = self.method
        if self.steps > 1:
            what += f", {self.steps} steps"
        return f"{self.probability:.1%} ({what}, {self.values} nightly values)"


def passing_interval(gate: ResolvedGate, current: Band, policy: Policy) -> tuple[float, float] | None:
    """The closed interval of values `judge` passes at this coordinate; None when it cannot fail.

    Limits read no history and apply even to a cold coordinate; the band applies once it has enough values.
    """
    if not gate.gated:
        return None
    lo, hi = -math.inf, math.inf
    if gate.limits is not None:
        lo = gate.limits.min if gate.limits.min is not None else lo
        hi = gate.limits.max if gate.limits.max is not None else hi
    if gate.constraint is not None and current.n >= needed_history(gate, policy):
        lo = max(lo, current.lo) if current.lo is not None else lo
        hi = min(hi, current.hi) if current.hi is not None else hi
    if math.isinf(lo) and math.isinf(hi):
        return None
    return lo, hi


def detect_trials(values: Sequence[float]) -> int | None:
    """The smallest n <= MAX_TRIALS that makes every value k/n, if a binomial mean of n trials could
    have the values' spread; None otherwise."""
    if len(values) < MIN_VALUES or any(not 0.0 <= v <= 1.0 for v in values):
        return None
    p = math.fsum(values) / len(values)
    if p in (0.0, 1.0):
        return None
    for n in range(1, MAX_TRIALS + 1):
        if all(abs(v * n - round(v * n)) <= GRID_TOLERANCE for v in values):
            return n if _binomial_spread(values, n, p) else None
    return None


def _variance(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _binomial_spread(values: Sequence[float], n: int, p: float) -> bool:
    """(m - 1) s^2 / (p (1 - p) / n) is chi-square with m - 1 degrees of freedom for binomial means."""
    # Deferred: scipy.special costs half a second to import and only detection needs it.
    from scipy.special import chdtri

    df = len(values) - 1
    statistic = df * _variance(values) / (p * (1 - p) / n)
    # chdtri(df, q) is the x with P(X > x) = q.
    low, high = chdtri(df, 1 - DISPERSION_ALPHA / 2), chdtri(df, DISPERSION_ALPHA / 2)
    return bool(low <= statistic <= high)


def _binomial_pmf(k: int, n: int, p: float) -> float:
    if p in (0.0, 1.0):
        return float(k == (0 if p == 0.0 else n))
    log = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return math.exp(log + k * math.log(p) + (n - k) * math.log1p(-p))


def binomial_probability(trials: int, p: float, interval: tuple[float, float]) -> float:
    """P(k/trials outside [lo, hi]) for k ~ Binomial(trials, p), compared exactly as `Band.contains` does."""
    lo, hi = interval
    # Summing the outside mass keeps small probabilities exact (1 - inside would cancel them away).
    outside = (_binomial_pmf(k, trials, p) for k in range(trials + 1) if not lo <= k / trials <= hi)
    return min(1.0, math.fsum(outside))


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def empirical_probability(values: Sequence[float], interval: tuple[float, float]) -> float:
    """P(outside [lo, hi]) under a variance-preserving Gaussian kernel density of `values`
    (of their logarithms when all are positive)."""
    lo, hi = interval
    if min(values) > 0:
        values = [math.log(v) for v in values]
        lo = math.log(lo) if lo > 0 else -math.inf
        hi = math.log(hi) if hi > 0 else -math.inf  # every positive value is above it
    mean = math.fsum(values) / len(values)
    sd = math.sqrt(_variance(values))
    if sd == 0.0:
        return 0.0 if lo <= mean <= hi else 1.0
    factor = len(values) ** (-1 / 5)  # Scott's rule in one dimension
    shrink = 1 / math.sqrt(1 + factor**2)
    width = sd * factor * shrink
    tails = (
        _normal_cdf((lo - c) / width) + _normal_cdf((c - hi) / width)
        for c in (mean + (v - mean) * shrink for v in values)
    )
    return min(1.0, math.fsum(tails) / len(values))


def step_estimate(
    gate: ResolvedGate, policy: Policy, current: Band, distribution: Sequence[float]
) -> Estimate | None:
    """The chance that one coordinate fails a night, or None (it cannot fail, or too few values)."""
    if gate.constraint is not None and gate.constraint.budget is not None:
        return _budget(gate, policy, [len(distribution)])
    interval = passing_interval(gate, current, policy)
    if interval is None or len(distribution) < MIN_VALUES:
        return None
    trials = gate.trials
    source: TrialsSource = "declared"
    if trials is None:
        trials, source = detect_trials(distribution), "detected"
    # A declared count over values outside [0, 1] is a mistake the binomial cannot absorb.
    if trials is not None and all(0.0 <= v <= 1.0 for v in distribution):
        p = math.fsum(distribution) / len(distribution)
        return Estimate(
            method="binomial",
            probability=binomial_probability(trials, p, interval),
            values=len(distribution),
            trials=trials,
            trials_source=source,
            p=p,
        )
    return Estimate(
        method="empirical",
        probability=empirical_probability(distribution, interval),
        values=len(distribution),
    )


def _budget(gate: ResolvedGate, policy: Policy, sizes: Sequence[int]) -> Estimate | None:
    """A budget gate's estimate: its `false_alarm`, once every step's window can judge."""
    if not sizes or min(sizes) < max(MIN_VALUES, needed_history(gate, policy)):
        return None
    return Estimate(method="budget", probability=gate.false_alarm, values=min(sizes), steps=len(sizes))


def combine(gate: ResolvedGate, estimates: Sequence[Estimate]) -> Estimate | None:
    """A many-step gate's chance to fail a night: more failing steps than `tolerate` allows, with the
    steps taken as independent."""
    if not estimates:
        return None
    if len(estimates) == 1:
        return estimates[0]
    allowed = allowed_failures(gate.tolerate, len(estimates))
    # P(exactly j failing) for j = 0..allowed, and one last cell for "more than allowed" (absorbing).
    cells = [1.0] + [0.0] * (allowed + 1)
    for e in estimates:
        q = e.probability
        cells = [
            cells[0] * (1 - q),
            *(cells[j] * (1 - q) + cells[j - 1] * q for j in range(1, allowed + 1)),
            cells[-1] + cells[allowed] * q,
        ]
    # The method of the steps that can fail at all: a constant step (probability 0) decides nothing.
    deciding = [e for e in estimates if e.probability > 0] or list(estimates)
    methods = {e.method for e in deciding}
    trials = {e.trials for e in deciding}
    sources = {e.trials_source for e in deciding}
    return Estimate(
        method="binomial" if methods == {"binomial"} else "empirical",
        probability=min(1.0, max(0.0, cells[-1])),
        values=min(e.values for e in estimates),
        steps=len(estimates),
        trials=trials.pop() if len(trials) == 1 else None,
        trials_source=sources.pop() if len(sources) == 1 else None,
    )


def gate_estimate(
    gate: ResolvedGate,
    policy: Policy,
    bands: Mapping[int, Band],
    distributions: Mapping[int, Sequence[float]],
) -> Estimate | None:
    """A gate's nightly false-alarm estimate from the band of each step and each step's nightly values."""
    if gate.constraint is not None and gate.constraint.budget is not None:
        return _budget(gate, policy, [len(distributions.get(step, ())) for step in bands])
    found = [
        e
        for step in sorted(bands)
        if (e := step_estimate(gate, policy, bands[step], distributions.get(step, ()))) is not None
    ]
    return combine(gate, found)


def current_estimates(store: Store, test: ResolvedTest, series: str) -> dict[str, Estimate | None]:
    """Each gate's estimate for the next nightly, from the store as `evaluate` would read it now:
    the band from the policy's baseline, the distribution from every nightly not untrusted by hand."""
    policy = test.policy
    coordinates = {g.metric: g.coordinate(series) for g in test.gates}
    windows = store.baselines(list(coordinates.values()), window=policy.window, baseline=policy.baseline)
    nightly = store.baselines(list(coordinates.values()), window=policy.window, baseline="nightly")
    found: dict[str, Estimate | None] = {}
    for gate in test.gates:
        coordinate = coordinates[gate.metric]
        steps = {step for c, step in (*windows, *nightly) if c == coordinate}
        bands = {
            step: band(gate.constraint, windows.get((coordinate, step), []), policy.reference)
            for step in steps
        }
        distributions = {step: nightly.get((coordinate, step), []) for step in steps}
        found[gate.metric] = gate_estimate(gate, policy, bands, distributions)
    return found
