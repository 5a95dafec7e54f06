"""Baselines that follow their metric, for one evaluation: which gates' failed values rejoin their
baselines tonight, which sustained shift tonight continues or accepts, which baseline has gone stale.

The decisions are gatecfg/shifts.py's (pure); this module reads what they need from the store, and only
for the gates that fail or stay cold tonight: a clean night costs no read."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from gatecfg.distributions import breaks_promise
from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.same_code import Earlier, SameCode, find
from gatecfg.shifts import Recent, Shift, Stale, find_shift, find_stale
from gatecfg.verdicts import GateVerdicts


class RecentReads(Protocol):
    """What `follow` reads of a store: the live store's, or a replay's history in memory."""

    def recent(
        self, coordinates: Sequence[str], *, depth: int, exclude_run_id: str | None = None
    ) -> dict[str, list[Recent]]: ...


@dataclass(frozen=True)
class Following:
    shifts: Sequence[Shift] = ()
    stale: Sequence[Stale] = ()
    rejoin: Sequence[str] = ()  # coordinates whose failed values rejoin their baselines, if written
    accept: Sequence[Shift] = field(default_factory=tuple)  # the shifts tonight accepts, if written
    same_code: Sequence[SameCode] = ()  # failures on the code of a stored run that passed the gate
    noisy: Sequence[str] = ()  # budget gates whose own newest nightlies break their promise, said once

    def notes(self) -> list[str]:
        """One line per shift, stale baseline and failure on unchanged code, for every report format."""
        lines = [("SHIFT ACCEPTED: " if s.accepted else "SHIFTED: ") + s.describe() for s in self.shifts]
        lines += [f"SAME CODE: {s.describe()}" for s in self.same_code]
        lines += [f"NOISY GATE: {line}" for line in self.noisy]
        return lines + [f"STALE BASELINE: {s.describe()}" for s in self.stale]

    def excused(self) -> set[str]:
        """Coordinates whose failure does not fail the job (`policy.same_code: warn`)."""
        return {s.coordinate for s in self.same_code if s.policy == "warn"}


def follow(
    store: RecentReads,
    results: Sequence[GateVerdicts],
    policy: Policy,
    *,
    run_id: str,
    commit: str | None,
    now: datetime,
    has_history: bool,
    writing: bool,
    meta: Mapping[str, str] | None = None,
) -> Following:
    """What tonight's results mean for their baselines; a run that is not written (`writing` False: a
    pull request) accepts no shift and rejoins nothing, it only names them. `meta`: what tonight's run
    carries (its build label and environment, for the same-code check)."""
    following = policy.accept_shift_after is not None
    # A gate that passed tonight: the failures before it did not hold, and rejoin its baseline.
    rejoin = [r.coordinate for r in results if r.gate.gated and not r.blocks_trust] if following else []
    asking = [r for r in results if r.gate.gated and (r.blocks_trust or r.status == "cold")]
    if not asking or not has_history:
        return Following(rejoin=rejoin)
    depth = policy.window + max(policy.accept_shift_after or 0, policy.stale_after)
    recent = store.recent([r.coordinate for r in asking], depth=depth, exclude_run_id=run_id)
    shifts: list[Shift] = []
    stale: list[Stale] = []
    same: list[SameCode] = []
    noisy: list[str] = []
    for r in asking:
        runs = recent.get(r.coordinate, [])
        if r.blocks_trust and r.failing:
            earlier = [Earlier(n.run_id, n.commit, n.meta, not n.failed) for n in runs]
            found_same = find(
                metric=r.gate.metric,
                coordinate=r.coordinate,
                commit=commit,
                meta=meta or {},
                earlier=earlier,
                policy=policy.same_code,
            )
            if found_same is not None:
                same.append(found_same)
            if (record := _broken_promise(r, runs)) is not None:
                noisy.append(record)
            shift = find_shift(
                metric=r.gate.metric,
                coordinate=r.coordinate,
                tonight=(run_id, commit, now, change(r)),
                recent=runs,
                accept_after=policy.accept_shift_after,
                alpha=r.gate.false_alarm,
            )
            if shift is not None:
                shifts.append(shift if writing else dataclasses.replace(shift, accepted=False))
                continue  # the shift says why the baseline takes no value, and when it will
        found = find_stale(metric=r.gate.metric, kept_out_tonight=True, recent=runs, after=policy.stale_after)
        if found is not None:
            stale.append(found)
    accepted = tuple(s for s in shifts if s.accepted)
    return Following(shifts=shifts, stale=stale, rejoin=rejoin, accept=accepted, same_code=same, noisy=noisy)


def _broken_promise(result: GateVerdicts, recent: Sequence[Recent]) -> str | None:
    """A budget gate failing tonight whose own newest nightlies (tonight's included) failed over twice its
    `false_alarm`, more than chance would: what to consider, once in tonight's report."""
    return broken_promise(result.gate, 1 + sum(r.failed for r in recent), 1 + len(recent))


def broken_promise(gate: ResolvedGate, failures: int, nights: int) -> str | None:
    """What a budget gate that failed `failures` of its `nights` newest nightlies should consider, when
    that is over twice its `false_alarm` and more than chance (evaluate's and report's NOISY GATE)."""
    if gate.constraint is None or gate.constraint.budget is None:
        return None
    if not breaks_promise(failures, nights, gate.false_alarm):
        return None
    return (
        f"{gate.metric} failed {failures} of its {nights} newest nightlies, over twice its false_alarm "
        f"{gate.false_alarm:.1%}: its noise has heavier tails than the rule prices; consider `min_change` "
        f"(the smallest change that matters), and `gatecfg backtest --metric {gate.metric}` for its record"
    )


def change(result: GateVerdicts) -> float | None:
    """Tonight's mean relative change of the gate's steps against their baselines (shifts.py)."""
    values = result.selection.numbers().tolist()
    found = [
        (value - ref) / abs(ref)
        for value, ref in zip(values, result.refs(), strict=True)
        if ref is not None and ref != 0 and math.isfinite(value)
    ]
    return sum(found) / len(found) if found else None
