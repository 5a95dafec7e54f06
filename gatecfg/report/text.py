"""The terminal report: what needs attention first, then one line per gate, then the verdict of the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gatecfg.band import fmt
from gatecfg.escape import terminal
from gatecfg.report.labels import band_label, role, step_label
from gatecfg.terminal import TextReport
from gatecfg.verdicts import STATUS_ORDER, GateVerdicts, Verdict

if TYPE_CHECKING:
    from gatecfg.report import RunReport

DETAIL_ROWS_PER_GATE = 10


def _pct(v: Verdict) -> str:
    pct = v.delta_pct
    return "" if pct is None else f"{pct:+.1f}%"


def render_text(report: RunReport) -> str:
    out = TextReport()
    run = report.run
    out.line(terminal(f"gatecfg evaluate: {report.test}  ({report.gate_file})"))
    labels = ", ".join(f"{k}={v}" for k, v in sorted(report.series.items())) or "none"
    out.line(
        terminal(f"run {run.run_id} · commit {run.commit or '-'} · labels {labels} · store {report.store}")
    )
    if report.enforce_disabled:
        out.line("GATECFG_ENFORCE=0: every enforced gate runs as a shadow gate")
    for note in report.notes:
        out.line(terminal(note))

    attention = _attention(report.results)
    if attention:
        rows: list[list[str]] = []
        for result, shown, more in attention:
            metric = terminal(result.gate.metric)
            for row in shown:
                v = row.verdict
                single = row.steps == 1
                rows.append(
                    [
                        v.status.upper() + (" (tolerated)" if v.tolerated else ""),
                        role(result),
                        metric,
                        step_label(v) if single else f"{row.steps} steps",
                        fmt(v.value) if v.value is not None and single else "-",
                        fmt(v.band.ref) if v.band.ref is not None else "-",
                        str(v.band.n),
                        band_label(v),
                        _pct(v) if single else "",
                        # The columns already say why a band failed; other reasons need the words.
                        "" if v.status == "fail" and " vs mean=" in v.reason else terminal(v.reason),
                    ]
                )
            if more:
                rows.append(["", "", metric, f"+{more} more", *[""] * 6])
        columns = ("status", "role", "metric", "step", "value", "ref", "n", "band", "Δ", "reason")
        out.table(columns, rows, title="needs attention")

    gates = [
        [
            result.status.upper(),
            role(result),
            terminal(result.gate.metric),
            result.gate.steps_key,
            _spread(result),
            terminal(f"{result.gate.file}:{result.gate.line}"),
        ]
        for result in report.results
    ]
    out.table(("status", "role", "metric", "steps", "coordinates", "source"), gates, title="gates")
    for result in report.results:
        if result.why is not None:
            # One line, however long: a person greps for it in a CI log.
            out.line(
                f"{role(result).upper()} FAIL {terminal(result.gate.metric)}: {terminal(result.why)}",
                wrap=False,
            )

    for warning in report.warnings:
        out.line(terminal(f"WARNING re-key: {warning.message}"))
    out.line(terminal(_verdict_line(report)))
    return out.text()


@dataclass(frozen=True)
class _Row:
    verdict: Verdict  # the first step of the row
    steps: int  # steps that share its status and reason


def _attention(results: Sequence[GateVerdicts]) -> list[tuple[GateVerdicts, list[_Row], int]]:
    """Per gate with steps that need attention: the first few rows (errors, then failures, then cold
    steps, each by step) and how many more steps there are. Steps of one status and one reason are one
    row ("8 steps cold: ..."). Only the first step of each row gets its band and reason built."""
    found = []
    for result in results:
        needing = sorted(
            (i for i, status in enumerate(result.statuses) if status in ("error", "fail", "cold")),
            key=lambda i: (STATUS_ORDER[result.statuses[i]], result.selection[i].step),
        )
        groups: dict[object, list[int]] = {}
        for i in needing:
            groups.setdefault(_same_reason(result, i), []).append(i)
        rows = [_Row(result[members[0]], len(members)) for members in groups.values()]
        if rows:
            shown = rows[:DETAIL_ROWS_PER_GATE]
            found.append((result, shown, sum(r.steps for r in rows[len(shown) :])))
    return found


def _same_reason(result: GateVerdicts, i: int) -> object:
    """A key that two steps of a gate share exactly when their status and reason are the same, read without
    building the reason: a cold step's reason depends only on how many baseline values it has, an error's
    is the selection's message; a failure's quotes its value, so each is its own row."""
    status = result.statuses[i]
    if status == "cold":
        return status, len(result.history(i))
    if status == "error":
        return status, result.selection[i].error
    return status, i


def _spread(result: GateVerdicts) -> str:
    """How a gate's steps fared, e.g. `3 fail, 997 pass`, in the order a reader acts on them."""
    ordered = sorted(result.counts.items(), key=lambda item: STATUS_ORDER[item[0]])
    return ", ".join(f"{n} {status}" for status, n in ordered if n)


def _verdict_line(report: RunReport) -> str:
    results = report.results
    enforced = sum(r.blocking for r in results if r.enforced)
    shadow = sum(r.blocking for r in results if r.gate.gated and not r.enforced)
    cold = sum(r.counts["cold"] for r in results)
    tolerated = sum(r.failing for r in results if r.tolerated)
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
