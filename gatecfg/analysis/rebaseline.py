"""New absolute limits for a gate, from the runs of its current regime only (found by `regimes`, or given
as `--since` / `--last`): `minmax` or `quantile` of the regime's values, widened by the allowance and
rounded outward. A regime that drifts gets no proposal. docs/analytics.md, "`gatecfg rebaseline`".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np

from gatecfg import moments
from gatecfg.analysis.regimes import Regime, find_regimes
from gatecfg.analysis.series import Night, analysable
from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.wording import plural

Method = Literal["minmax", "quantile"]
Side = Literal["min", "max"]
QUANTILE = 0.05
DIGITS = 4


@dataclass(frozen=True)
class Window:
    """The runs a proposal rests on, oldest first, and how they were chosen."""

    run_ids: tuple[str, ...]
    source: str  # e.g. "detected: regime 5 of 5", "--last 20", "--since 4872f5d"
    refusal: str | None = None  # why no limits should come from these runs


@dataclass(frozen=True)
class Proposal:
    gate: ResolvedGate
    method: Method
    allowance: float
    window: Window
    first_run: str
    last_run: str
    start_date: datetime
    end_date: datetime
    first_commit: str | None
    last_commit: str | None
    n_runs: int
    n_values: int
    low: float  # min, or the 5th percentile
    high: float  # max, or the 95th percentile
    minimum: float
    maximum: float
    old: Mapping[str, float]  # the gate's limits now ({} when it has none)
    new: Mapping[str, float]
    would_fail: int  # runs of the regime that the new limits would fail
    trusted_runs: int  # runs of the regime that form baselines
    untrusted_runs: tuple[str, ...]  # runs of the regime stored untrusted (not by hand)
    window_size: int  # the policy's baseline window

    @property
    def band_long_enough(self) -> bool | None:
        """For a band gate: does the baseline window fit inside the regime? None without a band."""
        if self.gate.constraint is None:
            return None
        return self.trusted_runs >= self.window_size

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.gate.metric,
            "file": self.gate.file,
            "line": self.gate.line,
            "method": self.method,
            "allowance": self.allowance,
            "regime": {
                "source": self.window.source,
                "runs": self.n_runs,
                "values": self.n_values,
                "first_run": self.first_run,
                "last_run": self.last_run,
                "start_date": self.start_date.isoformat(),
                "end_date": self.end_date.isoformat(),
                "first_commit": self.first_commit,
                "last_commit": self.last_commit,
            },
            "evidence": {"min": self.minimum, "max": self.maximum, "low": self.low, "high": self.high},
            "old": dict(self.old) or None,
            "new": dict(self.new),
            "would_fail": self.would_fail,
            "band": None
            if self.gate.constraint is None
            else {
                "trusted_runs": self.trusted_runs,
                "window": self.window_size,
                "long_enough": self.band_long_enough,
                "untrusted_runs": list(self.untrusted_runs),
            },
        }


def sides(gate: ResolvedGate) -> tuple[Side, ...]:
    """The sides to propose: the gate's limits', else the ones its band closes, else both."""
    if gate.limits is not None:
        closed = (gate.limits.min is not None, gate.limits.max is not None)
    elif gate.constraint is None:
        closed = (True, True)
    else:
        written = gate.constraint.literal()
        closed = (
            any(k.endswith("_down") for k in written),
            any(k.endswith("_up") for k in written),
        )
    both: tuple[Side, Side] = ("min", "max")
    return tuple(side for side, on in zip(both, closed, strict=True) if on)


def outward(value: float, side: Side) -> float:
    """`value` rounded to DIGITS significant digits, away from the values it bounds."""
    if value == 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(abs(value))) - (DIGITS - 1)
    scale = 10.0**exponent
    rounded = (math.floor if side == "min" else math.ceil)(round(value / scale, 9)) * scale
    return float(f"{rounded:.{DIGITS}g}")


def per_run(by_step: Mapping[int, Sequence[Night]]) -> list[Night]:
    """One night per run, oldest first; for a gate over several steps, its value is the steps' mean.

    A level shift moves the steps of a run together, and their mean has less noise than any one step, so
    the current regime of a gate over many steps is found on it.
    """
    runs: dict[str, list[Night]] = {}
    for nights in by_step.values():
        for night in analysable(nights):
            runs.setdefault(night.run_id, []).append(night)
    ordered = sorted(runs.values(), key=lambda group: (group[0].created_at, group[0].run_id))
    return [group[0] if len(group) == 1 else _mean_night(group) for group in ordered]


def _mean_night(group: Sequence[Night]) -> Night:
    first = group[0]
    return Night(
        run_id=first.run_id,
        commit=first.commit,
        created_at=first.created_at,
        value=moments.mean([n.value for n in group]),
        trusted=first.trusted,
        untrusted_by_hand=first.untrusted_by_hand,
        status=first.status,
        ref=None,
        lo=None,
        hi=None,
    )


def current_regime(metric: str, runs: Sequence[Night]) -> Window:
    """The runs since the last detected change; refused when they drift."""
    found = find_regimes(metric, 0, runs)
    last = found.regimes[-1]
    chosen = tuple(n.run_id for n in runs[last.start_index :])
    count = len(found.regimes)
    return Window(chosen, f"detected: regime {count} of {count}", _drift_refusal(last))


def _drift_refusal(regime: Regime) -> str | None:
    if regime.slope is None or regime.drift_total is None:
        return None
    since = regime.first_run + (f" at {regime.first_commit[:12]}" if regime.first_commit else "")
    return (
        f"no limits proposed: the current regime ({plural(regime.n, 'run')} since {since}) drifts by "
        f"{regime.slope:+.3g}/night ({regime.drift_total:+.3g} so far), so limits from it would be "
        "out of date within days; find what drives the drift, or choose runs with --last N or --since REV"
    )


def newest(runs: Sequence[Night], count: int) -> Window:
    return Window(tuple(n.run_id for n in runs[-count:]), f"--last {count}")


def since_date(runs: Sequence[Night], start: datetime, text: str) -> Window:
    return Window(tuple(n.run_id for n in runs if n.created_at >= start), f"--since {text}")


def since_commit(
    runs: Sequence[Night], text: str, full: str | None, contains: Callable[[str, str], bool]
) -> Window | None:
    """Runs from the first whose commit is `text` (a prefix, or `full` as git resolved it) or contains it.

    A merge rarely has a nightly of its own: the regime it opened starts at the first nightly whose commit
    has it as an ancestor, which `contains(ancestor, commit)` asks git.
    """
    wanted = [p.lower() for p in (text, full) if p]
    for i, night in enumerate(runs):
        commit = (night.commit or "").lower()
        if commit and any(commit.startswith(p) or p.startswith(commit) for p in wanted):
            return Window(tuple(n.run_id for n in runs[i:]), f"--since {text}")
    if full is None:
        return None
    checked: dict[str, bool] = {}
    for i, night in enumerate(runs):
        if night.commit is None:
            continue
        if night.commit not in checked:
            checked[night.commit] = contains(full, night.commit)
        if checked[night.commit]:
            return Window(tuple(n.run_id for n in runs[i:]), f"--since {text} (first nightly containing it)")
    return None


def propose(
    gate: ResolvedGate,
    by_step: Mapping[int, Sequence[Night]],
    window: Window,
    *,
    method: Method,
    allowance: float,
    policy: Policy,
    wanted: Sequence[Side],
) -> Proposal | None:
    """Limits from the values of `window`'s runs, or None when the window holds no value."""
    chosen = set(window.run_ids)
    nights = [n for step in by_step.values() for n in analysable(step) if n.run_id in chosen]
    if not nights:
        return None
    values = np.array([n.value for n in nights], dtype=np.float64)
    minimum, maximum = float(values.min()), float(values.max())
    if method == "minmax":
        low, high = minimum, maximum
    else:
        low, high = (float(q) for q in np.quantile(values, [QUANTILE, 1 - QUANTILE]))
    candidates = {
        "min": outward(low - allowance * abs(low), "min"),
        "max": outward(high + allowance * abs(high), "max"),
    }
    new: dict[str, float] = {side: candidates[side] for side in wanted}
    old = {} if gate.limits is None else gate.limits.literal()
    runs = {n.run_id: n for n in sorted(nights, key=lambda n: n.created_at)}
    ordered = list(runs.values())
    failing = {
        n.run_id
        for n in nights
        if ("min" in new and n.value < new["min"]) or ("max" in new and n.value > new["max"])
    }
    return Proposal(
        gate=gate,
        method=method,
        allowance=allowance,
        window=window,
        first_run=ordered[0].run_id,
        last_run=ordered[-1].run_id,
        start_date=ordered[0].created_at,
        end_date=ordered[-1].created_at,
        first_commit=ordered[0].commit,
        last_commit=ordered[-1].commit,
        n_runs=len(ordered),
        n_values=len(nights),
        low=low,
        high=high,
        minimum=minimum,
        maximum=maximum,
        old=old,
        new=new,
        would_fail=len(failing),
        trusted_runs=sum(n.trusted for n in ordered),
        untrusted_runs=tuple(n.run_id for n in ordered if not n.trusted and not n.untrusted_by_hand),
        window_size=policy.window,
    )
