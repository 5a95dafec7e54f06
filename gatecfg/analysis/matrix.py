"""A gate's nights as one matrix: the baseline window of every run at once, and its verdicts in bulk.

A replay judges each run against the newest `window` values of each step among the qualifying runs before
it. With every run's qualification known up front, those windows are slices of one runs x steps matrix:
per step, the qualifying runs' values in time order, of which run r sees the newest `window` before it.
`GateMatrix.windows` gathers them for many runs in one numpy operation, and `GateMatrix.verdicts` judges
those runs as one `GateVerdicts` whose "steps" are the (run, step) cells: the same code, arithmetic and
close-call fallback to `judge` as a run judged alone, so every status and band is the per-run one.

A budget gate decides over all the steps of one night together, so its cells cannot share a
`GateVerdicts`: `GateMatrix.night` gives each of its runs its own window, judged run by run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.select import LAST_STEP, Selected, Selection
from gatecfg.store.rows import PointColumns, ValueColumns
from gatecfg.verdicts import GateVerdicts
from gatecfg.windows import Window

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _selected(gate: ResolvedGate, step: int, value: float) -> Selected | None:
    """A stored value as `select` would have handed it to `judge` (a non-finite one only where gated)."""
    logged = None if step == LAST_STEP else step
    if math.isfinite(value):
        return Selected(step, logged, value, None, None)
    if not gate.gated:
        return None
    reason = "value is NaN" if math.isnan(value) else f"value is {'-' * (value < 0)}Infinity"
    return Selected(step, logged, None, reason, None)


def stored_selection(gate: ResolvedGate, stored: ValueColumns | None) -> Selection:
    """A run's stored values of a gate, by step, as `select` would have handed them to `judge`."""
    if stored is None:
        return Selection([], [], [], [], [])
    steps = stored.steps.tolist()
    if np.isfinite(stored.values).all():
        logged = [None if step == LAST_STEP else step for step in steps] if LAST_STEP in steps else steps
        none = [None] * len(steps)
        return Selection(steps, logged, stored.values.tolist(), none, none, numbers=stored.values)
    return Selection.of(
        s
        for step, value in zip(steps, stored.values.tolist(), strict=True)
        if (s := _selected(gate, step, value))
    )


