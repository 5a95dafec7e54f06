"""How counts and near names read in messages (gatecfg/wording.py)."""

from __future__ import annotations

import pytest

from gatecfg.wording import did_you_mean, near_matches, plural


@pytest.mark.parametrize(
    ("n", "noun", "many", "expected"),
    [
        pytest.param(1, "run", None, "1 run", id="one"),
        pytest.param(0, "run", None, "0 runs", id="none"),
        pytest.param(2, "nightly", "nightlies", "2 nightlies", id="irregular"),
        pytest.param(1200, "step", None, "1,200 steps", id="thousands"),
    ],
)
def test_plural(n: int, noun: str, many: str | None, expected: str) -> None:
    assert plural(n, noun, many) == expected


def test_a_name_that_differs_only_in_case_comes_first() -> None:
    names = ["train/ppo_KL", "train/ppo_kl_coef", "train/grad_norm"]
    assert near_matches("train/ppo_kl", names)[0] == "train/ppo_KL"
    assert did_you_mean("train/ppo_kl", ["train/ppo_KL"]) == "did you mean `train/ppo_KL`?"


def test_a_typo_is_matched_without_case() -> None:
    assert near_matches("Train/Grad_Nrom", ["train/grad_norm", "eval/score"]) == ["train/grad_norm"]


def test_several_near_names_are_offered_best_first() -> None:
    hint = did_you_mean("nightly-1", ["nightly-10", "nightly-11", "weekly-3"], n=3)
    assert hint == "did you mean one of `nightly-10`, `nightly-11`?"


def test_nothing_near_gives_no_hint() -> None:
    assert did_you_mean("rollout/raw_reward", ["perf/actor_train_mfu"]) is None
    assert did_you_mean("train/ppo_kl", ["train/ppo_kl"]) is None  # the name itself is no suggestion
