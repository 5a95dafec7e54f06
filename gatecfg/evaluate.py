"""Verdicts for one run: pure, given the resolved gates, the selected values and the baselines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gatecfg.band import Band, band, fmt, limits_breach
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

    @property
    def blocks_trust(self) -> bool:
        """A gated (enforced or shadow) coordinate that failed or errored makes the run untrusted."""
        return self.gate.gated and self.status in ("fail", "error")

    @property
    def fails_job(self) -> bool:
        return self.enforced and self.status in ("fail", "error")

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
    current = band(gate.constraint, history)
    enforced = enforce and gate.enforce and gate.gated

    def verdict(status: Status, reason: str) -> Verdict:
        return Verdict(
            gate=gate,
            coordinate=coordinate,
            step=selected.step,
            logged_step=selected.logged_step,
            status=status,
            enforced=enforced,
            value=selected.value,
            band=current,
            reason=reason,
        )

    if selected.error is not None or selected.value is None:
        return verdict("error", selected.error or "no value")
    value = selected.value
    versus = f"cur={fmt(value)} vs mean={fmt(current.ref)} (n={current.n})"
    if not gate.gated:
        return verdict(
            "tracked", f"tracked: {versus}" if current.n else f"tracked: cur={fmt(value)}, no history yet"
        )
    breach = limits_breach(value, gate.limits)
    if breach is not None:
        return verdict("fail", breach)
    if gate.constraint is None:
        return verdict("pass", f"cur={fmt(value)} within limits")
    needed = max(policy.min_history, 1)
    if current.n < needed:
        missing = needed - current.n
        return verdict(
            "cold",
            f"cold: {current.n} of min_history={needed} trusted values; gates after {missing} more nightl"
            f"{'ies' if missing != 1 else 'y'}",
        )
    if current.contains(value):
        return verdict("pass", f"{versus} within {current.interval()}")
    return verdict("fail", f"{versus} outside {current.interval()}")


def evaluate(
    gates: Sequence[tuple[ResolvedGate, str, Sequence[Selected]]],
    baselines: Mapping[tuple[str, int], Sequence[float]],
    policy: Policy,
    *,
    enforce: bool = True,
) -> list[Verdict]:
    """Verdicts for every selected coordinate of every gate (`(gate, coordinate hash, selection)`)."""
    return [
        judge(gate, coordinate, sel, baselines.get((coordinate, sel.step), ()), policy, enforce=enforce)
        for gate, coordinate, selection in gates
        for sel in selection
    ]


def trusted(verdicts: Sequence[Verdict]) -> bool:
    return not any(v.blocks_trust for v in verdicts)


def exit_code(verdicts: Sequence[Verdict]) -> int:
    return 1 if any(v.fails_job for v in verdicts) else 0
