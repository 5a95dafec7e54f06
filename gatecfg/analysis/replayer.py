"""The replay of one series' stored nightlies, oldest first, each judged by evaluate's own rules against
baselines formed only from the runs before it (`Replayer`, `replay`); the stored runs it is handed, and the
synthetic regression (`Shift`) a backtest may inject. `gatecfg.analysis.backtest` reports on replays."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gatecfg.analysis.matrix import stored_selection
from gatecfg.analysis.trust_rounds import BulkTrust
from gatecfg.band import Band, band, ragged_bands
from gatecfg.resolve import Policy, ResolvedGate, ResolvedTest
from gatecfg.select import Selection
from gatecfg.store import RunRow, Store, ValueColumns
from gatecfg.verdicts import GateVerdicts, Status, evaluate, trusted
from gatecfg.windows import Baselines, Window


@dataclass(frozen=True)
class StoredRun:
    """A stored nightly with every value of its test, a column per (metric, steps_key)."""

    run_id: str
    commit: str | None
    series_key: str
    labels: Mapping[str, str]
    trust_override: bool | None
    gate_trusted: bool
    values: Mapping[tuple[str, str], ValueColumns]  # the status: the verdict when written

    @property
    def untrusted_by_hand(self) -> bool:
        return self.trust_override is False


@dataclass(frozen=True)
class RunReplay:
    run: StoredRun
    results: Mapping[str, GateVerdicts]  # by metric: each step's status, its band built when asked for
    trusted: bool
    # With `--inject`: by metric, the gate's status on this night with the regression injected.
    injected: Mapping[str, Status] = dataclasses.field(default_factory=dict)


SHIFT = re.compile(r"^(?P<sign>[+-]?)(?P<size>\d+(?:\.\d*)?|\.\d+)(?P<unit>sigma|%)$")


@dataclass(frozen=True)
class Shift:
    """A synthetic regression: every judged step moved by `size` standard deviations of its window
    (`sigma`) or by `size` percent of its window's mean (`%`), in the gate's harmful direction unless
    a sign says which (`+` up, `-` down)."""

    text: str
    size: float
    unit: Literal["sigma", "%"]
    sign: float | None

    @classmethod
    def parse(cls, text: str) -> Shift:
        found = SHIFT.match(text.strip())
        if found is None:
            raise ValueError(f"`{text}` is not a shift: write e.g. `2sigma`, `-3sigma` or `10%`")
        sign = {"+": 1.0, "-": -1.0}.get(found["sign"])
        return cls(text.strip(), float(found["size"]), found["unit"], sign)  # type: ignore[arg-type]

    def direction(self, gate: ResolvedGate) -> float:
        """+1 (up) or -1 (down): the sign written, else the side the gate guards (up when it guards
        both or neither)."""
        if self.sign is not None:
            return self.sign
        c = gate.constraint
        if c is None:
            return 1.0
        if c.budget is not None:
            return -1.0 if c.budget == "down" else 1.0
        up = c.rel_up is not None or c.abs_floor_up is not None or c.sigma_up is not None
        return 1.0 if up else -1.0

    def apply(self, gate: ResolvedGate, chosen: Selection, window: Window | None) -> Selection:
        """The night `chosen` with the regression injected at every step its window can size (two
        values for `sigma`, one for `%`); steps without such a window, and errors, are left as they are."""
        sign = self.direction(gate)
        values: list[float | None] = []
        for step, value in zip(chosen.steps, chosen.values, strict=True):
            history = [] if window is None else window.history(step)
            if value is None or len(history) < (2 if self.unit == "sigma" else 1):
                values.append(value)
                continue
            spread = np.std(history, ddof=1) if self.unit == "sigma" else abs(np.mean(history)) / 100.0
            values.append(value + sign * self.size * float(spread))
        return Selection(chosen.steps, chosen.logged, values, chosen.errors, chosen.locations)


@dataclass(frozen=True)
class Replay:
    test: ResolvedTest
    policy: Policy
    runs: tuple[RunReplay, ...]
    # What the next run would meet: per metric and step, the band and the newest nightly values.
    bands: Mapping[str, Mapping[int, Band]]
    distributions: Mapping[str, Mapping[int, Sequence[float]]]
    inject: Shift | None = None  # the regression each night was also judged with


class _Pool:
    """One gate's values of the runs that qualify for a baseline, oldest first: a runs x steps matrix while
    every such run holds a finite value at the same steps (nearly always), per-step lists from the first run
    that does not. A run's window is then the matrix's newest rows, taken whole. Only the newest `width`
    values of a step can enter a window, so the pool keeps at most twice as many: a replay of years of
    nightlies holds a window's worth of them per gate."""

    def __init__(self, width: int) -> None:
        self._width = width
        self._steps: tuple[int, ...] | None = None
        self._rows: list[npt.NDArray[np.float64]] = []
        self._lists: dict[int, list[float]] | None = None

    def add(self, steps: Sequence[int], values: npt.NDArray[np.float64]) -> None:
        """A run's values at `steps` (NaN: an error, which no baseline holds)."""
        errors = np.isnan(values)
        if self._lists is None and not errors.any() and self._steps in (None, tuple(steps)):
            self._steps = tuple(steps)
            self._rows.append(values)
            if len(self._rows) > 2 * self._width:
                del self._rows[: -self._width]
            return
        lists = self._as_lists()
        for step, value, error in zip(steps, values.tolist(), errors.tolist(), strict=True):
            if not error:
                pool = lists.setdefault(step, [])
                pool.append(value)
                if len(pool) > 2 * self._width:
                    del pool[: -self._width]

    def window(self, steps: Sequence[int], width: int) -> Window | None:
        """The window of a run that selected `steps`: each step's newest `width` values, newest first."""
        if self._lists is not None:
            return Window.from_lists(
                {step: pool[-width:][::-1] for step in steps if (pool := self._lists.get(step))}
            )
        if not self._rows or self._steps is None:
            return None
        newest = np.array(self._rows[-width:][::-1])
        if self._steps == tuple(steps):
            return Window.from_runs(self._steps, newest)
        # A run that selected other steps than the pool's runs: the columns of those it holds.
        column = {step: i for i, step in enumerate(self._steps)}
        return Window.from_lists({step: newest[:, column[step]].tolist() for step in steps if step in column})

    def newest(self, steps: Sequence[int], width: int) -> dict[int, list[float]]:
        """Each step's newest `width` values, newest first (empty where the pool holds none)."""
        window = self.window(steps, width)
        return {step: [] if window is None else window.history(step) for step in steps}

    def _as_lists(self) -> dict[int, list[float]]:
        if self._lists is None:
            self._lists = {}
            if self._steps is not None and self._rows:
                columns = np.array(self._rows).T.tolist()
                self._lists = dict(zip(self._steps, columns, strict=True))
            self._rows = []
        return self._lists


