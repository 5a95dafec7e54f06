"""False alarms of the budget rule on correlated noise that is not the AR(1) its scans whiten by.

The budget rule (gatecfg/budget.py) scans AR-like steps (rho >= 0.5) for a trend and a block's edges,
whitened as AR(1), and scales its split of the budget by the joint null of that model. Its promise is
about any correlation: at most `false_alarm` of clean nights fail. This prints, per noise and step count,
the share of clean nights the rule fails at false_alarm 0.01, each judged against the 20 nights before
it, with its 95% Wilson interval:

    python benchmarks/misspecified_noise.py [--nights 1500] [--steps 20,100] [--seed 11]

Noises (sd 0.1 around 1.5; the shift is shared by every step of a night):

* `ar1+shift0.3`, `ar1+shift0.6`: AR(1) at rho 0.9 plus a per-night shift of 0.3 or 0.6 of its spread;
* `ar0.97`: AR(1) closer to a random walk than the rule's largest bucket of rho treats exactly;
* `ar1+ar0.5`: two AR(1) components, rho 0.95 and 0.5 (no single rho describes them);
* `walk`: a random walk along the run, scaled to the run's length.

A candidate change to the rule (a model-based spread, a larger scale of the split) should keep these
at or under 1%. Measured with the defaults: the rule before the joint null 0.27-0.80%, with it
0.27-0.87%; a trend threshold from the AR(1) model's unit spread instead of the past nights' measured
one (tried for the 20-step AR(1) drift of issue 12, which it lifts from 42% to 53% at a matched 1%)
0.33-1.53%: `walk` at 20 steps 1.53% [1.0, 2.3], `ar1+shift0.3` at 100 steps 1.33% [0.9, 2.1]; dropped.
The trend's spread pooled from its jumps' autocovariance at every lag (shipped,
`correlated.trend_spread`), with `--nights 4000`: 0.28-0.80% (0.23-0.78% with the past nights' trend
scores, side by side).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_quality import ar1_noise, wilson

from gatecfg.budget import decide

Array = np.ndarray
WINDOW = 20


NOISES: dict[str, Callable[[np.random.Generator, int, int], Array]] = {
    "ar1+shift0.3": lambda rng, n, m: ar1_noise(rng, n, m, 0.9) + 0.3 * rng.standard_normal((n, 1)),
    "ar1+shift0.6": lambda rng, n, m: ar1_noise(rng, n, m, 0.9) + 0.6 * rng.standard_normal((n, 1)),
    "ar0.97": lambda rng, n, m: ar1_noise(rng, n, m, 0.97),
    "ar1+ar0.5": lambda rng, n, m: ar1_noise(rng, n, m, 0.95) + 0.7 * ar1_noise(rng, n, m, 0.5),
    "walk": lambda rng, n, m: np.cumsum(rng.standard_normal((n, m)), axis=1) / math.sqrt(m),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=1500, help="clean nights judged per cell")
    parser.add_argument("--steps", default="20,100", help="steps per run, comma-separated")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    print("| noise | steps | false alarms % [95% CI] |")
    print("|---|---|---|")
    for name, noise in NOISES.items():
        for m in (int(s) for s in args.steps.split(",")):
            rng = np.random.default_rng([args.seed, m, list(NOISES).index(name)])
            runs = 1.5 + 0.1 * noise(rng, args.nights + WINDOW, m)
            failed = sum(
                decide(runs[i], runs[i - WINDOW : i][::-1].T.copy(), direction="up", alpha=0.01).fired
                for i in range(WINDOW, len(runs))
            )
            lo, hi = wilson(failed, args.nights)
            print(f"| {name} | {m} | {100 * failed / args.nights:.2f} [{100 * lo:.1f}, {100 * hi:.1f}] |")


if __name__ == "__main__":
    main()
