"""The terminal report: what needs attention first, then one line per gate, then the verdict of the run."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table

from gatecfg.band import fmt
from gatecfg.evaluate import STATUS_ORDER, Verdict
from gatecfg.report import RunReport, step_label, worst

DETAIL_ROWS_PER_GATE = 10


def _role(v: Verdict) -> str:
    if not v.gate.gated:
        return "tracked"
    return "enforced" if v.enforced else "shadow"


def _pct(v: Verdict) -> str:
    pct = v.delta_pct
    return "" if pct is None else f"{pct:+.1f}%"


def render_text(report: RunReport) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None, highlight=False)
    run = report.run
    console.print(f"gatecfg evaluate: {report.test}  ({report.gate_file})")
    labels = ", ".join(f"{k}={v}" for k, v in sorted(report.series.items())) or "none"
    console.print(f"run {run.run_id} · commit {run.commit or '-'} · labels {labels} · store {report.store}")
    if report.enforce_disabled:
        console.print("GATECFG_ENFORCE=0: every enforced gate runs as a shadow gate")

    attention = [v for v in report.verdicts if v.status in ("error", "fail", "cold")]
    if attention:
        table = Table(box=box.SIMPLE_HEAD, title="needs attention", title_justify="left")
        for column in ("status", "role", "metric", "step", "value", "ref", "n", "band", "Δ", "reason"):
            table.add_column(column, overflow="fold")
        for metric, group in _by_gate(attention):
            group.sort(key=lambda v: (STATUS_ORDER[v.status], v.step))
            for v in group[:DETAIL_ROWS_PER_GATE]:
                table.add_row(
                    v.status.upper() + (" (tolerated)" if v.tolerated else ""),
                    _role(v),
                    metric,
                    step_label(v),
                    fmt(v.value) if v.value is not None else "-",
                    fmt(v.band.ref) if v.band.ref is not None else "-",
                    str(v.band.n),
                    v.band.interval() if v.gate.constraint is not None and v.band.n else "-",
                    _pct(v),
                    # The columns already say why a band failed; other reasons need the words.
                    "" if v.status == "fail" and " vs mean=" in v.reason else v.reason,
                )
            if len(group) > DETAIL_ROWS_PER_GATE:
                table.add_row("", "", metric, f"+{len(group) - DETAIL_ROWS_PER_GATE} more", *[""] * 6)
        console.print(table)

    table = Table(box=box.SIMPLE_HEAD, title="gates", title_justify="left")
    for column in ("status", "role", "metric", "steps", "coordinates", "source"):
        table.add_column(column, overflow="fold")
    for metric, group in report.gates():
        counts: dict[str, int] = {}
        for v in group:
            counts[v.status] = counts.get(v.status, 0) + 1
        spread = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda i: STATUS_ORDER[i[0]]))
        gate = group[0].gate
        table.add_row(
            worst(group).upper(), _role(group[0]), metric, gate.steps_key, spread, f"{gate.file}:{gate.line}"
        )
    console.print(table)

    for warning in report.warnings:
        console.print(f"WARNING re-key: {warning.message}")
    for note in report.notes:
        console.print(note)
    console.print(_verdict_line(report))
    return console.file.getvalue().rstrip() + "\n"  # type: ignore[attr-defined,no-any-return]


def _by_gate(verdicts: list[Verdict]) -> list[tuple[str, list[Verdict]]]:
    groups: dict[str, list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault(v.gate.metric, []).append(v)
    return list(groups.items())


def _verdict_line(report: RunReport) -> str:
    enforced = sum(v.fails_job for v in report.verdicts)
    shadow = sum(v.blocks_trust and not v.enforced for v in report.verdicts)
    cold = sum(v.status == "cold" for v in report.verdicts)
    tolerated = sum(v.tolerated for v in report.verdicts)
    run = report.run
    if run.already_stored:
        stored = f"run {run.run_id} was already stored: nothing written"
    elif run.written:
        stored = f"run written as {'trusted' if run.trusted else 'UNTRUSTED (kept out of baselines)'}"
    else:
        stored = "not written (pass --write on nightlies)"
    within = f"{tolerated} failing within tolerate · " if tolerated else ""
    return (
        f"result: exit {report.exit_code} · {enforced} enforced failing · {shadow} shadow failing · "
        f"{within}{cold} cold · {stored}"
    )
