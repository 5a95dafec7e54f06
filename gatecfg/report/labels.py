"""How a gate's role, band and step read in every report format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gatecfg.escape import terminal

if TYPE_CHECKING:
    from gatecfg.verdicts import GateVerdicts, Verdict


def series_text(labels: Mapping[str, str]) -> str:
    """A series' labels as plain-text reports and logs show them (`hardware=h100, backend=x`), escaped as
    terminal text: a label stored with a newline (by an older gatecfg, or a copied store) never starts a
    line of its own, such as a `::error::` workflow command."""
    return terminal(", ".join(f"{k}={v}" for k, v in sorted(labels.items())))


def role(result: GateVerdicts) -> str:
    if not result.gate.gated:
        return "tracked"
    return "enforced" if result.enforced else "shadow"


def band_label(v: Verdict) -> str:
    """The band a step was judged against, `-` where none was (no history, no constraint); for a budget
    rule, which judges the steps together, the step's usual value and spread (`2.19 ± 0.10`)."""
    if v.gate.constraint is None or not v.band.n:
        return "-"
    if v.gate.constraint.budget is not None:
        from gatecfg.band import near  # band imports numpy, which argument parsing must not load

        ref, sd = v.band.ref, v.band.sd
        return "-" if ref is None or sd is None else f"{near(ref, sd)} ± {near(sd, sd)}"
    return v.band.interval()


@dataclass(frozen=True)
class Noise:
    """How many gate failures noise alone would produce across the gates a report judged: the sum of the
    budget gates' `false_alarm` (each fails a clean night with that probability); band gates have no
    such number at evaluate time (`gatecfg backtest` and `report --html` estimate theirs)."""

    judged: int  # gated gates with at least one judged (pass or fail) step
    failed: int  # of them, gates that fail (enforced or shadow)
    expected: float
    uncounted: int  # judged gates whose false-alarm rate is not known here (band gates)

    @classmethod
    def of(cls, results: Sequence[GateVerdicts]) -> Noise:
        judged = [r for r in results if r.gate.gated and r.judged]
        budget = [r for r in judged if r.gate.constraint is not None and r.gate.constraint.budget is not None]
        return cls(
            judged=len(judged),
            failed=sum(r.blocking > 0 for r in judged),
            expected=sum(r.gate.false_alarm for r in budget),
            uncounted=len(judged) - len(budget),
        )

    def line(self) -> str:
        """`3 of 40 gates failed; noise alone fails about 0.07 here (2 band gates not counted)`."""
        text = f"{self.failed} of {self.judged} gate{'s' * (self.judged != 1)} failed"
        if self.judged == self.uncounted:
            return f"{text}; noise alone: not known here (band gates; `gatecfg backtest` estimates theirs)"
        text += f"; noise alone fails about {self.expected:.2g} here"
        if self.uncounted:
            text += f" ({self.uncounted} band gate{'s' * (self.uncounted != 1)} not counted)"
        return text


def step_label(v: Verdict) -> str:
    if v.logged_step is None and v.step == -1:
        return str(v.gate.steps_key).strip('"')  # the metric is missing: no step was selected
    return "last" if v.step == -1 else str(v.step)


def step_reason(v: Verdict) -> str:
    """The reason without the status it may start with (`cold: ...`), for lines that show the status."""
    return v.reason.removeprefix(f"{v.status}: ")
