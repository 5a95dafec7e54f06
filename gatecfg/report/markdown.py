"""Markdown for `$GITHUB_STEP_SUMMARY` and PR comments."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from gatecfg.band import fmt
from gatecfg.escape import markdown_code, markdown_text
from gatecfg.report.labels import band_label, role, step_label
from gatecfg.verdicts import Status, Verdict

if TYPE_CHECKING:
    from gatecfg.report import RunReport

ICONS = {"pass": "✅", "fail": "❌", "error": "💥", "cold": "🧊", "tracked": "📈"}
DETAIL_ROWS = 50


def render_markdown(report: RunReport) -> str:
    run = report.run
    lines = [f"### gatecfg: {markdown_code(report.test)}", ""]
    state = "passed" if report.exit_code == 0 else "**failed**"
    lines.append(
        f"Exit {report.exit_code} ({state}) · run {markdown_code(run.run_id)} · "
        f"commit {markdown_code(run.commit or '-')} · "
        f"{'written, ' + ('trusted' if run.trusted else '**untrusted**') if run.written else 'not written'}"
    )
    for note in report.notes:
        lines += ["", "> [!WARNING]", f"> {markdown_text(note)}"]
    if report.enforce_disabled:
        lines += ["", "> [!NOTE]", "> `GATECFG_ENFORCE=0`: enforced gates ran as shadow gates."]
    for warning in report.warnings:
        lines += [
            "",
            "> [!WARNING]",
            f"> **Re-key, baseline cold-started:** {markdown_text(warning.message)}",
        ]
    lines += ["", "| | gate | role | steps | coordinates |", "|---|---|---|---|---|"]
    for result in report.results:
        gate = result.gate
        spread = ", ".join(f"{n} {s}" for s, n in sorted(result.counts.items()))
        icon, metric = ICONS[result.status], markdown_code(gate.metric)
        lines.append(f"| {icon} | {metric} | {role(result)} | {markdown_code(gate.steps_key)} | {spread} |")
    why = [
        f"- {ICONS['fail']} {markdown_code(r.gate.metric)}: {markdown_text(r.why)}"
        for r in report.results
        if r.why
    ]
    if why:
        lines += ["", "Why:", "", *why]
    needing: tuple[Status, ...] = ("fail", "error", "cold")
    attention = sum(result.counts[status] for result in report.results for status in needing)
    if attention:
        lines += ["", "<details><summary>Coordinates that need attention</summary>", ""]
        lines += [
            "| | metric | step | value | ref | n | band | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        shown = islice((v for result in report.results for v in result.where(*needing)), DETAIL_ROWS)
        lines += [_row(v) for v in shown]
        if attention > DETAIL_ROWS:
            lines.append(f"| | … {attention - DETAIL_ROWS} more | | | | | | |")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _row(v: Verdict) -> str:
    step = step_label(v)
    value = fmt(v.value) if v.value is not None else "-"
    ref = fmt(v.band.ref) if v.band.ref is not None else "-"
    return (
        f"| {ICONS[v.status]} | {markdown_code(v.gate.metric)} | {step} | {value} | {ref} | {v.band.n} | "
        f"{band_label(v)} | {'(tolerated) ' if v.tolerated else ''}{markdown_text(v.reason)} |"
    )
