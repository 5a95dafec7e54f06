"""A replay of some gates reports what the replay of every gate does (trust is per gate: a gate's baseline
rests on its own verdicts alone), and a backtest's rows per step are the steps where a run fails or flips.

Random histories mix every kind of gate (bands one- and two-sided, a sigma band, `tolerate`, absolute
limits, tracked, a budget rule), NaN and infinite values, runs that skip a gate or log other steps, trust
set by hand either way, both baseline policies, windows from 1 to 6 and `min_history` from 0 to 3, so that
windows start cold, fill, and lose and regain runs as trust flips.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from helpers import status_names
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gatecfg.analysis import backtest
from gatecfg.analysis.replayer import Replayer, StoredRun, replay
from gatecfg.resolve import ResolvedTest, load_tree
from gatecfg.store import ValueColumns

TEST = "tests/e2e/test_bulk_ci.py"
SERIES = "bulk-series"
GATES = """\
test: tests/e2e/test_bulk_ci.py
gates:
  two/sided:
    steps: all
    constraint: {rel_up: 0.05, abs_floor_up: 0.01, rel_down: 0.05, abs_floor_down: 0.01}
  one/sided:
    steps: all
    constraint: {rel_down: 0.045}
  sigma/band:
    steps: all
    constraint: {sigma_up: 4.0, sigma_down: 4.0}
  tolerant:
    steps: all
    constraint: {rel_up: 0.03, rel_down: 0.03}
    tolerate: 0.25
  limited:
    steps: all
    constraint: null
    limits: {min: 0.8, max: 1.2}
  tracked:
    steps: all
    constraint: null
  budget:
    steps: [0, 1, 2, 3]
    constraint: {budget: both}
  last/value:
    steps: last
    constraint: {rel_down: 0.04, abs_floor_down: 0.001}
"""
BASE = "version: 1\npolicy:\n  window: 20\n  min_history: 1\n"


@pytest.fixture(scope="module")
def test_gates(tmp_path_factory: pytest.TempPathFactory) -> ResolvedTest:
    root: Path = tmp_path_factory.mktemp("bulk") / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "bulk.yaml").write_text(GATES, encoding="utf-8")
    return load_tree(root).test(TEST)


def history(test: ResolvedTest, seed: int, nights: int) -> list[StoredRun]:
    """Nights of every gate around a level that moves now and then, with outliers, NaN and infinities,
    skipped gates, other step sets, and trust set by hand."""
    rng = np.random.default_rng(seed)
    level = 1.0
    runs = []
    for night in range(nights):
        if rng.random() < 0.05:
            level *= rng.choice([0.96, 1.04])
        values: dict[tuple[str, str], ValueColumns] = {}
        for gate in test.gates:
            if rng.random() < 0.05:
                continue  # the run did not log this metric
            if gate.steps == "last":
                steps = np.array([-1])
            elif isinstance(gate.steps, tuple):
                steps = np.array(gate.steps)
            else:
                steps = np.arange(6) if rng.random() < 0.85 else np.sort(rng.choice(8, 5, replace=False))
            found = level * (1.0 + rng.normal(0.0, 0.01, len(steps)))
            outliers = rng.random(len(steps)) < 0.006
            found[outliers] *= rng.choice([0.7, 1.3], outliers.sum())
            broken = rng.random(len(steps)) < 0.002
            found[broken] = rng.choice([np.nan, np.inf, -np.inf], broken.sum())
            statuses = np.zeros(len(steps), np.int8)
            values[(gate.metric, gate.steps_key)] = ValueColumns(steps.astype(np.int64), found, statuses)
        hand = rng.choice([None, True, False], p=[0.8, 0.1, 0.1])
        runs.append(
            StoredRun(
                run_id=f"night-{night:03d}",
                commit=None,
                series_key=SERIES,
                labels={},
                trust_override=hand,
                gate_trusted=True,
                values=values,
            )
        )
    return runs


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), window=st.integers(1, 6), metric=st.sampled_from(["two/sided", "budget"])
)
def test_a_replay_of_one_gate_reports_what_the_replay_of_every_gate_does(
    test_gates: ResolvedTest, seed: int, window: int, metric: str
) -> None:
    policy = dataclasses.replace(test_gates.policy, window=window)
    runs = history(test_gates, seed, 30)
    lean = replay(test_gates, SERIES, runs, policy, keep={metric})
    whole = Replayer(test_gates, SERIES, policy)
    for one, full in zip(lean.runs, [whole.judge(run) for run in runs], strict=True):
        assert one.results.keys() == {metric} & full.results.keys()
        if metric in one.results:
            assert one.results[metric].statuses == full.results[metric].statuses
            assert one.results[metric].refs() == full.results[metric].refs()


FAILING = ("fail", "error")


def rows_by_hand(
    test: ResolvedTest, runs: list[StoredRun], metric: str, before: dict[tuple[str, int], str]
) -> dict[int, list[tuple[str, str, str]]]:
    """The per-step rows a backtest shows, found step by step: a step where some run fails, or flips
    between failing and not against `before` ((run id, step): status), with its flips."""
    replayed = replay(test, SERIES, runs, test.policy)
    cells: dict[int, list[tuple[str, str]]] = {}
    for r in replayed.runs:
        result = r.results.get(metric)
        if result is not None:
            for step, status in zip(result.selection.steps, result.statuses, strict=True):
                cells.setdefault(step, []).append((r.run.run_id, status))
    rows = {}
    for step, track in cells.items():
        flips = [
            (run_id, before[run_id, step], status)
            for run_id, status in track
            if (run_id, step) in before and (before[run_id, step] in FAILING) != (status in FAILING)
        ]
        if flips or any(status == "fail" for _, status in track):
            rows[step] = flips
    return rows


@settings(max_examples=30, deadline=None)
@example(seed=476458, window=1, metric="two/sided")  # a step whose last verdict is an error
@given(
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(1, 6),
    metric=st.sampled_from(["two/sided", "tolerant"]),
)
def test_a_backtest_shows_the_steps_where_a_run_fails_or_flips_against_the_record_or_a_prior_tree(
    test_gates: ResolvedTest, seed: int, window: int, metric: str
) -> None:
    rng = np.random.default_rng(seed)
    runs = [
        dataclasses.replace(
            run,
            values={
                key: ValueColumns(c.steps, c.values, rng.choice([0, 0, 0, 1, 4], len(c)).astype(np.int8))
                for key, c in run.values.items()
            },
        )
        for run in history(test_gates, seed, 30)
    ]
    test = dataclasses.replace(test_gates, policy=dataclasses.replace(test_gates.policy, window=window))
    prior = dataclasses.replace(test, policy=dataclasses.replace(test.policy, window=window % 6 + 1))
    key = (metric, test.gate(metric).steps_key)  # type: ignore[union-attr]
    recorded = {
        (run.run_id, step): status
        for run in runs
        if key in run.values
        for step, status in zip(run.values[key].steps.tolist(), status_names(run.values[key]), strict=True)
    }
    replayed_prior = replay(prior, SERIES, runs, prior.policy)
    prior_statuses = {
        (r.run.run_id, step): status
        for r in replayed_prior.runs
        if metric in r.results
        for step, status in zip(r.results[metric].selection.steps, r.results[metric].statuses, strict=True)
    }
    for against, before in (("recorded", recorded), (prior, prior_statuses)):
        reports = backtest.backtest(test, runs, against=against, metric=metric)  # type: ignore[arg-type]
        shown = {
            report.step: [(f.run_id, f.before, f.after) for f in report.flips]
            for report in reports
            if report.step is not None
        }
        assert shown == rows_by_hand(test, runs, metric, before)
