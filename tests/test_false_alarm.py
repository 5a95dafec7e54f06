"""False-alarm estimates: exact binomial arithmetic, detection, the smoothed empirical tail, many-step gates,
and `gatecfg lint --max-false-alarm` on a real store."""

from __future__ import annotations

import itertools
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import run_cli

from gatecfg.analysis.false_alarm import (
    Estimate,
    binomial_probability,
    combine,
    detect_trials,
    empirical_probability,
    passing_interval,
    step_estimate,
)
from gatecfg.band import band
from gatecfg.models import Constraint, Limits
from gatecfg.resolve import BUILTIN, Policy, ResolvedGate

POLICY = Policy(window=20, min_history=1, enforce=False, sources={})
REWARD_DEFAULT = Constraint(rel_down=0.2, abs_floor_down=0.05)
# The number: a 16-coin reward with ref 0.521875 has lo 0.4175 and fails on 6 heads or fewer.
P_AT_MOST_6_OF_16 = Fraction(sum(math.comb(16, k) for k in range(7)), 2**16)


def gate(
    constraint: Constraint | None = REWARD_DEFAULT,
    *,
    limits: Limits | None = None,
    trials: int | None = None,
    tolerate: int | float = 0,
) -> ResolvedGate:
    return ResolvedGate(
        test="t", file="gates/t.yaml", line=3, metric="rollout/raw_reward", steps="all",
        constraint=constraint, limits=limits, enforce=False, sources=dict.fromkeys(("steps",), BUILTIN),
        tolerate=tolerate, trials=trials,
    )  # fmt: skip


def test_the_16_coin_reward_with_the_default_band_fails_22_7_percent_of_nights() -> None:
    current = band(REWARD_DEFAULT, [0.521875])
    assert current.lo == 0.4175
    probability = binomial_probability(16, 0.5, (current.lo, math.inf))
    assert probability == pytest.approx(float(P_AT_MOST_6_OF_16), abs=1e-15)
    assert f"{probability:.1%}" == "22.7%"


def test_declared_trials_give_the_exact_estimate_from_the_nightly_mean() -> None:
    nightly = [k / 16 for k in (4, 12, 8, 8, 5, 11, 9, 7)]  # mean 0.5
    estimate = step_estimate(gate(trials=16), POLICY, band(REWARD_DEFAULT, [0.521875]), nightly)
    assert estimate is not None
    assert (estimate.method, estimate.trials, estimate.trials_source, estimate.p) == (
        "binomial", 16, "declared", 0.5)  # fmt: skip
    assert estimate.probability == pytest.approx(float(P_AT_MOST_6_OF_16), abs=1e-15)


def test_the_binomial_matches_brute_force_enumeration_of_coins() -> None:
    interval = (0.3, 0.75)
    outside = sum(1 for flips in itertools.product((0, 1), repeat=10) if not 0.3 <= sum(flips) / 10 <= 0.75)
    assert binomial_probability(10, 0.5, interval) == pytest.approx(outside / 2**10, abs=1e-15)


def coin_means(n: int, nights: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [sum(rng.random() < 0.5 for _ in range(n)) / n for _ in range(nights)]


@pytest.mark.parametrize("trials", [16, 25, 64], ids=["16", "25", "64"])
def test_trials_are_detected_from_coin_means(trials: int) -> None:
    values = coin_means(trials, 20, seed=trials)
    assert detect_trials(values) == trials


@pytest.mark.parametrize(
    "values",
    [
        [round(0.6 + 0.002 * i, 2) for i in range(20)],  # rounded continuous values: far too little spread
        [0.2] * 20,  # a constant
        [0.5, 1.5, 0.5, 0.5, 0.5],  # outside [0, 1]
        [0.5, 0.25, 0.75],  # too few values
        [0.123456789 * i % 1 for i in range(1, 21)],  # no grid at all
    ],
    ids=["rounded-continuous", "constant", "outside-unit", "too-few", "continuous"],
)
def test_values_that_are_not_binomial_means_are_not_detected(values: list[float]) -> None:
    assert detect_trials(values) is None


def test_empirical_estimate_follows_a_normal_tail_on_a_large_sample() -> None:
    rng = random.Random(7)
    values = [rng.gauss(10.0, 2.0) for _ in range(4000)]
    # Two-sigma band around the true mean: 4.55% outside.
    assert empirical_probability(values, (6.0, 14.0)) == pytest.approx(0.0455, abs=0.006)
    assert empirical_probability(values, (6.0, math.inf)) == pytest.approx(0.02275, abs=0.004)


def test_positive_skewed_values_get_their_long_upper_tail() -> None:
    rng = random.Random(9)
    values = [math.exp(rng.gauss(0.0, 0.3)) for _ in range(4000)]
    # P(X > e^0.6) is P(Z > 2) = 2.28% for a lognormal; a Gaussian on the raw values would say 0.7%.
    assert empirical_probability(values, (0.0, math.exp(0.6))) == pytest.approx(0.02275, abs=0.004)
    assert empirical_probability(values, (-1.0, math.inf)) == 0.0  # positive values never go below 0


def test_empirical_estimate_of_a_constant_is_all_or_nothing() -> None:
    assert empirical_probability([3.0] * 10, (2.0, 4.0)) == 0.0
    assert empirical_probability([3.0] * 10, (3.5, 4.0)) == 1.0


def test_continuous_metric_gets_an_empirical_estimate() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(0.0, 0.3) for _ in range(20)]
    constraint = Constraint(rel_up=0.5)
    estimate = step_estimate(gate(constraint), POLICY, band(constraint, values), values)
    assert estimate is not None
    assert estimate.method == "empirical"
    assert 0.0 < estimate.probability < 0.2