class Replayer:
    """Judges the runs of one series, handed over oldest first, each against the runs before it: what
    `replay` does for a whole history, run by run, so that an import streams years of nightlies through it.

    Every gate is judged, since the trust of a run rests on all of them; a judged run keeps the verdicts
    of the gates of `keep` (metrics; None: all), each of which holds its baseline window. With `inject`,
    each night is judged a second time with that regression injected, against the same baselines; the
    injected values never form a baseline and never decide trust.
    """

    def __init__(
        self,
        test: ResolvedTest,
        series: str,
        policy: Policy,
        *,
        keep: Collection[str] | None = None,
        inject: Shift | None = None,
    ) -> None:
        self.test = test
        self.policy = policy
        self._keep = keep
        self._inject = inject
        # Per metric: the values that qualify under policy.baseline, and those of every run nobody
        # untrusted by hand, oldest first; and every step a run selected.
        self._baseline = {g.metric: _Pool(policy.window) for g in test.gates}
        self._nightly = {g.metric: _Pool(policy.window) for g in test.gates}
        self._steps_seen: dict[str, set[int]] = {g.metric: set() for g in test.gates}
        self._coordinates = {g.metric: g.coordinate(series) for g in test.gates}

    def judge(self, run: StoredRun, *, trust: bool | None = None) -> RunReplay:
        """The run's verdicts against the runs before it; the run then joins their baselines.

        With `trust` (the trust judging every gate would give it, as `bulk_trust` finds it), only the
        gates of `keep` are judged and pooled: a replayer handed one run so must be handed every run so."""
        if trust is not None:
            return self._judge_kept(run, is_trusted=trust)
        selections = self._selections(run)
        windows = self._windows(selections)
        # The hand-over point: a night's selected values meet the verdict here.
        results = evaluate(selections, Baselines(windows), self.policy)
        is_trusted = run.trust_override if run.trust_override is not None else trusted(results)
        kept = {r.gate.metric: r for r in results if self._keep is None or r.gate.metric in self._keep}
        injected = self._injected(
            [s for s in selections if self._keep is None or s[0].metric in self._keep], windows
        )
        self._add(run, selections, is_trusted)
        return RunReplay(run, kept, is_trusted, injected)

    def _judge_kept(self, run: StoredRun, *, is_trusted: bool) -> RunReplay:
        if self._keep is None:
            raise ValueError("a run's trust stands in for the gates that are not kept: pass keep")
        selections = self._selections(run, self._keep)
        windows = self._windows(selections)
        results = evaluate(selections, Baselines(windows), self.policy)
        if run.trust_override is None and is_trusted and not trusted(results):  # pragma: no cover
            raise AssertionError(f"run {run.run_id!r}: bulk trust and its own verdicts differ")
        injected = self._injected(selections, windows)
        self._add(run, selections, is_trusted)
        return RunReplay(run, {r.gate.metric: r for r in results}, is_trusted, injected)

    def _windows(self, selections: Sequence[tuple[ResolvedGate, str, Selection]]) -> dict[str, Window]:
        windows: dict[str, Window] = {}
        for gate, coordinate, chosen in selections:
            window = self._baseline[gate.metric].window(chosen.steps, self.policy.window)
            if window is not None:
                windows[coordinate] = window
        return windows

    def _injected(
        self, selections: Sequence[tuple[ResolvedGate, str, Selection]], windows: dict[str, Window]
    ) -> dict[str, Status]:
        """Each gate's status with `--inject`'s shift added to its night (never stored, never pooled)."""
        if self._inject is None:
            return {}
        shifted = [
            (gate, coordinate, self._inject.apply(gate, chosen, windows.get(coordinate)))
            for gate, coordinate, chosen in selections
        ]
        return {r.gate.metric: r.status for r in evaluate(shifted, Baselines(windows), self.policy)}

    def _selections(
        self, run: StoredRun, only: Collection[str] | None = None
    ) -> list[tuple[ResolvedGate, str, Selection]]:
        """The run's selection of each gate (of the metrics `only`; None: every gate) holding values."""
        selections = []
        for gate in self.test.gates:
            if only is not None and gate.metric not in only:
                continue
            chosen = stored_selection(gate, run.values.get((gate.metric, gate.steps_key)))
            if chosen:
                selections.append((gate, self._coordinates[gate.metric], chosen))
        return selections

    def _add(
        self, run: StoredRun, selections: Sequence[tuple[ResolvedGate, str, Selection]], is_trusted: bool
    ) -> None:
        qualifies = is_trusted if self.policy.baseline == "trusted" else not run.untrusted_by_hand
        for gate, _, chosen in selections:
            self._steps_seen[gate.metric].update(chosen.steps)
            if qualifies:
                self._baseline[gate.metric].add(chosen.steps, chosen.numbers())
            if not run.untrusted_by_hand:
                self._nightly[gate.metric].add(chosen.steps, chosen.numbers())

    def finish(self, runs: Sequence[RunReplay]) -> Replay:
        """The replay of `runs` (the judged ones), with the bands and values the next run would meet for
        the gates of `keep`."""
        bands: dict[str, dict[int, Band]] = {}
        distributions: dict[str, Mapping[int, Sequence[float]]] = {}
        for gate in self.test.gates:
            if self._keep is not None and gate.metric not in self._keep:
                continue
            steps = sorted(self._steps_seen[gate.metric])
            bands[gate.metric] = self._bands(gate, steps)
            distributions[gate.metric] = self._nightly[gate.metric].newest(steps, self.policy.window)
        return Replay(self.test, self.policy, tuple(runs), bands, distributions, self._inject)

    def _bands(self, gate: ResolvedGate, steps: Sequence[int]) -> dict[int, Band]:
        window = self._baseline[gate.metric].window(steps, self.policy.window)
        if window is None:
            return {step: band(gate.constraint, []) for step in steps}
        ref, lo, hi = ragged_bands(gate.constraint, window.values, window.counts, self.policy.reference)
        found = {
            step: Band(_none(r), n, _none(low), _none(high))
            for step, r, n, low, high in zip(
                window.steps, ref.tolist(), window.counts.tolist(), lo.tolist(), hi.tolist(), strict=True
            )
        }
        if gate.constraint is not None and (
            gate.constraint.sigma_up is not None or gate.constraint.sigma_down is not None
        ):  # a band with a sigma term carries its spread: built whole
            found = {
                step: band(gate.constraint, window.history(step), self.policy.reference) for step in found
            }
        return {step: found.get(step) or band(gate.constraint, []) for step in steps}


