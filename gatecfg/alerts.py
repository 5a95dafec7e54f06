"""The fleet's open alerts grouped by cause (pure; docs/alerts.md).

A gate is open when its series' newest run keeps its values out of the baseline because the gate failed
(failing, missing steps, an error), or when evaluate followed a shift of it that nobody has triaged. Its
*episode* is the streak of failing nightlies that ends tonight; the first run of the streak is where the
level moved. Gates group by what that first run changed against the run before it: the night, the commit,
and the environment its `--meta` carried (the runner's own name aside, gatecfg/same_code.py). One
container bump across a fleet is then one group, whatever the number of tests it moved; the evidence says
how many of the gates that first ran that change moved.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from gatecfg.same_code import environment
from gatecfg.wording import plural

Kind = Literal["failing", "missing", "error", "shifted"]
Verdict = Literal["intended", "environment", "false-alarm", "regression"]
VERDICTS: tuple[Verdict, ...] = ("intended", "environment", "false-alarm", "regression")
# JSON of `gatecfg alerts --format json` (docs/alerts.md): bumped when a field changes meaning or goes.
JSON_VERSION = 1


@dataclass(frozen=True)
class Night:
    """A stored run as the alerts read it."""

    run_id: str
    series_key: str
    test: str
    commit: str | None
    created_at: datetime
    meta: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Decided:
    """An active decision about an alert (`alerts ack`), as stored."""

    pk: int
    alert: str
    verdict: Verdict
    reason: str
    link: str | None
    decided_by: str
    decided_at: datetime


@dataclass(frozen=True)
class OpenGate:
    """One gate of one series whose newest run keeps it out of its baseline, or whose followed shift
    nobody triaged: its episode from the first run of the new level to tonight."""

    test: str
    series_key: str
    metric: str
    coordinate: str
    kind: Kind
    first: Night  # the first run of the streak: where the level moved
    before: Night | None  # the run before it, the last one the gate was fine on
    newest: Night
    runs: tuple[str, ...]  # the streak's run ids, oldest first
    change: float | None  # mean relative change of the first run's steps against their baselines
    steps: int  # steps failing or in error on the newest run (0: missing steps)
    shift_pk: int | None = None  # the followed shift of a `shifted` gate
    decision: Decided | None = None  # the active decision that covers this episode, if any

    @property
    def direction(self) -> Literal["up", "down"] | None:
        if self.change is None or self.change == 0.0:
            return None
        return "up" if self.change > 0 else "down"


@dataclass(frozen=True)
class Cause:
    """What the first run of a group's gates changed: the night (UTC date), its commit, and the
    environment keys whose values differ from the run before (key, before, after)."""

    night: str
    commit: str | None
    environment: tuple[tuple[str, str | None, str | None], ...]

    @property
    def id(self) -> str:
        """The group's id as people type it (`alerts ack ID`): stable for a cause, whatever is open."""
        key = json.dumps(
            [self.night, self.commit, [list(e) for e in self.environment]], separators=(",", ":")
        )
        return hashlib.sha256(key.encode()).hexdigest()[:8]

    def describe(self) -> str:
        parts = [_change(key, old, new) for key, old, new in self.environment]
        code = f"commit {self.commit}" if self.commit else "no commit recorded"
        if parts:
            return f"environment {', '.join(parts)} ({code}) on {self.night}"
        return f"{code} on {self.night}"

    def as_json(self) -> dict[str, object]:
        return {
            "night": self.night,
            "commit": self.commit,
            "environment": [{"key": k, "before": old, "after": new} for k, old, new in self.environment],
        }


