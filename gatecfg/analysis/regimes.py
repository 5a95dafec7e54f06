"""Regimes of a gate's nightly series, the commit that opened each, and shifts that coincide across metrics.

A regime is a stretch of nights that holds a level or moves along a line, with one noise scale (see
`changepoints` for how they are found). Its kind says what opened it: a `level` shift, a change of
`spread` (the noise scale, as a ratio), or a `drift` (a sustained slope). It is attributed to the commit
of its first night: the nightly after the merge that moved the metric. When that commit also ran the
night before, the change came with no code change (hardware, data, a dependency), and the regime says so.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gatecfg import moments
from gatecfg.analysis.changepoints import Detection, Kind
from gatecfg.analysis.readings import detect
from gatecfg.analysis.series import Night
from gatecfg.band import tidy


def _tidy(x: float | None) -> float | None:
    # 12 significant digits, as reports print band edges: a median of 0.31498 is not 0.31498000000000004.
    return None if x is None else tidy(x)


@dataclass(frozen=True)
class Regime:
    start_index: int  # runs in time order from 0, over the nights analysed
    end_index: int  # inclusive
    first_run: str
    last_run: str
    first_commit: str | None
    previous_commit: str | None  # the commit of the night before the regime; None for the first regime
    start_date: datetime
    end_date: datetime
    n: int  # nights in the regime, outliers included
    mean: float  # mean, median and spread leave out the outlier nights the detection set aside
    median: float
    spread: float  # sample standard deviation; 0 for a single night
    shift_abs: float | None  # median minus the previous regime's median
    shift_pct: float | None  # shift_abs relative to the previous median's magnitude
    kind: Kind  # what opened it; the first regime: "drift" when it moves along a line, else "level"
    slope: float | None  # a drift's slope per night; None for a level or spread regime
    spread_ratio: float | None  # noise scale over the previous regime's, where the scale changed
    start_low: int  # the likely nights of its start (inclusive): the data cannot tell them apart
    start_high: int

    @property
    def drift_total(self) -> float | None:
        """A drift's change from its first night to its last."""
        return None if self.slope is None else self.slope * (self.n - 1)

    @property
    def same_commit_as_before(self) -> bool:
        """The shift happened between two nights of one commit: not a code change."""
        return (
            self.start_index > 0
            and self.first_commit is not None
            and self.first_commit == self.previous_commit
        )

    def as_json(self) -> dict[str, Any]:
        """The documented shape: exactly these keys."""
        return {
            "start_index": self.start_index,
            "end_index": self.end_index,
            "first_run": self.first_run,
            "last_run": self.last_run,
            "first_commit": self.first_commit,
            "start_date": self.start_date.isoformat(),
            "n": self.n,
            "mean": tidy(self.mean),
            "median": tidy(self.median),
            "spread": tidy(self.spread),
            "shift_abs": _tidy(self.shift_abs),
            "shift_pct": _tidy(self.shift_pct),
            "kind": self.kind,
            "start_interval": [self.start_low, self.start_high],
            "slope": _tidy(self.slope),
            "drift_total": _tidy(self.drift_total),
            "spread_ratio": _tidy(self.spread_ratio),
        }


@dataclass(frozen=True)
class Regimes:
    """The regimes of one coordinate (a metric at one step) and what the detection rested on."""

    metric: str
    step: int
    nights: tuple[Night, ...]  # the nights analysed, oldest first
    regimes: tuple[Regime, ...]
    detection: Detection

    @property
    def outlier_runs(self) -> tuple[str, ...]:
        return tuple(self.nights[i].run_id for i in self.detection.outliers)

    @property
    def read_in(self) -> str:
        """`logs` where the regimes were read in logs (noise in proportion to the level), else `units`."""
        return "logs" if self.detection.in_logs else "units"

    def as_json(self, test: str) -> dict[str, Any]:
        return {
            "test": test,
            "metric": self.metric,
            "step": self.step,
            "read_in": self.read_in,
            "regimes": [r.as_json() for r in self.regimes],
        }


