"""The replay of one series' stored nightlies, oldest first, each judged as a nightly `evaluate --write` of
it would have judged and stored it (`Replayer`, `replay`); the stored runs it is handed, and the synthetic
regression (`Shift`) a backtest may inject. `gatecfg.analysis.backtest` reports on replays, `gatecfg
import` stores what they decide.

A replay keeps the history it writes in memory, as the store keeps it: per gate, each run's values with
the facts `gatecfg.membership` reads (the gate's own verdict, trust set by hand, rejoins, accepted
shifts). Each night's windows come from `membership`, what follows from its verdicts (a rejoin, a shift
accepted after `policy.accept_shift_after` nightlies) from `gatecfg.following`, the code the live path
calls. Trust is per gate, so a gate's replay needs no other gate: a replay of some gates judges only those.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
import numpy.typing as npt

from gatecfg.band import Band, band, ragged_bands
from gatecfg.following import Following, follow
from gatecfg.membership import (
    Baseline,
    Facts,
    joining,
    joins,
    rejoined,
    rejoins,
    taken_by_shift,
)
from gatecfg.resolve import Policy, ResolvedGate, ResolvedTest
from gatecfg.select import LAST_STEP, Selected, Selection
from gatecfg.shifts import Recent
from gatecfg.shifts import Shift as FollowedShift
from gatecfg.store import PointColumns, RunRow, Store, ValueColumns
from gatecfg.tail import levelled, reach
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
    created_at: datetime | None = None  # None: a run built by hand, replayed in the order given
    # Trust set by hand on one metric's values of this run (`trust --metric`), by metric.
    metric_overrides: Mapping[str, bool] = field(default_factory=dict)

    @property
    def untrusted_by_hand(self) -> bool:
        return self.trust_override is False


@dataclass(frozen=True)
class RunReplay:
    run: StoredRun
    results: Mapping[str, GateVerdicts]  # by metric: each step's status, its band built when asked for
    trusted: bool  # no replayed gate kept the run out of its baseline (or trust set by hand)
    # With `--inject`: by metric, the gate's status on this night with the regression injected.
    injected: Mapping[str, Status] = dataclasses.field(default_factory=dict)
    following: Following = dataclasses.field(default_factory=Following)
    # By metric: what the night's write stored of the gate (its values with their verdicts and bands).
    stored: Mapping[str, PointColumns] = dataclasses.field(default_factory=dict)


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


@dataclass(slots=True)
class _Row:
    """One run's stored values of a gate, with the facts its baseline reads, as the store keeps them."""

    run_id: str
    commit: str | None
    created_at: datetime
    facts: Facts
    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]  # finite: a step without one stores nothing
    change: float | None  # the mean relative change of its steps against their references


_NO_STEPS, _NO_VALUES = np.empty(0, np.int64), np.empty(0, np.float64)


