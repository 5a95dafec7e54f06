"""Runs judged in bulk, each gate's runs as one matrix (`gatecfg.analysis.matrix`), must be judged as each
run alone is: the trust a replay that reports one gate finds for every run (`bulk_trust`), and the points
an import stores for runs of known trust, judged a block at a time.

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
from hypothesis import given, settings
from hypothesis import strategies as st

from gatecfg.analysis import backtest, trust_rounds
from gatecfg.analysis.matrix import GateMatrix, stored_columns, stored_selection
from gatecfg.analysis.replayer import Replayer, StoredRun, replay
from gatecfg.analysis.trust_rounds import bulk_trust
from gatecfg.resolve import Policy, ResolvedTest, load_tree
from gatecfg.store import PointColumns, ValueColumns

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


def judged_alone(test: ResolvedTest, runs: list[StoredRun], policy: Policy) -> list[bool]:
    replayer = Replayer(test, SERIES, policy)
    return [replayer.judge(run).trusted for run in runs]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nights=st.integers(0, 40),
    window=st.integers(1, 6),
    min_history=st.integers(0, 3),
    baseline=st.sampled_from(["trusted", "nightly"]),
    block=st.sampled_from([1, 120, 400, 10**9]),
)
def test_bulk_trust_is_the_trust_of_judging_each_run_alone(
    test_gates: ResolvedTest,
    *,
    seed: int,
    nights: int,
    window: int,
    min_history: int,
    baseline: str,
    block: int,
) -> None:
    # `block`: the values of a block of runs judged together (a night holds about 45), down to one night a
    # block, each carrying the tails of the blocks before it.
    policy = dataclasses.replace(test_gates.policy, window=window, min_history=min_history, baseline=baseline)
    runs = history(test_gates, seed, nights)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trust_rounds, "TRUST_ROUNDS", nights + 1)  # enough rounds to always finish
        patch.setattr(trust_rounds, "RUN_BLOCK_VALUES", block)
        assert bulk_trust(test_gates, runs, policy) == judged_alone(test_gates, runs, policy)


def test_both_policies_judge_a_block_once_where_the_first_guess_holds(test_gates: ResolvedTest) -> None:
    # The first round under `trusted` guesses what `nightly` pools. On steady nights that guess holds in
    # every block, so the replay under the other policy judges nothing again.
    steady = [
        dataclasses.replace(
            run,
            trust_override=None,
            values={key: ValueColumns(c.steps, np.ones(len(c)), c.statuses) for key, c in run.values.items()},
        )
        for run in history(test_gates, 3, 30)
    ]
    trusted = dataclasses.replace(test_gates.policy, window=3, baseline="trusted")
    nightly = dataclasses.replace(trusted, baseline="nightly")
    bulk = trust_rounds.BulkTrust(test_gates, steady)
    judged: list[int] = []
    real = trust_rounds._blocked
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trust_rounds, "RUN_BLOCK_VALUES", 200)
        patch.setattr(trust_rounds, "_blocked", lambda *args: judged.append(len(args[3])) or real(*args))
        assert bulk.trust(nightly) == [True] * len(steady)
        once = sum(judged)
        assert bulk.trust(trusted) == [True] * len(steady)
    assert once >= len(steady)  # every run judged (by every gate)
    assert sum(judged) == once


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
        assert one.trusted == full.trusted
        assert one.results.keys() == {metric} & full.results.keys()
        if metric in one.results:
            assert one.results[metric].statuses == full.results[metric].statuses
            assert one.results[metric].refs() == full.results[metric].refs()


def test_a_history_that_needs_too_many_rounds_is_replayed_run_by_run(test_gates: ResolvedTest) -> None:
    policy = dataclasses.replace(test_gates.policy, window=2)
    runs = history(test_gates, 7, 30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trust_rounds, "TRUST_ROUNDS", 0)
        assert bulk_trust(test_gates, runs, policy) is None
        lean = replay(test_gates, SERIES, runs, policy, keep={"two/sided"})
    assert [r.trusted for r in lean.runs] == judged_alone(test_gates, runs, policy)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(1, 6),
    block=st.integers(1, 9),
    baseline=st.sampled_from(["trusted", "nightly"]),
)
def test_runs_of_known_trust_judged_a_block_at_a_time_store_what_each_judged_alone_does(
    test_gates: ResolvedTest, *, seed: int, window: int, block: int, baseline: str
) -> None:
    # An import: every run's trust is set, and its runs go through a gate's matrix `block` at a time, the
    # tail of each block carried to the next.
    policy = dataclasses.replace(test_gates.policy, window=window, baseline=baseline)
    runs = [
        dataclasses.replace(run, trust_override=run.trust_override is not False)
        for run in history(test_gates, seed, 25)
    ]
    alone = Replayer(test_gates, SERIES, policy)
    expected = [alone.judge(run).results for run in runs]
    for gate in test_gates.gates:
        tail: GateMatrix | None = None
        found: list[PointColumns | None] = []
        for start in range(0, len(runs), block):
            part = runs[start : start + block]
            matrix = GateMatrix.of(
                gate, [stored_selection(gate, run.values.get((gate.metric, gate.steps_key))) for run in part]
            ).after(tail)
            carried = len(matrix.values) - len(part)
            pooled = np.concatenate([np.ones(carried, bool), [bool(run.trust_override) for run in part]])
            found += stored_columns(matrix, pooled, policy, np.arange(carried, len(matrix.values)))
            tail = matrix.tail(pooled, policy.window)
        for results, columns in zip(expected, found, strict=True):
            if gate.metric not in results:
                assert columns is None or not len(columns)
                continue
            want = results[gate.metric].stored_columns()
            assert columns is not None
            assert (list(columns.steps), repr(list(columns.values)), list(columns.statuses)) == (
                list(want.steps),
                repr(list(want.values)),
                list(want.statuses),
            )
            assert (list(columns.refs), list(columns.los), list(columns.his)) == (
                list(want.refs),
                list(want.los),
                list(want.his),
            )


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nights=st.integers(1, 30))
def test_a_gates_matrix_made_from_stored_columns_is_the_one_made_from_their_selections(
    test_gates: ResolvedTest, seed: int, nights: int
) -> None:
    # Every kind of gate, tracked ones dropping their non-finite values, runs that skip a gate or log other
    # steps; and the same history with every run on the same steps, which takes the matrix whole.
    runs = history(test_gates, seed, nights)
    regular = [
        dataclasses.replace(
            run,
            values={
                key: ValueColumns(np.arange(len(c)), c.values, c.statuses)
                for key, c in run.values.items()
                if len(c) == 6 or key[1] != '"all"'
            },
        )
        for run in runs
    ]
    for nights_ in (runs, regular):
        for gate in test_gates.gates:
            columns = [run.values.get((gate.metric, gate.steps_key)) for run in nights_]
            made = GateMatrix.stored(gate, columns)
            want = GateMatrix.of(gate, [stored_selection(gate, c) for c in columns])
            assert made.steps.tolist() == want.steps.tolist()
            assert (made.present == want.present).all()
            assert repr(made.values[made.present].tolist()) == repr(want.values[want.present].tolist())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(1, 6), regular=st.booleans())
def test_a_gates_tail_holds_each_steps_newest_pooled_values_oldest_first(
    test_gates: ResolvedTest, seed: int, width: int, regular: bool
) -> None:
    # Runs that pool every step or none (taken whole), or a few cells missing or NaN (per step).
    rng = np.random.default_rng(seed)
    runs, steps = int(rng.integers(0, 9)), 4
    values = rng.normal(1.0, 0.1, (runs, steps))
    present = np.ones((runs, steps), bool)
    if not regular:
        present &= rng.random((runs, steps)) > 0.2
        values[rng.random((runs, steps)) < 0.1] = np.nan
    qualifies = rng.random(runs) > 0.3
    matrix = GateMatrix(test_gates.gates[0], np.arange(steps, dtype=np.int64), values, present)
    tail = matrix.tail(qualifies, width)
    assert tail.values.shape == (width, steps)
    for j in range(steps):
        pooled = [
            float(values[r, j])
            for r in range(runs)
            if qualifies[r] and present[r, j] and not np.isnan(values[r, j])
        ]
        want = [np.nan] * (width - len(pooled[-width:])) + pooled[-width:]
        assert repr(tail.values[:, j].tolist()) == repr(want)
        assert tail.present[:, j].tolist() == [not np.isnan(v) for v in want]


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
        for step, status in zip(run.values[key].steps.tolist(), run.values[key].status_list(), strict=True)
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
