"""The HTML report: an index of tests and gates, and one page per test with a chart per gate.

Offline by construction: a test page is one file, its CSS and scripts inline (gatecfg.analysis.interactive),
or with `--png` static images beside it and no script. Every text that comes from gate files or the store
is escaped. A test page is a list of sections: a `Section` in `TestView.sections` adds one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gatecfg.analysis.false_alarm import Estimate
from gatecfg.analysis.interactive import RunIndex, assets, runs_script
from gatecfg.band import fmt
from gatecfg.escape import html_text
from gatecfg.resolve import ResolvedGate
from gatecfg.wording import plural

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1c1c1c; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 15px; margin: 0 0 4px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; }
.status { font-weight: 600; padding: 1px 6px; border-radius: 3px; }
.pass { background: #e8f5e9; color: #1b5e20; } .fail, .error { background: #ffebee; color: #b71c1c; }
.cold { background: #e3f2fd; color: #0d47a1; } .tracked, .none { background: #f5f5f5; color: #555; }
figure.gate-plot { margin: 8px 0 28px; }
figure.gate-plot .charts { display: flex; flex-wrap: wrap; gap: 8px; }
figure.gate-plot img { max-width: 100%; height: auto; }
figure.gate-plot .charts > img { flex: 0 1 900px; min-width: 0; }  /* drawn for 900 px */
figcaption { color: #555; font-size: 13px; }
.muted { color: #777; }
.chart-box { flex: 1 1 600px; min-width: 0; }
.gate-chart { position: relative; min-height: 350px; }  /* its place, before it is drawn */
.gate-chart .u-title { font-size: 14px; font-weight: 600; text-align: left; padding-left: 8px; }
.gate-chart .tip { position: absolute; z-index: 10; pointer-events: none; background: #fff; color: #1c1c1c;
  border: 1px solid #bbb; border-radius: 4px; padding: 6px 8px; font-size: 13px; line-height: 1.35;
  box-shadow: 0 2px 6px rgba(0,0,0,.15); white-space: nowrap; }
ul.key { list-style: none; display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 2px 0 10px; padding: 0;
  font-size: 13px; color: #333; }
ul.key li::before { content: ""; display: inline-block; width: 18px; height: 10px; margin-right: 6px;
  vertical-align: middle; }
.key-value::before { border-top: 2px solid #1f4e79; height: 0 !important; }
.key-ref::before { border-top: 2px dashed #2e7d32; height: 0 !important; }
.key-band::before { background: rgba(165,214,167,.55); }
.key-lone::before { border-top: 2px dotted #e57373; height: 0 !important; }
.key-limit::before { border-top: 2px dotted #c0392b; height: 0 !important; }
.key-out::before { background: #c0392b; border-radius: 50%; width: 8px !important; height: 8px !important; }
.key-hand::before { background: #7f7f7f; border-radius: 50%; width: 8px !important; height: 8px !important; }
.key-failed::before { border: 2px solid #c0392b; border-radius: 50%; width: 8px !important;
  height: 8px !important; }
.key-regime::before { background: #eceff1; border-left: 1px solid #90a4ae; }
p.how { font-size: 13px; color: #555; }
"""
# How the charts of a test page are driven, said once above them.
HOW = (
    "Hover a point for its run, commit, date, value, status and baseline standing; click it to open the "
    "run's CI job where one is stored. Drag to zoom, shift-drag to pan, ctrl+wheel to zoom at the "
    "pointer, double-click to see everything again."
)


@dataclass(frozen=True)
class GateView:
    gate: ResolvedGate
    anchor: str
    step_shown: str | None  # the step charted, e.g. "last" or "199"; None without stored values
    steps_stored: str  # e.g. "0-199"
    status: str  # the latest run's status at this gate, or "none"
    value: float | None  # the latest run's value at the charted step
    estimate: Estimate | None
    regimes: int  # regimes at the charted step
    last_shift: str | None  # "commit (date)" that opened the current regime
    chart: str  # inline SVG, or an <img> tag; for a gate over many steps, its curve over steps first