class GateHistory:
    """One coordinate's stored rows, oldest first, as a nightly `--write` leaves them.

    Rows only ever join a baseline later (a rejoin), or stop joining all at once (an accepted shift takes
    everything older), so while every row holds the same steps a row with `width` newer joining rows can
    never enter a window again: its values are let go, and a replay of years holds a window's worth.
    """

    def __init__(self, baseline: Baseline, width: int) -> None:
        self.rows: list[_Row] = []
        self.shift_start: datetime | None = None  # the newest accepted shift's first run
        self._baseline = baseline
        self._width = width
        self._steps: frozenset[int] | None = frozenset()  # the one set of steps every row holds, if any
        self._held = 0  # rows before this one hold no values any more
        self._failed: list[_Row] = []  # rows whose failed values a pass of the gate lets rejoin

    def facts(self, row: _Row) -> Facts:
        if self.shift_start is not None and row.created_at < self.shift_start:
            return dataclasses.replace(row.facts, before_shift=True)
        return row.facts

    def newest(self) -> Iterator[tuple[_Row, Facts]]:
        for row in reversed(self.rows):
            yield row, self.facts(row)

    def window(self, baseline: Baseline, width: int) -> Window | None:
        """Per step, the newest `width` values of the rows that join the baseline, newest first (the
        store's `baselines`, for this coordinate)."""
        uniform = self._steps is not None
        chosen: list[_Row] = []
        by_step: dict[int, list[float]] = {}
        for row, _ in joining(self.newest(), _second, baseline):
            if uniform:
                chosen.append(row)
                if len(chosen) == width:
                    break
                continue
            for step, value in zip(row.steps.tolist(), row.values.tolist(), strict=True):
                kept = by_step.setdefault(step, [])
                if len(kept) < width:
                    kept.append(value)
        if uniform:
            if not chosen or not len(chosen[0].steps):
                return None
            return Window.from_runs(chosen[0].steps.tolist(), np.array([r.values for r in chosen]))
        return Window.from_lists(by_step)

    def add(self, row: _Row) -> None:
        steps = frozenset(row.steps.tolist())
        if self._steps is not None and self.rows and steps != self._steps:
            self._steps = None
        elif self._steps is not None:
            self._steps = steps
        self.rows.append(row)
        if rejoins(row.facts):
            self._failed.append(row)
        if self._steps is not None:
            self._let_go()

    def _let_go(self) -> None:
        """Drop the values of rows that `width` newer joining rows hide from every window."""
        joined = 0
        for at in range(len(self.rows) - 1, self._held - 1, -1):
            if joins(self.facts(self.rows[at]), self._baseline):
                joined += 1
                if joined == self._width:
                    for row in self.rows[self._held : at]:
                        row.steps, row.values = _NO_STEPS, _NO_VALUES
                    self._held = at
                    return

    def rejoin(self) -> None:
        for row in self._failed:
            row.facts = rejoined(row.facts)
        self._failed.clear()

    def accept(self, shift: FollowedShift, pk: int) -> None:
        runs = set(shift.runs)
        for row in reversed(self.rows):
            if not runs:
                break
            if row.run_id in runs:
                runs.discard(row.run_id)
                row.facts = taken_by_shift(row.facts, pk)
        if self.shift_start is None or shift.first_created_at > self.shift_start:
            self.shift_start = shift.first_created_at
        self._failed = [row for row in self._failed if rejoins(row.facts)]

    def recent(self, depth: int) -> list[Recent]:
        """The newest `depth` rows as `Store.recent` reads them (what `gatecfg.following` decides from)."""
        found: list[Recent] = []
        for row, facts in self.newest():
            if len(found) == depth:
                break
            found.append(
                Recent.of(
                    run_id=row.run_id,
                    commit=row.commit,
                    created_at=row.created_at,
                    facts=facts,
                    change=row.change,
                )
            )
        return found


def change_of(values: npt.NDArray[np.float64], refs: npt.NDArray[np.float64]) -> float | None:
    """The mean relative change of a night's steps against their references (as `follow.recent` reads it)."""
    usable = np.isfinite(refs) & (refs != 0)
    if not usable.any():
        return None
    return float(np.mean((values[usable] - refs[usable]) / np.abs(refs[usable])))


class _Memory:
    """The reads `gatecfg.following.follow` makes of a store, answered from the replay's own history."""

    def __init__(self, histories: Mapping[str, GateHistory]) -> None:
        self._histories = histories

    def recent(
        self, coordinates: Sequence[str], *, depth: int, exclude_run_id: str | None = None
    ) -> dict[str, list[Recent]]:
        return {c: found for c in coordinates if (found := self._histories[c].recent(depth))}


