"""Markdown for `$GITHUB_STEP_SUMMARY` and PR comments."""

from __future__ import annotations

from itertools import islice
from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import quote

from gatecfg.band import fmt
from gatecfg.escape import markdown_code, markdown_text, markdown_url
from gatecfg.report.labels import Noise, band_label, role, step_label
from gatecfg.verdicts import GateVerdicts, Status, Verdict

if TYPE_CHECKING:
    from gatecfg.report import RunReport

ICONS = {"pass": "✅", "fail": "❌", "error": "💥", "cold": "🧊", "tracked": "📈", "missing": "🕳️"}
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
    lines += ["", markdown_text(Noise.of(report.results).line().capitalize() + ".")]
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
    lines += ["", "| | gate | role | steps | coordinates | source |", "|---|---|---|---|---|---|"]
    for result in report.results:
        gate = result.gate
        spread = ", ".join(f"{n} {s}" for s, n in sorted(result.counts.items()))
        icon, metric = ICONS[result.status], markdown_code(gate.metric)
        lines.append(
            f"| {icon} | {metric} | {role(result)} | {markdown_code(gate.steps_key)} | {spread} | "
            f"{_source(result, run.source)} |"
        )
    why = [
        f"- {ICONS['fail']} {markdown_code(r.gate.metric)} ({_source(r, run.source)}): {markdown_text(r.why)}"
        for r in report.results
        if r.why
    ]
    if why:
        lines += ["", "Why:", "", *why]
    if report.changes is not None:
        lines += ["", f"What changed {markdown_text(report.changes.line())}"]
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


def _source(result: GateVerdicts, repository: str | None) -> str:
    """The gate's `file:line`, linked to that line at this commit when the CI names the repository and the
    file is inside the checkout (a relative path)."""
    gate = result.gate
    where = markdown_code(f"{gate.file}:{gate.line}")
    path = PurePosixPath(gate.file.replace("\\", "/"))
    if repository is None or path.is_absolute() or ".." in path.parts:
        return where
    return f"[{where}]({markdown_url(f'{repository}/{quote(str(path))}')}#L{gate.line})"


def _row(v: Verdict) -> str:
    step = step_label(v)
    value = fmt(v.value) if v.value is not None else "-"
    ref = fmt(v.band.ref) if v.band.ref is not None else "-"
    return (
        f"| {ICONS[v.status]} | {markdown_code(v.gate.metric)} | {step} | {value} | {ref} | {v.band.n} | "
        f"{band_label(v)} | {'(tolerated) ' if v.tolerated else ''}{markdown_text(v.reason)} |"
    )
