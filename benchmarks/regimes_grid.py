"""Validation grid of `gatecfg regimes`' detection: level shifts, drifts, spread changes, pure noise, noise
in proportion to the level, a season.

Prints the tables quoted in benchmarks/results/regimes.md. Every series is generated with a fixed seed, so
a run prints the same numbers; `--reps` scales the number of series per cell (the docs quote the default).

    python benchmarks/regimes_grid.py            # the full grid, a few minutes
    python benchmarks/regimes_grid.py --reps 5   # a quick look
    python benchmarks/regimes_grid.py --seeds 1  # the same grid on an independent set of series
    python benchmarks/regimes_grid.py --seeds 2 --jitter 0.6  # regime lengths of 40% to 160% of the cell's

The generators live in `tests/regimes_grid.py`, shared with the test suite's smaller grid. The script runs
against any version of gatecfg: a detection without kinds (before regimes told them apart) counts every
change point as a level shift.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from regimes_grid import (
    LEVEL_LENGTHS,
    LEVEL_SHIFTS,
    NOISES,
    Found,
    Score,
    drift_series,
    found_of,
    level_series,
    spread_series,
    step_series,
)


def _rng(seed: int, seeds: int) -> np.random.Generator:
    """The grid's generator for a table: its fixed seed, or with `--seeds N` an independent stream."""
    return np.random.default_rng(seed if seeds == 0 else [seeds, seed])


def level_table(reps: int, seeds: int, jitter: float) -> None:
    print("## level shifts: precision / recall (5 regimes, a found start within 2 nights counts)\n")
    print("| shift | " + " | ".join(f"regimes ~{n} nights" for n in LEVEL_LENGTHS) + " |")
    print("|---|" + "---|" * len(LEVEL_LENGTHS))
    pooled = Score()
    rng = _rng(20261130, seeds)
    for shift in LEVEL_SHIFTS:
        cells = []
        for length in LEVEL_LENGTHS:
            score = Score()
            for noise, outliers in itertools.product(NOISES, (0.0, 0.03)):
                for _ in range(reps):
                    series, truth = level_series(
                        rng, shift=shift, noise=noise, length=length, outliers=outliers, jitter=jitter
                    )
                    score.add(found_of(series).starts, truth)
            cells.append(f"P {score.precision:.2f} R {score.recall:.2f}")
            if shift >= 2 and length >= 10:
                pooled.merge(score)
        print(f"| {shift:g} sigma | " + " | ".join(cells) + " |")
    print(
        f"\nshifts >= 2 sigma over regimes >= 10 nights: precision {pooled.precision:.3f}, "
        f"recall {pooled.recall:.3f}\n"
    )


def drift_table(reps: int, seeds: int) -> None:
    print("## pure drifts (a flat lead of 30-150 nights, then a drift to the end)\n")
    print("share of series with exactly one drift regime and no level shift; [share with a level shift]\n")
    lengths = (100, 200, 300, 500)
    print("| total drift | " + " | ".join(f"over {n} nights" for n in lengths) + " |")
    print("|---|" + "---|" * len(lengths))
    rng = _rng(7, seeds)
    good = total = 0
    for size in (2.0, 3.0, 5.0, 10.0):
        cells = []
        for length in lengths:
            ok = level = 0
            for noise in NOISES:
                for _ in range(reps):
                    found = found_of(drift_series(rng, total=size, length=length, noise=noise))
                    ok += found.drifts == 1 and found.level_shifts == 0
                    level += found.level_shifts > 0
            count = reps * len(NOISES)
            good, total = good + ok, total + count
            cells.append(f"{ok / count:.2f} [{level / count:.2f}]")
        print(f"| {size:g} sigma | " + " | ".join(cells) + " |")
    print(f"\nall drifts: one drift and no level shift in {good / total:.3f} of series\n")