@dataclass(frozen=True)
class Group:
    cause: Cause
    gates: tuple[OpenGate, ...]
    evidence: str
    decision: Decided | None

    @property
    def id(self) -> str:
        return self.cause.id

    @property
    def tests(self) -> list[str]:
        return sorted({g.test for g in self.gates})

    def direction(self) -> str:
        ups = sum(g.direction == "up" for g in self.gates)
        downs = sum(g.direction == "down" for g in self.gates)
        return "up" if ups and not downs else "down" if downs and not ups else f"{ups} up, {downs} down"

    def size(self) -> float | None:
        """The median relative change of the gates on their first run (0.25: +25%)."""
        found = [g.change for g in self.gates if g.change is not None]
        return statistics.median(found) if found else None

    def first_failed_at(self) -> datetime:
        return min(g.first.created_at for g in self.gates)


def cause_of(gate: OpenGate) -> Cause:
    after = environment(gate.first.meta)
    before = environment(gate.before.meta) if gate.before is not None else after
    changed = tuple(
        (key, before.get(key), after.get(key))
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    )
    return Cause(gate.first.created_at.date().isoformat(), gate.first.commit, changed)


def group(
    gates: Iterable[OpenGate], history: Mapping[str, Sequence[Night]], width: Mapping[str, int]
) -> list[Group]:
    """The open gates grouped by cause, the largest group first. `history`: each series' runs, oldest first
    (for the evidence: which tests first ran the cause that night); `width`: each series' number of gates
    on its newest run."""
    found: dict[Cause, list[OpenGate]] = {}
    for gate in gates:
        found.setdefault(cause_of(gate), []).append(gate)
    groups = []
    for cause, members in found.items():
        members.sort(key=lambda g: (g.test, g.series_key, g.metric, g.coordinate))
        decisions = {g.decision for g in members if g.decision is not None}
        decision = next(iter(decisions)) if len(decisions) == 1 and all(g.decision for g in members) else None
        groups.append(Group(cause, tuple(members), _evidence(cause, members, history, width), decision))
    groups.sort(key=lambda g: (-len(g.gates), g.cause.night, g.id))
    return groups


def _evidence(
    cause: Cause,
    members: Sequence[OpenGate],
    history: Mapping[str, Sequence[Night]],
    width: Mapping[str, int],
) -> str:
    """How many of the gates that first ran this cause moved: every series whose run that night carried
    the cause for the first time counts, failing or not."""
    exposed = [s for s, runs in history.items() if _first_ran(cause, runs)]
    moved_series = {g.series_key for g in members}
    exposed_set = set(exposed) | moved_series
    total = sum(width.get(s, 0) for s in exposed_set)
    tests = {runs[-1].test for s, runs in history.items() if s in exposed_set and runs}
    moved_tests = {g.test for g in members}
    what = (
        "with " + ", ".join(f"{k}={new}" if new is not None else f"no {k}" for k, _, new in cause.environment)
        if cause.environment
        else f"of commit {cause.commit}"
        if cause.commit
        else "of that night"
    )
    return (
        f"{len(members)} of the {plural(max(total, len(members)), 'gate')} of the "
        f"{plural(len(tests), 'test')} whose first run {what} was on {cause.night} moved "
        f"({plural(len(moved_tests), 'test')} with a moved gate)"
    )


def _first_ran(cause: Cause, runs: Sequence[Night]) -> bool:
    """Whether one of these runs (oldest first) on the cause's night first carried its change."""
    for before, run in zip([None, *runs[:-1]], runs, strict=True):
        if run.created_at.date().isoformat() != cause.night:
            continue
        if cause.environment:
            env, prior = environment(run.meta), environment(before.meta) if before is not None else {}
            if all(env.get(k) == new and prior.get(k) == old for k, old, new in cause.environment):
                return True
        elif (
            cause.commit is not None
            and run.commit == cause.commit
            and (before is None or before.commit != cause.commit)
        ):
            return True
    return False


def _change(key: str, old: str | None, new: str | None) -> str:
    if old is None:
        return f"{key}={new} (new)"
    if new is None:
        return f"{key} {old} dropped"
    return f"{key} {old} -> {new}"


# What people said, counted.


