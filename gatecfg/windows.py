"""Baseline windows: per coordinate and step, the values of the newest qualifying runs, newest first.

The store reads a coordinate's window as a matrix (runs x steps); the evaluator computes bands over it
in bulk. `Baselines` keeps those matrices and reads, for everything else, as the plain mapping
`(coordinate, step) -> [values]` that a backtest or a test builds by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Window:
    """One coordinate's baselines: row i holds `counts[i]` values of step `steps[i]`, newest first, and NaN
    after them. Every row holds at least one value."""

    steps: tuple[int, ...]
    values: FloatMatrix  # (len(steps), the longest row)
    counts: Counts  # (len(steps),)
    # A one-value budget gate's values over the stretch its tail is priced on, newest first, the
    # window's own first (gatecfg/tail.py); None for every other gate.
    stretch: FloatMatrix | None = None

    @functools.cached_property
    def _rows(self) -> dict[int, int]:
        # Built when a step is looked up: an evaluation whose steps are the window's never does.
        return {step: row for row, step in enumerate(self.steps)}

    @classmethod
    def from_runs(cls, steps: Sequence[int], newest_first: FloatMatrix) -> Window:
        """The window of runs that all hold values at the same `steps`: `newest_first` is runs x steps."""
        runs = newest_first.shape[0]
        return cls(tuple(steps), np.ascontiguousarray(newest_first.T), np.full(len(steps), runs, np.int64))

    @classmethod
    def from_lists(cls, by_step: Mapping[int, Sequence[float]]) -> Window | None:
        """The window of these per-step values (newest first); None when no step holds a value."""
        kept = sorted((step, values) for step, values in by_step.items() if len(values))
        if not kept:
            return None
        counts = np.array([len(values) for _, values in kept], np.int64)
        if counts.min() == counts.max():  # every step as long: one array, at C speed
            matrix = np.array([values for _, values in kept], np.float64)
        else:
            matrix = np.full((len(kept), int(counts.max())), np.nan)
            for row, (_, values) in enumerate(kept):
                matrix[row, : len(values)] = values
        return cls(tuple(step for step, _ in kept), matrix, counts)

    def row(self, step: int) -> int | None:
        return self._rows.get(step)

    def history(self, step: int) -> list[float]:
        """The values of `step`, newest first; empty when the window holds none."""
        row = self._rows.get(step)
        return [] if row is None else self.values[row, : self.counts[row]].tolist()

    def as_lists(self) -> dict[int, list[float]]:
        return {step: self.history(step) for step in self.steps}


class Baselines(Mapping[tuple[str, int], list[float]]):
    """The windows of many coordinates; as a mapping, `(coordinate, step) -> values newest first`, with no
    key for a (coordinate, step) that has no values."""

    def __init__(self, windows: Mapping[str, Window] | None = None) -> None:
        self.windows: dict[str, Window] = dict(windows or {})

    @classmethod
    def from_values(cls, values: Mapping[tuple[str, int], Sequence[float]]) -> Baselines:
        by_coordinate: dict[str, dict[int, Sequence[float]]] = {}
        for (coordinate, step), found in values.items():
            by_coordinate.setdefault(coordinate, {})[step] = found
        windows = {c: Window.from_lists(by_step) for c, by_step in by_coordinate.items()}
        return cls({c: w for c, w in windows.items() if w is not None})

    def window(self, coordinate: str) -> Window | None:
        return self.windows.get(coordinate)

    def __getitem__(self, key: tuple[str, int]) -> list[float]:
        coordinate, step = key
        found = self.windows.get(coordinate)
        if found is None or found.row(step) is None:
            raise KeyError(key)
        return found.history(step)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for coordinate, found in self.windows.items():
            for step in found.steps:
                yield coordinate, step

    def __len__(self) -> int:
        return sum(len(found.steps) for found in self.windows.values())