def spread_table(reps: int, seeds: int, jitter: float) -> None:
    print("## spread changes (two regimes of equal mean; the noise scale multiplied by the ratio)\n")
    print("share reported as a spread change within 10 nights of the truth; [share with a level shift]\n")
    lengths = (30, 50, 100, 200)
    print("| ratio | " + " | ".join(f"regimes of {n} nights" for n in lengths) + " |")
    print("|---|" + "---|" * len(lengths))
    rng = _rng(5, seeds)
    big = {"spread": 0, "level": 0, "n": 0}
    for ratio in (5.0, 3.0, 2.0, 1 / 2, 1 / 3, 1 / 5):
        cells = []
        for length in lengths:
            ok = level = 0
            for noise in NOISES:
                for _ in range(reps):
                    series, change = spread_series(
                        rng, ratio=ratio, length=length, noise=noise, jitter=jitter
                    )
                    found = found_of(series)
                    ok += found.spread_near(change)
                    level += found.level_shifts > 0
            count = reps * len(NOISES)
            if max(ratio, 1 / ratio) >= 3:
                big["spread"] += ok
                big["level"] += level
                big["n"] += count
            cells.append(f"{ok / count:.2f} [{level / count:.2f}]")
        label = f"x{ratio:g}" if ratio > 1 else f"/{1 / ratio:g}"
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(
        f"\nratios of 3 or more either way: reported as spread in {big['spread'] / big['n']:.3f}, "
        f"with a level shift in {big['level'] / big['n']:.3f}\n"
    )


def noise_table(reps: int, seeds: int) -> None:
    print("## pure noise: share of series with any change reported (a phantom)\n")
    lengths = (30, 100, 350, 1000)
    print("| noise | " + " | ".join(f"{n} nights" for n in lengths) + " |")
    print("|---|" + "---|" * len(lengths))
    rng = _rng(3, seeds)
    for noise in NOISES:
        cells = []
        for n in lengths:
            phantom = 0
            for _ in range(reps):
                draw = rng.normal(0, 1, n) if noise == "gauss" else rng.standard_t(3, n) / np.sqrt(3)
                found = found_of(0.3 + 0.01 * draw)
                phantom += found.changes > 0
            cells.append(f"{phantom / reps:.3f}")
        print(f"| {noise} | " + " | ".join(cells) + " |")
    print()
    skewed_noise_table(reps, seeds, lengths)


# Noise that is not symmetric or not continuous, as real nightly metrics often are: timings (a floor and
# a long right tail), rates, counts with many repeats or zeros. Each drawn independently, night by night.
SKEWED: dict[str, Any] = {
    "lognormal, sdlog 0.3": lambda rng, n: rng.lognormal(0, 0.3, n),
    "lognormal, sdlog 0.6": lambda rng, n: rng.lognormal(0, 0.6, n),
    "gamma, shape 2": lambda rng, n: rng.gamma(2, 1, n),
    "a floor plus an exponential tail": lambda rng, n: 10 + rng.exponential(1, n),
    "Poisson, mean 1": lambda rng, n: rng.poisson(1, n).astype(np.float64),
    "Poisson, mean 10": lambda rng, n: rng.poisson(10, n).astype(np.float64),
    "half zeros, else Poisson 5": lambda rng, n: np.where(rng.random(n) < 0.5, 0, rng.poisson(5, n)).astype(
        np.float64
    ),
}


def _head(columns: list[str], lengths: tuple[int, ...]) -> None:
    """A markdown table's head: the named columns, then a column a series length."""
    names = [*columns, *(f"{n} nights" for n in lengths)]
    print("| " + " | ".join(names) + " |")
    print("|" + "---|" * len(names))