@dataclass(frozen=True)
class Triaged:
    """One gate of one decision (an `alert_gates` row of an active decision)."""

    test: str
    metric: str
    verdict: Verdict
    first_failed_at: datetime
    decided_at: datetime
    closed: bool
    decision: int  # the decision's number: a test counts each decision once, whatever its gates


@dataclass(frozen=True)
class Tally:
    """Alerts of a gate (`metric` set) or of a test, and what people said about them."""

    test: str
    metric: str | None
    alerts: int  # triaged and open episodes
    open: int
    verdicts: Mapping[Verdict, int]
    median_hours: float | None  # from the first failing run to the decision

    @property
    def triaged(self) -> int:
        return sum(self.verdicts.values())

    @property
    def precision(self) -> float | None:
        """The share of triaged alerts people did not call a false alarm: the alert was a real change."""
        return None if not self.triaged else 1.0 - self.verdicts.get("false-alarm", 0) / self.triaged

    def as_json(self) -> dict[str, object]:
        found: dict[str, object] = {"test": self.test}
        if self.metric is not None:
            found["metric"] = self.metric
        return found | {
            "alerts": self.alerts,
            "open": self.open,
            "triaged": self.triaged,
            "verdicts": {v: self.verdicts.get(v, 0) for v in VERDICTS},
            "precision": self.precision,
            "median_hours_to_decision": self.median_hours,
        }


# A gate is named for its precision once people triaged this many of its alerts: with fewer, one false
# alarm is half of them and says nothing about the gate.
MIN_TRIAGED = 3
# ... and when people called at least half of them false alarms: the gate is wrong more often than right.
LOW_PRECISION = 0.5

Key = tuple[str, str | None]


def tallies(triaged: Sequence[Triaged], open_gates: Sequence[OpenGate]) -> tuple[list[Tally], list[Tally]]:
    """Per gate and per test: alerts (triaged, and open ones nobody triaged), verdicts, precision, the
    median time from first failure to decision. A gate counts each episode; a test each alert once,
    however many of its gates the alert moved."""
    found: dict[Key, list[Triaged]] = {}
    for t in triaged:
        found.setdefault((t.test, t.metric), []).append(t)
        per_test = found.setdefault((t.test, None), [])
        if all(x.decision != t.decision for x in per_test):
            per_test.append(t)
    still_open: dict[Key, set[str]] = {}
    for g in open_gates:
        if g.decision is None:
            still_open.setdefault((g.test, g.metric), set()).add(g.coordinate)
            still_open.setdefault((g.test, None), set()).add(cause_of(g).id)
    out = [
        _tally(key, found.get(key, ()), len(still_open.get(key, ())))
        for key in sorted(set(found) | set(still_open), key=_order)
    ]
    return [t for t in out if t.metric is not None], [t for t in out if t.metric is None]


def _order(key: Key) -> tuple[str, str]:
    return key[0], key[1] or ""


def _tally(key: Key, rows: Sequence[Triaged], n_open: int) -> Tally:
    verdicts: dict[Verdict, int] = {}
    for r in rows:
        verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
    hours = [(r.decided_at - r.first_failed_at).total_seconds() / 3600.0 for r in rows]
    return Tally(
        key[0], key[1], len(rows) + n_open, n_open, verdicts, statistics.median(hours) if hours else None
    )


def low_precision(gates: Sequence[Tally]) -> list[str]:
    """The gates people mostly called false alarms, with the fix to consider."""
    lines = []
    for t in gates:
        if t.triaged < MIN_TRIAGED or t.precision is None or t.precision > LOW_PRECISION:
            continue
        lines.append(
            f"{t.test} {t.metric}: {t.verdicts.get('false-alarm', 0)} of its "
            f"{plural(t.triaged, 'triaged alert')} were false alarms (precision {t.precision:.0%}); consider "
            f"a wider band or a smaller `false_alarm`, `min_change` for the smallest change that matters, "
            f"and check the change with `gatecfg backtest --test {t.test} --metric {t.metric}`"
        )
    return lines
