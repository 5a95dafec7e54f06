"""`gatecfg backtest` end to end through the real entry point, on SQLite and (when configured) PostgreSQL.

The issue's "done means": 22 nightlies drawn like the 16-coin reward, backtest reports the gate's failures
and the 22.7% estimate, and switching the gate to `constraint: null` shows those runs flipping.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import flat, run_cli

import gatecfg
from gatecfg import terminal

TEST = "tests/e2e/test_reward_ci.py"
REWARD = "rollout/raw_reward"
BASE = """\
version: 1
defaults:
  rollout/raw_reward:
    steps: all
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
policy:
  window: 20
  min_history: 1
  accept_shift_after: never  # a failed night never rejoins: the trusted baseline ratchets
"""
# Heads out of 16 fair coin flips on 22 nights: draws of random.Random(5), picked among the sequences for
# which the replayed trusted window ends at the reference, 167/320 = 0.521875, while the 20 newest
# nights average 0.5. Night 14 (4 heads) and night 17 (5 heads) fall below 0.8 x ref and fail.
HEADS = [7, 9, 10, 7, 9, 7, 8, 7, 7, 8, 10, 9, 9, 7, 4, 9, 8, 5, 8, 8, 10, 10]
FAILING_NIGHTS = ["night-14", "night-17"]
# P(at most 6 heads of 16): the band's lo is 0.4175, 6/16 is below it and 7/16 is not.
TWENTY_TWO_POINT_SEVEN = Fraction(1 + 16 + 120 + 560 + 1820 + 4368 + 8008, 2**16)


def write_gates(root: Path, gate_body: str = "  rollout/raw_reward:\n", base: str = BASE) -> Path:
    gates = root / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    (gates / "base.yaml").write_text(base, encoding="utf-8")
    (gates / "reward.yaml").write_text(f"test: {TEST}\ngates:\n{gate_body}", encoding="utf-8")
    return gates


def write_record(path: Path, rows: dict[str, list[tuple[int, float]]]) -> Path:
    path.write_text("".join(json.dumps({m: [list(p) for p in pts]}) + "\n" for m, pts in rows.items()))
    return path


def nightly(tmp_path: Path, gates: Path, db: str, records: Sequence[dict[str, list[tuple[int, float]]]],
            *extra: str) -> None:  # fmt: skip
    for night, rows in enumerate(records):
        record = write_record(tmp_path / f"night{night:02d}.jsonl", rows)
        result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                         "--write", "--run-id", f"night-{night:02d}", "--commit", f"c{night:02d}",
                         *extra)  # fmt: skip
        assert result.code == 0, result.err


def coin_nights(tmp_path: Path, gates: Path, db: str) -> None:
    nightly(tmp_path, gates, db, [{REWARD: [(0, heads / 16)]} for heads in HEADS])


def backtest_json(db: str, *args: str | Path) -> dict[str, Any]:
    result = run_cli("backtest", "--db", db, "--format", "json", *args)
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    return document


def row(document: dict[str, Any], step: int | None, metric: str = REWARD) -> dict[str, Any]:
    found = [g for g in document["gates"] if g["metric"] == metric and g["step"] == step]
    assert len(found) == 1, document["gates"]
    return found[0]


def test_coin_reward_history_backtests_to_two_failures_and_the_22_7_percent_estimate(
    tmp_path: Path, db: str
) -> None:
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)
    document = backtest_json(db, "--gates", gates)
    assert document["against"] == "recorded"
    step0 = row(document, 0)
    assert set(step0) >= {"test", "metric", "step", "coordinate", "replayed", "failures", "false_alarm_rate",
                          "estimate", "flips"}  # fmt: skip
    assert (step0["test"], step0["replayed"], step0["judged"], step0["cold"]) == (TEST, 22, 21, 1)
    assert step0["failures"] == 2
    assert step0["false_alarm_rate"] == pytest.approx(2 / 21)
    estimate = step0["estimate"]
    assert estimate["method"] == "binomial"
    assert (estimate["trials"], estimate["trials_source"], estimate["p"]) == (16, "detected", 0.5)
    assert estimate["probability"] == pytest.approx(float(TWENTY_TWO_POINT_SEVEN), abs=1e-12)
    assert f"{estimate['probability']:.1%}" == "22.7%"
    # The ratchet: trusted-only baselines drift up to 0.521875, baselines of every nightly stay at 0.5;
    # the next nightly meets the reference the replay ends at.
    assert step0["baseline"] == "trusted"
    assert step0["drift"]["last"] == 0.521875
    [nextnight] = gatecfg.evaluate(TEST, {REWARD: [(0, 0.5)]}, gates=gates, db=db).verdicts
    assert nextnight.band.ref == 0.521875
    assert step0["other_baseline"]["baseline"] == "nightly"
    assert step0["other_baseline"]["drift"]["last"] == 0.5
    assert step0["flips"] == []  # the replay agrees with every verdict evaluate recorded
    whole = row(document, None)  # the gate over all its steps: here the one step it logs
    assert (whole["failures"], whole["replayed"]) == (2, 22)
    assert whole["estimate"]["probability"] == pytest.approx(float(TWENTY_TWO_POINT_SEVEN), abs=1e-12)
    assert whole["coordinate"] == step0["coordinate"]


def test_text_report_shows_failures_rate_estimate_and_drift(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)
    result = run_cli("backtest", "--db", db, "--gates", gates, "--steps")
    assert result.code == 0, result.err
    text = flat(result.out)
    assert f"{REWARD}, all steps: 22 replayed, 21 judged, 2 failed (9.5%)" in text
    assert f"{REWARD}, step 0: 22 replayed, 21 judged, 2 failed (9.5%)" in text
    assert "22.7% (binomial, 16 trials (detected), p=0.5" in text
    assert "0.4375 -> 0.521875 (+19.3%)" in text


def flips_to_tracked(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["run_id"], f["before"], f["after"]) for f in row(document, None)["flips"]]


def test_switching_to_constraint_null_flips_the_failing_nights_against_the_record(
    tmp_path: Path, db: str
) -> None:
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)
    proposed = write_gates(tmp_path / "proposed", "  rollout/raw_reward:\n    constraint: null\n")
    document = backtest_json(db, "--gates", proposed)
    assert flips_to_tracked(document) == [(night, "fail", "tracked") for night in FAILING_NIGHTS]
    commits = [f["commit"] for f in row(document, None)["flips"]]
    assert commits == ["c14", "c17"]
    tracked = row(document, None)
    assert (tracked["failures"], tracked["estimate"]) == (0, None)  # a tracked gate cannot fail


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, check=True, capture_output=True,
    )  # fmt: skip


def test_switching_to_constraint_null_in_the_working_tree_flips_against_base_rev(
    tmp_path: Path, db: str
) -> None:
    repo = tmp_path / "repo"
    gates = write_gates(repo)
    git(repo, "init", "-q")
    git(repo, "add", "gates")
    git(repo, "commit", "-q", "-m", "gates")
    coin_nights(tmp_path, gates, db)
    write_gates(repo, "  rollout/raw_reward:\n    constraint: null\n")  # the uncommitted proposal
    document = backtest_json(db, "--gates", gates, "--base", "HEAD")
    assert document["against"] == "HEAD"
    assert flips_to_tracked(document) == [(night, "fail", "tracked") for night in FAILING_NIGHTS]
    text = run_cli("backtest", "--db", db, "--gates", gates, "--base", "HEAD").out
    assert "flips are measured against the gates at HEAD" in text
    assert "night-14  commit c14  fail -> tracked" in text


def test_unknown_base_revision_is_an_input_error_that_says_what_to_fetch(tmp_path: Path, db: str) -> None:
    repo = tmp_path / "repo"
    gates = write_gates(repo)
    git(repo, "init", "-q")
    result = run_cli("backtest", "--db", db, "--gates", gates, "--base", "origin/nope")
    assert result.code == 2
    assert "git does not know the revision `origin/nope`" in result.err
    assert "hint: " in result.err
    assert "git fetch" in result.err


def independent_sigma_replay(values: Sequence[float], sigma: float, window: int) -> list[bool]:
    """Which nights fail `{sigma_down: sigma}`: a plain re-derivation of SPEC §4 with a sigma term."""
    trusted: list[float] = []
    failed = []
    for value in values:
        if len(trusted) < 2:  # a sigma-only side needs two values: cold, cannot fail
            failed.append(False)
            trusted.append(value)
            continue
        recent = trusted[-window:]
        lo = statistics.fmean(recent) - sigma * statistics.stdev(recent)
        failed.append(value < lo)
        if value >= lo:
            trusted.append(value)
    return failed


def test_sigma_band_backtests_like_a_plain_rederivation(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    constraint: {sigma_down: 1.5}\n")
    coin_nights(tmp_path, gates, db)
    document = backtest_json(db, "--gates", gates)
    expected = independent_sigma_replay([h / 16 for h in HEADS], 1.5, 20)
    step0 = row(document, 0)
    assert step0["failures"] == sum(expected) > 0
    assert step0["cold"] == 2
    assert step0["judged"] == 20


def spiky(night: int, spikes: Sequence[int]) -> dict[str, list[tuple[int, float]]]:
    """Five steps near 1.0, with a spike to 2.0 at each step in `spikes`."""
    return {REWARD: [(s, 2.0 if s in spikes else 1.0 + 0.01 * ((night + s) % 3)) for s in range(5)]}


SPIKES = {3: [1], 6: [2, 4], 9: [0, 1, 3], 12: [4]}


def test_tolerate_counts_a_night_failing_only_when_more_steps_fail_and_lists_every_step(
    tmp_path: Path, db: str
) -> None:
    body = "  rollout/raw_reward:\n    constraint: {rel_up: 0.5}\n    tolerate: 2\n"
    gates = write_gates(tmp_path, body)
    nightly(tmp_path, gates, db, [spiky(n, SPIKES.get(n, [])) for n in range(15)])
    document = backtest_json(db, "--gates", gates)
    whole = row(document, None)
    assert whole["failures"] == 1  # only night 9 has more than two failing steps
    assert whole["flips"] == []  # evaluate recorded the same: tolerated nights were written trusted
    spiked = sorted({s for steps in SPIKES.values() for s in steps})
    per_step = {g["step"]: g["failures"] for g in document["gates"] if g["step"] is not None}
    assert per_step == {s: sum(s in steps for steps in SPIKES.values()) for s in spiked}
    untolerated = write_gates(tmp_path / "strict", "  rollout/raw_reward:\n    constraint: {rel_up: 0.5}\n")
    strict = row(backtest_json(db, "--gates", untolerated), None)
    assert strict["failures"] == len(SPIKES)
    assert [f["run_id"] for f in strict["flips"]] == ["night-03", "night-06", "night-12"]


def test_runs_untrusted_by_hand_are_replayed_but_not_counted(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)
    assert run_cli("untrust", "--run-id", "night-14", "--db", db, "--reason", "known bad").code == 0
    step0 = row(backtest_json(db, "--gates", gates), 0)
    assert (step0["replayed"], step0["failures"]) == (21, 1)


def test_each_series_replays_on_its_own_history(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path, "  rollout/raw_reward:\n    steps: last\n")
    h100 = [{REWARD: [(0, 0.5)]}] * 3
    nightly(tmp_path, gates, db, h100, "--series", "hw=h100")
    a100 = [{REWARD: [(0, 0.3)]}] * 2
    for night, rows in enumerate(a100):
        record = write_record(tmp_path / f"a{night}.jsonl", rows)
        result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                         "--write", "--run-id", f"a100-{night}", "--series", "hw=a100")  # fmt: skip
        assert result.code == 0, result.err
    document = backtest_json(db, "--gates", gates)
    rows = {g["series"]["hw"]: g for g in document["gates"]}
    assert set(rows) == {"h100", "a100"}
    assert (rows["h100"]["replayed"], rows["h100"]["failures"]) == (3, 0)
    assert (rows["a100"]["replayed"], rows["a100"]["failures"]) == (2, 0)
    assert rows["a100"]["drift"]["last"] == 0.3
    assert rows["h100"]["step"] == -1


def test_unknown_metric_is_an_input_error(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    result = run_cli("backtest", "--db", db, "--gates", gates, "--metric", "train/nope")
    assert result.code == 2
    assert "no gate declares `train/nope`" in result.err


def test_metric_filter_and_empty_history(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    document = backtest_json(db, "--gates", gates, "--metric", REWARD)
    assert (document["against"], document["gates"]) == ("recorded", [])
    assert document["replayed"][TEST]["accept_shift_after"] == "never"
    text = run_cli("backtest", "--db", db, "--gates", gates)
    assert "nothing to replay" in text.out


def test_text_report_summarises_each_gate_unless_asked_for_its_steps(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)

    summary = run_cli("backtest", "--db", db, "--gates", gates)
    detail = run_cli("backtest", "--db", db, "--gates", gates, "--steps")

    def rows(out: str) -> list[str]:
        return [ln.split(":")[0].strip() for ln in out.splitlines() if ln.startswith(f"  {REWARD}, ")]

    assert rows(summary.out) == [f"{REWARD}, all steps"]
    assert f"{REWARD}, all steps: 22 replayed, 21 judged, 2 failed (9.5%)" in flat(summary.out)
    assert f"{REWARD}: 1 step failed or flipped on some night (--steps lists them" in flat(summary.out)
    assert rows(detail.out) == [f"{REWARD}, all steps", f"{REWARD}, step 0"]


def test_text_report_fits_80_columns_without_folding_a_word(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Eleven figures a gate made a table that folded every header at 80 columns (`metri` / `c`).
    gates = write_gates(tmp_path)
    coin_nights(tmp_path, gates, db)
    monkeypatch.setattr(terminal, "width", lambda: 80)

    text = run_cli("backtest", "--db", db, "--gates", gates).out

    assert max(len(line) for line in text.splitlines()) <= 80
    assert {"replayed,", "judged,", "failed", "estimate", "baseline"} <= set(text.split())


def test_a_budget_gate_whose_record_breaks_its_promise_is_named_with_the_fix(tmp_path: Path, db: str) -> None:
    # A timing with one slow night in twelve: the budget rule promises 1% of clean nights, its record on
    # these 120 nightlies is several times that.
    gates = write_gates(tmp_path, base=BUDGET_BASE)
    rng = np.random.default_rng(36)
    values = [1.0 + 0.01 * rng.standard_normal() + (0.5 if i % 12 == 11 else 0.0) for i in range(120)]
    nightly(tmp_path, gates, db, [{REWARD: [(0, v)]} for v in values])
    [whole] = [g for g in backtest_json(db, "--gates", gates)["gates"] if g["metric"] == REWARD]
    assert whole["promise"] == {"false_alarm": 0.01, "over": True}
    assert whole["false_alarm_rate"] > 0.02
    text = flat(run_cli("backtest", "--db", db, "--gates", gates).out)
    assert "ITS RECORD BREAKS ITS PROMISE: it failed" in text
    assert "over twice its false_alarm 1.0%" in text


BUDGET_BASE = """\
version: 1
defaults:
  rollout/raw_reward:
    steps: last
    constraint: {budget: up}
