"""A gate's stored history as nightly series in time order: what regimes, rebaseline and the report read.

What is read is the measured quantity, not the key: every value stored for the test's series, the metric
and the gate's `steps`, under whichever constraint was in force when it was written (as backtest does).
A constraint change re-keys the band's baseline, but it does not change what was measured, so a re-key
does not blank the history these analyses look at. A `steps` change does: step -1 (`last`) and per-step
values are different quantities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gatecfg.errors import InputError, Location
from gatecfg.membership import Standing
from gatecfg.resolve import ResolvedGate, ResolvedTest
from gatecfg.select import LAST_STEP, step_ranges
from gatecfg.store import HistoryRow, Status
from gatecfg.store.protocol import StoreReads

PASSED = Standing(True, "passed")


@dataclass(frozen=True)
class Night:
    """One run's stored value at one step of a gate, with the verdict it got when written."""

    run_id: str
    commit: str | None
    created_at: datetime
    value: float  # NaN when the run logged NaN
    trusted: bool  # in its gate's baseline, as gatecfg.membership reads the stored facts
    untrusted_by_hand: bool
    status: Status
    ref: float | None
    lo: float | None
    hi: float | None
    sd: float | None = None  # the step's night-to-night spread where its rule gave one (a budget gate)
    why: Standing = PASSED  # in its gate's baseline or out of it, and why

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)


def step_name(step: int) -> str:
    return "last" if step == LAST_STEP else str(step)


def gate_nights(store: StoreReads, gate: ResolvedGate, series: str) -> dict[int, list[Night]]:
    """Per stored step, the gate's nights oldest first (runs with equal times in the order written)."""
    rows = store.history(test=gate.test, metric=gate.metric, series_key=series)
    return nights_of(rows, gate.steps_key)


def stored_steps(store: StoreReads, gate: ResolvedGate, series: str) -> set[int]:
    """The steps `gate_nights` would return, without building their nights."""
    rows = store.history(test=gate.test, metric=gate.metric, series_key=series)
    return {row.point.step for row in rows if row.coordinate.steps_key == gate.steps_key}


def nights_of(rows: Sequence[HistoryRow], steps_key: str) -> dict[int, list[Night]]:
    by_step: dict[int, list[Night]] = {}
    # `Store.history` is newest first; reversed, ties keep the store's (created_at, pk) order.
    for row in reversed(rows):
        if row.coordinate.steps_key != steps_key:
            continue
        point = row.point
        standing = row.standing()
        by_step.setdefault(point.step, []).append(
            Night(
                run_id=row.run_id,
                commit=row.commit,
                created_at=row.created_at,
                value=point.value,
                # As the gate's baseline reads the value (gatecfg.membership): trust is per gate.
                trusted=standing.joins,
                untrusted_by_hand=standing.why == "untrusted by hand",
                status=point.status,
                ref=point.ref,
                lo=point.lo,
                hi=point.hi,
                sd=point.sd,
                why=standing,
            )
        )
    return dict(sorted(by_step.items()))


def analysable(nights: Sequence[Night]) -> list[Night]:
    """The nights a level analysis may use: finite values of runs that nobody untrusted by hand.

    Runs the gate itself failed stay in: a shift makes the gate fail, so leaving them out would hide the
    very regime a person is looking for. A run untrusted by hand is a known-bad night (broken hardware, a
    cancelled job) and says nothing about the code.
    """
    return [n for n in nights if n.finite and not n.untrusted_by_hand]


def gate_of(test: ResolvedTest, metric: str) -> ResolvedGate:
    """The gate `metric` of `test`, or an error that names the gate file and what it declares."""
    gate = test.gate(metric)
    if gate is None:
        declared = ", ".join(g.metric for g in test.gates)
        raise InputError.at(
            Location(test.file),
            f"`{metric}` is not declared for test `{test.test}`",
            dotted="gates",
            hint=f"declared there: {declared}",
        )
    return gate


def pick_step(gate: ResolvedGate, by_step: Mapping[int, object], step: int | None) -> int:
    """The step the user asked for, or the gate's only stored step; an error names the stored ones."""
    if step is not None:
        if step not in by_step:
            raise InputError.at(
                "--step",
                f"{gate.metric} has no stored values at step {step_name(step)}",
                hint=f"stored steps: {step_ranges(by_step)}",
            )
        return step
    if len(by_step) == 1:
        return next(iter(by_step))
    raise InputError.at(
        "--step",
        f"{gate.metric} is stored at {len(by_step)} steps; say which one",
        hint=f"e.g. --step {max(by_step)} (stored steps: {step_ranges(by_step)})",
    )
