"""The tail a one-value budget gate's history has shown (gatecfg/tail.py): a single slow run of a size the
coordinate has had before passes, a shift of the level fails, and the limit is the rank statistic it
says it is."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gatecfg import tail
from gatecfg.budget import decide
from gatecfg.models import Constraint
from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.select import Selected
from gatecfg.verdicts import evaluate
from gatecfg.windows import Baselines, Window

WINDOW = 60


def _noise(rng: np.random.Generator, nights: int) -> np.ndarray:
    """A timing with heavy right tails: lognormal 2% noise, and one night in 20 slow by 10-16%."""
    values = 1.0 * np.exp(rng.normal(0.0, 0.02, nights))
    slow = rng.random(nights) < 1 / 20
    values[slow] *= rng.uniform(1.10, 1.16, int(slow.sum()))
    return values


def _quiet_window(rng: np.random.Generator, nights: int) -> np.ndarray:
    """A stretch (newest first) whose newest WINDOW nights hold no slow run, the older ones several."""
    values = _noise(rng, nights)
    values[:WINDOW] = np.exp(rng.normal(0.0, 0.02, WINDOW))
    return values


def test_limit_is_the_rank_statistic_of_the_past_scores() -> None:
    rng = np.random.default_rng(1)
    stretch = np.log(_noise(rng, 700))
    alpha = 0.02
    found = tail.limit(stretch, nights=WINDOW, sign=1.0, alpha=alpha, floor=0.0)
    past = len(stretch) - WINDOW
    scores = []
    for j in range(past):  # brute force: night j on the WINDOW nights before it
        before = stretch[j + 1 : j + 1 + WINDOW]
        median = float(np.median(before))
        scores.append((stretch[j] - median) / (float(np.median(np.abs(before - median))) * 1.4826))
    share = alpha / tail.SCORES
    alone = sorted(scores)[-math.floor(share * (past + 1))]
    means = [sum(scores[j : j + 3]) / 3 for j in range(past - 2)]
    level = sorted(means)[-math.floor(share * (len(means) + 1))]
    assert found == pytest.approx(min(alone, 3 * level - sum(scores[:2])))


def test_a_stretch_too_short_for_the_budget_prices_nothing() -> None:
    stretch = np.log(_noise(np.random.default_rng(2), WINDOW + 50))
    assert tail.limit(stretch, nights=WINDOW, sign=1.0, alpha=0.01, floor=0.0) is None


def test_a_slow_run_like_those_the_history_has_had_passes() -> None:
    """A 12% slow run on a 2% metric whose history holds such runs: the window alone (60 quiet nights)
    prices a normal spread and fails it; the stretch has shown it, and it passes."""
    rng = np.random.default_rng(3)
    failed_alone = passed_stretch = 0
    for _ in range(20):
        stretch = _quiet_window(rng, 1100)
        tonight = np.array([float(np.median(stretch[:WINDOW])) * 1.12])
        history = stretch[None, :WINDOW]
        failed_alone += decide(tonight, history, direction="up", alpha=0.01).fired
        passed_stretch += not decide(tonight, history, direction="up", alpha=0.01, stretch=stretch).fired
    assert failed_alone == 20
    assert passed_stretch >= 18


def test_a_shift_of_the_level_fails() -> None:
    """x1.25 on every night from tonight on, far beyond any slow run the stretch has shown, fails; and a
    smaller shift, x1.12, that no single night shows (slow runs go to 16%) is caught by the level once
    three nights show it."""
    rng = np.random.default_rng(4)
    stretch = _quiet_window(rng, 1100)
    tonight = np.array([float(np.median(stretch[:WINDOW])) * 1.25])
    assert decide(tonight, stretch[None, :WINDOW], direction="up", alpha=0.01, stretch=stretch).fired
    caught = 0
    for _ in range(20):
        stretch = _quiet_window(rng, 1100)
        stretch[:2] *= 1.12  # the two newest nights passed and joined: the level moved
        tonight = np.array([float(np.median(stretch[2:WINDOW])) * 1.12])
        caught += decide(tonight, stretch[None, :WINDOW], direction="up", alpha=0.01, stretch=stretch).fired
    assert caught >= 15


def test_clean_nights_of_heavy_tailed_noise_keep_the_promise() -> None:
    rng = np.random.default_rng(5)
    fired = 0
    nights = 600
    for _ in range(nights):
        stretch = _noise(rng, 1100)
        tonight = _noise(rng, 1)
        fired += decide(tonight, stretch[None, :WINDOW], direction="up", alpha=0.01, stretch=stretch).fired
    assert fired / nights <= 0.02  # 1% promised; 600 nights put 2% beyond chance (p < 0.01)


def _gate(steps: object = "last") -> ResolvedGate:
    return ResolvedGate(
        test="t.py",
        file="gates/t.yaml",
        line=3,
        metric="perf/seconds",
        steps=steps,  # type: ignore[arg-type]
        constraint=Constraint(budget="up"),
        limits=None,
        enforce=True,
        sources={},
    )


def _policy() -> Policy:
    return Policy(window=WINDOW, min_history=1, enforce=True, sources={})


def test_reach_reads_the_stretch_for_one_value_budget_gates_only() -> None:
    policy = _policy()
    assert tail.reach(_gate(), policy) == WINDOW + tail.LEVEL_NIGHTS + 1000
    assert tail.reach(_gate((0, 1)), policy) == WINDOW
    assert tail.reach(_gate((5,)), policy) > WINDOW


def test_evaluate_judges_the_level_on_the_window_and_the_tail_on_the_stretch() -> None:
    """A deep read keeps the window deciding the level (its n is the window's) and the stretch the tail."""
    rng = np.random.default_rng(6)
    stretch = _quiet_window(rng, 1100)
    window = Window.from_lists({-1: stretch.tolist()})
    assert window is not None
    gate = _gate()
    value = float(np.median(stretch[:WINDOW])) * 1.12
    chosen = [Selected(step=-1, logged_step=None, value=value, error=None, location=None)]
    judged = evaluate([(gate, "c", chosen)], Baselines({"c": window}), _policy())[0]
    assert judged.status == "pass"
    assert judged[0].band.n == WINDOW
    shallow = Window.from_lists({-1: stretch[:WINDOW].tolist()})
    assert shallow is not None
    assert evaluate([(gate, "c", chosen)], Baselines({"c": shallow}), _policy())[0].status == "fail"
