"""Every view shows a value as its gate's baseline reads it (gatecfg.membership): a failed value that
rejoined, the runs of an accepted shift, a run whose only failure was another (shadow) gate's, and the
runs before the shift, in `history`, the HTML charts' nights, `rebaseline` and `shifts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

import gatecfg
from gatecfg.analysis.series import Night, gate_nights
from gatecfg.keys import series_key
from gatecfg.resolve import load_tree
from gatecfg.store import Store

TEST = "tests/e2e/test_views_ci.py"
KL, REWARD = "train/kl", "rollout/raw_reward"
BASE = """\
version: 1
defaults:
  train/kl:
    steps: last
    constraint: {rel_up: 0.1}
  rollout/raw_reward:
    steps: last
    constraint: {rel_down: 0.2}
    enforce: false
policy:
  window: 20
  min_history: 1
  accept_shift_after: 5
"""
STEADY = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.02]


def night(gates: Path, db: str, run_id: str, kl: float, reward: float = 0.5) -> None:
    report = gatecfg.evaluate(
        TEST, {KL: [(0, kl)], REWARD: [(0, reward)]}, gates=gates, db=db, write=True, run_id=run_id
    )
    assert report.run.written


@pytest.fixture
def story(tmp_path: Path, db: str) -> tuple[Path, str]:
    """Ten steady nights; a kl spike that fails and rejoins when kl passes again; a night whose only
    failure is the shadow reward gate's."""
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "views.yaml").write_text(f"test: {TEST}\ngates:\n  {KL}:\n  {REWARD}:\n", encoding="utf-8")
    for i, kl in enumerate(STEADY):
        night(gates, db, f"base{i}", kl)
    night(gates, db, "spike", 1.5)
    night(gates, db, "calm", 1.0)
    night(gates, db, "shadow", 1.0, reward=0.1)
    return gates, db


def shift(gates: Path, db: str) -> None:
    """A kl shift of five nights, accepted on the fifth, and one night after."""
    for i, kl in enumerate([2.0, 2.02, 1.98, 2.01, 2.0]):
        night(gates, db, f"up{i}", kl)
    night(gates, db, "after", 2.0)


def marks(db: str, metric: str) -> dict[str, tuple[bool, str]]:
    result = run_cli(
        "history", "--test", TEST, "--metric", metric, "--db", db, "--format", "json", "--limit", "0"
    )
    assert result.code == 0, result.err
    return {row["run_id"]: (row["in_baseline"], row["baseline_reason"]) for row in json.loads(result.out)}


def test_history_marks_each_value_in_or_out_of_its_gates_baseline_with_the_reason(
    story: tuple[Path, str],
) -> None:
    gates, db = story
    kl = marks(db, KL)
    assert kl["spike"] == (True, "rejoined")  # failed, then kl passed on `calm`
    assert kl["shadow"] == (True, "passed")  # only the shadow reward gate failed that night
    assert marks(db, REWARD)["shadow"] == (False, "failed")
    assert "in (rejoined)" in run_cli("history", "--test", TEST, "--metric", KL, "--db", db).out
    shift(gates, db)
    kl = marks(db, KL)
    assert {kl[f"up{i}"] for i in range(5)} == {(True, "accepted shift")}
    assert kl["base0"] == (False, "before shift")  # the level moved at up0
    assert kl["spike"] == (False, "before shift")
    assert kl["after"] == (True, "passed")
    text = run_cli("history", "--test", TEST, "--metric", KL, "--db", db, "--limit", "0").out
    assert "in (shift)" in text
    assert "OUT (pre-shift)" in text


def test_the_charts_nights_are_the_baselines_reading(story: tuple[Path, str]) -> None:
    gates, db = story
    test = load_tree(gates).test(TEST)

    def read() -> tuple[list[Night], list[Night]]:
        with Store.open(db) as store:
            [kl] = gate_nights(store, test.gate(KL), series_key(TEST, {})).values()  # type: ignore[arg-type]
            [reward] = gate_nights(store, test.gate(REWARD), series_key(TEST, {})).values()  # type: ignore[arg-type]
        return kl, reward

    kl, reward = read()
    by_run = {n.run_id: n for n in kl}
    assert by_run["spike"].trusted
    assert by_run["shadow"].trusted
    assert not {n.run_id: n for n in reward}["shadow"].trusted
    shift(gates, db)
    kl, _ = read()
    by_run = {n.run_id: n for n in kl}
    assert by_run["up0"].trusted
    assert not by_run["base0"].trusted
    assert not by_run["base0"].untrusted_by_hand


def test_rebaseline_counts_the_shifts_runs_as_in_its_baseline(story: tuple[Path, str]) -> None:
    gates, db = story
    shift(gates, db)
    result = run_cli(
        "rebaseline", "--test", TEST, "--metric", KL, "--gates", gates, "--db", db, "--last", "6",
        "--format", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    [proposal] = [p for p in json.loads(result.out)["gates"] if p["metric"] == KL]
    assert proposal["band"]["trusted_runs"] == 6  # up0..up4 (the accepted shift) and `after`
    assert proposal["band"]["untrusted_runs"] == []


def test_shifts_lists_the_accepted_shift_with_the_nightlies_the_baseline_took(
    story: tuple[Path, str],
) -> None:
    gates, db = story
    shift(gates, db)
    [row] = json.loads(run_cli("shifts", "--db", db, "--format", "json").out)
    assert (row["metric"], row["first_run_id"], row["nightlies"]) == (KL, "up0", 5)
    kl = marks(db, KL)
    assert sum(kl[f"up{i}"][0] for i in range(5)) == row["nightlies"]
