"""Generated nightly series with known regimes, and how a detection is scored against them.

Shared by `tests/test_regimes.py` (a small seeded grid whose targets are asserted) and
`benchmarks/regimes_grid.py` (the full grid quoted in benchmarks/results/regimes.md). Series sit around 0.3
with a noise scale of 0.01, as an eval score would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gatecfg.analysis.noise import MIN_REGIME
from gatecfg.analysis.readings import detect

TOLERANCE = 2  # a found level shift within this many nights of a true one counts as that one
SPREAD_TOLERANCE = 10  # a noise scale change shows over several nights: located within this many
LEVEL_SHIFTS = (1.0, 2.0, 3.0, 5.0)
LEVEL_LENGTHS = (5, 10, 20, 50)
NOISES = ("gauss", "t3")
Array = np.ndarray[Any, np.dtype[np.float64]]


def _noise(rng: np.random.Generator, noise: str, count: int) -> Array:
    """Unit-variance Gaussian or Student-t(3) noise."""
    if noise == "gauss":
        return rng.normal(0, 1, count)
    return rng.standard_t(3, count) / np.sqrt(3)


def _scaled(values: Array) -> Array:
    return 0.3 + 0.01 * values


def level_series(
    rng: np.random.Generator,
    *,
    shift: float,
    noise: str,
    length: int,
    outliers: float,
    regimes: int = 5,
    jitter: float = 0.3,
) -> tuple[Array, list[int]]:
    """`regimes` levels `shift` sigmas apart (random direction), each about `length` nights (+-`jitter`),
    and a fraction of outlier nights 6 to 10 sigmas off. Returns the series and the true regime starts."""
    lengths = [max(MIN_REGIME, round(length * rng.uniform(1 - jitter, 1 + jitter))) for _ in range(regimes)]
    level, parts, starts, at = 0.0, [], [], 0
    for i, count in enumerate(lengths):
        if i:
            level += shift * rng.choice([-1, 1])
            starts.append(at)
        parts.append(level + _noise(rng, noise, count))
        at += count
    series = np.concatenate(parts)
    hits = rng.choice(series.size, round(outliers * series.size), replace=False)
    series[hits] += rng.choice([-1, 1], hits.size) * rng.uniform(6, 10, hits.size)
    return _scaled(series), starts


def drift_series(rng: np.random.Generator, *, total: float, length: int, noise: str) -> Array:
    """A flat lead of 30 to 150 nights, then a drift of `total` sigmas (random direction) over `length`
    nights: a metric that started creeping and still is."""
    lead = int(rng.integers(30, 151))
    direction = rng.choice([-1, 1])
    trend = np.r_[np.zeros(lead), direction * total * np.arange(1, length + 1) / length]
    return _scaled(trend + _noise(rng, noise, lead + length))


def spread_series(
    rng: np.random.Generator, *, ratio: float, length: int, noise: str, jitter: float = 0.3
) -> tuple[Array, int]:
    """Two regimes of about `length` nights (+-`jitter`) with the same mean; the second's noise scale is
    `ratio` times the first's. Returns the series and the night the spread changes."""
    first = max(MIN_REGIME, round(length * rng.uniform(1 - jitter, 1 + jitter)))
    second = max(MIN_REGIME, round(length * rng.uniform(1 - jitter, 1 + jitter)))
    series = np.r_[_noise(rng, noise, first), ratio * _noise(rng, noise, second)]
    return _scaled(series), first


def step_series(rng: np.random.Generator, *, shift: float, length: int) -> tuple[Array, int]:
    """One step of `shift` sigmas between two regimes of `length` nights, Gaussian noise."""
    direction = rng.choice([-1, 1])
    series = np.r_[rng.normal(0, 1, length), direction * shift + rng.normal(0, 1, length)]
    return _scaled(series), length


@dataclass(frozen=True)
class Found:
    """What a detection reported, in the terms the grid scores: regime starts after the first, their kinds
    (every one a level shift for a detection that does not tell kinds apart) and intervals."""

    starts: tuple[int, ...]
    kinds: tuple[str, ...]
    intervals: tuple[tuple[int, int], ...] | None
    first_kind: str

    @property
    def drifts(self) -> int:
        return self.kinds.count("drift") + (self.first_kind == "drift")

    @property
    def level_shifts(self) -> int:
        return self.kinds.count("level")

    @property
    def changes(self) -> int:
        return len(self.starts) + (self.first_kind == "drift")

    def spread_near(self, night: int) -> bool:
        return any(
            kind == "spread" and abs(start - night) <= SPREAD_TOLERANCE
            for start, kind in zip(self.starts, self.kinds, strict=True)
        )


def found_of(series: Array) -> Found:
    detection = detect(series)
    regimes = getattr(detection, "segments", None)
    if regimes is None:  # a detection of level shifts only
        starts = tuple(s for s in detection.starts if s)
        return Found(starts, ("level",) * len(starts), None, "level")
    later = regimes[1:]
    return Found(
        tuple(r.start for r in later),
        tuple(r.kind for r in later),
        tuple(r.interval for r in later),
        regimes[0].kind if regimes else "level",
    )


def matched(found: tuple[int, ...] | list[int], truth: list[int]) -> int:
    """True change points found within TOLERANCE, each found one used once."""
    used: set[int] = set()
    hits = 0
    for t in truth:
        near = [f for f in found if abs(f - t) <= TOLERANCE and f not in used]
        if near:
            used.add(min(near, key=lambda f: abs(f - t)))
            hits += 1
    return hits


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, found: tuple[int, ...], truth: list[int]) -> None:
        hits = matched(found, truth)
        self.tp += hits
        self.fp += len(found) - hits
        self.fn += len(truth) - hits

    def merge(self, other: Score) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