def skewed_noise_table(reps: int, seeds: int, lengths: tuple[int, ...]) -> None:
    """Phantoms in independent noise that is skewed or discrete (benchmarks/results/regimes.md, round four:
    the levels' Gaussian price does not hold there, a known limit)."""
    print("## pure noise, skewed or discrete: share of series with any change reported\n")
    _head(["noise"], lengths)
    rng = _rng(4, seeds)
    for name, draw in SKEWED.items():
        cells = []
        for n in lengths:
            phantom = sum(found_of(draw(rng, n)).changes > 0 for _ in range(reps))
            cells.append(f"{phantom / reps:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()


# Noise in proportion to the level, as a timing's or a count's often is: each series is `exp` of a level
# or a line plus Gaussian noise (lognormal nights), its true regime starts beside it.
MULTIPLICATIVE: dict[str, Any] = {
    "a step x2, sdlog 0.1": lambda rng, n: (np.log(np.where(np.arange(n) < n // 2, 1.0, 2.0)), [n // 2], 0.1),
    "a step x2, sdlog 0.3": lambda rng, n: (np.log(np.where(np.arange(n) < n // 2, 1.0, 2.0)), [n // 2], 0.3),
    "flat, then growth to x4, sdlog 0.1": lambda rng, n: (
        np.log(4) * np.maximum(0, np.arange(n) - n // 2) / (n - n // 2),
        [n // 2],
        0.1,
    ),
    "growth to x4, then back, sdlog 0.1": lambda rng, n: (
        np.log(4) * (1 - np.abs(np.arange(n) - n // 2) / (n // 2)),
        [n // 2],
        0.1,
    ),
    "no change, sdlog 0.3": lambda rng, n: (np.zeros(n), [], 0.3),
}


def multiplicative_table(reps: int, seeds: int) -> None:
    """Regimes in noise that scales with the level (benchmarks/results/regimes.md, round five: step 12
    reads such a metric in logs)."""
    lengths = (60, 200)
    print("## noise in proportion to the level: regime starts a series; [share found exactly]\n")
    print("exactly: every true start found within 5 nights, and nothing else\n")
    _head(["series", "truth"], lengths)
    rng = _rng(12, seeds)
    for name, make in MULTIPLICATIVE.items():
        cells = []
        truth: list[int] = []
        for n in lengths:
            starts = exact = 0
            for _ in range(reps):
                logs, truth, sdlog = make(rng, n)
                found = found_of(10 * np.exp(logs + rng.normal(0, sdlog, n))).starts
                starts += len(found)
                exact += len(found) == len(truth) and all(any(abs(f - t) <= 5 for f in found) for t in truth)
            cells.append(f"{starts / reps:.2f} [{exact / reps:.2f}]")
        print(f"| {name} | {len(truth)} | " + " | ".join(cells) + " |")
    print()


def seasonal_table(reps: int, seeds: int) -> None:
    """A season (a sine of `period` nights, unit Gaussian noise around it) with one level shift half way,
    and without: a known limit (benchmarks/results/regimes.md, round five)."""
    lengths = (120, 400)
    print("## a season with one shift half way: share found within 5 nights [changes a series]\n")
    _head(["period", "amplitude", "shift"], lengths)
    rng = _rng(13, seeds)
    for period, amplitude, shift in itertools.product((7, 12), (2.0, 5.0), (0.0, 1.0, 2.0)):
        cells = []
        for n in lengths:
            found = changes = 0
            for _ in range(reps):
                t = np.arange(n)
                series = amplitude * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
                series += rng.normal(0, 1, n) + np.where(t >= n // 2, shift * amplitude, 0.0)
                starts = found_of(series).starts
                changes += len(starts)
                found += any(abs(s - n // 2) <= 5 for s in starts)
            share = "-" if shift == 0 else f"{found / reps:.2f}"
            cells.append(f"{share} [{changes / reps:.2f}]")
        size = "none" if shift == 0 else f"{shift:g} x amplitude"
        print(f"| {period} | {amplitude:g} | {size} | " + " | ".join(cells) + " |")
    print()


def localisation_table(reps: int, seeds: int) -> None:
    print("## localisation of one step between two regimes of 100 nights (Gaussian noise)\n")
    print("| step | found | median distance | 90th pct distance | interval covers the truth | width |")
    print("|---|---|---|---|---|---|")
    rng = _rng(11, seeds)
    for shift in (1.0, 1.5, 2.0, 3.0):
        distances: list[int] = []
        covered = widths = 0
        has_interval = False
        for _ in range(reps):
            series, change = step_series(rng, shift=shift, length=100)
            found: Found = found_of(series)
            near = [(abs(s - change), i) for i, s in enumerate(found.starts) if abs(s - change) <= 30]
            if not near:
                continue
            distance, i = min(near)
            distances.append(distance)
            interval = found.intervals[i] if found.intervals else None
            if interval is not None:
                has_interval = True
                covered += interval[0] <= change <= interval[1]
                widths += interval[1] - interval[0] + 1
        if not distances:
            print(f"| {shift:g} sigma | 0 | - | - | - | - |")
            continue
        q90 = float(np.quantile(distances, 0.9))
        coverage = f"{covered / len(distances):.2f}" if has_interval else "-"
        width = f"{widths / len(distances):.1f}" if has_interval else "-"
        print(
            f"| {shift:g} sigma | {len(distances) / reps:.2f} | {statistics.median(distances):g} | "
            f"{q90:g} | {coverage} | {width} |"
        )
    print()


def runtime() -> None:
    rng = np.random.default_rng(7)
    series = np.concatenate([rng.normal(level, 1, 2000) for level in (0, 3, 1, 4, 2)])
    drift = np.r_[rng.normal(0, 1, 5000), rng.normal(0, 1, 5000) + np.linspace(0, 10, 5000)]
    spread = np.r_[rng.normal(0, 1, 5000), rng.normal(0, 3, 5000)]
    cases = (("5 level regimes", series), ("noise then a drift", drift), ("noise x3 half way", spread))
    for name, values in cases:
        times = []
        for _ in range(3):
            started = time.process_time()  # CPU seconds: wall time on a shared machine runs long
            found_of(values)
            times.append(time.process_time() - started)
        print(f"runtime over 10,000 nights ({name}): best of 3 {min(times):.3f} s of CPU")


def _price_lines(kind: str, factor: float) -> None:
    """Replace what gatecfg charges for a line's slope (the grid's trade-off between lines and steps)."""
    from gatecfg.analysis import changepoints

    mbic = changepoints._slope_price

    def laplace(a: Any, b: Any, n: int, per_night: float) -> Any:
        # MBIC's 3 ln N per change is 2 ln N for its place and ln N for its size (BIC's). Here the size,
        # the slope, is priced by its Fisher information instead, l^3/12 nights^3 for l nights, over the
        # prior's: a unit-information prior, one night's share of the stretch's information (n^3/12 / n).
        length = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
        information = n * (length**3 - length) / (float(n) ** 3 - n)
        return 2 * per_night / 3 + np.log1p(information)

    base = laplace if kind == "laplace" else mbic

    def price(a: Any, b: Any, n: int, per_night: float) -> Any:
        return factor * base(a, b, n, per_night)

    changepoints._slope_price = price


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=50, help="series per cell and noise (default 50)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=0,
        help="0: the seeds benchmarks/results/regimes.md quotes; N: another independent set",
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.3,
        help="regime lengths of the level and spread grids vary by this fraction (default 0.3)",
    )
    parser.add_argument(
        "--only",
        choices=[
            "level",
            "drift",
            "spread",
            "noise",
            "multiplicative",
            "seasonal",
            "localisation",
            "runtime",
        ],
    )
    parser.add_argument(
        "--line-price",
        choices=["mbic", "laplace"],
        default="mbic",
        help="benchmark only: what a line's slope costs (mbic: gatecfg's; laplace: the variant in "
        "docs/analytics.md, a Laplace term with a unit-information prior in place of MBIC's ln n)",
    )
    parser.add_argument(
        "--line-factor",
        type=float,
        default=1.0,
        help="benchmark only: multiply the line's price by this (the trade-off table in "
        "benchmarks/results/regimes.md)",
    )
    args = parser.parse_args()
    if (args.line_price, args.line_factor) != ("mbic", 1.0):
        _price_lines(args.line_price, args.line_factor)
    tables = {
        "level": lambda: level_table(args.reps, args.seeds, args.jitter),
        "drift": lambda: drift_table(max(1, args.reps // 2), args.seeds),
        "spread": lambda: spread_table(max(1, args.reps // 2), args.seeds, args.jitter),
        "noise": lambda: noise_table(args.reps * 4, args.seeds),
        "multiplicative": lambda: multiplicative_table(args.reps * 2, args.seeds),
        "seasonal": lambda: seasonal_table(args.reps, args.seeds),
        "localisation": lambda: localisation_table(args.reps * 4, args.seeds),
        "runtime": runtime,
    }
    for name, table in tables.items():
        if args.only in (None, name):
            table()


if __name__ == "__main__":
    main()
