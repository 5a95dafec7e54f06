"""One chart per gate: the nightly values, the band each was judged against, limits, regimes, trust;
and for a gate over many steps, the latest run's curve over its steps on each step's band.

matplotlib with the Agg backend (no display needed on a CI runner), rendered to inline SVG or to PNG.
The SVG keeps its text as text and carries no timestamp, and its internal ids are salted with the
coordinate, so several charts inline in one page never share an id and a report rebuilt from the same
history is byte for byte the same.
"""

from __future__ import annotations

import io
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gatecfg.analysis.regimes import Regimes
from gatecfg.analysis.series import Night
from gatecfg.escape import mathtext_label

Kind = Literal["svg", "png"]
# The largest magnitude on an axis: matplotlib's tick arithmetic overflows much beyond it.
PLOTTABLE = sys.float_info.max / 64
WIDTH_IN, HEIGHT_IN, DPI = 9.0, 3.4, 100
SHORT_SHA = 7
PROLOG = re.compile(r"\A.*?(?=<svg)", re.DOTALL)
COLORS = {
    "value": "#1f4e79",
    "fail": "#c0392b",
    "untrusted_by_hand": "#7f7f7f",
    "ref": "#2e7d32",
    "band": "#a5d6a7",
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
    """The latest run of a gate over all its steps: each step's value, the band it was judged against
    (a budget gate's: its usual value and the edges at which it fails alone), and whether it failed."""

    title: str
    salt: str
    steps: Sequence[int]
    values: Sequence[float]
    refs: Sequence[float | None]
    los: Sequence[float | None]
    his: Sequence[float | None]
    failing: Sequence[bool]


def render(chart: Chart | Curve, kind: Kind) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import pyplot as plt

    # Values near the float maximum overflow matplotlib's data-limit arithmetic, harmlessly.
    with (
        matplotlib.rc_context({"svg.hashsalt": chart.salt, "svg.fonttype": "none", "font.size": 8}),
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
    ax.set_title(mathtext_label(chart.title), loc="left", fontsize=9)
    if not nights:
        ax.text(0.5, 0.5, "no stored values", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    x = list(range(len(nights)))
    values = [n.value for n in nights]
    low, high = _y_range(nights, chart.limits)
    _shade_regimes(ax, chart, nights, high)
    lo = [low if n.lo is None else n.lo for n in nights]
    hi = [high if n.hi is None else n.hi for n in nights]
    judged = [n.ref is not None and (n.lo is not None or n.hi is not None) for n in nights]
    if any(judged):
        ax.fill_between(
            x,
            lo,
            hi,
            where=judged,
            step="mid",
            color=COLORS["band"],
            alpha=0.5,
            lw=0,
            label="band when judged",
        )
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
    if untrusted:
        ax.scatter(
            untrusted,
            [values[i] for i in untrusted],
            s=28,
            marker="x",
            color=COLORS["fail"],
            label="out of the baseline (failed)",
            zorder=4,
        )
    if by_hand:
        ax.scatter(
            by_hand,
            [values[i] for i in by_hand],
            s=28,
            marker="x",
            color=COLORS["untrusted_by_hand"],
            label="untrusted by hand",
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
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def _draw_curve(ax: Any, curve: Curve) -> None:
    ax.set_title(mathtext_label(curve.title), loc="left", fontsize=9)
    x = list(curve.steps)
    values = [math.nan if not math.isfinite(v) else v for v in curve.values]
    shown = [v for v in values if math.isfinite(v)]
    shown += [e for e in (*curve.los, *curve.his) if e is not None and math.isfinite(e)]
    if not shown:
        ax.text(0.5, 0.5, "no stored values", ha="center", va="center", transform=ax.transAxes)
        return
    low, high = _padded(min(shown), max(shown))
    judged = [r is not None for r in curve.refs]
    if any(judged):
        ax.fill_between(
            x,
            [low if e is None else e for e in curve.los],
            [high if e is None else e for e in curve.his],
            where=judged,
            color=COLORS["band"],
            alpha=0.5,
            lw=0,
            label="band of each step",
        )
        refs = [math.nan if r is None else r for r in curve.refs]
        ax.plot(x, refs, color=COLORS["ref"], lw=1, ls="--", label="reference (usual value)")
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
    ax.set_xlabel("step", fontsize=7)
    ax.grid(axis="y", lw=0.3, alpha=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def _y_range(nights: Sequence[Night], limits: Mapping[str, float]) -> tuple[float, float]:
    """Values, limits and finite band edges in view, with a margin; an open band side runs to the edge."""
    points = [n.value for n in nights] + list(limits.values())
    points += [e for n in nights for e in (n.lo, n.hi) if e is not None and math.isfinite(e)]
    return _padded(min(points), max(points))


def _padded(low: float, high: float) -> tuple[float, float]:
    """`low` to `high` with a margin, within the range matplotlib can place ticks in: values nearer the
    float maximum (a diverged run at 1.8e308) are drawn at the chart's edge."""
    margin = (high / 2 - low / 2) * 0.16 or abs(high) * 0.05 or 1.0
    low, high = (min(max(x, -PLOTTABLE), PLOTTABLE) for x in (low - margin, high + margin))
    if low == high:  # everything beyond the drawable range, on one side
        return (PLOTTABLE / 2, PLOTTABLE) if high > 0 else (-PLOTTABLE, -PLOTTABLE / 2)
    return low, high


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
            ax.text(start, top, f" {label}", fontsize=6, va="top", ha="left", color="#455a64", rotation=90)


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
    ax.set_xticklabels(list(labels), fontsize=7)
