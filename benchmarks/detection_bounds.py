"""Oracle bounds: the most any rule can detect at 1% false alarms per night, for the cases where the
shipped defaults fall short of issue 12's targets.

    python benchmarks/detection_bounds.py [--nights 400000] [--seed 0]

An oracle knows the noise exactly (its distribution, every step's location and scale, the night's shared
shift, which steps spiked and by how much): everything but whether and where tonight's regression sits.
Its test is the Neyman-Pearson one for the benchmark's regression, the likelihood ratio averaged over
the block's possible positions (the benchmark draws the position uniformly), failing the night where the
ratio passes its 99th percentile on clean nights. No rule that must estimate the noise from 20 past
nights can detect more; a rule that must also survive a spike it cannot tell from a regression, less.

Cases (the families of benchmarks/gate_quality.py, same parameters):

* a 3 sigma shift of a contiguous 10% block at 20 steps (two steps), Gaussian noise, and the families
  of the shipped defaults: lognormal (KL-like), Bernoulli (16 coins), spiky (grad norm);
* the same for the Bernoulli reward with each step's p estimated from the 20 past nights (320 coins per
  step), as any rule must: the estimated-noise bound of the reward default (`trials: 16`), its threshold
  still set at exactly 1% by simulation, which no rule can do; and the block scan that does not know
  the shift's size (the largest two-step mean of binomial z scores), calibrated the same way;
* one value of the rare-event rate (the tito gates' `steps: last`), shifted by 3 sigma: the oracle that
  knows the binomial distribution fails the night when the count is high enough (a threshold on the
  value, randomised at the boundary to spend exactly 1%); beside it a known normal distribution;
* AR(1) noise at rho 0.9 over 20 steps (the `ar1` family): a shift of every step by 3 sigma, and the
  drift from 0 at the first step to 3 sigma at the last. Both shapes are known to the oracle, so its test
  is the generalised least squares projection on that shape, normal with a signal-to-noise ratio of
  3 sqrt(s' R^-1 s) (R the AR(1) correlation, s the shape): exact, no simulation. Beside each, the same
  test with each step's location taken from the 20 past nights (variance 1 + 1/20 of the oracle's).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from scipy import stats
from scipy.special import logsumexp

STEPS = 20
WIDTH = 2  # ceil(10% of 20), as gate_quality.variants places it
ALPHA = 0.01
K = 3.0


def _power(null_score: np.ndarray, alt_score: np.ndarray) -> float:
    threshold = float(np.quantile(null_score, 1.0 - ALPHA))
    return float((alt_score > threshold).mean())


def _mixture(log_lr_steps: np.ndarray) -> np.ndarray:
    """log of the likelihood ratio averaged over block positions, from each step's log ratio
    (nights x steps)."""
    starts = STEPS - WIDTH + 1
    blocks = sum(log_lr_steps[:, k : k + starts] for k in range(WIDTH))
    return logsumexp(blocks, axis=1) - math.log(starts)


def _block(rng: np.random.Generator, nights: int) -> np.ndarray:
    mask = np.zeros((nights, STEPS), bool)
    starts = rng.integers(0, STEPS - WIDTH + 1, nights)
    for k in range(WIDTH):
        mask[np.arange(nights), starts + k] = True
    return mask


def gaussian(rng: np.random.Generator, nights: int) -> float:
    def score(z: np.ndarray) -> np.ndarray:
        return _mixture(K * z - K * K / 2.0)

    null = rng.standard_normal((nights, STEPS))
    alt = rng.standard_normal((nights, STEPS)) + K * _block(rng, nights)
    return _power(score(null), score(alt))


def _lognormal_case(
    rng: np.random.Generator, nights: int, centre: np.ndarray, tau: float, total: float
) -> float:
    """Per step a lognormal with known location `centre` (the night's shift included) and log sd `tau`;
    the regression adds 3 sigma in the metric's units, sigma its night-to-night sd (log sd `total`)."""
    sigma = centre * math.exp(total**2 / 2.0) * math.sqrt(math.exp(total**2) - 1.0)
    shift = K * sigma

    def log_f(v: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                v > 0,
                stats.norm.logpdf(np.log(np.maximum(v, 1e-300) / centre), scale=tau)
                - np.log(np.maximum(v, 1e-300)),
                -np.inf,
            )

    def score(v: np.ndarray) -> np.ndarray:
        return _mixture(log_f(v - shift) - log_f(v))

    null = centre * np.exp(tau * rng.standard_normal((nights, STEPS)))
    alt = centre * np.exp(tau * rng.standard_normal((nights, STEPS))) + shift * _block(rng, nights)
    return _power(score(null), score(alt))


def lognormal(rng: np.random.Generator, nights: int) -> float:
    centre = 0.002 + 0.002 * np.linspace(0.0, 1.0, STEPS)
    return _lognormal_case(rng, nights, centre, 0.5, math.hypot(0.1, 0.5))


def spiky(rng: np.random.Generator, nights: int) -> float:
    # Spikes known to the oracle are divided out; what remains is the per-step noise.
    centre = 0.5 + 0.5 * np.exp(-5.0 * np.linspace(0.0, 1.0, STEPS))
    return _lognormal_case(rng, nights, centre, 0.15, math.hypot(0.05, 0.15))


def bernoulli(rng: np.random.Generator, nights: int) -> float:
    trials = 16
    shift = K * 0.5 / math.sqrt(trials) * trials  # in coins: 6 of 16, downward

    def score(counts: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_lr = stats.binom.logpmf(counts + shift, trials, 0.5) - stats.binom.logpmf(counts, trials, 0.5)
            mixed = _mixture(np.where(counts < 0, 0.0, log_lr))
        # A count below 0 cannot happen on a clean night: such a night is certainly regressed.
        return np.where((counts < 0).any(axis=1), np.inf, mixed)

    null = rng.binomial(trials, 0.5, (nights, STEPS)).astype(float)
    alt = rng.binomial(trials, 0.5, (nights, STEPS)) - shift * _block(rng, nights)
    return _power(score(null), score(alt))


def bernoulli_estimated(rng: np.random.Generator, nights: int) -> float:
    """As `bernoulli`, each step's p the share of heads in its 20 past nights (320 coins): the plug-in
    likelihood ratio, its 99th percentile on clean nights drawn the same way."""
    trials, window = 16, 20
    shift = K * 0.5 / math.sqrt(trials) * trials

    def score(counts: np.ndarray, p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_lr = stats.binom.logpmf(counts + shift, trials, p) - stats.binom.logpmf(counts, trials, p)
            mixed = _mixture(np.where(counts < 0, 0.0, np.nan_to_num(log_lr, nan=0.0, neginf=-np.inf)))
        return np.where((counts < 0).any(axis=1), np.inf, mixed)

    def estimated() -> np.ndarray:
        heads = rng.binomial(trials * window, 0.5, (nights, STEPS))
        return np.clip(heads, 1, trials * window - 1) / (trials * window)  # p never exactly 0 or 1

    null = score(rng.binomial(trials, 0.5, (nights, STEPS)).astype(float), estimated())
    alt_counts = rng.binomial(trials, 0.5, (nights, STEPS)) - shift * _block(rng, nights)
    return _power(null, score(alt_counts, estimated()))


def bernoulli_scan(rng: np.random.Generator, nights: int) -> float:
    """The two-step block scan with each step's p from its 20 past nights, not told the shift's size:
    the largest mean of two neighbouring steps' binomial z scores (a block of the benchmark's width at any
    position), its 99th percentile on clean nights drawn the same way."""
    trials, window = 16, 20
    shift = K * 0.5 / math.sqrt(trials) * trials

    def score(counts: np.ndarray) -> np.ndarray:
        heads = rng.binomial(trials * window, 0.5, counts.shape)
        p = np.clip(heads, 1, trials * window - 1) / (trials * window)
        z = (trials * p - counts) / np.sqrt(trials * p * (1.0 - p))  # downward is harmful
        return (sum(z[:, k : STEPS - WIDTH + 1 + k] for k in range(WIDTH)) / WIDTH).max(axis=1)

    null = score(rng.binomial(trials, 0.5, (nights, STEPS)).astype(float))
    return _power(null, score(rng.binomial(trials, 0.5, (nights, STEPS)) - shift * _block(rng, nights)))


def ar1_shapes(rho: float = 0.9, window: int = 20) -> list[tuple[str, float, float]]:
    """(shape, oracle, location from `window` nights) detection at ALPHA for the `ar1` family's shift of
    every step and its drift, both 3 sigma: the GLS test of the known shape, exact."""
    lags = np.abs(np.subtract.outer(np.arange(STEPS), np.arange(STEPS)))
    inverse = np.linalg.inv(rho**lags)
    found = []
    for name, shape in (("every step", np.ones(STEPS)), ("drift 0 -> 3 sd", np.linspace(0.0, 1.0, STEPS))):
        snr = K * math.sqrt(float(shape @ inverse @ shape))
        critical = float(stats.norm.isf(ALPHA))
        found.append(
            (
                name,
                float(stats.norm.sf(critical - snr)),
                float(stats.norm.sf(critical - snr / math.sqrt(1.0 + 1.0 / window))),
            )
        )
    return found


def one_rare_value() -> tuple[float, float]:
    """(binomial oracle, known normal) for one value of a rate of 200 sessions at p 0.02, shifted by 3
    sigma, at exactly 1% false alarms."""
    n, p = 200, 0.02
    shift = K * math.sqrt(n * p * (1 - p))  # in sessions
    tail = stats.binom.sf(np.arange(n + 1) - 1, n, p)  # P(X >= k)
    k = int(np.flatnonzero(tail <= ALPHA)[0])  # the smallest count failing outright
    # At count k - 1 the night fails with the probability that spends the rest of the 1%.
    share = (ALPHA - tail[k]) / stats.binom.pmf(k - 1, n, p)
    # Shifted: X + shift >= k fails outright, X + shift >= k - 1 with that probability.
    outright = stats.binom.sf(math.ceil(k - shift) - 1, n, p)
    partial = stats.binom.sf(math.ceil(k - 1 - shift) - 1, n, p) - outright
    return float(outright + share * partial), float(stats.norm.sf(stats.norm.isf(ALPHA) - K))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=400_000, help="simulated nights per case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(
        f"oracle detection at {ALPHA:.0%} false alarms per night "
        f"({args.nights} nights per case, seed {args.seed})"
    )
    print()
    print("| case | oracle detection % |")
    print("|---|---|")
    for name, case in (
        ("gaussian", gaussian),
        ("lognormal (KL-like)", lognormal),
        ("bernoulli (16 coins)", bernoulli),
        ("spiky (grad norm)", spiky),
    ):
        print(f"| 3 sd over a 2-step block at 20 steps, {name} | {100 * case(rng, args.nights):.1f} |")
    estimated = bernoulli_estimated(rng, args.nights)
    print(
        "| 3 sd over a 2-step block at 20 steps, bernoulli, p per step from 20 nights | "
        f"{100 * estimated:.1f} |"
    )
    scan = bernoulli_scan(rng, args.nights)
    print(f"| the same, the best two-step block scan (size unknown), p from 20 nights | {100 * scan:.1f} |")
    binomial, normal = one_rare_value()
    print(f"| 3 sd on one value, rare-event rate (binomial 200, p 0.02) | {100 * binomial:.1f} |")
    print(f"| 3 sd on one value, known normal | {100 * normal:.1f} |")
    for name, oracle, plug_in in ar1_shapes():
        print(f"| 3 sd AR(1) rho 0.9, 20 steps, {name} | {100 * oracle:.1f} |")
        print(f"| 3 sd AR(1) rho 0.9, 20 steps, {name}, location from 20 nights | {100 * plug_in:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