@dataclass(frozen=True)
class SeriesView:
    labels: Mapping[str, str]
    runs: int
    latest_run: str | None
    latest_commit: str | None
    latest_date: datetime | None
    latest_trusted: bool | None
    gates: Sequence[GateView]


@dataclass(frozen=True)
class Section:
    """A part of a test page after its series: a heading with an anchor, and its body (HTML, escaped)."""

    anchor: str
    title: str
    body: str


@dataclass(frozen=True)
class TestView:
    test: str
    file: str
    page: str  # relative to the index
    series: Sequence[SeriesView]
    runs: RunIndex | None  # the runs the interactive charts point at; None for static (PNG) charts
    sections: Sequence[Section] = ()


_e = html_text


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no labels"


def _status(status: str) -> str:
    return f'<span class="status {_e(status)}">{_e(status)}</span>'


def _steps(gate: ResolvedGate) -> str:
    return gate.steps_key.strip('"')  # `all` / `last` as written, a list as its canonical JSON


def _role(gate: ResolvedGate) -> str:
    if not gate.gated:
        return "tracked"
    return "enforced" if gate.enforce else "shadow"


def _estimate(estimate: Estimate | None) -> str:
    if estimate is None:
        return '<span class="muted">-</span>'
    return f'<span title="{_e(estimate.describe())}">{estimate.probability:.1%}</span>'


def _limits(gate: ResolvedGate) -> str:
    if gate.limits is None:
        return '<span class="muted">-</span>'
    return _e(", ".join(f"{k} {fmt(v)}" for k, v in gate.limits.literal().items()))


def _page(title: str, body: str, generated: str, *, scripts: str = "") -> str:
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head>\n<body>\n{body}\n"
        f'<p class="muted">generated by gatecfg {_e(generated)}</p>\n{scripts}</body></html>\n'
    )


