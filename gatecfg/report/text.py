"""The terminal report, as a CI log shows it: the run, one line per failing or re-keyed gate (why it fails;
wrapped only when a width is given, as the CLI gives a terminal's), and the verdict of the run with the
failures noise alone would produce. With `--verbose`, the steps that need attention and every gate as tables
too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gatecfg.escape import terminal
from gatecfg.report.labels import Noise, role, step_label, step_reason
from gatecfg.terminal import TextReport
from gatecfg.verdicts import STATUS_ORDER, GateVerdicts, Verdict
from gatecfg.wording import plural

if TYPE_CHECKING:
    from gatecfg.report import RunReport

DETAIL_ROWS_PER_GATE = 10
TOLERATED_SHOWN = 3  # tolerated steps a gate's TOLERATED line gives in full


def _pct(v: Verdict) -> str:
    pct = v.delta_pct
    return "" if pct is None else f"{pct:+.1f}%"


def render_text(report: RunReport, *, verbose: bool = False, width: int | None = None) -> str:
    """The text report; `width`: wrap lines and fit tables to that many columns (None: never wrap)."""
    out = TextReport(width)
    run = report.run
    labels = ", ".join(f"{k}={v}" for k, v in sorted(report.series.items())) or "none"
    out.line(
        terminal(
            f"gatecfg evaluate: {report.test} ({report.gate_file}) · run {run.run_id} · commit "
            f"{run.commit or '-'} · labels {labels} · store {report.store}"
        ),
        indent=2,
    )
    if report.enforce_disabled:
        out.line("GATECFG_ENFORCE=0: every enforced gate runs as a shadow gate")
    for note in report.notes:
        out.line(terminal(note), indent=2)
    if verbose:
        _details(out, report)
    for result in report.results:
        if result.why is not None:
            # One line per failing gate: a person greps a CI log for its first words and gets the whole line.
            gate = result.gate
            out.line(
                terminal(
                    f"{role(result).upper()} FAIL {gate.metric} ({gate.file}:{gate.line}): {result.why}"
                ),
                indent=2,
            )
    for result in report.results:
        if result.tolerated:
            # Named without --verbose: a tolerated x1000 step is worth a look even when the job passes.
            gate = result.gate
            out.line(
                terminal(
                    f"{role(result).upper()} TOLERATED {gate.metric} ({gate.file}:{gate.line}): "
                    f"{_tolerated(result)}"
                ),
                indent=2,
            )
    if report.changes is not None:
        out.line(terminal(f"CHANGED {report.changes.line()}"), indent=2)
    for warning in report.warnings:
        out.line(terminal(f"WARNING re-key: {warning.message}"), indent=2)
    out.line(terminal(_verdict_line(report)), indent=2)
    return out.text()


def _details(out: TextReport, report: RunReport) -> None:
    """`--verbose`: the steps that need attention and every gate, as tables."""
    attention = _attention(report.results)
    if attention:
        # A line per step (or per steps that share a reason), not a table: a reason is a sentence, which a
        # table column on an 80-column terminal would cut into a word per line.
        out.line("needs attention:")
        for result, shown, more in attention:
            metric = terminal(result.gate.metric)
            for row in shown:
                v = row.verdict
                status = v.status.upper() + (" (tolerated)" if v.tolerated else "")
                where = f"step {step_label(v)}"
                if row.steps > 1:
                    where = f"{row.steps} steps from {where}"
                change = f" ({_pct(v)})" if row.steps == 1 and _pct(v) else ""
                out.line(f"{status} {role(result)} {metric} {where}: {terminal(v.reason)}{change}", indent=4)
            if more:
                out.line(f"{metric}: {more} more steps (the JSON report lists every step)", indent=4)
        out.line()

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


def _tolerated(result: GateVerdicts) -> str:
    """`2 of 10 steps failing, within `tolerate: 2`; step 3: 9 vs mean 1 ..., beyond the band's edge 1.5
    by 7.5; step 7: ...`: each tolerated step and how far beyond its band, the first few in full."""
    failing = list(result.where("fail"))
    shown = "; ".join(f"step {step_label(v)}: {step_reason(v)}" for v in failing[:TOLERATED_SHOWN])
    more = len(failing) - TOLERATED_SHOWN
    if more > 0:
        shown += f"; and {plural(more, 'more step')} (the JSON report lists every step)"
    return (
        f"{result.failing} of {plural(result.judged, 'step')} failing, within `tolerate: "
        f"{result.gate.tolerate}`; {shown}"
    )


def _verdict_line(report: RunReport) -> str:
    """The run's outcome, gates counted as gates and steps as steps: `exit 1 · 1 of 2 gates failed (1
    error); ... · 1 enforced gate failing · 0 shadow gates failing · 3 steps cold · ...`."""
    results = report.results
    gated = [r for r in results if r.gate.gated]
    enforced = sum(r.blocking > 0 for r in gated if r.enforced)
    shadow = sum(r.blocking > 0 for r in gated if not r.enforced)
    cold = sum(r.counts["cold"] for r in results)
    tolerated = [r for r in gated if r.tolerated]
    run = report.run
    if run.already_stored:
        stored = f"run {run.run_id} was already stored: nothing written"
    elif run.written:
        out = [r.gate.metric for r in results if r.blocks_trust]
        # Trust is per gate: a failing gate keeps only its own values out of its own baseline.
        stored = (
            "run written as trusted"
            if not out
            else (
                f"run written; kept out of their own baselines: {', '.join(out[:3])}"
                + (f" and {len(out) - 3} more" if len(out) > 3 else "")
            )
        )
    else:
        stored = "not written (pass --write on nightlies)"
    within = ""
    if tolerated:
        steps = sum(r.failing for r in tolerated)
        within = f"{plural(len(tolerated), 'gate')} within tolerate ({plural(steps, 'failing step')}) · "
    return (
        f"result: exit {report.exit_code} · {Noise.of(results).line()} · "
        f"{plural(enforced, 'enforced gate')} failing · {plural(shadow, 'shadow gate')} failing · "
        f"{within}{plural(cold, 'step')} cold · {stored}"
    )