class Replayer:
    """Judges the runs of one series, handed over oldest first, as nightly `evaluate --write`s of them:
    what `replay` does for a whole history, run by run, so that an import streams years of nightlies
    through it.

    The gates of `keep` (metrics; None: all) are judged and hold their history. With `inject`, each night
    is judged a second time with that regression injected, against the same baselines; the injected
    values are never stored and never decide anything. With `hand_over`, each `RunReplay` carries what its
    night stored (`stored`: what an import writes); a backtest, which keeps every night, does without.
    """

    def __init__(
        self,
        test: ResolvedTest,
        series: str,
        policy: Policy,
        *,
        keep: Collection[str] | None = None,
        inject: Shift | None = None,
        hand_over: bool = False,
    ) -> None:
        self.test = test
        self._hand_over = hand_over
        self.policy = policy
        self._gates = [g for g in test.gates if keep is None or g.metric in keep]
        self._inject = inject
        self._coordinates = {g.metric: g.coordinate(series) for g in self._gates}
        # Each gate holds as many joining rows as its baseline read reaches (gatecfg/tail.py).
        self._reach = {self._coordinates[g.metric]: reach(g, policy) for g in self._gates}
        self.histories = {c: GateHistory(policy.baseline, depth) for c, depth in self._reach.items()}
        self._memory = _Memory(self.histories)
        self._shifts = 0
        self._nights = 0

    def judge(self, run: StoredRun, *, at: datetime | None = None) -> RunReplay:
        """The run's verdicts against the runs before it, as `evaluate --write` gives them; the run is
        then stored into the replay's history as that write stores it. `at`: the night's time (the run's
        own by default)."""
        now = at or run.created_at or _night(self._nights)
        selections = self._selections(run)
        windows = {
            coordinate: found
            for _, coordinate, _ in selections
            if (found := self.histories[coordinate].window(self.policy.baseline, self._reach[coordinate]))
        }
        # Every night is stored: its bands are computed once, up front (the statuses are the same).
        results = evaluate(selections, Baselines(windows), self.policy, keep_bands=True)
        followed = follow(
            self._memory,
            results,
            self.policy,
            run_id=run.run_id,
            commit=run.commit,
            now=now,
            has_history=self._nights > 0,
            writing=True,
        )
        injected = self._injected(selections, windows)
        stored = self._write(run, results, followed, now)
        self._nights += 1
        is_trusted = run.trust_override if run.trust_override is not None else trusted(results)
        kept = stored if self._hand_over else {}
        return RunReplay(run, {r.gate.metric: r for r in results}, is_trusted, injected, followed, kept)

    def _write(
        self, run: StoredRun, results: Sequence[GateVerdicts], followed: Following, now: datetime
    ) -> dict[str, PointColumns]:
        """What `Store.write_run` stores of the night: each gate's values with its verdict, then the
        rejoins and accepted shifts that follow from it. The stored columns, by metric."""
        run_trusted = trusted(results)
        stored: dict[str, PointColumns] = {}
        for r in results:
            columns = stored[r.gate.metric] = r.stored_columns()
            values = np.asarray(columns.values, np.float64)
            finite = np.isfinite(values)  # what a baseline reads of the row (store/statements.py FINITE)
            if not len(columns):
                continue
            self.histories[r.coordinate].add(
                _Row(
                    run_id=run.run_id,
                    commit=run.commit,
                    created_at=now,
                    facts=Facts(
                        gate_trusted=not r.blocks_trust,
                        run_trusted=run_trusted,
                        override=run.metric_overrides.get(r.gate.metric),
                        run_override=run.trust_override,
                    ),
                    steps=np.asarray(columns.steps, np.int64)[finite],
                    values=values[finite],
                    change=change_of(values[finite], _floats(columns)[finite]),
                )
            )
        for coordinate in followed.rejoin:
            self.histories[coordinate].rejoin()
        for shift in followed.accept:
            self._shifts += 1
            self.histories[shift.coordinate].accept(shift, self._shifts)
        return stored

    def _injected(
        self, selections: Sequence[tuple[ResolvedGate, str, Selection]], windows: dict[str, Window]
    ) -> dict[str, Status]:
        """Each gate's status with `--inject`'s shift added to its night (never stored, never pooled)."""
        if self._inject is None:
            return {}
        shifted = [
            (
                gate,
                coordinate,
                self._inject.apply(gate, chosen, levelled(windows.get(coordinate), gate, self.policy)),
            )
            for gate, coordinate, chosen in selections
        ]
        return {r.gate.metric: r.status for r in evaluate(shifted, Baselines(windows), self.policy)}

    def _selections(self, run: StoredRun) -> list[tuple[ResolvedGate, str, Selection]]:
        """The run's selection of each replayed gate holding values."""
        selections = []
        for gate in self._gates:
            chosen = stored_selection(gate, run.values.get((gate.metric, gate.steps_key)))
            if chosen:
                selections.append((gate, self._coordinates[gate.metric], chosen))
        return selections

    def finish(self, runs: Sequence[RunReplay]) -> Replay:
        """The replay of `runs` (the judged ones), with the bands and values the next run would meet."""
        bands: dict[str, dict[int, Band]] = {}
        distributions: dict[str, Mapping[int, Sequence[float]]] = {}
        for gate in self._gates:
            history = self.histories[self._coordinates[gate.metric]]
            steps = sorted({step for row in history.rows for step in row.steps.tolist()})
            bands[gate.metric] = self._bands(gate, history, steps)
            nightly = history.window("nightly", self.policy.window)
            distributions[gate.metric] = {
                step: [] if nightly is None else nightly.history(step) for step in steps
            }
        return Replay(self.test, self.policy, tuple(runs), bands, distributions, self._inject)

    def _bands(self, gate: ResolvedGate, history: GateHistory, steps: Sequence[int]) -> dict[int, Band]:
        window = history.window(self.policy.baseline, self.policy.window)
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