def test_no_estimate_without_enough_values_or_when_the_gate_cannot_fail() -> None:
    current = band(REWARD_DEFAULT, [0.5, 0.5])
    assert step_estimate(gate(), POLICY, current, [0.5, 0.5, 0.5, 0.5]) is None  # 4 < MIN_VALUES
    assert step_estimate(gate(None), POLICY, current, [0.5] * 20) is None  # tracked


def test_limits_count_even_where_the_band_is_cold() -> None:
    cold = band(REWARD_DEFAULT, [])
    limits = Limits(min=0.3)
    assert passing_interval(gate(limits=limits), cold, POLICY) == (0.3, math.inf)
    assert passing_interval(gate(), cold, POLICY) is None
    warm = band(REWARD_DEFAULT, [0.521875])
    assert passing_interval(gate(limits=limits), warm, POLICY) == (0.4175, math.inf)


def test_a_many_step_gate_fails_when_more_steps_fail_than_tolerated() -> None:
    probabilities = [0.1, 0.2, 0.05, 0.3]
    steps = [Estimate("empirical", p, values=20) for p in probabilities]
    for tolerate in (0, 1, 2, 0.5):
        allowed = 2 if tolerate == 0.5 else int(tolerate)
        brute = 0.0
        for failing in itertools.product((False, True), repeat=4):
            if sum(failing) > allowed:
                brute += math.prod(p if f else 1 - p for p, f in zip(probabilities, failing, strict=True))
        combined = combine(gate(tolerate=tolerate), steps)
        assert combined is not None
        assert combined.probability == pytest.approx(brute, abs=1e-15)
        assert combined.steps == 4


def test_a_constant_step_does_not_decide_the_method_of_a_many_step_gate() -> None:
    coin = Estimate("binomial", 0.227, values=20, trials=16, trials_source="detected", p=0.5)
    constant = Estimate("empirical", 0.0, values=20)
    combined = combine(gate(), [constant, coin])
    assert combined is not None
    assert (combined.method, combined.trials, combined.probability) == ("binomial", 16, 0.227)


# --- lint --max-false-alarm ------------------------------------------------------------------------------

TEST = "tests/e2e/test_reward_ci.py"


def coin_history(tmp_path: Path, db: str) -> Path:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        "version: 1\ndefaults:\n  rollout/raw_reward:\n    steps: last\n"
        "    constraint: {rel_down: 0.2, abs_floor_down: 0.05}\n",
        encoding="utf-8",
    )
    (gates / "reward.yaml").write_text(f"test: {TEST}\ngates:\n  rollout/raw_reward:\n", encoding="utf-8")
    for night, value in enumerate(coin_means(16, 20, seed=11)):
        record = tmp_path / f"n{night}.jsonl"
        record.write_text(json.dumps({"rollout/raw_reward": [[0, value]]}) + "\n", encoding="utf-8")
        result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                         "--write", "--run-id", f"n{night}")  # fmt: skip
        assert result.code == 0, result.err
    return gates


def test_lint_warns_on_a_gate_above_the_false_alarm_budget_and_exits_0(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    coin_history(tmp_path, db)
    result = run_cli("lint", "--db", db, "--max-false-alarm", "0.05")
    assert result.code == 0
    line = result.out.splitlines()[0]
    head = "gates/reward.yaml:3: warning: gates.rollout/raw_reward: estimated false-alarm rate "
    assert line.startswith(head)
    assert "(binomial, 16 trials (detected)" in line
    assert line.endswith("per night is above --max-false-alarm 0.05")
    assert "gatecfg backtest --test tests/e2e/test_reward_ci.py --metric rollout/raw_reward" in result.out
    assert result.err.rstrip().endswith("1 warning, 0 errors")
    github = run_cli("lint", "--db", db, "--max-false-alarm", "0.05", "--format", "github")
    assert github.out.startswith("::warning file=gates/reward.yaml,line=3,title=gatecfg::")


def test_lint_stays_quiet_within_the_budget_and_without_one(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    coin_history(tmp_path, db)
    assert run_cli("lint", "--db", db, "--max-false-alarm", "0.9").out == ""
    assert run_cli("lint", "--db", db).out == ""


@pytest.mark.parametrize("budget", ["0", "1.5", "five"], ids=["zero", "above-one", "word"])
def test_lint_refuses_a_budget_that_is_not_a_probability(budget: str) -> None:
    result = run_cli("lint", "--max-false-alarm", budget)
    assert result.code == 2
    assert "is not a probability between 0 and 1" in result.err