policy:
  window: 20
  min_history: 1
"""


def test_evaluate_says_once_when_a_failing_budget_gates_own_nightlies_break_its_promise(
    tmp_path: Path, db: str
) -> None:
    # Failed values that never rejoin (`accept_shift_after: never`) keep the slow nights out of the
    # baseline, so each of them fails.
    gates = write_gates(tmp_path, base=BUDGET_BASE + "  accept_shift_after: never\n")
    rng = np.random.default_rng(36)
    values = [1.0 + 0.01 * rng.standard_normal() + (0.5 if i % 12 == 11 else 0.0) for i in range(60)]
    nightly(tmp_path, gates, db, [{REWARD: [(0, v)]} for v in values])
    slow = gatecfg.evaluate(TEST, {REWARD: [(0, 5.0)]}, gates=gates, db=db)
    assert [r.status for r in slow.results] == ["fail"]
    [note] = [n for n in slow.notes if n.startswith("NOISY GATE: ")]
    assert f"{REWARD} failed " in note
    assert "over twice its false_alarm 1.0%" in note
    calm = gatecfg.evaluate(TEST, {REWARD: [(0, 1.0)]}, gates=gates, db=db)
    assert not any(n.startswith("NOISY GATE: ") for n in calm.notes)  # said when the gate fails


def test_report_says_when_a_budget_gates_own_nightlies_break_its_promise(tmp_path: Path, db: str) -> None:
    """`report` words the gate's record as `evaluate` does, from the nightlies the store holds."""
    gates = write_gates(tmp_path, base=BUDGET_BASE + "  accept_shift_after: never\n")
    rng = np.random.default_rng(36)
    values = [1.0 + 0.01 * rng.standard_normal() + (0.5 if i % 12 == 11 else 0.0) for i in range(60)]
    nightly(tmp_path, gates, db, [{REWARD: [(0, v)]} for v in values])
    result = run_cli("report", "--html", str(tmp_path / "out"), "--gates", str(gates), "--db", db)
    assert result.code == 0, result.err
    [line] = [n for n in result.out.splitlines() if n.startswith("NOISY GATE: ")]
    assert f"{REWARD} failed " in line
    assert "over twice its false_alarm 1.0%" in line
    (tmp_path / "quiet").mkdir()
    quiet = write_gates(tmp_path / "quiet", base=BUDGET_BASE)
    calm = [{REWARD: [(0, 1.0 + 0.01 * rng.standard_normal())]} for _ in range(30)]
    other = f"sqlite:///{tmp_path / 'quiet.db'}"
    nightly(tmp_path / "quiet", quiet, other, calm)
    result = run_cli("report", "--html", str(tmp_path / "out2"), "--gates", str(quiet), "--db", other)
    assert result.code == 0, result.err
    assert "NOISY GATE" not in result.out