def _gate_rows(test: TestView, series: SeriesView, *, link: bool) -> str:
    rows = []
    for g in series.gates:
        metric = _e(g.gate.metric)
        if link:
            metric = f'<a href="{_e(test.page)}#{_e(g.anchor)}">{metric}</a>'
        else:
            metric = f'<a href="#{_e(g.anchor)}">{metric}</a>'
        rows.append(
            "<tr>"
            f"<td>{metric}</td><td><code>{_e(_steps(g.gate))}</code></td><td>{_role(g.gate)}</td>"
            f"<td>{_status(g.status)}</td><td class=num>{'-' if g.value is None else _e(fmt(g.value))}</td>"
            f"<td>{_limits(g.gate)}</td><td class=num>{_estimate(g.estimate)}</td>"
            f"<td class=num>{g.regimes}</td><td>{_e(g.last_shift or '-')}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>gate</th><th>steps</th><th>role</th><th>latest</th><th>value</th><th>limits</th>"
        '<th title="estimated chance that the gate fails a night when nothing regressed">false alarm</th>'
        "<th>regimes</th><th>current regime since</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _noise(gates: Sequence[GateView]) -> str:
    """How many of these gates noise alone fails on a night where nothing regressed: the sum of their
    estimated false-alarm rates (docs/evaluate.md, "Reports", **noise alone**)."""
    known = [g.estimate.probability for g in gates if g.estimate is not None]
    if not known:
        return f"noise alone: not known for these {len(gates)} gates (no estimate yet)"
    text = f"noise alone fails about {sum(known):.2g} of these {len(gates)} gates a night"
    missing = len(gates) - len(known)
    return text + (f" ({missing} without an estimate, not counted)" if missing else "")


def _latest(series: SeriesView) -> str:
    if series.latest_run is None:
        return "no stored runs"
    trust = "trusted" if series.latest_trusted else "untrusted"
    date = "-" if series.latest_date is None else f"{series.latest_date:%Y-%m-%d %H:%M}"
    return (
        f"{plural(series.runs, 'run')}; latest <code>{_e(series.latest_run)}</code> at commit "
        f"<code>{_e((series.latest_commit or '-')[:12])}</code>, {_e(date)} UTC, {trust}"
    )


def index_page(tests: Sequence[TestView], *, store: str, generated: str, alerts: str = "") -> str:
    parts = [
        "<h1>gatecfg report</h1>",
        f'<p class="muted">history store: <code>{_e(store)}</code></p>',
        alerts,  # gatecfg/alerts_html.py's section
        "<h2>Tests</h2><table><tr><th>test</th><th>gate file</th><th>series</th><th>runs</th>"
        "<th>latest run</th><th>gates: latest status</th></tr>",
    ]
    for t in tests:
        for s in t.series:
            counts: dict[str, int] = {}
            for g in s.gates:
                counts[g.status] = counts.get(g.status, 0) + 1
            summary = " ".join(f"{_status(k)}&nbsp;{n}" for k, n in sorted(counts.items()))
            parts.append(
                f'<tr><td><a href="{_e(t.page)}">{_e(t.test)}</a></td><td><code>{_e(t.file)}</code></td>'
                f"<td>{_e(_labels(s.labels))}</td><td class=num>{s.runs}</td>"
                f"<td>{_e(s.latest_run or '-')}</td><td>{summary}</td></tr>"
            )
    everything = [g for t in tests for s in t.series for g in s.gates]
    parts.append(f'</table><p class="noise">Whole store: {_e(_noise(everything))}.</p><h2>Gates</h2>')
    for t in tests:
        for s in t.series:
            parts.append(f"<h3>{_e(t.test)} <span class=muted>({_e(_labels(s.labels))})</span></h3>")
            parts.append(f"<p>{_latest(s)}; {_e(_noise(s.gates))}</p>")
            parts.append(_gate_rows(t, s, link=True))
    return _page("gatecfg report", "\n".join(parts), generated)


def page_of_test(test: TestView, *, generated: str) -> str:
    parts = [
        '<p><a href="../index.html">&larr; all tests</a></p>',
        f"<h1>{_e(test.test)}</h1>",
        f"<p>gate file <code>{_e(test.file)}</code></p>",
    ]
    if test.runs is not None:
        parts.append(
            f'<p class="how">{_e(HOW)}</p><noscript><p>The charts need JavaScript; '
            "<code>gatecfg report --png</code> writes static images instead.</p></noscript>"
        )
    parts += [_series_section(test, s) for s in test.series]
    parts += [_section(s) for s in test.sections]
    scripts = "" if test.runs is None else runs_script(test.runs) + assets()
    return _page(test.test, "\n".join(parts), generated, scripts=scripts)


def _series_section(test: TestView, series: SeriesView) -> str:
    parts = [
        f"<h2>{_e(_labels(series.labels))}</h2><p>{_latest(series)}</p>"
        f'<p class="noise">{_e(_noise(series.gates))}</p>',
        _gate_rows(test, series, link=False),
    ]
    for g in series.gates:
        caption = (
            f"{_e(g.gate.metric)} at step {_e(g.step_shown)} (stored steps {_e(g.steps_stored)}); "
            f"defined at {_e(g.gate.file)}:{g.gate.line}"
            if g.step_shown is not None
            else f"{_e(g.gate.metric)}: no stored values yet"
        )
        parts.append(
            f'<figure class="gate-plot" id="{_e(g.anchor)}" data-metric="{_e(g.gate.metric)}">'
            f'<div class="charts">{g.chart}</div><figcaption>{caption}</figcaption></figure>'
        )
    return "\n".join(parts)


def _section(section: Section) -> str:
    return f'<section id="{_e(section.anchor)}"><h2>{_e(section.title)}</h2>{section.body}</section>'