def _second(item: tuple[_Row, Facts]) -> Facts:
    return item[1]


def _floats(columns: PointColumns) -> npt.NDArray[np.float64]:
    return np.array([np.nan if x is None else x for x in columns.refs], np.float64)


def _night(n: int) -> datetime:
    """The time of the n-th run of a replay handed runs without one: their order is all that counts."""
    return datetime(2000, 1, 1, tzinfo=UTC) + timedelta(days=n)


def _none(x: float) -> float | None:
    return None if math.isnan(x) else x


def replayed_policy(policy: Policy) -> dict[str, object]:
    """The policy fields a replay's verdicts rest on, as backtest's JSON and import's output name them."""
    return {
        "window": policy.window,
        "min_history": policy.min_history,
        "reference": policy.reference,
        "baseline": policy.baseline,
        "accept_shift_after": "never" if policy.accept_shift_after is None else policy.accept_shift_after,
    }


def describe_policy(policy: Policy) -> str:
    return ", ".join(f"{key} {value}" for key, value in replayed_policy(policy).items())


def replay(
    test: ResolvedTest,
    series: str,
    runs: Sequence[StoredRun],
    policy: Policy,
    *,
    keep: Collection[str] | None = None,
    inject: Shift | None = None,
) -> Replay:
    """Judge `runs` (one series, oldest first) one after another, as nightly writes (see `Replayer`)."""
    replayer = Replayer(test, series, policy, keep=keep, inject=inject)
    return replayer.finish([replayer.judge(run) for run in runs])


def stored_runs(
    store: Store, test: str, metrics: Sequence[str], *, statuses: Collection[str] | None = None
) -> list[StoredRun]:
    """Every stored run of `test`, oldest first, with its values of `metrics` as columns, and the statuses
    they were written with for the metrics of `statuses` (None: all)."""
    overrides = store.metric_overrides(test=test)
    return [
        stored_run(row, values, overrides.get(row.run.run_id, {}))
        for row, values in store.run_values(test=test, metrics=metrics, statuses=statuses)
    ]


def stored_run(
    row: RunRow, values: Mapping[tuple[str, str], ValueColumns], overrides: Mapping[str, bool] | None = None
) -> StoredRun:
    return StoredRun(
        run_id=row.run.run_id,
        commit=row.run.commit,
        series_key=row.run.series_key,
        labels=row.run.labels,
        trust_override=row.trust_override,
        gate_trusted=row.run.gate_trusted,
        values=values,
        created_at=row.run.created_at,
        metric_overrides=dict(overrides or {}),
    )
