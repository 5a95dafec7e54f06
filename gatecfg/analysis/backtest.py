"""Backtest: replay stored nightly history in time order under a gate tree, with evaluate's own rules.

Each stored run, oldest first, is judged by `gatecfg.verdicts.evaluate` (the same band, `judge` and
`tolerate`) against baselines formed only from the runs before it, with the test's `window`,
`min_history`, `reference` and `baseline` policy. Trust is decided as evaluate decides it: a trust or
untrust set by hand wins, else a run is trusted iff no gated coordinate of the replay failed. So a
proposed tree changes not only its own verdicts but the baselines every later run meets.

What is replayed is the measured quantity, not the key: the values stored for the test's series, metric
and `steps`, under whichever constraint was in force when they were written. A gate is backtested as if
it had been in place since the first stored run. A proposed `steps` change has no values to replay
(step -1 and per-step values are different quantities).

A run untrusted by hand is a known-bad night: it is replayed, never forms a baseline, and is left out of
the counts, since an alarm on it is not a false one.

Limits: a run keeps no stored row for a metric its record lacked, so the `error` evaluate gave such a run
is not replayed, and its trust is recomputed from the values it has.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gatecfg.analysis.false_alarm import Estimate, gate_estimate, step_estimate
from gatecfg.analysis.matrix import GateMatrix, stored_selection
from gatecfg.band import Band, band, ragged_bands
from gatecfg.models import MAX_STEP, Baseline
from gatecfg.resolve import Policy, ResolvedGate, ResolvedTest
from gatecfg.select import LAST_STEP, Selection
from gatecfg.store import STATUSES, RunRow, Store, ValueColumns
from gatecfg.verdicts import STATUS_ORDER, GateVerdicts, Status, evaluate, tolerates, trusted
from gatecfg.windows import Baselines, Window

FAILING: frozenset[str] = frozenset({"fail", "error"})
Against = ResolvedTest | Literal["recorded"] | None


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


# Rounds of `BulkTrust.trust` before it leaves a history to the run-by-run replay; a round judges the runs
# of a block from the first one whose trust is not yet known.
TRUST_ROUNDS = 6
# Stored values of a block of runs judged together (every gate's), which bounds BulkTrust's memory.
RUN_BLOCK_VALUES = 2_000_000
# Window values a judged part of a block gathers at once (x 8 bytes).
BLOCK_VALUES = 4_000_000


class BulkTrust:
    """Each run's trust as judging `runs` (one series, oldest first) one by one under `test` decides it,
    each gate's runs judged together (`GateMatrix`), a block of runs at a time.

    Under `baseline: trusted` a run's window rests on the trust of the runs before it, which rests on
    their verdicts. A round judges the runs of a block given a guess of their trust: the first run the
    guess gets wrong is judged right (every run before it was guessed right), so the next round, guessing
    what this one found, need judge only the runs after it; a round that finds its own guess is the
    replay's answer for the block. Starting from "trusted unless set by hand", a block nearly always takes
    one round, and that round judges its runs exactly as `baseline: nightly` does: rounds are kept, so
    that the replays under both policies judge them once. Between blocks a gate carries only each step's
    newest `window` values that join baselines (`GateMatrix.tail`), so memory does not grow with history.
    """

    def __init__(self, test: ResolvedTest, runs: Sequence[StoredRun]) -> None:
        self.test = test
        self.runs = runs
        self._hand = np.array([run.trust_override is not None for run in runs], bool)
        self._given = np.array([bool(run.trust_override) for run in runs], bool)
        self._gates = [gate for gate in test.gates if gate.gated]
        self._blocked: dict[tuple[int, bytes, int, int, str, float], npt.NDArray[np.bool_]] = {}

    def trust(self, policy: Policy) -> list[bool] | None:
        """Each run's trust; None when a block takes more than TRUST_ROUNDS rounds."""
        found = np.where(self._hand, self._given, True)
        by_hand = ~(self._hand & ~self._given)  # the runs `baseline: nightly` pools
        tails: dict[str, GateMatrix | None] = {gate.metric: None for gate in self._gates}
        for start, stop in self._blocks():
            matrices = [
                GateMatrix.stored(
                    gate, [run.values.get((gate.metric, gate.steps_key)) for run in self.runs[start:stop]]
                ).after(tails[gate.metric])
                for gate in self._gates
            ]
            blocked = np.zeros(stop - start, bool)
            settled = 0  # runs of the block whose trust is known
            for _ in range(TRUST_ROUNDS):
                qualifies = found if policy.baseline == "trusted" else by_hand
                blocked[settled:] = self._judged(matrices, qualifies[:stop], policy, start, settled)
                block = np.where(self._hand[start:stop], self._given[start:stop], ~blocked)
                wrong = np.flatnonzero(block != found[start:stop])
                found[start:stop] = block
                if policy.baseline != "trusted" or not len(wrong):
                    break
                settled = int(wrong[0]) + 1
            else:
                return None
            pooled = (found if policy.baseline == "trusted" else by_hand)[start:stop]
            for gate, matrix in zip(self._gates, matrices, strict=True):
                carried = len(matrix.values) - (stop - start)
                tails[gate.metric] = matrix.tail(
                    np.concatenate([np.ones(carried, bool), pooled]), policy.window
                )
        return found.tolist()  # type: ignore[no-any-return]

    def _blocks(self) -> Iterator[tuple[int, int]]:
        """(start, stop) of consecutive runs holding about RUN_BLOCK_VALUES values."""
        start, size = 0, 0
        for at, run in enumerate(self.runs):
            size += sum(map(len, run.values.values()))
            if size >= RUN_BLOCK_VALUES:
                yield start, at + 1
                start, size = at + 1, 0
        if start < len(self.runs):
            yield start, len(self.runs)

    def _judged(
        self,
        matrices: Sequence[GateMatrix],
        qualifies: npt.NDArray[np.bool_],
        policy: Policy,
        start: int,
        settled: int,
    ) -> npt.NDArray[np.bool_]:
        """Per run of the block from its `settled`-th: whether a gate keeps it from being trusted, given
        which runs up to the block's end join baselines (`qualifies`, from the first run on)."""
        # What verdicts rest on besides the windows' runs (`baseline` only chooses those runs); the runs
        # before the block enter through the tails, which rest on their qualification alone.
        key = (
            start + settled,
            qualifies.tobytes(),
            policy.window,
            policy.min_history,
            policy.reference,
            policy.false_alarm,
        )
        found = self._blocked.get(key)
        if found is None:
            found = np.zeros(len(qualifies) - start - settled, bool)
            for matrix in matrices:
                carried = len(matrix.values) - (len(qualifies) - start)
                pooled = np.concatenate([np.ones(carried, bool), qualifies[start:]])
                found |= _blocked(matrix, pooled, policy, np.arange(carried + settled, len(matrix.values)))
            self._blocked[key] = found
        return found