def test_backtest_of_every_gate_reads_one_gate_at_a_time_and_reports_as_each_gate_alone(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Trust is per gate, so a replay needs one gate's values: the replay holds one gate's history at a
    # time, never the test's (a fleet test of 40 gates x 1,000 steps would hold millions of values).
    metrics = ["rollout/raw_reward", "train/grad_norm", "train/ppo_kl"]
    upward = "".join(f"  {m}:\n    steps: all\n    constraint: {{rel_up: 0.5}}\n" for m in metrics[1:])
    base = BASE.replace("defaults:\n", "defaults:\n" + upward)
    gates = write_gates(tmp_path, "".join(f"  {m}:\n" for m in metrics), base=base)
    rng = np.random.default_rng(7)
    records = [
        {m: [(s, float(1 + 0.05 * rng.normal())) for s in range(3)] for m in metrics} for _ in range(8)
    ]
    records[6]["train/ppo_kl"] = [(s, 9.0) for s in range(3)]
    nightly(tmp_path, gates, db, records)
    from gatecfg.commands import backtest as command

    held: list[set[str]] = []
    real = command.backtest

    def spy(test: Any, runs: Any, **kwargs: Any) -> Any:
        held.append({metric for run in runs for metric, _ in run.values})
        return real(test, runs, **kwargs)

    monkeypatch.setattr(command, "backtest", spy)
    whole = backtest_json(db, "--gates", gates)
    assert sorted(held, key=sorted) == [{m} for m in metrics]
    alone = [g for m in metrics for g in backtest_json(db, "--gates", gates, "--metric", m)["gates"]]
    assert whole["gates"] == alone
    assert row(whole, None, "train/ppo_kl")["failures"] == 1
