"""GitHub Actions workflow commands: annotations on the gate file's line for everything that needs eyes."""

from __future__ import annotations

from gatecfg.errors import Location, Problem, Severity
from gatecfg.report import RunReport, step_label

ANNOTATIONS_PER_GATE = 3


def render_github(report: RunReport) -> str:
    lines: list[str] = []
    seen: dict[str, int] = {}
    for v in report.verdicts:
        if v.status not in ("fail", "error", "cold"):
            continue
        seen[v.gate.metric] = seen.get(v.gate.metric, 0) + 1
        if seen[v.gate.metric] > ANNOTATIONS_PER_GATE:
            continue
        severity: Severity = "error" if v.fails_job else "warning"
        step = step_label(v)
        role = "enforced" if v.enforced else ("shadow" if v.gate.gated else "tracked")
        if v.tolerated:
            role += f", within tolerate: {v.gate.tolerate}"
        problem = Problem(
            Location(v.gate.file, v.gate.line),
            f"{v.status} ({role}) at step {step}: {v.reason}",
            dotted=v.gate.metric,
            severity=severity,
        )
        lines.append(problem.github())
    for warning in report.warnings:
        problem = Problem(
            Location(warning.gate.file, warning.gate.line),
            warning.message,
            dotted=warning.gate.metric,
            severity="warning",
        )
        lines.append(problem.github())
    counts = report.counts()
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines.append(f"::notice title=gatecfg::{report.test}: exit {report.exit_code} ({summary})")
    return "\n".join(lines) + "\n"