def bulk_trust(test: ResolvedTest, runs: Sequence[StoredRun], policy: Policy) -> list[bool] | None:
    """`BulkTrust(test, runs).trust(policy)`."""
    return BulkTrust(test, runs).trust(policy)


def _blocked(
    matrix: GateMatrix, qualifies: npt.NDArray[np.bool_], policy: Policy, runs: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Per run of `runs` (row indices, ascending): whether the gate keeps it from being trusted (a failing
    or erroring step, not tolerated), given which rows join baselines."""
    blocked = np.zeros(len(runs), bool)
    gate = matrix.gate
    if gate.constraint is not None and gate.constraint.budget is not None:
        for k, run in enumerate(runs.tolist()):
            judged = matrix.night(qualifies, policy, run)
            blocked[k] = judged is not None and judged.blocks_trust
        return blocked
    block = max(1, BLOCK_VALUES // max(1, len(matrix.steps) * policy.window))
    for start in range(0, len(runs), block):
        part = runs[start : start + block]
        judged, rows = matrix.verdicts(qualifies, policy, part)
        at = np.searchsorted(part, rows)  # each cell's run, as its index in `part`
        count = {
            status: np.bincount(at[judged.codes == STATUSES.index(status)], minlength=len(part))
            for status in ("fail", "pass", "error")
        }
        for k in np.flatnonzero(np.bincount(at, minlength=len(part))).tolist():
            failing = int(count["fail"][k])
            tolerated = tolerates(gate, failing=failing, judged=failing + int(count["pass"][k]))
            blocked[start + k] = count["error"][k] > 0 or (failing > 0 and not tolerated)
    return blocked


@dataclass(frozen=True)
class Flip:
    run_id: str
    commit: str | None
    before: Status
    after: Status

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "commit": self.commit, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Drift:
    """The reference the first judged run met, and the one the next run would meet."""

    first: float | None
    last: float | None

    @property
    def change(self) -> float | None:
        return None if self.first is None or self.last is None else self.last - self.first

    @property
    def pct(self) -> float | None:
        change = self.change
        if change is None or self.first is None or self.first == 0:
            return None
        return change / abs(self.first) * 100.0

    def as_json(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "change": self.change, "pct": self.pct}


@dataclass(frozen=True)
class Tally:
    replayed: int  # runs holding the gate's values (runs untrusted by hand are left out)
    judged: int  # of those, runs whose verdict was pass or fail
    failures: int
    errors: int
    cold: int
    drift: Drift

    @property
    def false_alarm_rate(self) -> float | None:
        return self.failures / self.judged if self.judged else None

    def as_json(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "judged": self.judged,
            "failures": self.failures,
            "false_alarm_rate": self.false_alarm_rate,
            "errors": self.errors,
            "cold": self.cold,
            "drift": self.drift.as_json(),
        }


@dataclass(frozen=True)
class Detection:
    """`backtest --inject`: of the nights judged with the regression injected, how many failed."""

    shift: str
    judged: int
    detected: int

    @property
    def rate(self) -> float | None:
        return self.detected / self.judged if self.judged else None

    def as_json(self) -> dict[str, Any]:
        return {
            "shift": self.shift,
            "judged": self.judged,
            "detected": self.detected,
            "detection_rate": self.rate,
        }


@dataclass(frozen=True)
class GateReport:
    """One backtest row: a gate (`step` None: over all its steps) or one of its steps, in one series."""

    test: str
    metric: str
    step: int | None
    coordinate: str
    labels: Mapping[str, str]
    tally: Tally
    estimate: Estimate | None
    flips: tuple[Flip, ...]
    baseline: Baseline
    other: tuple[Baseline, Tally]  # the same replay under the other baseline policy
    detection: Detection | None = None  # a gate's row with `--inject`

    def as_json(self) -> dict[str, Any]:
        other_name, other = self.other
        found = {} if self.detection is None else {"injected": self.detection.as_json()}
        return {
            **found,
            "test": self.test,
            "metric": self.metric,
            "step": self.step,
            "coordinate": self.coordinate,
            "replayed": self.tally.replayed,
            "failures": self.tally.failures,
            "false_alarm_rate": self.tally.false_alarm_rate,
            "estimate": None if self.estimate is None else self.estimate.as_json(),
            "flips": [f.as_json() for f in self.flips],
            "series": dict(self.labels),
            "judged": self.tally.judged,
            "errors": self.tally.errors,
            "cold": self.tally.cold,
            "baseline": self.baseline,
            "drift": self.tally.drift.as_json(),
            "other_baseline": {"baseline": other_name, **other.as_json()},
        }


Track = list[tuple[StoredRun, Status, float | None]]


class Tracks:
    """A gate's verdicts over a replay: per run holding the gate, its status and the mean reference of
    its steps (`whole`), and each (run, step) cell's status and reference, kept as flat columns from which
    one step's Track is cut when a report row needs it (a gate of 1,000 steps has 1,000 tracks; a report
    shows the few with a failure or a flip)."""

    def __init__(self, replayed: Replay, metric: str) -> None:
        self.runs = [r.run for r in replayed.runs]
        self.whole: Track = []
        self.held: list[int] = []  # the index of each run of `whole`
        positions: list[npt.NDArray[np.int64]] = []
        steps: list[int] = []
        self._statuses: list[Status] = []
        self._refs: list[float | None] = []
        for at, r in enumerate(replayed.runs):
            result = r.results.get(metric)
            if result is None:
                continue
            refs = result.refs()
            self.whole.append((r.run, result.status, _mean(refs)))
            self.held.append(at)
            positions.append(np.full(len(refs), at, np.int64))
            steps += result.selection.steps
            self._statuses += result.statuses
            self._refs += refs
        self.position = np.concatenate(positions) if positions else np.empty(0, np.int64)  # the run's index
        self.step = np.array(steps, np.int64)
        self.failing = np.isin(np.array(self._statuses, dtype=object), list(FAILING))
        self.failed = np.array([status == "fail" for status in self._statuses], bool)
        self._order = np.argsort(self.step, kind="stable")  # by step, each step's cells in run order
        self._sorted = self.step[self._order]

    def track(self, step: int | None) -> Track:
        if step is None:
            return list(self.whole)
        cells = self._order[
            np.searchsorted(self._sorted, step, "left") : np.searchsorted(self._sorted, step, "right")
        ].tolist()
        return [(self.runs[self.position[i]], self._statuses[i], self._refs[i]) for i in cells]

    def keys(self) -> npt.NDArray[np.int64]:
        """Each cell as one number: its run's index and its step."""
        return _cell_keys(self.position, self.step)

    def flipped(self, keys: npt.NDArray[np.int64], failing: npt.NDArray[np.bool_]) -> set[int]:
        """Steps where some run is failing here but not in the cells `keys` (`_cell_keys`), or the other way
        round, as `_flips` finds them step by step."""
        _, here, there = np.intersect1d(self.keys(), keys, assume_unique=True, return_indices=True)
        return set(self.step[here[self.failing[here] != failing[there]]].tolist())


