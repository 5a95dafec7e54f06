"""How much of its budget each statistic of the budget rule spends on clean nights.

The budget rule (gatecfg/budget.py) splits `false_alarm` over its statistics: the mean over all steps,
the blocks (together), on AR-like steps the trend and the edges, and the lone step, each share scaled up
by the joint null where the steps' noise has a model. This judges clean nights, each against the 20
before it, and prints per statistic the share of nights on which it alone exceeds its threshold beside
its nominal share, and the share the whole gate fails (any statistic), with 95% Wilson intervals:

    python benchmarks/budget_spending.py [--nights 20000] [--seed 5]

A statistic whose rate sits far under its share leaves budget unspent (docs/calibration.md, step 4 and
Limits); one far over it spends what another leaves. Noises (sd 0.1 around 1.5, harmful direction up):
AR(1) at rho 0.9 (the trend and the edges are scanned), independent Gaussian steps, and one step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_quality import ar1_noise, wilson

from gatecfg.budget import Null

Array = np.ndarray
WINDOW = 20
ALPHA = 0.01
STATISTICS = ("mean", "blocks", "trend", "edges", "step")

CASES: tuple[tuple[str, int, Callable[[np.random.Generator, int, int], Array]], ...] = (
    ("ar1", 20, lambda rng, n, m: ar1_noise(rng, n, m, 0.9)),
    ("ar1", 100, lambda rng, n, m: ar1_noise(rng, n, m, 0.9)),
    ("gaussian", 20, lambda rng, n, m: rng.standard_normal((n, m))),
    ("gaussian", 1, lambda rng, n, m: rng.standard_normal((n, m))),
)


def spending(runs: Array) -> tuple[dict[str, int], int, dict[str, float]]:
    """Clean nights on which each statistic alone fires, nights the gate fails, the mean nominal shares."""
    alone = dict.fromkeys(STATISTICS, 0)
    gate = 0
    shares = dict.fromkeys(STATISTICS, 0.0)
    for i in range(WINDOW, len(runs)):
        null = Null.of(runs[i - WINDOW : i][::-1].T.copy(), direction="up", alpha=ALPHA, trials=None)
        [(_, side)] = null.sides
        severity = null.statistics(null.standardise(runs[i]), side).severity
        fired = severity > 1.0
        blocks = len(null.starts)
        alone["mean"] += bool(fired[0])
        alone["blocks"] += bool(fired[1 : 1 + blocks].any())
        lone = int(len(runs[i]) > 1)  # the lone step comes last where there is more than one step
        if null.edges:
            alone["trend"] += bool(fired[-2 - lone])
            alone["edges"] += bool(fired[-1 - lone])
        if lone:
            alone["step"] += bool(fired[-1])
        gate += bool(fired.any())
        for name, share in zip(STATISTICS, null.budgets, strict=True):
            shares[name] += share
    nights = len(runs) - WINDOW
    return alone, gate, {name: total / nights for name, total in shares.items()}


def _pct(hits: int, nights: int) -> str:
    lo, hi = wilson(hits, nights)
    return f"{100 * hits / nights:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=20000, help="clean nights judged per case")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    print(
        "| noise | steps | gate fails % | "
        + " | ".join(f"{name} alone % (share %)" for name in STATISTICS)
        + " |"
    )
    print("|---|---|---|" + "---|" * len(STATISTICS))
    for k, (name, m, noise) in enumerate(CASES):
        rng = np.random.default_rng([args.seed, k])
        alone, gate, shares = spending(1.5 + 0.1 * noise(rng, args.nights + WINDOW, m))
        cells = [
            f"{_pct(alone[s], args.nights)} ({100 * shares[s]:.2f})" if shares[s] > 0 else "-"
            for s in STATISTICS
        ]
        print(f"| {name} | {m} | {_pct(gate, args.nights)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
