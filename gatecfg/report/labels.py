"""How a gate's role, band and step read in every report format."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gatecfg.verdicts import GateVerdicts, Verdict


def role(result: GateVerdicts) -> str:
    if not result.gate.gated:
        return "tracked"
    return "enforced" if result.enforced else "shadow"


def band_label(v: Verdict) -> str:
    """The band a step was judged against, `-` where none was: no history, no constraint, or a budget
    rule (which judges the steps together; its reason says against what)."""
    if v.gate.constraint is None or v.gate.constraint.budget is not None or not v.band.n:
        return "-"
    return v.band.interval()


def step_label(v: Verdict) -> str:
    if v.logged_step is None and v.step == -1:
        return str(v.gate.steps_key).strip('"')  # the metric is missing: no step was selected
    return "last" if v.step == -1 else str(v.step)


def step_reason(v: Verdict) -> str:
    """The reason without the status it may start with (`cold: ...`), for lines that show the status."""
    return v.reason.removeprefix(f"{v.status}: ")
