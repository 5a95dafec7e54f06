"""One baseline, one verdict: the nightly `evaluate --write` of a history, `backtest`'s replay of the stored
runs and `import` of the same runs decide the same window, value for value, and the same verdict, night by
night (`gatecfg.membership` is the one rule, docs/calibration.md "Which runs form a baseline").

Generated histories mix gates of every kind (a one-sided band, a sigma band, `tolerate`, a budget rule, a
tracked metric, a single `last` value), level shifts that a gate follows after `accept_shift_after`
nightlies, spikes that fail one night and rejoin when the gate passes again, shadow gates whose failures
keep only their own values out, runs that skip a metric, and trust set by hand on a run or on
one metric of it right after that run is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

import gatecfg
from gatecfg.analysis.replayer import replay, stored_runs
from gatecfg.keys import series_key
from gatecfg.membership import standing
from gatecfg.resolve import load_tree
from gatecfg.store import Store
from gatecfg.verdicts import GateVerdicts

TEST = "tests/e2e/test_one_baseline_ci.py"
GATES = """\
test: tests/e2e/test_one_baseline_ci.py
gates:
  band/up:
    steps: [0, 1, 2]
    constraint: {rel_up: 0.04, abs_floor_up: 0.001}
  band/shadow:
    steps: [0, 1, 2]
    constraint: {rel_down: 0.03}
    enforce: false
  sigma/band:
    steps: last
    constraint: {sigma_up: 3.0, sigma_down: 3.0}
  tolerant:
    steps: all
    constraint: {rel_up: 0.03, rel_down: 0.03}
    tolerate: 1
  budget:
    steps: all
    constraint: {budget: up}
  tracked:
    steps: last
    constraint: null