@dataclass(frozen=True)
class GateMatrix:
    """One gate's selected values of consecutive runs of a series, oldest first: `values[r, j]` is run r's
    value at `steps[j]` (NaN: an error, a value no baseline holds), where `present[r, j]` (selected)."""

    gate: ResolvedGate
    steps: IntArray  # ascending: every step some run selected
    values: FloatArray  # runs x steps
    present: BoolArray  # runs x steps

    @classmethod
    def of(cls, gate: ResolvedGate, selections: Sequence[Selection]) -> GateMatrix:
        """The matrix of each run's selection (empty: the run holds none of the gate's values)."""
        first = next((s for s in selections if len(s)), None)
        same = first is not None and all(
            len(s) == 0 or (len(s) == len(first) and s.steps == first.steps) for s in selections
        )
        if same and first is not None:  # nearly always: every run selected the same steps
            steps = np.asarray(first.steps, np.int64)
            values = np.full((len(selections), len(steps)), np.nan)
            present = np.zeros(values.shape, bool)
            for r, chosen in enumerate(selections):
                if len(chosen):
                    values[r], present[r] = chosen.numbers(), True
            return cls(gate, steps, values, present)
        steps = np.unique(np.concatenate([np.asarray(s.steps, np.int64) for s in selections]))
        values = np.full((len(selections), len(steps)), np.nan)
        present = np.zeros(values.shape, bool)
        for r, chosen in enumerate(selections):
            if len(chosen):
                at = np.searchsorted(steps, np.asarray(chosen.steps, np.int64))
                values[r, at], present[r, at] = chosen.numbers(), True
        return cls(gate, steps, values, present)

    @classmethod
    def stored(cls, gate: ResolvedGate, columns: Sequence[ValueColumns | None]) -> GateMatrix:
        """The matrix of each run's stored values of the gate (None: it holds none), as `of` makes it of
        their `stored_selection`s: a value that is not finite is an error (NaN) where the gate is gated,
        and not selected where it is not. Taken whole when the runs hold the same steps (nearly always:
        they share one steps array), without a Python object per value."""
        held = [c for c in columns if c is not None and len(c)]
        if not held:
            return cls(
                gate, np.empty(0, np.int64), np.empty((len(columns), 0)), np.empty((len(columns), 0), bool)
            )
        first = held[0].steps
        if not all(c.steps is first or np.array_equal(c.steps, first) for c in held):
            return cls.of(gate, [stored_selection(gate, c) for c in columns])
        values = np.full((len(columns), len(first)), np.nan)
        present = np.zeros(values.shape, bool)
        rows = [r for r, c in enumerate(columns) if c is not None and len(c)]
        values[rows] = np.stack([c.values for c in held])
        present[rows] = True
        finite = np.isfinite(values)
        values[~finite] = np.nan
        if not gate.gated:
            present &= finite
            kept = present.any(axis=0)
            if not kept.all():  # a step none of the runs holds a finite value at is selected by none
                return cls(gate, first[kept].astype(np.int64), values[:, kept], present[:, kept])
        return cls(gate, first.astype(np.int64), values, present)

    def after(self, earlier: GateMatrix | None) -> GateMatrix:
        """These runs under the rows of `earlier` (a `tail`), over the steps of both."""
        if earlier is None:
            return self
        if not np.array_equal(earlier.steps, self.steps):
            steps = np.union1d(earlier.steps, self.steps)
            return GateMatrix(
                self.gate,
                steps,
                np.vstack(
                    [
                        _spread(earlier.values, earlier.steps, steps, np.nan),
                        _spread(self.values, self.steps, steps, np.nan),
                    ]
                ),
                np.vstack(
                    [
                        _spread(earlier.present, earlier.steps, steps, False),
                        _spread(self.present, self.steps, steps, False),
                    ]
                ),
            )
        return GateMatrix(
            self.gate,
            self.steps,
            np.vstack([earlier.values, self.values]),
            np.vstack([earlier.present, self.present]),
        )

    def tail(self, qualifies: BoolArray, width: int) -> GateMatrix:
        """What a run after these can still meet: per step, the newest `width` values that join baselines,
        oldest first, as `width` rows that all qualify (a step with fewer leaves the top rows empty)."""
        pooled = self.present & ~np.isnan(self.values) & qualifies[:, None]
        whole = pooled.all(axis=1)
        if (whole | ~pooled.any(axis=1)).all():  # nearly always: a run pools all its steps or none
            kept = self.values[np.flatnonzero(whole)[-width:]] if width else self.values[:0]
            last = np.full((width, len(self.steps)), np.nan)
            last[width - len(kept) :] = kept
            return GateMatrix(self.gate, self.steps, last, ~np.isnan(last))
        order = np.argsort(~pooled, axis=0, kind="stable")
        packed = np.take_along_axis(self.values, order, axis=0)
        total = pooled.sum(axis=0)
        index = total[None, :] - width + np.arange(width)[:, None]  # the last `width` pooled, in order
        found = packed[np.maximum(index, 0), np.arange(len(self.steps))[None, :]]
        found[index < 0] = np.nan
        return GateMatrix(self.gate, self.steps, found, ~np.isnan(found))

    def windows(self, qualifies: BoolArray, width: int, runs: IntArray) -> tuple[FloatArray, IntArray]:
        """The baseline windows of `runs` (row indices), each step's newest `width` values among the runs
        before it that qualify (`qualifies`, per run) and hold a value there, newest first: an array
        len(runs) x steps x width (NaN past each window's size) and the sizes, len(runs) x steps."""
        pooled = self.present & ~np.isnan(self.values) & qualifies[:, None]
        whole = pooled.all(axis=1)
        if (whole | ~pooled.any(axis=1)).all():  # nearly always: a run pools all its steps or none
            earlier: IntArray = (np.cumsum(whole) - whole)[runs]  # pooled runs before each run
            newest = earlier[:, None] - 1 - np.arange(width)  # newest first
            kept = self.values[np.flatnonzero(whole)]
            # Laid out width x len(runs) x steps, the layout `verdicts` gathers its cells' windows in.
            if len(kept):
                rows = kept[np.maximum(newest.T, 0)]
                rows[newest.T < 0] = np.nan
            else:
                rows = np.full((width, len(runs), len(self.steps)), np.nan)
            sizes: IntArray = np.minimum(earlier, width)[:, None].repeat(len(self.steps), axis=1)
            return rows.transpose(1, 2, 0), sizes
        # Per step, the pooled values in time order first (a stable sort keeps their order).
        order = np.argsort(~pooled, axis=0, kind="stable")
        packed = np.take_along_axis(self.values, order, axis=0)
        before: IntArray = np.cumsum(pooled, axis=0) - pooled  # pooled values before each run, per step
        counts: IntArray = before[runs]  # len(runs) x steps
        index = counts[:, :, None] - 1 - np.arange(width)  # newest first
        found = packed[np.maximum(index, 0), np.arange(len(self.steps))[None, :, None]]
        found[index < 0] = np.nan
        return found, np.minimum(counts, width)

    def verdicts(
        self, qualifies: BoolArray, policy: Policy, runs: IntArray, *, keep_bands: bool = False
    ) -> tuple[GateVerdicts, IntArray]:
        """`runs` (row indices) judged as one GateVerdicts over their (run, step) cells, in run then step
        order, and each cell's row index (`keep_bands`: as GateVerdicts'). Not for a budget gate (see
        `night`)."""
        if self.gate.constraint is not None and self.gate.constraint.budget is not None:
            raise ValueError(f"{self.gate.metric}: a budget gate judges each night's steps together")
        found, sizes = self.windows(qualifies, policy.window, runs)
        cells = self.present[runs]
        row, column = np.nonzero(cells)
        values = self.values[runs][cells]
        steps = self.steps[column].tolist()
        selection = _selection(steps, values)
        # Rows of no value stay in: `GateVerdicts` reads a size of 0 as no history, as for a run alone.
        # Gathered as width x cells and handed over transposed (column-major): a band's reductions over a
        # cell's window then run across contiguous rows, four to seven times faster than along each short
        # row (numpy's boolean indexing would lay the cells out row-major again).
        width = found.shape[2]
        gathered = found.transpose(2, 0, 1).reshape(width, cells.size)
        if not cells.all():
            gathered = np.take(gathered, np.flatnonzero(cells.ravel()), axis=1)
        window = Window(tuple(steps), gathered.T, sizes[cells])
        judged = GateVerdicts(
            gate=self.gate,
            coordinate="",
            selection=selection,
            window=window,
            policy=policy,
            enforced=False,
            keep_bands=keep_bands,
        )
        return judged, runs[row]

    def night(self, qualifies: BoolArray, policy: Policy, run: int) -> GateVerdicts | None:
        """Run `run` judged alone against its window, as `Replayer.judge` judges it; None when it selected
        nothing of the gate."""
        cells = self.present[run]
        if not cells.any():
            return None
        found, sizes = self.windows(qualifies, policy.window, np.array([run], np.int64))
        held = cells & (sizes[0] > 0)
        window = (
            Window(tuple(self.steps[held].tolist()), np.ascontiguousarray(found[0][held]), sizes[0][held])
            if held.any()
            else None
        )
        selection = _selection(self.steps[cells].tolist(), self.values[run][cells])
        return GateVerdicts(
            gate=self.gate, coordinate="", selection=selection, window=window, policy=policy, enforced=False
        )


