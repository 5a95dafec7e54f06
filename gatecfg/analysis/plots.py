"""One chart per gate as a static image (`report --png`): the nightly values, the band each sits in
(gatecfg.analysis.bands), limits, regimes, trust; and for a gate over many steps, the latest run's curve
over its steps on each step's band. The interactive page draws the same from gatecfg.analysis.interactive.

matplotlib with the Agg backend (no display needed on a CI runner), rendered to inline SVG or to PNG.
The SVG keeps its text as text and carries no timestamp, and its internal ids are salted with the
coordinate, so several charts inline in one page never share an id and a report rebuilt from the same
history is byte for byte the same.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gatecfg.analysis import bands
from gatecfg.analysis.regimes import Regimes
from gatecfg.analysis.series import Night
from gatecfg.escape import mathtext_label
from gatecfg.store import Status

Kind = Literal["svg", "png"]
# Drawn at 900 x 340 px and shown at that size: 11 px text at 100% zoom, 10 px at the least.
WIDTH_IN, HEIGHT_IN, DPI = 9.0, 3.4, 100
FONT, SMALL = 11, 10
SHORT_SHA = 7
PROLOG = re.compile(r"\A.*?(?=<svg)", re.DOTALL)
COLORS = {
    "value": "#1f4e79",
    "fail": "#c0392b",
    "untrusted_by_hand": "#7f7f7f",
    "ref": "#2e7d32",
    "band": "#a5d6a7",
    "lone": "#e57373",
    "limit": "#c0392b",
    "regime": "#eceff1",
    "model": "#6a1b9a",
}


@dataclass(frozen=True)
class Chart:
    title: str
    salt: str  # unique per chart: the coordinate and step
    nights: Sequence[Night]  # every stored night at the step, oldest first (NaN ones are skipped)
    regimes: Regimes | None
    limits: Mapping[str, float]


@dataclass(frozen=True)
class Curve:
    """The latest run of a gate over all its steps: each step's value, the reference and edges it was
    judged against, its spread where its rule gave one (a budget gate's), and whether it failed."""

    title: str
    salt: str
    steps: Sequence[int]
    values: Sequence[float]
    refs: Sequence[float | None]
    los: Sequence[float | None]
    his: Sequence[float | None]
    sds: Sequence[float | None]
    statuses: Sequence[Status]

    @property
    def failing(self) -> list[bool]:
        return [s in ("fail", "error") for s in self.statuses]


def render(chart: Chart | Curve, kind: Kind) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import pyplot as plt

    # Values near the float maximum overflow matplotlib's data-limit arithmetic, harmlessly.
    with (
        matplotlib.rc_context({"svg.hashsalt": chart.salt, "svg.fonttype": "none", "font.size": FONT}),
        np.errstate(over="ignore"),
    ):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
        try:
            if isinstance(chart, Curve):
                _draw_curve(ax, chart)
            else:
                _draw(ax, chart)
            fig.tight_layout()
            out = io.BytesIO()
            metadata: dict[str, Any] = {"Date": None} if kind == "svg" else {"Software": None}
            fig.savefig(out, format=kind, metadata=metadata)
        finally:
            plt.close(fig)
    data = out.getvalue()
    if kind == "svg":
        # Inline in HTML: the XML declaration and DOCTYPE belong to a standalone file only.
        return PROLOG.sub("", data.decode("utf-8"), count=1).encode("utf-8")
    return data


def _draw(ax: Any, chart: Chart) -> None:
    nights = [n for n in chart.nights if math.isfinite(n.value)]
    ax.set_title(mathtext_label(chart.title), loc="left", fontsize=FONT)
    if not nights:
        ax.text(0.5, 0.5, "no stored values", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    x = list(range(len(nights)))
    values = [n.value for n in nights]
    floor = bands.floor_of(values)
    drawn = [bands.drawn(n.ref, n.lo, n.hi, n.sd, floor=floor) for n in nights]
    low, high = bands.view(
        [*values, *chart.limits.values(), *(e for d in drawn for e in (d.lo, d.hi))], floor=floor
    )
    _shade_regimes(ax, chart, nights, high)
    judged = [d.lo is not None for d in drawn]
    if any(judged):
        noise = any(n.sd is not None for n in nights)
        ax.fill_between(
            x,
            [max(low, d.lo) if d.lo is not None else low for d in drawn],
            [min(high, d.hi) if d.hi is not None else high for d in drawn],
            where=judged,
            step="mid",
            color=COLORS["band"],
            alpha=0.5,
            lw=0,
            label=f"normal noise (±{bands.NOISE_SPREADS:g} spreads)" if noise else "band when judged",
        )
    _lone_edges(ax, x, drawn, low, high, drawstyle="steps-mid")
    refs = [math.nan if n.ref is None else n.ref for n in nights]
    if any(n.ref is not None for n in nights):
        ax.plot(x, refs, color=COLORS["ref"], lw=1, ls="--", drawstyle="steps-mid", label="reference")
    ax.plot(x, values, color=COLORS["value"], lw=0.8, alpha=0.6)
    trusted = [i for i, n in enumerate(nights) if n.trusted]
    untrusted = [i for i, n in enumerate(nights) if not n.trusted and not n.untrusted_by_hand]
    by_hand = [i for i, n in enumerate(nights) if n.untrusted_by_hand]
    ax.scatter(
        trusted, [values[i] for i in trusted], s=9, color=COLORS["value"], label="in the baseline", zorder=3
    )
    for marked, color, label in (
        (untrusted, "fail", "out of the baseline (failed)"),
        (by_hand, "untrusted_by_hand", "untrusted by hand"),
    ):
        if marked:
            ax.scatter(
                marked,
                [values[i] for i in marked],
                s=28,
                marker="x",
                color=COLORS[color],
                label=label,
                zorder=4,
            )
    failed = [i for i, n in enumerate(nights) if n.status in ("fail", "error")]
    if failed:
        ax.scatter(
            failed,
            [values[i] for i in failed],
            s=40,
            facecolors="none",
            edgecolors=COLORS["fail"],
            linewidths=0.8,
            label="failed the gate",
            zorder=5,
        )
    for side, limit in sorted(chart.limits.items()):
        ax.axhline(limit, color=COLORS["limit"], lw=1, ls=":", label=f"limits.{side} {limit:g}")
    ax.set_ylim(low, high)
    ax.set_xlim(-0.5, len(nights) - 0.5)
    _date_ticks(ax, nights)
    ax.grid(axis="y", lw=0.3, alpha=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=SMALL, frameon=False)


def _draw_curve(ax: Any, curve: Curve) -> None:
    ax.set_title(mathtext_label(curve.title), loc="left", fontsize=FONT)
    x = list(curve.steps)
    values = [math.nan if not math.isfinite(v) else v for v in curve.values]
    floor = bands.floor_of(values)
    drawn = [
        bands.drawn(r, lo, hi, sd, floor=floor)
        for r, lo, hi, sd in zip(curve.refs, curve.los, curve.his, curve.sds, strict=True)
    ]
    shown = [*values, *(r for r in curve.refs), *(e for d in drawn for e in (d.lo, d.hi))]
    if not any(v is not None and math.isfinite(v) for v in shown):
        ax.text(0.5, 0.5, "no stored values", ha="center", va="center", transform=ax.transAxes)
        return
    low, high = bands.view(shown, floor=floor)
    judged = [d.lo is not None for d in drawn]
    if any(judged):
        noise = any(sd is not None for sd in curve.sds)
        ax.fill_between(
            x,
            [max(low, d.lo) if d.lo is not None else low for d in drawn],
            [min(high, d.hi) if d.hi is not None else high for d in drawn],
            where=judged,
            color=COLORS["band"],
            alpha=0.5,
            lw=0,
            label=f"normal noise (±{bands.NOISE_SPREADS:g} spreads)" if noise else "band of each step",
        )
        refs = [math.nan if r is None else r for r in curve.refs]
        ax.plot(x, refs, color=COLORS["ref"], lw=1, ls="--", label="reference (usual value)")
    _lone_edges(ax, x, drawn, low, high, drawstyle="default")
    ax.plot(x, values, color=COLORS["value"], lw=1, label="latest run")
    failed = [i for i, f in enumerate(curve.failing) if f]
    if failed:
        ax.scatter(
            [x[i] for i in failed],
            [values[i] for i in failed],
            s=22,
            color=COLORS["fail"],
            label="failing step",
            zorder=5,
        )
    ax.set_ylim(low, high)
    ax.set_xlabel("step", fontsize=SMALL)
    ax.grid(axis="y", lw=0.3, alpha=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=SMALL, frameon=False)


def _lone_edges(
    ax: Any, x: Sequence[int], drawn: Sequence[bands.Drawn], low: float, high: float, *, drawstyle: str
) -> None:
    """A budget gate's lone-step edges as thin dotted lines where they fall in the view (they never set
    it); the legend says how far out they are when none does."""
    label = bands.lone_label(drawn, low, high)
    for line in ([d.lone_lo for d in drawn], [d.lone_hi for d in drawn]):
        if all(e is None for e in line):
            continue
        y = [math.nan if e is None else e for e in line]
        ax.plot(x, y, color=COLORS["lone"], lw=0.8, ls=":", drawstyle=drawstyle, label=label)
        label = "_nolegend_"  # one legend entry for both sides


def _shade_regimes(ax: Any, chart: Chart, nights: Sequence[Night], top: float) -> None:
    """Every other regime shaded, each labelled with the commit that opened it (and its kind when it is
    not a level shift), and each regime's model drawn over it: its median, or its slope for a drift."""
    if chart.regimes is None or not chart.regimes.regimes:
        return
    regimes = chart.regimes.regimes
    # Regimes index the nights they analysed (no NaN, no run untrusted by hand); the chart shows more.
    position = {n.run_id: i for i, n in enumerate(nights)}
    legend = "drift (slope)"
    for number, regime in enumerate(regimes):
        start = position.get(regime.first_run)
        end = position.get(regime.last_run)
        if start is None or end is None:
            continue
        if len(regimes) > 1 and number % 2:
            ax.axvspan(start - 0.5, end + 0.5, color=COLORS["regime"], lw=0, zorder=0)
        if regime.slope is not None:
            # The least-squares line passes through the regime's mean at its middle night.
            half = (regime.n - 1) / 2
            ends = (regime.mean - regime.slope * half, regime.mean + regime.slope * half)
            ax.plot([start, end], ends, color=COLORS["model"], lw=1.2, zorder=2, label=legend)
            legend = "_nolegend_"  # one legend entry however many drifts
        elif len(regimes) > 1:
            ax.plot([start - 0.5, end + 0.5], [regime.median] * 2, color=COLORS["model"], lw=0.8, zorder=2)
        if number:
            label = (regime.first_commit or regime.first_run)[:SHORT_SHA]
            if regime.kind != "level":
                label += f" {regime.kind}"
            ax.axvline(start - 0.5, color="#90a4ae", lw=0.6, zorder=1)
            ax.text(start, top, f" {label}", fontsize=SMALL, va="top", color="#455a64", rotation=90)


def _date_ticks(ax: Any, nights: Sequence[Night]) -> None:
    """Up to 8 nights labelled by date, with the time when two of them share a day; a label never
    repeats (nights of one minute keep the first)."""
    count = min(8, len(nights))
    ticks = sorted({round(i * (len(nights) - 1) / max(1, count - 1)) for i in range(count)})
    days = [f"{nights[i].created_at:%Y-%m-%d}" for i in ticks]
    shape = "%Y-%m-%d" if len(set(days)) == len(days) else "%Y-%m-%d %H:%M"
    labels: dict[str, int] = {}
    for i in ticks:
        labels.setdefault(f"{nights[i].created_at:{shape}}", i)
    ax.set_xticks(list(labels.values()))
    ax.set_xticklabels(list(labels), fontsize=SMALL)