def find_regimes(metric: str, step: int, nights: Sequence[Night], coordinates: int = 1) -> Regimes:
    """Regimes of `nights` (finite values, oldest first), one of `coordinates` series scanned together
    (each change then priced so that noise over all of them opens as few regimes as over one)."""
    values = [n.value for n in nights]
    detection = detect(values, coordinates)
    bounds = [*detection.starts, len(nights)]
    outliers = set(detection.outliers)
    regimes: list[Regime] = []
    scales: list[float] = []
    for segment, (start, stop) in zip(detection.segments, itertools.pairwise(bounds), strict=True):
        # A crashed night would drag the mean and blow up the spread of the regime it sits in.
        chunk = [values[i] for i in range(start, stop) if i not in outliers] or values[start:stop]
        median = moments.median(chunk)
        previous = regimes[-1] if regimes else None
        shift = None if previous is None else median - previous.median
        regimes.append(
            Regime(
                start_index=start,
                end_index=stop - 1,
                first_run=nights[start].run_id,
                last_run=nights[stop - 1].run_id,
                first_commit=nights[start].commit,
                previous_commit=nights[start - 1].commit if start > 0 else None,
                start_date=nights[start].created_at,
                end_date=nights[stop - 1].created_at,
                n=stop - start,
                mean=moments.mean(chunk),
                median=median,
                spread=_stdev(chunk),
                shift_abs=shift,
                shift_pct=None
                if shift is None or previous is None or previous.median == 0
                else shift / abs(previous.median) * 100.0,
                kind=segment.kind,
                slope=segment.slope if segment.kind == "drift" else None,
                spread_ratio=_ratio(segment.noise, scales[-1]) if segment.spread_change and scales else None,
                start_low=segment.interval[0],
                start_high=segment.interval[1],
            )
        )
        scales.append(segment.noise)
    return Regimes(metric, step, tuple(nights), tuple(regimes), detection)


def _stdev(chunk: Sequence[float]) -> float:
    """Sample standard deviation (0 for one night): two passes in floats, where `statistics.stdev`'s exact
    fractions cost `regimes --all` seconds over thousands of coordinates for digits no report prints."""
    return moments.stdev(chunk) if len(chunk) >= 2 else 0.0


def _ratio(scale: float, before: float) -> float | None:
    return scale / before if before > 0 else None


@dataclass(frozen=True)
class Shift:
    """A regime start at one coordinate, as listed under the commit that opened it."""

    metric: str
    step: int
    regime: Regime

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "step": self.step,
            "run": self.regime.first_run,
            "kind": self.regime.kind,
            "shift_abs": _tidy(self.regime.shift_abs),
            "shift_pct": _tidy(self.regime.shift_pct),
        }


@dataclass(frozen=True)
class Coincidence:
    """Every shift opened by one commit, across the metrics of a test."""

    commit: str | None
    first_run: str  # the earliest of the shifts' first runs
    start_date: datetime
    shifts: tuple[Shift, ...]
    same_commit_as_before: bool  # every shift here happened between two nights of this commit

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.metric for s in self.shifts))

    def gates(self) -> list[dict[str, Any]]:
        """The shifts once per gate (metric), with the steps each spans: one change of a gate that moves
        the metric at many steps is one finding, not one per step."""
        by_metric: dict[str, list[Shift]] = {}
        for s in self.shifts:
            by_metric.setdefault(s.metric, []).append(s)
        return [
            {
                "metric": metric,
                "steps": [s.step for s in shifts],
                "kinds": sorted({s.regime.kind for s in shifts}),
                "median_shift_pct": _tidy(
                    statistics.median(pcts)
                    if (pcts := [s.regime.shift_pct for s in shifts if s.regime.shift_pct is not None])
                    else None
                ),
            }
            for metric, shifts in by_metric.items()
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "first_run": self.first_run,
            "start_date": self.start_date.isoformat(),
            "metrics": list(self.metrics),
            "same_commit_as_before": self.same_commit_as_before,
            "shifts": [s.as_json() for s in self.shifts],
            "gates": self.gates(),
        }


def coincidences(found: Sequence[Regimes]) -> list[Coincidence]:
    """Shifts grouped by the commit that opened them, most metrics first, then oldest first.

    A run without a commit groups by its run id: without provenance, only the same night coincides.
    """
    groups: dict[str, list[Shift]] = {}
    for regimes in found:
        for regime in regimes.regimes[1:]:
            key = regime.first_commit if regime.first_commit is not None else f"run:{regime.first_run}"
            groups.setdefault(key, []).append(Shift(regimes.metric, regimes.step, regime))
    result: list[Coincidence] = []
    for shifts in groups.values():
        first = min(shifts, key=lambda s: s.regime.start_date).regime
        result.append(
            Coincidence(
                commit=first.first_commit,
                first_run=first.first_run,
                start_date=first.start_date,
                shifts=tuple(sorted(shifts, key=lambda s: (s.metric, s.step))),
                same_commit_as_before=all(s.regime.same_commit_as_before for s in shifts),
            )
        )
    result.sort(key=lambda c: (-len(c.metrics), c.start_date))
    return result
