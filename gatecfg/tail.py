"""The tail a one-value budget gate's own history has shown: how far tonight must go, in the scales of its
window, before it is beyond what clean nights of the coordinate did (docs/calibration.md, "The tail the
metric has shown").

A gate of one value (`steps: last`, a one-step list) learns its noise from its nights alone, and a window
of 60 real CI timings prices a heavy right tail as a normal spread: quiet for weeks, then failing the
first slow run like those it had before. So such a gate reads further back than its window, over the
joining values since its last accepted shift (`reach`: the same rows on every path), and judges tonight
the way each of those nights would have been judged: by its distance from the median of the `window`
nights before it, over their MAD (a spread that slow runs barely move, so that a quiet window and one
holding two slow runs score alike, and an era of noisier runners scores on its own noise). Tonight and
those past nights are then exchangeable under a stable level, and tonight beats the k-th largest of P
past scores with probability k / (P + 1), whatever the noise's tail. The window still decides the level;
the stretch says how far from it a clean night goes.

Two scores share the budget: tonight alone (a slow run beyond those the stretch showed), and the mean of
tonight with the LEVEL_NIGHTS - 1 newest joining nights (a shift of the level, which a run of a few
nights shows before any single night stands out; spells of slow nights the stretch held are priced in).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from gatecfg import standardise
from gatecfg.windows import Window

if TYPE_CHECKING:
    from gatecfg.resolve import Policy, ResolvedGate

FloatArray = npt.NDArray[np.float64]

# Past scores beyond each threshold a full stretch holds at the gate's share: the k-th largest of P has
# its exceedance probability exactly, and the threshold's own scatter falls as 1 / sqrt(k).
RANKS = 5
# Nights whose mean is the level score: tonight and the two newest joining nights, the "within 3 runs"
# a sustained shift is to be caught in.
LEVEL_NIGHTS = 3
SCORES = 2  # tonight alone, and the level: each gets half of a side's budget


def one_value(gate: ResolvedGate) -> bool:
    """Whether the gate judges one value a night under the budget rule (the gates that read a stretch)."""
    single = gate.steps == "last" or (isinstance(gate.steps, tuple) and len(gate.steps) == 1)
    return single and gate.constraint is not None and gate.constraint.budget is not None


def reach(gate: ResolvedGate, policy: Policy) -> int:
    """How many of a coordinate's newest joining values per step a baseline read fetches for this gate:
    the window; for a one-value budget gate also the stretch that holds RANKS past scores beyond each
    threshold at its share (1,000 nights at `false_alarm: 0.01`, one side)."""
    if not one_value(gate):
        return policy.window
    sides = 2 if gate.constraint is not None and gate.constraint.budget == "both" else 1
    share = gate.false_alarm / sides / SCORES
    return policy.window + LEVEL_NIGHTS + math.ceil(RANKS / share)


def levelled(window: Window | None, gate: ResolvedGate, policy: Policy) -> Window | None:
    """The window a gate is judged on. A one-value budget gate's read reaches deeper (`reach`): its
    newest `policy.window` values, with the whole stretch kept beside them (`Window.stretch`). Every other
    gate's read is its window already, and is judged as read."""
    if window is None or not one_value(gate) or len(window.steps) != 1:
        return window
    if int(window.counts[0]) <= policy.window:
        return window
    trimmed = np.minimum(window.counts, policy.window)
    return Window(window.steps, window.values[:, : policy.window], trimmed, window.values)


def limit(stretch: FloatArray, *, nights: int, sign: float, alpha: float, floor: float) -> float | None:
    """Tonight's harmful score (`sign` times its distance from the median of the newest `nights` values
    of `stretch`, one value per night, newest first, in the space the gate judges in, over their robust
    spread, the MAD, never below `floor`) beyond which the gate fails, at `alpha` on this side; None when
    the stretch holds too few past nights.

    Past night j is scored on the `nights` nights before it, as tonight is; tonight fails when it beats
    the k1-th largest of those scores, or when its mean with the newest LEVEL_NIGHTS - 1 nights beats the
    k2-th largest of their running means (k = floor(alpha / SCORES x (past + 1)))."""
    past = len(stretch) - nights
    share = alpha / SCORES
    if past < LEVEL_NIGHTS or math.floor(share * (past - LEVEL_NIGHTS + 2)) < 1:
        return None
    trailing = sliding_window_view(stretch[1:], nights)[:past]  # row j: the nights before night j
    loc, mad = standardise.median_mad(trailing)
    scores = sign * (stretch[:past] - loc) / standardise.floored(loc, mad, floor)
    alone = _largest(scores, math.floor(share * (past + 1)))
    means = np.convolve(scores, np.ones(LEVEL_NIGHTS) / LEVEL_NIGHTS, mode="valid")
    level = _largest(means, math.floor(share * (len(means) + 1)))
    # Tonight's mean with the newest nights beats `level` where tonight alone beats this.
    return min(alone, LEVEL_NIGHTS * level - float(scores[: LEVEL_NIGHTS - 1].sum()))


def _largest(scores: FloatArray, k: int) -> float:
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])