def _none(x: float) -> float | None:
    return None if math.isnan(x) else x


def replay(
    test: ResolvedTest,
    series: str,
    runs: Sequence[StoredRun],
    policy: Policy,
    *,
    keep: Collection[str] | None = None,
    inject: Shift | None = None,
    bulk: BulkTrust | None = None,
) -> Replay:
    """Judge `runs` (one series, oldest first) one after another, each against the runs before it (see
    `Replayer`). `bulk`: the `BulkTrust` of these runs under `test`, shared by several replays."""
    replayer = Replayer(test, series, policy, keep=keep, inject=inject)
    # A replay that reports some gates needs the others only for each run's trust, found in bulk.
    every = {g.metric for g in test.gates}
    trust = None if keep is None or every <= set(keep) else (bulk or BulkTrust(test, runs)).trust(policy)
    if trust is None:
        return replayer.finish([replayer.judge(run) for run in runs])
    return replayer.finish([replayer.judge(run, trust=t) for run, t in zip(runs, trust, strict=True)])


def stored_runs(
    store: Store, test: str, metrics: Sequence[str], *, statuses: Collection[str] | None = None
) -> list[StoredRun]:
    """Every stored run of `test`, oldest first, with its values of `metrics` as columns, and the statuses
    they were written with for the metrics of `statuses` (None: all)."""
    return [
        stored_run(row, values)
        for row, values in store.run_values(test=test, metrics=metrics, statuses=statuses)
    ]


def stored_run(row: RunRow, values: Mapping[tuple[str, str], ValueColumns]) -> StoredRun:
    return StoredRun(
        run_id=row.run.run_id,
        commit=row.run.commit,
        series_key=row.run.series_key,
        labels=row.run.labels,
        trust_override=row.trust_override,
        gate_trusted=row.run.gate_trusted,
        values=values,
    )