"""
METRICS = ("band/up", "band/shadow", "sigma/band", "tolerant", "budget", "tracked")


def write_gates(root: Path, *, window: int, accept: int | str, baseline: str) -> Path:
    gates = root / "gates"
    gates.mkdir(exist_ok=True)
    policy = f"  window: {window}\n  min_history: 2\n  accept_shift_after: {accept}\n  baseline: {baseline}\n"
    (gates / "base.yaml").write_text(f"version: 1\npolicy:\n{policy}", encoding="utf-8")
    (gates / "one.yaml").write_text(GATES, encoding="utf-8")
    return gates


@dataclass(frozen=True)
class Night:
    run_id: str
    metrics: dict[str, list[tuple[int, float]]]
    untrust_run: bool | None  # trust set by hand on the whole run right after it is written
    untrust_metric: tuple[str, bool] | None  # ... or on one metric of it


def nights(seed: int, count: int, *, by_hand: bool = True) -> Iterator[Night]:
    rng = np.random.default_rng(seed)
    level = dict.fromkeys(METRICS, 1.0)
    for night in range(count):
        metrics: dict[str, list[tuple[int, float]]] = {}
        for metric in METRICS:
            if rng.random() < 0.06:
                level[metric] *= float(rng.choice([0.85, 1.2]))  # a shift the gate may follow
            if rng.random() < 0.04:
                continue  # the run did not log this metric
            steps = [0] if metric in ("sigma/band", "tracked") else [0, 1, 2]
            if metric in ("tolerant", "budget") and rng.random() < 0.1:
                steps = [0, 1, 2, 3]  # other steps now and then
            values = level[metric] * (1.0 + rng.normal(0.0, 0.01, len(steps)))
            spikes = rng.random(len(steps)) < 0.05
            values[spikes] *= 1.3
            points = [(step, float(v)) for step, v in zip(steps, values, strict=True)]
            metrics[metric] = points
        hand = rng.random() if by_hand else 0.04 + 0.05 * rng.random()  # only untrusts of a whole run
        yield Night(
            run_id=f"night-{night:03d}",
            metrics=metrics,
            untrust_run=(False if hand < (0.04 if by_hand else 0.045) else True if hand < 0.06 else None),
            untrust_metric=(str(rng.choice(METRICS)), bool(rng.random() < 0.3))
            if 0.06 <= hand < 0.1
            else None,
        )


def windows_of(results: list[GateVerdicts]) -> dict[str, dict[int, list[float]]]:
    return {r.gate.metric: ({} if r.window is None else r.window.as_lists()) for r in results}


@dataclass(frozen=True)
class Case:
    seed: int
    count: int
    window: int
    accept: int | str
    baseline: str


CASES = [
    pytest.param(Case(11, 60, 4, 2, "trusted"), id="window-4-accept-2"),
    pytest.param(Case(12, 60, 6, 3, "trusted"), id="window-6-accept-3"),
    pytest.param(Case(13, 40, 3, "never", "trusted"), id="never-followed"),
    pytest.param(Case(14, 40, 5, 2, "nightly"), id="nightly-baseline"),
]


@pytest.mark.parametrize("case", CASES)
def test_the_nightly_and_its_replay_read_the_same_window_and_give_the_same_verdict_every_night(
    tmp_path: Path, db: str, case: Case
) -> None:
    gates = write_gates(tmp_path, window=case.window, accept=case.accept, baseline=case.baseline)
    live: list[tuple[dict[str, str], dict[str, dict[int, list[float]]]]] = []
    logged: list[set[str]] = []
    for night in nights(case.seed, case.count):
        logged.append(set(night.metrics))
        report = gatecfg.evaluate(
            TEST, night.metrics, gates=gates, db=db, write=True, run_id=night.run_id, commit=night.run_id
        )
        live.append(({r.gate.metric: r.status for r in report.results}, windows_of(list(report.results))))
        with Store.open(db) as store:
            if night.untrust_run is not None:
                store.set_trust(trusted=night.untrust_run, run_id=night.run_id, reason="by hand")
            if night.untrust_metric is not None:
                metric, trusted = night.untrust_metric
                store.set_trust(trusted=trusted, run_id=night.run_id, metric=metric, reason="by hand")
    resolved = load_tree(gates).test(TEST)
    with Store.open(db) as store:
        runs = stored_runs(store, TEST, list(METRICS), statuses=())
        # The re-key warning's count of values in the old key's baselines spells the rule in SQL.
        for metric in METRICS:
            rows = store.history(test=TEST, metric=metric)
            counted = sum(standing(replace(r.facts, before_shift=False), "trusted").joins for r in rows)
            [summary] = store.coordinates_for(series_key(TEST, {}), metric)
            assert summary.n_trusted_values == counted, metric
    replayed = replay(resolved, series_key(TEST, {}), runs, resolved.policy)
    assert len(replayed.runs) == len(live)
    for (statuses, windows), night, metrics in zip(live, replayed.runs, logged, strict=True):
        results = list(night.results.values())
        # A metric the record lacked is an error the store keeps no value of: not replayed (a known limit).
        assert set(night.results) == metrics, night.run.run_id
        assert all(statuses[m] == "error" for m in set(statuses) - metrics), night.run.run_id
        assert windows_of(results) == {m: w for m, w in windows.items() if m in metrics}, night.run.run_id
        assert {r.gate.metric: r.status for r in results} == {
            m: s for m, s in statuses.items() if m in metrics
        }, night.run.run_id
    # Some nights must have failed, rejoined and (where followed) shifted, or the comparison proves little.
    failed = sum(any(s == "fail" for s in statuses.values()) for statuses, _ in live)
    rejoined = sum(len(night.following.rejoin) for night in replayed.runs[1:])
    shifts = sum(len(night.following.accept) for night in replayed.runs)
    print(f"{failed} failing nights, {rejoined} rejoins, {shifts} accepted shifts")
    assert failed >= 3
    if case.accept != "never" and case.baseline == "trusted":
        assert shifts >= 1


@pytest.mark.parametrize("case", CASES[:2] + CASES[3:])
def test_an_import_of_the_nightlies_stores_what_they_stored(tmp_path: Path, db: str, case: Case) -> None:
    # The export says what a team's export can: each night's values, date, commit, and `trusted: false`
    # for the nights untrusted by hand.
    gates = write_gates(tmp_path, window=case.window, accept=case.accept, baseline=case.baseline)
    untrusted = set()
    with (tmp_path / "export.jsonl").open("w", encoding="utf-8") as export:
        for night in nights(case.seed, case.count, by_hand=False):
            gatecfg.evaluate(
                TEST, night.metrics, gates=gates, db=db, write=True, run_id=night.run_id, commit=night.run_id
            )
            if night.untrust_run is False:
                untrusted.add(night.run_id)
                with Store.open(db) as store:
                    store.set_trust(trusted=False, run_id=night.run_id, reason="by hand")
            with Store.open(db) as store:
                [row] = store.runs_by_id([night.run_id]).values()
            line = {"run_id": night.run_id, "date": row.run.created_at.isoformat(), "commit": night.run_id}
            export.write(
                json.dumps({**line, "metrics": night.metrics, "trusted": night.run_id not in untrusted})
            )
            export.write("\n")
    imported = f"sqlite:///{tmp_path / 'imported.db'}"
    result = run_cli("import", "--test", TEST, tmp_path / "export.jsonl", "--gates", gates, "--db", imported)
    assert result.code == 0, result.err
    assert "replayed as nightly `evaluate --write`s" in result.out

    def stored(url: str) -> dict[tuple[str, str, int], tuple[str, str, float | None]]:
        with Store.open(url) as store:
            return {
                (r.run_id, metric, r.point.step): (r.point.status, r.standing(case.baseline).why, r.point.ref)
                for metric in METRICS
                for r in store.history(test=TEST, metric=metric)
            }

    live, again = stored(db), stored(imported)
    assert again == live
    with Store.open(db) as store, Store.open(imported) as other:
        assert [(s.metric, s.first_run_id) for s in other.shifts()] == [
            (s.metric, s.first_run_id) for s in store.shifts()
        ]
    assert sum(status == "fail" for status, _, _ in live.values()) >= 3
