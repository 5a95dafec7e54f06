"""The report's interactive charts: each gate's chart as JSON beside a `<div>`, drawn in the browser by
uPlot and gatecfg/data/report/charts.js, both inlined into the page (offline, one file). Hover shows a
point's run, commit, date, value, status and baseline standing; a click opens the run's CI job; drag,
shift-drag, ctrl+wheel and double-click zoom, pan and reset (docs/analytics.md, "gatecfg report --html").

uPlot (MIT, 51 KB minified, gatecfg/data/report/uPlot.LICENSE) draws thousands of points on a canvas in
milliseconds with zoom and cursor built in; the charting libraries that do more weigh 4 to 70 times as
much.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

import orjson

from gatecfg.analysis import bands
from gatecfg.analysis.plots import Chart, Curve
from gatecfg.escape import html_text
from gatecfg.membership import MARKS
from gatecfg.store import STATUSES
from gatecfg.wording import plural

ASSETS = "report"
SHORT_SHA = 7
DIGITS = 7  # significant digits a chart's numbers carry: more than a reader compares, a third of the bytes


@dataclass(frozen=True)
class RunIndex:
    """The runs a page's charts point at, each listed once: a chart's points carry an index into it."""

    rows: list[tuple[str, str | None, str, str | None]]  # run id, commit, date, CI URL (http(s) only)
    position: dict[str, int]

    @classmethod
    def of(cls, runs: Iterable[tuple[str, str | None, datetime, str | None]]) -> RunIndex:
        rows: list[tuple[str, str | None, str, str | None]] = []
        position: dict[str, int] = {}
        for run_id, commit, created_at, url in runs:
            if run_id in position:
                continue
            # A stored URL comes from the CI's environment or a flag: only a web address becomes a link.
            link = url if url is not None and url.lower().startswith(("https://", "http://")) else None
            position[run_id] = len(rows)
            rows.append((run_id, commit, f"{created_at:%Y-%m-%d %H:%M} UTC", link))
        return cls(rows, position)


def assets() -> str:
    """The style and scripts every page with charts carries once, inline."""
    folder = resources.files("gatecfg.data") / ASSETS
    css = (folder / "uPlot.min.css").read_text(encoding="utf-8")
    # Both scripts are ours to ship: tests/test_html_report.py checks that neither holds `</script`.
    scripts = [(folder / name).read_text(encoding="utf-8") for name in ("uPlot.iife.min.js", "charts.js")]
    return f"<style>{css}</style>" + "".join(f"<script>{s}</script>" for s in scripts)


def runs_script(runs: RunIndex) -> str:
    return f'<script type="application/json" id="gatecfg-runs">{_json(runs.rows)}</script>'


def nights_chart(chart: Chart, runs: RunIndex) -> str:
    """The nights of one step: value, the band each sat in, lone-step edges apart, limits, regimes."""
    nights = chart.nights
    values = [n.value for n in nights]
    floor = bands.floor_of(values)
    drawn = [bands.drawn(n.ref, n.lo, n.hi, n.sd, floor=floor) for n in nights]
    low, high = bands.view([*values, *chart.limits.values(), *_edges(drawn)], floor=floor)
    days = [f"{n.created_at:%Y-%m-%d}" for n in nights]
    spec: dict[str, Any] = {
        "kind": "nights",
        "title": chart.title,
        "x": list(range(len(nights))),
        "run": [runs.position[n.run_id] for n in nights],
        "value": _numbers(values),
        "ref": _numbers(n.ref for n in nights),
        "sd": _numbers(n.sd for n in nights),
        "lo": _numbers(n.lo for n in nights),
        "hi": _numbers(n.hi for n in nights),
        "band": _band(drawn, low, high),
        "lone": _lone(drawn),
        "limits": sorted(chart.limits.items()),
        "statuses": STATUSES,
        "status": [STATUSES.index(n.status) for n in nights],
        "marks": list(MARKS.values()),
        "mark": [list(MARKS).index(n.why.why) for n in nights],
        "joins": [int(n.why.joins) for n in nights],
        "hand": [int(n.untrusted_by_hand) for n in nights],
        "failed": [int(n.status in ("fail", "error")) for n in nights],
        "y": [low, high],
        "regimes": _regimes(chart),
        "sameDay": len(set(days)) < len(days),
    }
    out = [j == 0 and h == 0 for j, h in zip(spec["joins"], spec["hand"], strict=True)]
    shifts = len(chart.regimes.regimes) - 1 if chart.regimes else 0
    key = [("value", "value of each night"), ("ref", "reference")]
    key += [_band_key(any(n.sd is not None for n in nights), drawn)]
    key += [("lone", bands.lone_label(drawn, low, high))] if spec["lone"] else []
    key += [("limit", f"limits.{side} {v:g}") for side, v in spec["limits"]]
    key += [("out", "out of the baseline (failed)")] if any(out) else []
    key += [("hand", "untrusted by hand")] if any(spec["hand"]) else []
    key += [("failed", "failed the gate")] if any(spec["failed"]) else []
    key += [("regime", f"{plural(shifts, 'regime change')}, labelled by commit")] if shifts else []
    return _markup(spec, key)


def curve_chart(curve: Curve, run: int) -> str:
    """The latest run over its steps, each on its own band; failing steps marked."""
    floor = bands.floor_of(curve.values)
    drawn = [
        bands.drawn(r, lo, hi, sd, floor=floor)
        for r, lo, hi, sd in zip(curve.refs, curve.los, curve.his, curve.sds, strict=True)
    ]
    low, high = bands.view([*curve.values, *curve.refs, *_edges(drawn)], floor=floor)
    spec: dict[str, Any] = {
        "kind": "steps",
        "title": curve.title,
        "x": list(curve.steps),
        "run": run,
        "value": _numbers(curve.values),
        "ref": _numbers(curve.refs),
        "sd": _numbers(curve.sds),
        "lo": _numbers(curve.los),
        "hi": _numbers(curve.his),
        "band": _band(drawn, low, high),
        "lone": _lone(drawn),
        "limits": [],
        "statuses": STATUSES,
        "status": [STATUSES.index(s) for s in curve.statuses],
        "failed": [int(f) for f in curve.failing],
        "y": [low, high],
    }
    key = [("value", "latest run"), ("ref", "reference (usual value)")]
    key += [_band_key(any(sd is not None for sd in curve.sds), drawn)]
    key += [("lone", bands.lone_label(drawn, low, high))] if spec["lone"] else []
    key += [("out", "failing step")] if any(spec["failed"]) else []  # a red dot, as drawn
    return _markup(spec, key, css="curve")


def _band_key(noise: bool, drawn: Sequence[bands.Drawn]) -> tuple[str, str]:
    if noise:
        return ("band", f"normal noise: reference ± {bands.NOISE_SPREADS:g} spreads")
    return ("band", "band when judged" if any(d.lo is not None for d in drawn) else "no band yet")


def _markup(spec: Mapping[str, Any], key: Sequence[tuple[str, str]], *, css: str = "") -> str:
    legend = "".join(f'<li class="key-{k}">{html_text(text)}</li>' for k, text in key)
    classes = " ".join(c for c in ("gate-chart", css) if c)
    return (
        f'<div class="chart-box"><div class="{classes}" data-kind="{spec["kind"]}">'
        f'<script type="application/json">{_json(spec)}</script></div>'
        f'<ul class="key">{legend}</ul></div>'
    )


def _edges(drawn: Sequence[bands.Drawn]) -> list[float | None]:
    return [e for d in drawn for e in (d.lo, d.hi)]


def _band(drawn: Sequence[bands.Drawn], low: float, high: float) -> list[list[float | None]]:
    """The band's two edges, an open side (infinite) drawn to the view's edge."""
    return [
        _numbers(None if d.lo is None else max(d.lo, low) for d in drawn),
        _numbers(None if d.hi is None else min(d.hi, high) for d in drawn),
    ]


def _lone(drawn: Sequence[bands.Drawn]) -> list[list[float | None]]:
    sides = ([d.lone_lo for d in drawn], [d.lone_hi for d in drawn])
    return [_numbers(side) for side in sides if any(e is not None for e in side)]


def _regimes(chart: Chart) -> list[dict[str, Any]]:
    """Every other regime shaded, each after the first labelled with the commit that opened it (and its
    kind when not a level shift), each with its model: its median, or its slope for a drift."""
    if chart.regimes is None or not chart.regimes.regimes:
        return []
    regimes = chart.regimes.regimes
    # Regimes index the nights they analysed (no NaN, no run untrusted by hand); the chart shows all.
    position = {n.run_id: i for i, n in enumerate(chart.nights)}
    found = []
    for number, regime in enumerate(regimes):
        start, end = position.get(regime.first_run), position.get(regime.last_run)
        if start is None or end is None:
            continue
        model: list[list[float]] | None = None
        if regime.slope is not None:
            half = (regime.n - 1) / 2  # the least-squares line passes through the mean at the middle night
            model = [[start, regime.mean - regime.slope * half], [end, regime.mean + regime.slope * half]]
        elif len(regimes) > 1:
            model = [[start - 0.5, regime.median], [end + 0.5, regime.median]]
        label = None
        if number:
            label = (regime.first_commit or regime.first_run)[:SHORT_SHA]
            label += "" if regime.kind == "level" else f" {regime.kind}"
        found.append(
            {
                "start": start,
                "end": end,
                "shade": len(regimes) > 1 and number % 2 == 1,
                "label": label,
                "model": model,
            }
        )
    return found


def _numbers(values: Iterable[float | None]) -> list[float | None]:
    return [None if v is None or not math.isfinite(v) else float(f"{v:.{DIGITS}g}") for v in values]


def _json(value: object) -> str:
    """JSON that is safe inside a <script> element: a `<` (only ever inside a string) is escaped, so no
    `</script>` or `<!--` from a gate file or the store can end the element early."""
    return orjson.dumps(value).decode("utf-8").replace("<", "\\u003c")
