"""A gate's recent nightlies read as a story (pure): a sustained shift, and a baseline that stopped growing.

From a gate's newest stored runs (`Recent`, newest first) and tonight's verdict: a **shift** when tonight
and at least MIN_REGIME nightlies before it failed the same way and a one-sided rank test confirms a new
level (accepted after `policy.accept_shift_after` nightlies); a **stale baseline** when tonight and each
of the newest `policy.stale_after` runs kept the gate's values out of its baseline. A night's change is
the mean over its steps of `(value - ref) / |ref|`. docs/evaluate.md, "Statuses, trust and exit codes".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from statistics import NormalDist
from typing import Literal

from gatecfg.membership import Cause, Facts, cause, standing

MIN_REGIME = 3  # analysis/changepoints.MIN_REGIME (not imported: that module loads ruptures)


@dataclass(frozen=True)
class Recent:
    """One stored run of a gate's coordinate, as its baseline sees it."""

    run_id: str
    commit: str | None
    created_at: datetime
    in_baseline: bool  # its values qualify for the gate's baseline now
    failed: bool  # the gate failed on it (its own verdict when written)
    cause: Cause | None  # why it is kept out of the baseline, when it is
    change: float | None  # mean relative change of its steps against their baselines
    meta: Mapping[str, str] = field(default_factory=dict)  # what the run carried (`--meta`, the runner)

    @classmethod
    def of(
        cls,
        *,
        run_id: str,
        commit: str | None,
        created_at: datetime,
        facts: Facts,
        change: float | None,
        meta: Mapping[str, str] | None = None,
    ) -> Recent:
        """A stored run as the `trusted` baseline reads its facts (followed shifts and stale baselines
        read that one, whatever the policy's)."""
        kept = standing(facts, "trusted")
        return cls(
            run_id=run_id,
            commit=commit,
            created_at=created_at,
            in_baseline=kept.joins,
            failed=facts.gate_trusted is False,
            cause=None if kept.joins else cause(facts),
            change=change,
            meta=dict(meta or {}),
        )


@dataclass(frozen=True)
class Shift:
    """A sustained shift of a gate: the first failing run of the new level, its size, nightlies held."""

    metric: str
    coordinate: str
    first_run_id: str
    first_created_at: datetime
    commit: str | None
    direction: Literal["up", "down"]
    size: float  # relative: the median change of the failing nights (0.25: +25%)
    nightlies: int  # tonight included
    accepted: bool  # tonight makes the new level the baseline
    accept_after: int | None
    runs: tuple[str, ...]  # the run ids of the shift, oldest first, tonight's last

    def describe(self) -> str:
        commit = f" (commit {self.commit})" if self.commit else ""
        held = f"held {self.nightlies} nightl{'ies' if self.nightlies != 1 else 'y'}"
        text = (
            f"{self.metric} shifted {self.direction} by {100.0 * self.size:+.1f}% "
            f"from run {self.first_run_id}{commit}: {held}"
        )
        if self.accepted:
            return f"{text}; ACCEPTED tonight: the new level is its baseline from the next nightly on"
        if self.accept_after is None:
            return f"{text}; never followed (policy.accept_shift_after: never): fix it or `gatecfg trust`"
        left = self.accept_after - self.nightlies
        if left <= 0:
            return f"{text}; followed as the new baseline by the next nightly `--write`"
        more = f"{left} more failing nightl{'ies' if left != 1 else 'y'}"
        return f"{text}; followed as the new baseline after {more}"


@dataclass(frozen=True)
class Stale:
    """A gate whose baseline has taken no value for `nightlies` nightlies (tonight included)."""

    metric: str
    nightlies: int
    since_run_id: str
    since_commit: str | None
    causes: tuple[Cause, ...]
    command: str

    def describe(self) -> str:
        why = {
            "failed": "its own failures",
            "untrusted": "runs untrusted by hand",
            "run untrusted": "runs written before trust per gate whose other gates failed",
        }
        causes = " and ".join(why[c] for c in self.causes) or "no trusted nightly yet"
        return (
            f"{self.metric}: its baseline has taken no value for {self.nightlies} nightlies, since run "
            f"{self.since_run_id}{f' (commit {self.since_commit})' if self.since_commit else ''}: {causes}; "
            f"fix: {self.command}"
        )


def find_shift(
    *,
    metric: str,
    coordinate: str,
    tonight: tuple[str, str | None, datetime, float | None],
    recent: Sequence[Recent],
    accept_after: int | None,
    alpha: float,
) -> Shift | None:
    """The shift tonight's failure continues, if any (tonight failed: the caller asks only then).
    `tonight` is (run id, commit, time, change); `recent` the coordinate's runs before it, newest first."""
    run_id, commit, at, change = tonight
    if change is None or change == 0.0:
        return None
    up = change > 0
    streak = [(run_id, commit, at, change)]
    for r in recent:
        # A value untrusted by hand (a `regression` triage holds them so) is one somebody said is wrong:
        # it never makes a level to follow.
        if (
            not r.failed
            or r.in_baseline
            or r.cause == "untrusted"
            or r.change is None
            or (r.change > 0) != up
        ):
            break
        streak.append((r.run_id, r.commit, r.created_at, r.change))
    if len(streak) < MIN_REGIME:
        return None
    before = [r.change for r in recent[len(streak) - 1 :] if r.in_baseline and r.change is not None]
    changes = [c for *_, c in streak]
    if not confirmed(changes, before, up=up, alpha=alpha):
        return None
    first_run, first_commit, first_at, _ = streak[-1]
    ordered = sorted(changes)
    mid = len(ordered) // 2
    size = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    return Shift(
        metric=metric,
        coordinate=coordinate,
        first_run_id=first_run,
        first_created_at=first_at,
        commit=first_commit,
        direction="up" if up else "down",
        size=size,
        nightlies=len(streak),
        accepted=accept_after is not None and len(streak) >= accept_after,
        accept_after=accept_after,
        runs=tuple(r for r, *_ in reversed(streak)),
    )


def confirmed(shifted: Sequence[float], before: Sequence[float], *, up: bool, alpha: float) -> bool:
    """Whether the shifted nights' changes sit above (`up`) or below the baseline nights' beyond chance:
    a one-sided Mann-Whitney U test (normal approximation, ties counted half) at level `alpha`."""
    n1, n2 = len(shifted), len(before)
    if n2 == 0:
        return False
    sign = 1.0 if up else -1.0
    u = sum(1.0 if sign * a > sign * b else 0.5 if a == b else 0.0 for a in shifted for b in before)
    mean, sd = n1 * n2 / 2.0, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
    return 1.0 - NormalDist().cdf((u - mean) / sd) < alpha


def find_stale(*, metric: str, kept_out_tonight: bool, recent: Sequence[Recent], after: int) -> Stale | None:
    """The stale-baseline warning of a gate kept out tonight, when its newest `after - 1` runs were too."""
    if not kept_out_tonight:
        return None
    out: list[Recent] = []
    for r in recent:
        if r.in_baseline:
            break
        out.append(r)
    if len(out) + 1 < after or not out:
        return None
    causes = tuple(sorted({r.cause for r in out if r.cause is not None}))
    first = out[-1]
    if "failed" in causes:
        command = (
            f"fix the regression; or, if the new level is right, `gatecfg trust --run-id {first.run_id} "
            f"--metric {metric}` for each failing run (or let policy.accept_shift_after follow it)"
        )
    else:
        command = f"`gatecfg trust --run-id {first.run_id} --metric {metric}` for each run that is fine"
    return Stale(metric, len(out) + 1, first.run_id, first.commit, causes, command)