def _cell_keys(positions: npt.NDArray[np.int64], steps: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return positions * (MAX_STEP + 2) + steps + 1  # steps from -1 (`last`) to MAX_STEP


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def _tally(track: Track, next_ref: float | None) -> Tally:
    counted = [(run, status, ref) for run, status, ref in track if not run.untrusted_by_hand]
    statuses = [status for _, status, _ in counted]
    first = next((ref for _, status, ref in counted if status in ("pass", "fail")), None)
    return Tally(
        replayed=len(counted),
        judged=sum(s in ("pass", "fail") for s in statuses),
        failures=statuses.count("fail"),
        errors=statuses.count("error"),
        cold=statuses.count("cold"),
        drift=Drift(first, next_ref),
    )


def _next_ref(replayed: Replay, metric: str, step: int | None) -> float | None:
    bands = replayed.bands.get(metric, {})
    if step is None:
        return _mean(b.ref for b in bands.values())
    found = bands.get(step)
    return None if found is None else found.ref


class Recorded:
    """The verdicts the runs of a track got when they were written, per run and step."""

    def __init__(self, gate: ResolvedGate) -> None:
        self._gate = gate
        self._key = (gate.metric, gate.steps_key)

    def status(self, run: StoredRun, step: int | None) -> Status | None:
        if step is None:
            return _recorded(run, self._gate)
        stored = run.values.get(self._key)
        return None if stored is None else stored.status_at(step)

    def cells(self, tracks: Tracks) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The recorded steps of the runs of `tracks` that hold the gate, as `Tracks.keys` numbers them,
        and whether each was failing."""
        held = [
            (at, stored)
            for at in tracks.held
            if (stored := tracks.runs[at].values.get(self._key)) is not None
        ]
        if not held:
            return np.empty(0, np.int64), np.empty(0, bool)
        positions = np.concatenate([np.full(len(stored), at, np.int64) for at, stored in held])
        steps = np.concatenate([stored.steps for _, stored in held])
        codes = np.concatenate([stored.status_codes() for _, stored in held])
        failing = np.isin(codes, [STATUSES.index(status) for status in FAILING])
        return _cell_keys(positions, steps), failing


def _recorded(run: StoredRun, gate: ResolvedGate) -> Status | None:
    """The gate's verdict the run got when it was written. A stored step keeps `fail` even when its gate
    tolerated it; a run written trusted cannot have had a gate fail, so there its failing steps were
    tolerated."""
    stored = run.values.get((gate.metric, gate.steps_key))
    if stored is None or not len(stored):
        return None
    codes = stored.status_codes()
    if run.gate_trusted:
        codes = np.where(codes == _FAIL, _PASS, codes)
    return STATUSES[int(codes[np.argmin(_ORDER[codes])])]  # the first of the most severe, as min() finds it


# Status codes as stored (their index in STATUSES), and each one's severity (STATUS_ORDER).
_FAIL, _PASS = STATUSES.index("fail"), STATUSES.index("pass")
_ORDER = np.array([STATUS_ORDER[status] for status in STATUSES])


def _flips(after: Track, before: Mapping[str, Status]) -> tuple[Flip, ...]:
    """Runs whose verdict changes between failing (fail, error) and not failing."""
    return tuple(
        Flip(run.run_id, run.commit, before[run.run_id], status)
        for run, status, _ in after
        if run.run_id in before and (before[run.run_id] in FAILING) != (status in FAILING)
    )


def _before(
    recorded: Recorded | None,
    prior: Tracks | None,
    track: Track,
    step: int | None,
) -> dict[str, Status]:
    """The verdicts flips are measured from: `recorded` ones (when flips are measured against them), or
    the prior tree's replay (`prior`, None when that tree has no such gate)."""
    if recorded is not None:
        return {
            run.run_id: status for run, _, _ in track if (status := recorded.status(run, step)) is not None
        }
    if prior is None:
        return {}
    return {run.run_id: status for run, status, _ in prior.track(step)}


def _single_step(gate: ResolvedGate) -> int | None:
    if gate.steps == "last":
        return LAST_STEP
    if isinstance(gate.steps, tuple) and len(gate.steps) == 1:
        return gate.steps[0]
    return None


def _other(baseline: Baseline) -> Baseline:
    return "nightly" if baseline == "trusted" else "trusted"


def series_runs(runs: Sequence[StoredRun]) -> dict[str, list[StoredRun]]:
    """Runs by series key, each list keeping the given (time) order."""
    found: dict[str, list[StoredRun]] = {}
    for run in runs:
        found.setdefault(run.series_key, []).append(run)
    return found


def backtest(
    test: ResolvedTest,
    runs: Sequence[StoredRun],
    *,
    against: Against,
    metric: str | None = None,
    inject: Shift | None = None,
) -> list[GateReport]:
    """Backtest rows for every gate of `test` (or the one for `metric`) in every series of `runs`.

    `runs` are oldest first. `against` is what flips are measured from: the same test in another tree,
    "recorded" (the verdicts stored when each run was evaluated), or None (no comparison). With
    `inject`, each gate's row also reports how often that regression, injected into each night, fails it.
    """
    reports: list[GateReport] = []
    other_policy = dataclasses.replace(test.policy, baseline=_other(test.policy.baseline))
    for series, chosen in series_runs(runs).items():
        # Only the verdicts of the gates reported are kept: a replayed gate holds a window per run.
        keep = None if metric is None else {metric}
        bulk = BulkTrust(test, chosen)
        after = replay(test, series, chosen, test.policy, keep=keep, inject=inject, bulk=bulk)
        other = replay(test, series, chosen, other_policy, keep=keep, bulk=bulk)
        prior = (
            replay(against, series, chosen, against.policy, keep=keep)
            if isinstance(against, ResolvedTest)
            else None
        )
        for gate in test.gates:
            if metric is not None and gate.metric != metric:
                continue
            reports += _gate_reports(gate, series, after=after, other=other, against=against, prior=prior)
    return reports


def _gate_reports(
    gate: ResolvedGate,
    series: str,
    *,
    after: Replay,
    other: Replay,
    against: Against,
    prior: Replay | None,
) -> list[GateReport]:
    tracks = Tracks(after, gate.metric)
    other_tracks = Tracks(other, gate.metric)
    old = None if prior is None else prior.test.gate(gate.metric)
    # Per-step verdicts compare only where both trees select the same steps (the same quantity).
    prior_tracks = None if prior is None or old is None else Tracks(prior, gate.metric)
    same_steps = old is not None and old.steps_key == gate.steps_key
    whole = tracks.track(None)
    if not whole:
        return []
    recorded = Recorded(gate) if against == "recorded" else None
    single = _single_step(gate)
    policy = after.policy
    detection = _detection(after, gate.metric)
    rows: list[tuple[int | None, Track]] = []
    if single is not None:
        rows.append((single, tracks.track(single)))
    else:
        rows.append((None, whole))
        # A step has a row of its own when some run fails there or flips verdict.
        shown = set(tracks.step[tracks.failed].tolist())
        if recorded is not None:
            shown |= tracks.flipped(*recorded.cells(tracks))
        elif prior_tracks is not None and same_steps:
            shown |= tracks.flipped(prior_tracks.keys(), prior_tracks.failing)
        rows += [(one, tracks.track(one)) for one in sorted(after.bands.get(gate.metric, {})) if one in shown]
    reports = []
    for step, track in rows:
        if step is None:
            estimate = gate_estimate(
                gate, policy, after.bands.get(gate.metric, {}), after.distributions.get(gate.metric, {})
            )
        else:
            current = after.bands.get(gate.metric, {}).get(step)
            values = after.distributions.get(gate.metric, {}).get(step, ())
            estimate = None if current is None else step_estimate(gate, policy, current, values)
        reports.append(
            GateReport(
                test=after.test.test,
                metric=gate.metric,
                step=step,
                coordinate=gate.coordinate(series),
                labels=track[0][0].labels,
                tally=_tally(track, _next_ref(after, gate.metric, step)),
                estimate=estimate,
                flips=_flips(
                    track,
                    _before(recorded, prior_tracks if step is None or same_steps else None, track, step),
                ),
                baseline=policy.baseline,
                other=(
                    other.policy.baseline,
                    _tally(other_tracks.track(step), _next_ref(other, gate.metric, step)),
                ),
                detection=detection if step is None or step == single else None,
            )
        )
    return reports


def _detection(replayed: Replay, metric: str) -> Detection | None:
    """How often the injected regression failed the gate, over the nights nobody untrusted by hand on
    which its injected verdict was pass or fail; None without `--inject`."""
    if replayed.inject is None:
        return None
    statuses = [
        status
        for r in replayed.runs
        if not r.run.untrusted_by_hand and (status := r.injected.get(metric)) in ("pass", "fail")
    ]
    return Detection(replayed.inject.text, len(statuses), statuses.count("fail"))


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
