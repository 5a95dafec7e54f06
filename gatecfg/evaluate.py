"""Verdicts for one run: pure, given the resolved gates, the selected values and the baselines."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import groupby
from typing import Literal

from gatecfg.band import Band, band, fmt, limits_breach, min_values
from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.select import Selected

Status = Literal["pass", "fail", "tracked", "cold", "error"]
# Reports list the statuses a reader must act on first.
STATUS_ORDER: Mapping[str, int] = {"error": 0, "fail": 1, "cold": 2, "pass": 3, "tracked": 4}


@dataclass(frozen=True)
class Verdict:
    gate: ResolvedGate
    coordinate: str
    step: int
    logged_step: int | None
    status: Status
    enforced: bool
    value: float | None
    band: Band
    reason: str
    # A failing step within its gate's `tolerate`: still `fail` and listed, but the gate passes.
    tolerated: bool = False

    @property
    def blocks_trust(self) -> bool:
        """A gated (enforced or shadow) coordinate that failed or errored makes the run untrusted."""
        return self.gate.gated and self.status in ("fail", "error") and not self.tolerated

    @property
    def fails_job(self) -> bool:
        return self.enforced and self.status in ("fail", "error") and not self.tolerated

    @property
    def delta_pct(self) -> float | None:
        ref = self.band.ref
        if self.value is None or ref is None or ref == 0:
            return None
        return (self.value - ref) / abs(ref) * 100.0


def judge(
    gate: ResolvedGate,
    coordinate: str,
    selected: Selected,
    history: Sequence[float],
    policy: Policy,
    *,
    enforce: bool,
) -> Verdict:
    """One coordinate's verdict. `history` is the baseline window, newest first."""
    current = band(gate.constraint, history, policy.reference)
    status, reason = _status(gate, selected, current, policy)
    return Verdict(
        gate=gate,
        coordinate=coordinate,
        step=selected.step,
        logged_step=selected.logged_step,
        status=status,
        enforced=enforce and gate.enforce and gate.gated,
        value=selected.value,
        band=current,
        reason=reason,
    )


def _status(gate: ResolvedGate, selected: Selected, current: Band, policy: Policy) -> tuple[Status, str]:
    if selected.error is not None or selected.value is None:
        return "error", selected.error or "no value"
    value = selected.value
    versus = f"cur={fmt(value)} vs mean={fmt(current.ref)} (n={current.n})"
    if not gate.gated:
        return "tracked", f"tracked: {versus}" if current.n else f"tracked: cur={fmt(value)}, no history yet"
    breach = limits_breach(value, gate.limits)
    if breach is not None:
        return "fail", breach
    if gate.constraint is None:
        return "pass", f"cur={fmt(value)} within limits"
    needed = needed_history(gate, policy)
    if current.n < needed:
        missing = needed - current.n
        why = f"min_history={needed}" if needed == max(policy.min_history, 1) else f"{needed} (sigma)"
        return (
            "cold",
            f"cold: {current.n} of {why} {policy.baseline} values; gates after {missing} more nightl"
            f"{'ies' if missing != 1 else 'y'}",
        )
    if current.contains(value):
        return "pass", f"{versus} within {current.interval()}"
    return "fail", f"{versus} outside {current.interval()}"


def needed_history(gate: ResolvedGate, policy: Policy) -> int:
    """Baseline values a coordinate needs before its band gates: `min_history`; 2 for a sigma-only side."""
    return max(policy.min_history, min_values(gate.constraint))


def evaluate(
    gates: Sequence[tuple[ResolvedGate, str, Sequence[Selected]]],
    baselines: Mapping[tuple[str, int], Sequence[float]],
    policy: Policy,
    *,
    enforce: bool = True,
) -> list[Verdict]:
    """Verdicts for every selected coordinate of every gate (`(gate, coordinate hash, selection)`),
    with the failing steps that a gate's `tolerate` absorbs marked `tolerated`."""
    verdicts: list[Verdict] = []
    for gate, coordinate, selection in gates:
        judged = [
            judge(gate, coordinate, sel, baselines.get((coordinate, sel.step), ()), policy, enforce=enforce)
            for sel in selection
        ]
        verdicts += _tolerate(judged)
    return verdicts


def allowed_failures(tolerate: int | float, judged: int) -> int:
    """Failing steps a gate tolerates among `judged` (pass or fail) steps: K, or floor(fraction * judged)."""
    if isinstance(tolerate, float):
        # Through the decimal the user wrote: 0.29 * 100 is 28.999999999999996 in binary floating point.
        return math.floor(Fraction(repr(tolerate)) * judged)
    return tolerate


def _tolerate(verdicts: list[Verdict]) -> list[Verdict]:
    """Errors are never tolerated: a NaN or a missing step is not noise around a band."""
    if not verdicts or not verdicts[0].gate.tolerate:
        return verdicts
    failing = sum(v.status == "fail" for v in verdicts)
    judged = sum(v.status in ("pass", "fail") for v in verdicts)
    if failing == 0 or failing > allowed_failures(verdicts[0].gate.tolerate, judged):
        return verdicts
    return [dataclasses.replace(v, tolerated=True) if v.status == "fail" else v for v in verdicts]


@dataclass(frozen=True)
class GateOutcome:
    """A gate's verdict for a run, over all its steps: what `tolerate` decides and the JSON report shows."""

    gate: ResolvedGate
    coordinate: str
    status: Status
    enforced: bool
    steps: int
    failing: int
    allowed: int

    @property
    def reason(self) -> str:
        text = f"{self.failing} of {self.steps} step{'s' * (self.steps != 1)} failing"
        if self.gate.tolerate:
            fate = "tolerated" if self.failing <= self.allowed else "more than tolerated"
            text += f"; tolerate: {self.gate.tolerate} allows {self.allowed} ({fate})"
        return text


def gate_status(verdicts: Sequence[Verdict]) -> Status:
    """The gate's status: the worst of its steps, a tolerated failing step counting as a pass."""
    statuses: list[Status] = ["pass" if v.tolerated else v.status for v in verdicts]
    return min(statuses, key=STATUS_ORDER.__getitem__)


def outcomes(verdicts: Sequence[Verdict]) -> list[GateOutcome]:
    """One outcome per gate in declaration order (`evaluate` keeps the verdicts of a gate adjacent)."""
    found: list[GateOutcome] = []
    for (_, coordinate), group in groupby(verdicts, key=lambda v: (v.gate.metric, v.coordinate)):
        items = list(group)
        gate = items[0].gate
        judged = sum(v.status in ("pass", "fail") for v in items)
        found.append(
            GateOutcome(
                gate=gate,
                coordinate=coordinate,
                status=gate_status(items),
                enforced=items[0].enforced,
                steps=len(items),
                failing=sum(v.status == "fail" for v in items),
                allowed=allowed_failures(gate.tolerate, judged),
            )
        )
    return found


def trusted(verdicts: Sequence[Verdict]) -> bool:
    return not any(v.blocks_trust for v in verdicts)


def exit_code(verdicts: Sequence[Verdict]) -> int:
    return 1 if any(v.fails_job for v in verdicts) else 0
