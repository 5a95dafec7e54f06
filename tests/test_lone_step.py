"""The lone step (gatecfg/lone_step.py, the budget rule's `kind` "step"): one step that explodes fails on
its own, unclipped, at any number of steps and on noisy metrics, while spikes like the window's pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, run_cli
from test_budget import TEST, record, write_gates

from gatecfg.budget import Null, decide
from gatecfg.lone_step import STEP_FLOOR

QUIET = 0.02  # a quiet metric: 2% night-to-night noise


def quiet_window(steps: int, nights: int, seed: int, *, log: bool) -> np.ndarray:
    """steps x nights of a quiet metric around 1.0, newest first: Gaussian, or lognormal (a KL-like
    metric judged in logs)."""
    noise = np.random.default_rng(seed).standard_normal((steps, nights + 1))
    return np.exp(QUIET * noise) if log else 1.0 + QUIET * noise


@pytest.mark.parametrize("log", [False, True], ids=["gaussian", "lognormal"])
@pytest.mark.parametrize("factor", [10.0, 100.0, 1e6], ids=["x10", "x100", "x1e6"])
@pytest.mark.parametrize("steps", [20, 100, 1000], ids=["20-steps", "100-steps", "1000-steps"])
def test_one_step_that_explodes_fails_at_any_number_of_steps(steps: int, factor: float, log: bool) -> None:
    # Before the lone step, a x1e6 step at 20 steps moved a block by at most 5 / sqrt(2) scales and
    # passed: "within the false-alarm budget".
    nights = quiet_window(steps, 10, seed=steps, log=log)
    tonight, window = nights[:, 0].copy(), nights[:, 1:]
    tonight[steps // 3] *= factor

    decision = decide(tonight, window, direction="up", alpha=0.01)

    assert decision.fired
    assert decision.kind == "step"
    assert np.flatnonzero(decision.failing).tolist() == [steps // 3]  # that step, no other


def spiky_window(steps: int, nights: int, seed: int, spike: float) -> np.ndarray:
    """A gradient norm that spikes `spike` times its level on one step of every other night."""
    rng = np.random.default_rng(seed)
    values = np.exp(0.15 * rng.standard_normal((steps, nights)))
    for night in range(0, nights, 2):
        values[rng.integers(0, steps), night] *= spike
    return values


def test_a_spike_like_those_the_window_shows_passes_and_one_far_beyond_fails() -> None:
    window = spiky_window(100, 20, seed=3, spike=8.0)
    tonight = np.exp(0.15 * np.random.default_rng(4).standard_normal(100))
    like_them, far_beyond = tonight.copy(), tonight.copy()
    like_them[50] *= 8.0
    far_beyond[50] *= 1000.0

    assert not decide(like_them, window, direction="up", alpha=0.01).fired
    assert decide(far_beyond, window, direction="up", alpha=0.01).kind == "step"


def test_a_step_beyond_the_noise_but_no_explosion_is_left_to_the_statistics_over_several_steps() -> None:
    # Three scales on one step of a hundred is what clean nights do now and then: the lone step stays
    # silent below STEP_FLOOR scales (a positive metric below STEP_RATIO times its median).
    nights = quiet_window(100, 20, seed=5, log=False)
    tonight, window = nights[:, 0].copy(), nights[:, 1:]
    tonight[10] = 1.0 + 0.5 * STEP_FLOOR * QUIET

    null = Null.of(window, direction="up", alpha=0.01, trials=None)
    [(_, side)] = null.sides
    night = null.statistics(null.standardise(tonight), side)

    assert night.lone[10] < 1.0


def test_evaluate_fails_a_run_whose_one_step_exploded_and_names_that_step(tmp_path: Path) -> None:
    gates = write_gates(tmp_path, enforce=True)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    nights = quiet_window(20, 9, seed=12, log=True).T
    args = ("evaluate", "--gates", gates, "--test", TEST, "--db", db)
    for night, values in enumerate(nights[1:]):
        run_cli(*args, "--record", record(tmp_path / "r.jsonl", values), "--write", "--run-id", f"n{night}")
    tonight = nights[0].copy()
    tonight[7] *= 1e6

    result = run_cli(*args, "--record", record(tmp_path / "r.jsonl", tonight), "--format", "json")

    [gate] = json.loads(result.out)["gates"]
    failing = [v["step"] for v in json.loads(result.out)["verdicts"] if v["status"] == "fail"]
    assert result.code == 1
    assert failing == [7]
    assert gate["why"].startswith("step 7 moved up (1 of 20 steps); fired: step 7 exploded on its own (+")


@pytest.mark.parametrize("factor", [5.0, 100.0, 1e6], ids=["x5", "x100", "x1e6"])
def test_the_shipped_grad_norm_one_liner_fails_a_step_that_exploded(tmp_path: Path, factor: float) -> None:
    # Before: the shipped `train/grad_norm:` (budget both) passed a 5x, 100x or 1e6x step after eight
    # quiet nightlies, and so did the pytest plugin's enforced gate built on it.
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        (REPO / "gates" / "base.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    one_liner = "  train/grad_norm:\n    enforce: true\n"
    mfu = "  perf/actor_train_mfu:\n    steps: last\n    constraint: null\n"  # base.yaml's rule asks for it
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n{one_liner}{mfu}", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    nights = quiet_window(50, 8, seed=21, log=True).T
    args = ("evaluate", "--gates", gates, "--test", TEST, "--db", db)
    for night, values in enumerate(nights[1:]):
        run_cli(*args, "--record", record(tmp_path / "r.jsonl", values), "--write", "--run-id", f"n{night}")
    tonight = nights[0].copy()
    tonight[30] *= factor

    result = run_cli(*args, "--record", record(tmp_path / "r.jsonl", tonight), "--format", "json")

    assert result.code == 1, result.out
    assert [v["step"] for v in json.loads(result.out)["verdicts"] if v["status"] == "fail"] == [30]


def kl_like(rng: np.random.Generator, steps: int, nights: int) -> np.ndarray:
    """steps x nights of a KL-like metric: 50% per-step noise in logs and a 10% shift shared by a night
    (benchmarks/gate_quality.py's lognormal family)."""
    return np.exp(0.1 * rng.standard_normal((1, nights)) + 0.5 * rng.standard_normal((steps, nights)))


def grad_norm_like(rng: np.random.Generator, steps: int, nights: int) -> np.ndarray:
    """steps x nights of a gradient norm: 15% per-step noise in logs, 5% a night, 0.5% of the steps
    spiking 3-10x (the benchmark's spiky family)."""
    values = np.exp(0.05 * rng.standard_normal((1, nights)) + 0.15 * rng.standard_normal((steps, nights)))
    spikes = rng.random((steps, nights)) < 0.005
    return np.where(spikes, values * rng.uniform(3.0, 10.0, (steps, nights)), values)


@pytest.mark.parametrize("family", [kl_like, grad_norm_like], ids=["kl-like", "grad-norm-like"])
def test_a_hundredfold_step_fails_on_noisy_metrics_with_many_steps(family: object) -> None:
    # Before, the lone step had to clear 19 nights' t quantile at a millionth per step in each step's own
    # scale (8.5 scales: 4.3 in logs at 50% noise, where x100 is 4.6), and the largest past step in each
    # step's scales (a 10x spike on a step whose nights happened to look quiet counted as 20-odd): 12 of
    # 100 such steps on the KL-like metric and 13 on the gradient norm passed (gate_quality.py, 1,000
    # steps). Now the noise quantile uses the scale pooled over steps whose scales are alike, and a spike
    # in logs is a ratio, whatever the step's scale.
    assert callable(family)
    rng = np.random.default_rng(23)
    missed = []
    for trial in range(20):
        nights = family(rng, 1000, 21)
        tonight, window = nights[:, 0].copy(), nights[:, 1:]
        step = int(rng.integers(0, 1000))
        tonight[step] *= 100.0
        decision = decide(tonight, window, direction="up", alpha=0.01)
        if not decision.failing[step]:
            missed.append(trial)
    assert missed == []


def test_a_kl_like_metric_without_an_explosion_stays_within_its_budget() -> None:
    # The pooled noise quantile is narrower than each step's own: it must not spend more than the lone
    # step's share on clean nights of the same metric.
    rng = np.random.default_rng(29)
    fired = 0
    for _ in range(100):
        nights = kl_like(rng, 1000, 21)
        decision = decide(nights[:, 0], nights[:, 1:], direction="up", alpha=0.01)
        fired += decision.fired and decision.kind == "step"
    assert fired <= 1


def test_a_window_whose_nights_repeat_one_curve_is_judged_not_crashed() -> None:
    # Deterministic metrics repeat a curve exactly from version to version; with one version apart, the
    # tail fitted to the nights' largest steps had an index in the millions and its margin overflowed
    # (OverflowError out of `evaluate`, found on the Megatron-LM goldens).
    window = np.array([[1.0, 1.0, 1.0, 1.0, 1.1], [2.0, 2.0, 2.0, 2.0, 2.1]])

    assert not decide(np.array([1.0, 2.0]), window, direction="up", alpha=0.01).fired
    assert decide(np.array([1.0, 200.0]), window, direction="up", alpha=0.01).kind == "step"
