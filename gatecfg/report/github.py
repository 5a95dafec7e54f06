"""GitHub Actions workflow commands: annotations on the gate file's line for everything that needs eyes."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from gatecfg.errors import Location, Problem, Severity
from gatecfg.escape import github_data
from gatecfg.report.labels import Noise, role, step_label, step_reason

if TYPE_CHECKING:
    from gatecfg.report import RunReport

ANNOTATIONS_PER_GATE = 3


def render_github(report: RunReport) -> str:
    lines = [Problem(Location(report.gate_file), note, severity="warning").github() for note in report.notes]
    for result in report.results:
        if result.why is not None:
            problem = Problem(
                Location(result.gate.file, result.gate.line),
                f"gate fails ({role(result)}): {result.why}"
                + ("" if report.changes is None else f"; changed {report.changes.line()}"),
                dotted=result.gate.metric,
                severity="error" if result.fails_job else "warning",
            )
            lines.append(problem.github())
        for v in islice(result.where("fail", "error", "cold"), ANNOTATIONS_PER_GATE):
            severity: Severity = "error" if v.fails_job else "warning"
            step = step_label(v)
            how = role(result) + (f", within tolerate: {v.gate.tolerate}" if v.tolerated else "")
            problem = Problem(
                Location(v.gate.file, v.gate.line),
                f"{v.status} ({how}) at step {step}: {step_reason(v)}",
                dotted=v.gate.metric,
                severity=severity,
            )
            lines.append(problem.github())
    for warning in report.warnings:
        problem = Problem(
            Location(warning.gate.file, warning.gate.line),
            warning.message,
            dotted=warning.gate.metric,
            severity="error" if report.rekey_fails else "warning",
        )
        lines.append(problem.github())
    counts = report.counts()
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    notice = f"{report.test}: exit {report.exit_code} ({summary}); {Noise.of(report.results).line()}"
    lines.append(f"::notice title=gatecfg::{github_data(notice)}")
    return "\n".join(lines) + "\n"
