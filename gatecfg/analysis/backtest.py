"""Backtest: replay stored nightly history in time order under a gate tree, with evaluate's own rules,
and compare the replays per gate: failures, false alarms, flips, drift, detection, and a budget gate's
record beside its promise.

The replay itself is `gatecfg.analysis.replayer`, its baselines read by `gatecfg.membership`, so a proposed
tree changes not only its own verdicts but the baselines every later run meets. What is replayed, and its
limits: docs/calibration.md, "Backtest".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gatecfg import moments
from gatecfg.analysis.false_alarm import Estimate, gate_estimate, step_estimate
from gatecfg.analysis.replayer import Replay, Shift, StoredRun, replay
from gatecfg.distributions import breaks_promise
from gatecfg.membership import Baseline
from gatecfg.models import MAX_STEP
from gatecfg.resolve import ResolvedGate, ResolvedTest
from gatecfg.select import LAST_STEP
from gatecfg.store import STATUSES
from gatecfg.verdicts import STATUS_ORDER, Status

FAILING: frozenset[str] = frozenset({"fail", "error"})
Against = ResolvedTest | Literal["recorded"] | None


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
    promise: float | None = None  # a budget gate's `false_alarm`: the share of clean nights it may fail

    @property
    def over_promise(self) -> bool:
        """The gate's own record fails more than twice its promise, more than chance would (binomial,
        one-sided at 1%): its history's noise is not the noise the rule prices."""
        if self.promise is None:
            return False
        return breaks_promise(self.tally.failures, self.tally.judged, self.promise)

    def as_json(self) -> dict[str, Any]:
        other_name, other = self.other
        found = {} if self.detection is None else {"injected": self.detection.as_json()}
        if self.promise is not None:
            found["promise"] = {"false_alarm": self.promise, "over": self.over_promise}
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
    return moments.mean(known) if known else None


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
        after = replay(test, series, chosen, test.policy, keep=keep, inject=inject)
        other = replay(test, series, chosen, other_policy, keep=keep)
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
        # Every such step, also one with no band left after the last run (its last verdict an error).
        rows += [(one, tracks.track(one)) for one in sorted(shown)]
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
                promise=gate.false_alarm if _budget(gate) and (step is None or step == single) else None,
            )
        )
    return reports


def _budget(gate: ResolvedGate) -> bool:
    return gate.constraint is not None and gate.constraint.budget is not None


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
