"""The false-alarm budget rule (`constraint: {budget: ...}`): the rule itself, its place in the gate
language and the key, and end to end through evaluate and backtest."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import flat, run_cli

from gatecfg import standardise
from gatecfg.budget import (
    ALL_SHARE,
    CAP_Z,
    CLIP_Z,
    CORRELATED_SHARES,
    MIN_NIGHTS,
    Null,
    _block_correlation,
    _blocks,
    _effective_tests,
    _gaussian_statistics,
    _joint_scale,
    _spiked_quantile,
    _statistics,
    decide,
)
from gatecfg.correlated import (
    JUMP_CLIP,
    TREND_DF_MAX,
    edges_score,
    neighbour_correlation,
    trend,
    trend_spread,
    whiten,
)
from gatecfg.distributions import chi_upper, t_quantile
from gatecfg.escape import markdown_text
from gatecfg.keys import constraint_key
from gatecfg.models import Constraint
from gatecfg.resolve import load_tree
from gatecfg.select import Selection
from gatecfg.verdicts import evaluate
from gatecfg.windows import Baselines, Window

TEST = "tests/e2e/test_budget_ci.py"
STEPS = 20
NIGHTS = 24
BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {budget: up}
policy:
  window: 20
  false_alarm: 0.01
"""


def clean_nights(nights: int, steps: int, seed: int) -> np.ndarray:
    """Grad-norm-like nights: a curve, a shift shared by each night and per-step noise (lognormal)."""
    rng = np.random.default_rng(seed)
    curve = 0.5 + 0.5 * np.exp(-5.0 * np.linspace(0.0, 1.0, steps))
    shared = 0.05 * rng.standard_normal((nights, 1))
    return curve * np.exp(shared + 0.15 * rng.standard_normal((nights, steps)))


# ---------------------------------------------------------------------------------------------- rule


@pytest.mark.parametrize("steps", [1, 20, 100], ids=["one-step", "20-steps", "100-steps"])
def test_clean_nights_fail_about_as_often_as_the_budget_allows(steps: int) -> None:
    nights = clean_nights(400 + 20, steps, seed=steps)
    fired = sum(
        decide(nights[i], nights[i - 20 : i][::-1].T.copy(), direction="up", alpha=0.01).fired
        for i in range(20, len(nights))
    )
    # 400 nights at 1%: 4 expected; 12 or more would happen by chance less than once in 2,000 runs.
    assert fired < 12


@pytest.mark.parametrize("steps", [20, 100], ids=["20-steps", "100-steps"])
def test_a_three_sigma_shift_of_every_step_fails_the_night(steps: int) -> None:
    nights = clean_nights(21 + 50, steps, seed=7)
    sigma = clean_nights(4000, steps, seed=8).std(axis=0)
    caught = sum(
        decide(nights[i] + 3 * sigma, nights[i - 20 : i][::-1].T.copy(), direction="up", alpha=0.01).fired
        for i in range(21, len(nights))
    )
    assert caught == 50