def stored_columns(
    matrix: GateMatrix, qualifies: BoolArray, policy: Policy, runs: IntArray
) -> list[PointColumns | None]:
    """What `evaluate --write` would store of each of `runs` (row indices), each judged against the runs
    before it that qualify: the `GateVerdicts.stored_columns` of the run judged alone, None when it
    selected nothing of the gate."""
    gate = matrix.gate
    if gate.constraint is not None and gate.constraint.budget is not None:
        return [
            None if (judged := matrix.night(qualifies, policy, run)) is None else judged.stored_columns()
            for run in runs.tolist()
        ]
    if not len(runs):
        return []
    judged, rows = matrix.verdicts(qualifies, policy, runs, keep_bands=True)
    columns = judged.stored_columns()  # only the cells that hold a value, in run then step order
    held = rows[~np.isnan(judged.selection.numbers())]
    bounds = [*np.searchsorted(held, runs, side="left").tolist(), len(held)]
    selected = np.isin(runs, rows)
    found: list[PointColumns | None] = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        if not selected[k]:
            found.append(None)
            continue
        found.append(
            PointColumns(
                columns.steps[a:b],
                columns.values[a:b],
                columns.statuses[a:b],
                columns.refs[a:b],
                columns.los[a:b],
                columns.his[a:b],
                columns.sds[a:b],
            )
        )
    return found


def _spread(
    matrix: npt.NDArray[np.generic], steps: IntArray, into: IntArray, empty: object
) -> npt.NDArray[np.generic]:
    """The columns of `matrix` (at `steps`) placed at their steps among `into`, `empty` elsewhere."""
    found = np.full((matrix.shape[0], len(into)), empty, matrix.dtype)
    found[:, np.searchsorted(into, steps)] = matrix
    return found


def _selection(steps: list[int], values: FloatArray) -> Selection:
    """Cells as `select` hands them to the verdict: NaN an error (its reason is never shown)."""
    logged = [None if step == LAST_STEP else step for step in steps] if LAST_STEP in steps else steps
    errors = np.isnan(values)
    if not errors.any():  # nearly always: lists made at C speed
        return Selection(
            steps, logged, values.tolist(), [None] * len(steps), [None] * len(steps), numbers=values
        )
    flags = errors.tolist()
    return Selection(
        steps,
        logged,
        [None if error else v for v, error in zip(values.tolist(), flags, strict=True)],
        ["no value" if error else None for error in flags],
        [None] * len(steps),
        numbers=values,
    )