def ar1_nights(nights: int, steps: int, seed: int, rho: float = 0.9) -> np.ndarray:
    """Noise correlated across neighbouring steps: AR(1) with unit marginal variance around a curve."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((nights, steps))
    for s in range(1, steps):
        noise[:, s] = rho * noise[:, s - 1] + np.sqrt(1 - rho * rho) * noise[:, s]
    return np.linspace(2.0, 1.0, steps) + 0.1 * noise


def block_statistics(history: np.ndarray) -> np.ndarray:
    """The block statistics of every past night of a window (steps x nights), as the rule computes them."""
    z = (history - history.mean(axis=1, keepdims=True)) / history.std(axis=1, keepdims=True)
    starts, width = _blocks(history.shape[0])
    return _statistics(z, starts, width)[1:]


def test_correlated_blocks_count_as_fewer_tests_than_independent_ones() -> None:
    independent = block_statistics(np.random.default_rng(0).standard_normal((100, 20)))
    correlated = block_statistics(ar1_nights(20, 100, seed=1).T)
    blocks = len(independent)
    repeated = np.tile(independent[:1], (blocks, 1))  # one statistic, many times

    assert _effective_tests(_block_correlation(repeated)) == 1.0
    # Half-overlapping blocks of independent steps are worth nearly as many tests as there are blocks;
    # with rho 0.9 between neighbouring steps a block is strongly tied to the next ones.
    assert _effective_tests(_block_correlation(independent)) > 0.8 * blocks
    assert _effective_tests(_block_correlation(correlated)) < 0.7 * blocks


@pytest.mark.parametrize("steps", [20, 100], ids=["20-steps", "100-steps"])
def test_clean_correlated_nights_stay_within_budget_and_a_block_shift_is_seen(steps: int) -> None:
    nights = ar1_nights(400 + 20, steps, seed=steps)
    width = max(1, round(0.1 * steps))
    fired = caught = 0
    for i in range(20, len(nights)):
        window = nights[i - 20 : i][::-1].T.copy()
        fired += decide(nights[i], window, direction="up", alpha=0.01).fired
        shifted = nights[i].copy()
        shifted[steps // 2 : steps // 2 + width] += 0.5  # 5 sigma over a 10% block
        caught += decide(shifted, window, direction="up", alpha=0.01).fired
    assert fired < 12  # 4 expected at 1%; 12 or more: less than once in 2,000 runs
    assert caught > 0.5 * 400


def test_a_regression_confined_to_a_block_fails_that_block_and_names_it() -> None:
    nights = clean_nights(21, 100, seed=3)
    sigma = clean_nights(4000, 100, seed=4).std(axis=0)
    tonight = nights[20].copy()
    tonight[40:50] += 4 * sigma[40:50]

    decision = decide(tonight, nights[:20][::-1].T.copy(), direction="up", alpha=0.01)

    assert decision.fired
    assert (decision.first, decision.last) == (40, 49)
    assert set(np.flatnonzero(decision.failing).tolist()) <= set(range(40, 50))  # no step outside it
    assert decision.failing.sum() >= 5  # 4 sigma: most of the block's steps moved beyond their noise
    assert decision.distance > decision.threshold


def test_one_step_spiking_tenfold_does_not_fail_a_many_step_gate() -> None:
    nights = clean_nights(21, 100, seed=5)
    tonight = nights[20].copy()
    tonight[63] *= 10

    assert not decide(tonight, nights[:20][::-1].T.copy(), direction="up", alpha=0.01).fired


def test_a_two_step_block_keeps_its_signal_and_a_spike_adds_at_most_the_cap() -> None:
    starts, width = _blocks(20)
    assert width == 2
    block = np.zeros((20, 1))
    block[6:8, 0] = (3.0, 2.5)  # two shifted steps
    spike = np.zeros((20, 1))
    spike[6, 0] = CLIP_Z  # one step at the clip, its neighbour clean

    # The pair's mean with its larger step capped at the smaller plus CAP_Z: 2.75 here (dropping the
    # larger step, as before, kept 2.5 of it); the spike moves its blocks by at most CAP_Z / 2.
    assert _statistics(block, starts, width)[1:].max() == pytest.approx(2.75)
    assert _statistics(spike, starts, width)[1:].max() == pytest.approx(CAP_Z / 2)


def test_with_trials_a_block_keeps_every_step() -> None:
    starts, width = _blocks(20)
    block = np.zeros((20, 1))
    block[6:8, 0] = (3.0, 1.5)

    # Binomial noise has no heavy tail to guard against: the pair's plain mean, not the capped one.
    assert _statistics(block, starts, width)[1:].max() == pytest.approx((1.5 + 1.5 + CAP_Z) / 2)
    assert _statistics(block, starts, width, spikes=False)[1:].max() == pytest.approx(2.25)


def test_a_two_step_drop_of_a_mean_of_coins_is_caught_more_often_than_not() -> None:
    # The reward: a mean of 16 fair coins per step, 20 steps; 3 sigma down over two steps anywhere.
    rng = np.random.default_rng(16)
    nights = rng.binomial(16, 0.5, (200 + 20, 20)) / 16.0
    caught = fired = 0
    for i in range(20, len(nights)):
        window = nights[i - 20 : i][::-1].T.copy()
        shifted = nights[i].copy()
        start = int(rng.integers(0, 19))
        shifted[start : start + 2] -= 3 * 0.5 / np.sqrt(16)
        caught += decide(shifted, window, direction="down", alpha=0.01, trials=16).fired
        fired += decide(nights[i], window, direction="down", alpha=0.01, trials=16).fired

    assert caught > 140  # 158 of these 200 nights; 118 when the pair's larger step was capped
    assert fired < 6  # 2 expected at 1%


def coin_nights(nights: int, steps: int, seed: int, spread: float = 0.0) -> np.ndarray:
    """Means of 16 coins per step, p = 0.5 moved by a shift shared by each night (sd `spread`)."""
    rng = np.random.default_rng(seed)
    p = np.clip(0.5 + spread * rng.standard_normal((nights, 1)), 0.0, 1.0)
    return rng.binomial(16, np.broadcast_to(p, (nights, steps))) / 16.0


def test_with_trials_a_two_step_drop_is_caught_four_nights_in_five() -> None:
    # The known binomial spread with the normal quantile spends the budget the t quantile on 19 nights'
    # spread left unspent: 301 of these 400 nights before (75%), 325 with it.
    rng = np.random.default_rng(16)
    nights = coin_nights(400 + 20, 20, seed=16)
    caught = 0
    for i in range(20, len(nights)):
        shifted = nights[i].copy()
        start = int(rng.integers(0, 19))
        shifted[start : start + 2] -= 3 * 0.5 / np.sqrt(16)
        window = nights[i - 20 : i][::-1].T.copy()
        caught += decide(shifted, window, direction="down", alpha=0.01, trials=16).fired

    assert caught >= 320


@pytest.mark.parametrize(
    ("steps", "spread"), [(20, 0.0), (100, 0.0), (20, 0.04)], ids=["20-steps", "100-steps", "overdispersed"]
)
def test_with_trials_clean_nights_stay_within_budget(steps: int, spread: float) -> None:
    # Independent windows. With a shift of p shared by each night the measured spread exceeds the
    # binomial one beyond chance and takes over (the known spread alone fails 46 of the 600 overdispersed
    # nights; the old rule, measured spreads only, 9).
    nights = coin_nights(600 * 21, steps, seed=steps + int(100 * spread), spread=spread).reshape(
        600, 21, steps
    )
    fired = sum(
        decide(night[20], night[:20][::-1].T.copy(), direction="down", alpha=0.01, trials=16).fired
        for night in nights
    )

    assert fired < 14  # 6 expected at 1%; 14 or more: about once in 500 runs


@pytest.mark.parametrize("df", [4, 19, 76, 399])
@pytest.mark.parametrize("level", [0.05, 0.01])
def test_the_chi_upper_point_agrees_with_scipy(df: int, level: float) -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy (gatecfg[analytics]) is the reference")
    expected = float(np.sqrt(stats.chi2.ppf(1.0 - level, df) / df))
    assert chi_upper(df, level) == pytest.approx(expected, rel=5e-3)


def test_neighbour_correlation_is_measured_from_the_window() -> None:
    independent = np.random.default_rng(0).standard_normal((100, 20))
    correlated = (ar1_nights(20, 100, seed=1).T - np.linspace(2.0, 1.0, 100)[:, None]) / 0.1

    assert neighbour_correlation(independent) < 0.1
    assert 0.8 < neighbour_correlation(correlated) < 0.95


def test_the_edge_score_is_a_normal_score_on_independent_jumps() -> None:
    # Steps standardised by scales from 20 nights: Student t jumps with 19 degrees of freedom.
    score = edges_score(np.random.default_rng(2).standard_t(19, (100, 4000)), 0.0, 19)[0]

    assert abs(score.mean()) < 0.1
    assert abs(score.std() - 1.0) < 0.1
    assert 0.005 < (score > 2.326).mean() < 0.02  # 1% above the normal's 99th percentile


def test_under_correlated_noise_a_block_is_found_by_its_edges_and_a_spike_is_not() -> None:
    nights = ar1_nights(21, 100, seed=9)
    window = nights[:20][::-1].T.copy()
    shifted = nights[20].copy()
    shifted[33:41] += 0.3  # 3 sigma over 8 steps: neither the run's 10% nor aligned with its blocks
    spiked = nights[20].copy()
    spiked[57] += 1.0  # 10 sigma on one step

    found = decide(shifted, window, direction="up", alpha=0.01)

    assert found.fired
    assert found.kind == "edges"
    assert (found.first, found.last) == (33, 40)
    # Only steps of the block that moved beyond their own noise fail: none outside it.
    assert set(np.flatnonzero(found.failing).tolist()) <= set(range(33, 41))
    assert found.failing.any()
    assert not decide(spiked, window, direction="up", alpha=0.01).fired


def test_the_trend_is_about_a_unit_normal_on_clean_correlated_steps() -> None:
    z = (ar1_nights(4000, 100, seed=3).T - np.linspace(2.0, 1.0, 100)[:, None]) / 0.1
    scores = trend(z, 0.9)

    assert abs(scores.mean()) < 0.1
    assert abs(scores.std() - 1.0) < 0.1  # the clipped jumps take a little of the spread
    assert (scores > 2.326).mean() < 0.015


def test_a_drift_along_correlated_steps_is_caught_by_the_trend() -> None:
    nights = ar1_nights(200 + 20, 100, seed=140)
    drift = 0.3 * np.linspace(0.0, 1.0, 100)  # 0 at the first step, 3 sigma at the last
    kinds = [
        decide(nights[i] + drift, nights[i - 20 : i][::-1].T.copy(), direction="up", alpha=0.01)
        for i in range(20, len(nights))
    ]

    # Before the trend the rule caught 122 of these 200 nights (the mean over all steps); with it 151, with
    # its spread pooled over steps and nights 171.
    assert sum(d.fired for d in kinds) > 160
    assert sum(d.fired and d.kind == "trend" for d in kinds) > 60


def test_a_shift_of_every_correlated_step_gets_the_larger_share() -> None:
    # Twenty steps at rho 0.9 are worth about two independent values: the mean over all of them carries
    # most of what the run says, and gets half the budget (a quarter before: 257 of these 400 nights).
    nights = ar1_nights(400 + 20, 20, seed=20)
    caught = sum(
        decide(nights[i] + 0.3, nights[i - 20 : i][::-1].T.copy(), direction="up", alpha=0.01).fired
        for i in range(20, len(nights))
    )

    assert caught > 270


def test_the_joint_null_gives_back_what_the_split_wastes_on_alike_statistics() -> None:
    # Twenty AR steps at rho 0.9: the mean, the blocks and the trend are strongly alike, so a Bonferroni
    # split over them fails far fewer clean nights than the budget allows (the edges' sixth stays split).
    correlated = _joint_scale(20, 0.9, edges=True, shares=CORRELATED_SHARES, directions=1, alpha=0.01)
    # 19 half-overlapping blocks of 100 independent steps: Bonferroni is nearly exact.
    independent = _joint_scale(
        1000,
        0.0,
        edges=False,
        shares=(ALL_SHARE, 1.0 - ALL_SHARE, 0.0, 0.0),
        directions=1,
        alpha=0.01,
    )

    assert correlated > 1.2
    assert 1.0 <= independent < 1.15


def test_a_drift_along_twenty_correlated_steps_is_caught_more_often_within_budget() -> None:
    # The split scaled up to the joint null: 114 of these 400 nights before, 126 with it; with the
    # trend's spread pooled over steps and nights (its quantile no longer that of 19 nights) 170.
    nights = ar1_nights(400 + 20, 20, seed=21)
    drift = 0.3 * np.linspace(0.0, 1.0, 20)  # 0 at the first step, 3 sigma at the last
    caught = fired = 0
    for i in range(20, len(nights)):
        window = nights[i - 20 : i][::-1].T.copy()
        caught += decide(nights[i] + drift, window, direction="up", alpha=0.01).fired
        fired += decide(nights[i], window, direction="up", alpha=0.01).fired

    assert caught > 150
    assert fired < 12  # 4 expected at 1%; 12 or more: less than once in 2,000 runs


def test_the_trend_spread_sums_the_jumps_autocovariance_over_every_lag() -> None:
    rng = np.random.default_rng(8)
    for m, n, rho in ((3, 5, 0.5), (7, 20, 0.8), (40, 20, 0.95)):
        z = rng.standard_normal((m, n)) * 1.5
        ramp = whiten(np.linspace(0.0, 1.0, m)[:, None], rho)[:, 0]
        ramp /= np.linalg.norm(ramp)
        jumps = np.clip(whiten(z, rho), -JUMP_CLIP, JUMP_CLIP)
        d = jumps - jumps.mean(axis=1, keepdims=True)
        gamma = [np.mean(d[: m - k] * d[k:]) * n / (n - 1) for k in range(m)]
        variance = sum((2 if k else 1) * gamma[k] * (ramp[: m - k] @ ramp[k:]) for k in range(m))

        spread, df = trend_spread(z, rho)

        assert spread == pytest.approx(math.sqrt(variance), rel=1e-9)
        assert df == min(m * (n - 1), TREND_DF_MAX)


@pytest.mark.parametrize("shift", [0.0, 0.5], ids=["ar1", "ar1-plus-a-shift-per-night"])
def test_the_pooled_trend_spread_is_the_trends_own_spread(shift: float) -> None:
    # A shift shared by a night's steps correlates its jumps at every distance: pooled over the lags the
    # spread keeps it (the jumps' variance alone gives 0.95 where the trend spreads 1.25 at 100 steps).
    rng = np.random.default_rng(5)
    for steps in (20, 100):
        z = (ar1_nights(4000, steps, seed=steps).T - np.linspace(2.0, 1.0, steps)[:, None]) / 0.1
        z += shift * rng.standard_normal(4000)
        z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)

        assert trend_spread(z, 0.9)[0] == pytest.approx(trend(z, 0.9).std(ddof=1), rel=0.05)


def test_a_spike_on_the_last_correlated_step_barely_moves_the_trend() -> None:
    # The last step's jump up has no jump back to tell a spike from the start of a shift: clipped, it
    # moves the trend by at most JUMP_CLIP times the ramp's last weight. Unclipped, a 10 sigma spike
    # there failed 51 of these 200 nights. (The lone step is another matter: a step far beyond its own
    # scale is what it is there to catch, so only the statistics over several steps are counted.)
    nights = ar1_nights(200 + 20, 20, seed=60)
    spiked = nights.copy()
    spiked[:, -1] += 1.0  # 10 sigma
    fired = 0
    for i in range(20, len(nights)):
        null = Null.of(nights[i - 20 : i][::-1].T.copy(), direction="up", alpha=0.01, trials=None)
        [(_, side)] = null.sides
        night = null.statistics(null.standardise(spiked[i]), side)
        fired += bool((night.severity[:-1] > 1.0).any())  # all but the lone step, which comes last
    ramp = whiten(np.linspace(0.0, 1.0, 20)[:, None], 0.9)[:, 0]
    z = np.zeros((20, 1))
    z[-1] = CLIP_Z

    assert trend(z, 0.9)[0] == pytest.approx(JUMP_CLIP * ramp[-1] / np.linalg.norm(ramp))
    assert trend(z, 0.9)[0] < 0.7
    assert fired <= 4  # 2 expected at 1%


def test_the_harmless_direction_never_fails() -> None:
    nights = clean_nights(21, 20, seed=6)

    assert not decide(nights[20] * 0.2, nights[:20][::-1].T.copy(), direction="up", alpha=0.01).fired
    assert decide(nights[20] * 0.2, nights[:20][::-1].T.copy(), direction="both", alpha=0.01).fired


# ----------------------------------------------------------------------------------- gate language


def test_budget_is_identity_and_false_alarm_is_not() -> None:
    assert constraint_key(Constraint(budget="down")) == '{"budget":"down"}'


def test_budget_beside_band_keys_is_an_error_that_says_to_write_it_alone(tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "t.yaml").write_text(
        f"test: {TEST}\ngates:\n  train/grad_norm:\n    constraint: {{budget: up, rel_up: 0.5}}\n",
        encoding="utf-8",
    )

    result = run_cli("lint", gates)

    assert result.code == 2
    assert "gates.train/grad_norm.constraint: `budget` replaces the band: write it alone" in result.out


def test_tolerate_on_a_budget_gate_is_an_error_naming_both_sources(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    (gates / "t.yaml").write_text(
        f"test: {TEST}\ngates:\n  train/grad_norm:\n    tolerate: 2\n", encoding="utf-8"
    )

    result = run_cli("lint", gates)

    assert result.code == 2
    assert "t.yaml:4:15: error: gates.train/grad_norm.tolerate: `tolerate: 2`" in result.out
    assert "has no meaning for a budget rule (`constraint` from " in result.out
    assert "base.yaml:5), which judges the steps together" in result.out
    assert (
        "hint: a budget gate's failures per night are set by `false_alarm`; remove `tolerate`" in result.out
    )


def test_changing_false_alarm_keeps_the_coordinate(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    before = json.loads(run_cli("resolve", "--gates", gates, "--format", "json").out)
    (gates / "t.yaml").write_text(
        f"test: {TEST}\ngates:\n  train/grad_norm:\n    false_alarm: 0.001\n", encoding="utf-8"
    )
    after = json.loads(run_cli("resolve", "--gates", gates, "--format", "json").out)

    [old], [new] = before, after
    assert new["false_alarm"] == 0.001
    assert new["sources"]["false_alarm"].endswith("t.yaml:4")
    assert old["coordinate"] == new["coordinate"]


# -------------------------------------------------------------------------------------- end to end


def write_gates(root: Path, enforce: bool = True) -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    body = "    enforce: true\n" if enforce else "    enforce: false\n"
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n  train/grad_norm:\n{body}", encoding="utf-8")
    return gates


def record(path: Path, values: np.ndarray) -> Path:
    rows = [[step, float(v)] for step, v in enumerate(values)]
    path.write_text(json.dumps({"train/grad_norm": rows}) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str, np.ndarray]:
    """NIGHTS clean nightlies written through `evaluate --write` by a shadow gate (a clean night may be
    one of the 1% it fails), and the same gate enforced (`enforce` is not part of the key)."""
    gates = write_gates(tmp_path, enforce=False)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    nights = clean_nights(NIGHTS, STEPS, seed=11)
    for night, values in enumerate(nights):
        result = run_cli(
            "evaluate", "--gates", gates, "--test", TEST, "--record", record(tmp_path / "r.jsonl", values),
            "--db", db, "--write", "--run-id", f"night-{night:02d}", "--commit", f"c{night:02d}",
        )  # fmt: skip
        assert result.code == 0, result.out + result.err
    return write_gates(tmp_path, enforce=True), db, nights


def test_a_three_sigma_shift_fails_evaluate_with_a_one_line_reason(
    seeded: tuple[Path, str, np.ndarray], tmp_path: Path
) -> None:
    gates, db, nights = seeded
    sigma = nights.std(axis=0, ddof=1)
    shifted = record(tmp_path / "pr.jsonl", nights[-1] + 3 * sigma)
    args = ("evaluate", "--gates", gates, "--test", TEST, "--record", shifted, "--db", db)

    as_json = run_cli(*args, "--format", "json")
    text = run_cli(*args, "--format", "text")
    markdown = run_cli(*args, "--format", "markdown")
    github = run_cli(*args, "--format", "github")

    assert as_json.code == text.code == 1
    [gate] = json.loads(as_json.out)["gates"]
    why = gate["why"]
    assert gate["status"] == "fail"
    # The steps that moved beyond their own noise fail (attribution); the mean of all of them fired.
    assert re.match(rf"(all {STEPS} steps|steps? [\d, -]+) moved up( \(\d+ of {STEPS} steps\))?; ", why)
    assert re.search(
        rf"; fired: the mean over all {STEPS} steps \(\+\d+\.\d% on average\) went \d+\.\d\d spreads up, "
        r"beyond \d+\.\d\d that a clean night passes with probability 0\.01; worst step \d+: "
        r"\d\.\d+ vs usual \d\.\d+ ± 0\.\d+: \+\d+(\.\d)? spreads \(fails alone beyond \d\.\d+\); "
        r"budget rule, 20 past nights$",
        why,
    )
    # Wrapped to the terminal at spaces: the words are the same.
    assert flat(f"ENFORCED FAIL train/grad_norm ({gates}/t.yaml:3): {why}") in flat(text.out)
    assert f"): {markdown_text(why)}" in markdown.out
    assert "::error file=gates/t.yaml,line=3," in github.out.replace(str(tmp_path) + "/", "")
    assert why.replace("%", "%25") in github.out  # workflow commands escape %


def ar1_why(tmp_path: Path, shift: np.ndarray) -> str | None:
    """The why line evaluate gives a 100-step AR(1) night shifted by `shift`, against 20 past nights."""
    test = load_tree(write_gates(tmp_path)).test(TEST)
    nights = ar1_nights(21, 100, seed=9)
    steps = list(range(100))
    selection = Selection(steps, steps, (nights[20] + shift).tolist(), [None] * 100, [None] * 100)
    window = Window.from_runs(steps, nights[:20][::-1].copy())
    [result] = evaluate([(test.gates[0], "c", selection)], Baselines({"c": window}), test.policy)
    return result.why


def test_a_block_found_by_its_edges_says_where_it_rose_and_fell(tmp_path: Path) -> None:
    shift = np.zeros(100)
    shift[33:41] = 0.3

    why = ar1_why(tmp_path, shift)

    assert why is not None
    # Only steps of the block fail, and the statistic that fired is named with the steps it covers.
    assert re.match(
        r"steps? 3[3-9](-(3[4-9]|40))?(, 3[4-9](-(3[4-9]|40))?)* moved up \([1-8] of 100 steps\); ", why
    )
    assert re.search(
        r"; fired: the edges of the block steps 33-40 \(rising at step 33, falling back after step 40\) "
        r"\(\+\d+\.\d% on average\) went \d+\.\d\d \(a score\) up, beyond \d+\.\d\d that a clean night "
        r"passes with probability 0\.01; worst step (3[3-9]|40): ",
        why,
    )


def test_a_drift_found_by_the_trend_says_how_the_run_drifted(tmp_path: Path) -> None:
    why = ar1_why(tmp_path, 0.3 * np.linspace(0.0, 1.0, 100))

    assert why is not None
    assert re.match(r"(all 100 steps|steps? [\d, -]+) moved up \(", why)
    assert re.search(
        r"; fired: the trend over all 100 steps \(a drift up along the run\) \(\+\d+\.\d% on average\) went "
        r"\d+\.\d\d \(a score\) up, "
        r"beyond \d+\.\d\d that a clean night passes with probability 0\.01; worst step \d+: ",
        why,
    )


def test_a_clean_night_passes_evaluate(seeded: tuple[Path, str, np.ndarray], tmp_path: Path) -> None:
    gates, db, _ = seeded
    tonight = record(tmp_path / "pr.jsonl", clean_nights(1, STEPS, seed=99)[0])

    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tonight, "--db", db,
                     "--format", "json")  # fmt: skip

    assert result.code == 0, result.out
    [gate] = json.loads(result.out)["gates"]
    assert (gate["status"], gate["why"]) == ("pass", None)


def test_fewer_nights_than_the_rule_needs_are_cold(tmp_path: Path) -> None:
    gates = write_gates(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    nights = clean_nights(MIN_NIGHTS, STEPS, seed=1)
    args = ("evaluate", "--gates", gates, "--test", TEST, "--db", db)
    for night, values in enumerate(nights[:-1]):
        run_cli(*args, "--record", record(tmp_path / "r.jsonl", values), "--write", "--run-id", f"n{night}")

    result = run_cli(*args, "--record", record(tmp_path / "r.jsonl", nights[-1] * 10), "--format", "json")

    verdict = json.loads(result.out)["verdicts"][0]
    assert verdict["status"] == "cold"
    assert f"{MIN_NIGHTS - 1} of {MIN_NIGHTS} (budget)" in verdict["reason"]


def test_backtest_of_clean_history_stays_under_budget_and_sees_an_injected_shift(
    seeded: tuple[Path, str, np.ndarray],
) -> None:
    gates, db, _ = seeded

    result = run_cli("backtest", "--gates", gates, "--db", db, "--inject", "3sigma", "--format", "json")

    assert result.code == 0, result.err
    [row] = [r for r in json.loads(result.out)["gates"] if r["step"] is None]
    assert row["judged"] == NIGHTS - MIN_NIGHTS
    # 1% of 19 clean nights: one failure happens (17%), two would be a 1-in-60 draw.
    assert row["failures"] <= 1
    assert row["estimate"]["method"] == "budget"
    assert row["estimate"]["probability"] == 0.01
    injected = row["injected"]
    assert (injected["shift"], injected["judged"]) == ("3sigma", NIGHTS - MIN_NIGHTS)
    assert injected["detection_rate"] >= 0.9


def test_backtest_text_shows_detection_beside_false_alarms(seeded: tuple[Path, str, np.ndarray]) -> None:
    gates, db, _ = seeded

    result = run_cli("backtest", "--gates", gates, "--db", db, "--inject=-10%")

    assert result.code == 0, result.err
    assert "each night judged again with -10% injected" in result.out
    assert "detects -10%" in result.out


@pytest.mark.parametrize("shift", ["2", "sigma", "2 sigmas", "ten%"], ids=str)
def test_a_shift_that_does_not_parse_is_a_usage_error(shift: str, tmp_path: Path) -> None:
    result = run_cli("backtest", "--db", f"sqlite:///{tmp_path / 'h.db'}", f"--inject={shift}")

    assert result.code == 2
    assert (
        f"argument --inject: `{shift}` is not a shift: write e.g. `2sigma`, `-3sigma` or `10%`" in result.err
    )


def test_lint_max_false_alarm_reads_a_budget_gate_as_its_budget(seeded: tuple[Path, str, np.ndarray]) -> None:
    gates, db, _ = seeded

    quiet = run_cli("lint", gates, "--db", db, "--max-false-alarm", "0.02")
    loud = run_cli("lint", gates, "--db", db, "--max-false-alarm", "0.005")

    assert (quiet.code, loud.code) == (0, 0)
    assert "warning" not in quiet.out
    assert "estimated false-alarm rate 1.0% (budget, 20 steps, 20 nightly values)" in loud.out
    # The hint names the keys a budget gate takes (lint refuses band keys and `tolerate` there).
    assert "write `false_alarm: 0.005` on the gate" in loud.out
    assert "sigma_down" not in loud.out
    assert "tolerate" not in loud.out


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 19, 20, 76, 399, 4000])
@pytest.mark.parametrize("upper", [0.5, 0.3, 0.05, 0.01, 1e-3, 1e-5, 2.5e-7, 0.9])
def test_the_t_quantile_agrees_with_scipy(df: int, upper: float) -> None:
    special = pytest.importorskip("scipy.special", reason="scipy (gatecfg[analytics]) is the reference")
    expected = float(special.stdtrit(df, 1.0 - upper))
    assert t_quantile(upper, df) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_a_why_line_at_the_clip_says_at_least(seeded: tuple[Path, str, np.ndarray], tmp_path: Path) -> None:
    gates, db, nights = seeded
    sigma = nights.std(axis=0, ddof=1)
    far = record(tmp_path / "pr.jsonl", nights[-1] + 40 * sigma)  # every step far beyond the +-5 clip
    result = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", far, "--db", db, "--format", "json"
    )
    [gate] = json.loads(result.out)["gates"]
    assert result.code == 1
    assert re.search(
        rf"fired: the mean over all {STEPS} steps \(\+\d+\.\d% on average\) went at least 5\.00 spreads up",
        gate["why"],
    )


@pytest.mark.parametrize(
    ("m", "rho", "spikes", "with_trend"),
    [(40, 0.5, False, False), (20, 0.9, True, True), (100, 0.9, True, True), (200, 0.0, False, False)],
)
def test_the_drawn_joint_null_is_that_of_simulated_steps(
    m: int, rho: float, spikes: bool, with_trend: bool
) -> None:
    # `_joint_scale` draws the statistics from the normal law of their weights on the steps; the rule
    # computes them from steps, the block means spike-guarded (without `trials`) and the trend's jumps
    # clipped. Simulated steps must give the statistics the correlations that law gives them: a wrong
    # rho or wrong weights miss by 0.15-0.25 (neighbouring blocks of 4 at rho 0.5: 0.67, at rho 0: 0.5).
    starts, width = _blocks(m)
    drawn = np.corrcoef(_gaussian_statistics(m, rho, starts, width, trend=with_trend))
    rng = np.random.default_rng(5)
    z = rng.standard_normal((m, 20000))
    for i in range(1, m):
        z[i] = rho * z[i - 1] + math.sqrt(1.0 - rho * rho) * z[i]
    stats = _statistics(z, starts, width, spikes=spikes)
    if with_trend:
        stats = np.vstack([stats, trend(z, rho)])

    assert np.abs(drawn - np.corrcoef(stats)).max() < 0.06


def test_the_joint_scale_moves_smoothly_with_rho() -> None:
    # One rho bucket to the next changes the statistics' correlation a little, so the scale may only
    # move a little: a rate counted from the draws with any failure rested on a hundred-odd tail draws
    # and jumped by 0.1-0.3 between neighbouring buckets (100 steps: 1.18, 1.29, 1.32, 1.24, 1.14).
    scales = [
        _joint_scale(
            100,
            bucket * 0.05,
            edges=False,
            shares=(ALL_SHARE, 1.0 - ALL_SHARE, 0.0, 0.0),
            directions=1,
            alpha=0.01,
        )
        for bucket in range(9)
    ]

    assert max(abs(b - a) for a, b in itertools.pairwise(scales)) <= 0.03
    assert scales[-1] >= scales[0]


@pytest.mark.parametrize("nights", [5, 6, 20, 21, 60])
@pytest.mark.parametrize("kind", ["gaussian", "ties", "constant-but-two", "heavy"])
def test_leave_one_out_scales_are_those_of_the_other_nights_gathered(nights: int, kind: str) -> None:
    # standardise.leave_one_out sorts each step once instead of taking medians over every night's others
    # (m x n x n - 1): the same medians to the bit, the same clipped spreads to rounding.
    rng = np.random.default_rng([nights, len(kind)])
    shape = (7, nights)
    history = {
        "gaussian": rng.standard_normal(shape),
        "ties": np.round(rng.standard_normal(shape), 1),
        "constant-but-two": np.where(rng.random(shape) < 0.8, 1.5e9, 1.5e9 + rng.integers(0, 3, shape) * 1e6),
        "heavy": rng.standard_t(2, shape) * 1e4,
    }[kind]
    others = np.array([[k for k in range(nights) if k != j] for j in range(nights)])

    loc, scale = standardise.leave_one_out(history, 0.0)
    gathered_loc, gathered_scale = standardise.location_scale(history[:, others], 0.0)

    assert np.array_equal(loc, gathered_loc)
    np.testing.assert_allclose(scale, gathered_scale, rtol=1e-12)


def test_leave_one_out_in_chunks_of_rows_gives_the_same_scales(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clipped nights are held rows x n x n at a time (LOO_CHUNK values): 10,000 steps at 60 nights
    # would hold 288 MB at once.
    history = np.random.default_rng(3).standard_t(3, (11, 20))
    whole = standardise.leave_one_out(history, 0.0)
    monkeypatch.setattr(standardise, "LOO_CHUNK", 3 * 20 * 20)

    chunked = standardise.leave_one_out(history, 0.0)

    assert np.array_equal(whole[0], chunked[0])
    assert np.array_equal(whole[1], chunked[1])


def test_a_spiked_blocks_quantile_is_that_of_the_mixture_drawn() -> None:
    # A block of two holding a spike is its other step (a unit normal) plus CAP_Z / 2; the rest are the
    # block's clean t. The returned distance is exceeded by draws of that mixture at the level asked.
    rng = np.random.default_rng(11)
    draws, spiked, spread, df, upper = 2_000_000, 0.02, 0.75, 200, 1e-3
    clean = rng.standard_t(df, draws) * spread
    lifted = rng.standard_normal(draws) + CAP_Z / 2.0
    mixture = np.where(rng.random(draws) < spiked, lifted, clean)

    q = _spiked_quantile(upper, df, spread, 0.0, spiked)

    assert float(np.mean(mixture > q)) == pytest.approx(upper, rel=0.1)
    assert q > t_quantile(upper, df) * spread  # the spikes' tail lifts it


def test_two_step_blocks_are_priced_for_spikes_only_where_the_window_shows_them() -> None:
    # The gradient norm of the benchmark's spiky family at 20 steps (blocks of two) against 60 nights:
    # its two-step blocks failed 0.051% of clean nights for a share of 0.0375% (1.27% of nights for the
    # gate) before the spikes' tail was priced; a window without a spike keeps its plain quantile.
    rng = np.random.default_rng(12)
    quiet = np.exp(0.15 * rng.standard_normal((20, 60)))
    spiky = quiet.copy()
    spiky[rng.integers(0, 20, 6), rng.integers(0, 60, 6)] *= 8.0

    def block_thresholds(window: np.ndarray) -> np.ndarray:
        [(_, side)] = Null.of(window, direction="up", alpha=0.01, trials=None).sides
        return side.thresholds[1:] - side.centres[1:]

    plain = block_thresholds(quiet)
    priced = block_thresholds(spiky)

    assert np.allclose(plain, plain[0])  # one pooled spread and level for every block
    assert priced.min() > plain.max()
