"""`gatecfg import`: CSV and JSON Lines exports backfill history keyed like `evaluate --write`.

Also home of the shared imported history (`write_scenario`), which the regimes, rebaseline and
report tests import: five regimes over 348 nightlies, opened by four merges.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy.exc
from helpers import CliResult, run_cli

from gatecfg.analysis.backfill import made_ahead
from gatecfg.analysis.importer import read_export
from gatecfg.keys import series_key
from gatecfg.store import Store
from gatecfg.store import writes as store_writes

TEST = "tests/e2e/fully_async/test_gsm8k_fully_async_ci.py"
EVAL, REWARD = "eval/all/avg_score", "rollout/raw_reward"

BASE = """\
version: 1
policy:
  window: 20                       # newest trusted values per coordinate that form the baseline
"""

# Comments, a blank line, flow and block limits, aligned trailing comments: what `rebaseline --write`
# must leave alone.
GATE_FILE = """\
# yaml-language-server: $schema=../../schema/gatefile.schema.json
test: tests/e2e/fully_async/test_gsm8k_fully_async_ci.py
gates:
  eval/all/avg_score:
    steps: last
    constraint: {rel_down: 0.1}    # one-sided: the up side is open (+inf)
    limits: {min: 0.50}            # an absolute floor that reads no history
    enforce: true                  # a failure fails the CI job

  # Train reward at the end of the run; the floor is the old TRAIN_MIN_VALUE.
  rollout/raw_reward:
    steps: last
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
    limits:
      min: 0.20                    # from the shell script, 2023
"""

LENGTHS = (70, 62, 81, 57, 78)
REWARD_LEVELS = (0.315, 0.285, 0.238, 0.238, 0.240)
EVAL_LEVELS = (0.588, 0.500, 0.410, 0.500, 0.575)
MERGES = ("kv-cache flag", "loss change", "cache salt", "logging fix")
CRASHED = 100  # a night whose job crashed: exported untrusted, with a nonsense score


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass(frozen=True)
class Scenario:
    root: Path  # working directory: gates/ and the export live here
    gates: Path
    gate_file: Path
    export: Path
    starts: tuple[int, ...]  # 1-based night numbers that open regimes 2..5
    run_ids: tuple[str, ...]  # every night, in date order
    commits: tuple[str, ...]

    def run_id(self, night: int) -> str:
        return self.run_ids[night - 1]

    def commit(self, night: int) -> str:
        return self.commits[night - 1]


def write_scenario(root: Path, *, seed: int = 6) -> Scenario:
    """The issue's history: four merges, each landing on the first nightly after it, with nightly noise.

    Train reward 0.315 -> 0.285 -> 0.238 -> 0.238 -> 0.240 (the third merge leaves it alone), eval score
    0.588 -> 0.500 -> 0.410 -> 0.500 -> 0.575. Main moves on most days; the export lists the rows
    shuffled, as a tracker export might, so that import has to order them by date.
    """
    rng = np.random.default_rng(seed)
    gates = root / "gates"
    (gates / "fully_async").mkdir(parents=True)
    (gates / "base.yaml").write_text(BASE)
    gate_file = gates / "fully_async" / "test_gsm8k_fully_async_ci.yaml"
    gate_file.write_text(GATE_FILE)
    rows: list[str] = []
    run_ids: list[str] = []
    commits: list[str] = []
    starts: list[int] = []
    night = 0
    commit = sha("initial")
    for regime, length in enumerate(LENGTHS):
        for day in range(length):
            night += 1
            if day == 0 and regime > 0:
                commit = sha(MERGES[regime - 1])
                starts.append(night)
            elif rng.random() < 0.7:
                commit = sha(f"main@{night}")
            score = EVAL_LEVELS[regime] + rng.normal(0, 0.01)
            reward = REWARD_LEVELS[regime] + rng.normal(0, 0.0015)
            trusted = "true"
            if night == CRASHED:
                score, reward, trusted = 0.12, 0.05, "false"
            run_id = f"nightly-{night:03d}"
            when = date(2024, 1, 1) + timedelta(days=night - 1)
            rows.append(f"{run_id},{when.isoformat()}T02:30:00Z,{commit},{trusted},{score:.4f},{reward:.5f}")
            run_ids.append(run_id)
            commits.append(commit)
    order = rng.permutation(len(rows))
    export = root / "nightlies.csv"
    header = f"run_id,date,commit,trusted,{EVAL},{REWARD}\n"
    export.write_text(header + "".join(rows[i] + "\n" for i in order))
    return Scenario(root, gates, gate_file, export, tuple(starts), tuple(run_ids), tuple(commits))


def import_scenario(scenario: Scenario, db: str) -> None:
    result = run_cli("import", "--test", TEST, scenario.export, "--gates", scenario.gates, "--db", db)
    assert result.code == 0, result.err


def _gates(tmp_path: Path, gate_file: str = GATE_FILE) -> Path:
    gates = tmp_path / "gates"
    (gates / "fully_async").mkdir(parents=True)
    (gates / "base.yaml").write_text(BASE)
    (gates / "fully_async" / "test_gsm8k_fully_async_ci.yaml").write_text(gate_file)
    return gates


def _import(
    tmp_path: Path, text: str, db: str, name: str = "export.csv", gates: Path | None = None
) -> CliResult:
    export = tmp_path / name
    export.write_text(text)
    return run_cli("import", "--test", TEST, export, "--gates", gates or _gates(tmp_path), "--db", db)


@pytest.mark.usefixtures("store")  # an upgraded store: PostgreSQL is never migrated implicitly
def test_scenario_import_stores_every_night_ordered_by_date(tmp_path: Path, store_url: str) -> None:
    scenario = write_scenario(tmp_path)
    result = run_cli(
        "import", "--test", TEST, scenario.export, "--gates", scenario.gates, "--db", store_url, "--trust-all"
    )
    assert result.code == 0, result.err
    assert "imported 348 run(s)" in result.out
    assert "every run trusted as given (--trust-all): 347 trusted, 1 untrusted by the export" in result.out
    assert "696 values at 2 coordinate(s)" in result.out
    with Store.open(store_url) as store:
        runs = list(reversed(store.runs(test=TEST)))
        history = store.history(test=TEST, metric=EVAL)
    assert [r.run.run_id for r in runs] == list(scenario.run_ids)
    assert [r.run.commit for r in runs] == list(scenario.commits)
    assert [r.run.run_id for r in runs if not r.trusted] == [scenario.run_id(CRASHED)]
    assert {h.point.step for h in history} == {-1}


def test_import_keys_values_exactly_like_evaluate_write(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gates = _gates(tmp_path)
    csv = "run_id,date,commit,eval/all/avg_score,rollout/raw_reward\nn1,2024-05-01,abc,0.58,0.31\n"
    assert _import(tmp_path, csv, db, gates=gates).code == 0
    record = tmp_path / "record.jsonl"
    record.write_text(json.dumps({"_step": 7, EVAL: 0.57, REWARD: 0.30}) + "\n")
    evaluated = run_cli(
        "evaluate",
        "--test",
        TEST,
        "--record",
        record,
        "--write",
        "--run-id",
        "n2",
        "--gates",
        gates,
        "--db",
        db,
    )
    assert evaluated.code == 0, evaluated.err
    with Store.open(db) as store:
        for metric in (EVAL, REWARD):
            rows = store.history(test=TEST, metric=metric)
            by_run = {r.run_id: (r.coordinate, r.point.step) for r in rows}
            assert by_run["n1"] == by_run["n2"]
            assert by_run["n1"][0].series_key == series_key(TEST)


def test_imported_points_carry_the_band_a_nightly_evaluate_would_have_used(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    rows = "".join(f"n{i:02d},2024-05-{i:02d},c{i},{0.5 + 0.01 * i},0.3\n" for i in range(1, 23))
    csv = f"run_id,date,commit,{EVAL},{REWARD}\n" + rows
    assert _import(tmp_path, csv, db).code == 0
    with Store.open(db) as store:
        history = {r.run_id: r.point for r in store.history(test=TEST, metric=EVAL)}
    assert history["n01"].status == "cold"
    assert history["n01"].ref is None
    # n22 meets the newest 20 before it, n02..n21, whose mean is 0.5 + 0.01 * 11.5.
    assert history["n22"].ref == pytest.approx(0.615)
    assert history["n22"].lo == pytest.approx(0.615 * 0.9)
    assert history["n22"].hi is None
    assert history["n22"].status == "pass"


def test_runs_are_ordered_by_date_not_by_file_order(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    csv = (
        f"run_id,date,commit,{EVAL}\n"
        "late,2024-05-03T01:00:00+01:00,c3,0.5\n"  # 00:00 UTC, after middle's 23:30 UTC
        "early,2024-05-01,c1,0.5\n"
        "middle,2024-05-02T23:30:00Z,c2,0.5\n"
    )
    assert _import(tmp_path, csv, db).code == 0
    with Store.open(db) as store:
        assert [r.run.run_id for r in reversed(store.runs(test=TEST))] == ["early", "middle", "late"]


def test_trusted_column_false_imports_an_untrusted_run(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    csv = f"run_id,date,commit,trusted,{EVAL}\nok,2024-05-01,c1,,0.5\nbad,2024-05-02,c2,false,0.1\n"
    assert _import(tmp_path, csv, db).code == 0
    with Store.open(db) as store:
        trust = {r.run.run_id: r.trusted for r in store.runs(test=TEST)}
    assert trust == {"ok": True, "bad": False}


def test_jsonl_export_with_steps_and_single_values(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gate_file = GATE_FILE.replace(
        "    steps: last\n    constraint: {rel_down: 0.2", "    steps: all\n    constraint: {rel_down: 0.2"
    )
    gates = _gates(tmp_path, gate_file)
    lines = [
        {
            "run_id": "a",
            "date": "2024-05-01",
            "commit": "c1",
            "metrics": {EVAL: 0.5, REWARD: [[0, 0.1], [1, 0.2]]},
        },
        {"run_id": "b", "date": "2024-05-02", "commit": None, "trusted": False, "metrics": {EVAL: "NaN"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    result = _import(tmp_path, text, db, name="export.jsonl", gates=gates)
    assert result.code == 0, result.err
    with Store.open(db) as store:
        rewards = store.history(test=TEST, metric=REWARD)
        evals = store.history(test=TEST, metric=EVAL)
        runs = {r.run.run_id: r for r in store.runs(test=TEST)}
    assert sorted((r.run_id, r.point.step, r.point.value) for r in rewards) == [("a", 0, 0.1), ("a", 1, 0.2)]
    # A NaN at a gated coordinate is an error verdict, and evaluate stores nothing for it either.
    assert [(r.run_id, r.point.value) for r in evals] == [("a", 0.5)]
    assert runs["b"].run.commit is None
    assert not runs["b"].trusted


def test_importing_again_skips_stored_runs_and_duplicates_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gates = _gates(tmp_path)
    csv = f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\nn2,2024-05-02,c2,0.6\n"
    assert _import(tmp_path, csv, db, gates=gates).code == 0
    again = _import(tmp_path, csv + "n3,2024-05-03,c3,0.7\n", db, gates=gates)
    assert again.code == 0
    assert "imported 1 run(s)" in again.out
    assert "2 run(s) already stored, skipped" in again.out
    with Store.open(db) as store:
        assert len(store.history(test=TEST, metric=EVAL)) == 3


def test_importing_the_same_export_again_still_names_what_it_holds(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gates = _gates(tmp_path)
    csv = f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\n"
    first = _import(tmp_path, csv, db, gates=gates)
    again = _import(tmp_path, csv, db, gates=gates)
    assert "imported 0 run(s)" in again.out
    # Every run skipped: the metrics it holds are still the export's, not "absent from the export".
    assert EVAL not in again.out.split("absent from the export:")[-1]
    assert again.out.splitlines()[2:] == first.out.splitlines()[2:]


@pytest.mark.parametrize(
    ("csv", "expected"),
    [
        (
            f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\nn2,2024-05-02,c2,n/a\n",
            "export.csv:3: error: eval/all/avg_score: `n/a` is not a number",
        ),
        (
            f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\nn2,yesterday,c2,0.5\n",
            "export.csv:3: error: date: `yesterday` is not an ISO 8601 date",
        ),
        (
            f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\nn1,2024-05-02,c2,0.5\n",
            "export.csv:3: error: run_id: run_id `n1` appears twice, first at export.csv:2",
        ),
        (f"run_id,commit,{EVAL}\nn1,c1,0.5\n", "export.csv:1: error: the header lacks `date`"),
        (
            f"run_id,date,commit,{EVAL}\nn1,2024-05-01,c1,0.5\nn2,2024-05-02,c2\n",
            "export.csv:3: error: the row has 3 cells, the header 4",
        ),
        (
            f"run_id,date,commit,trusted,{EVAL}\nn1,2024-05-01,c1,maybe,0.5\n",
            "export.csv:2: error: trusted: `maybe` is not true or false",
        ),
        (
            f"run_id,date,commit,{EVAL},{EVAL}@3\nn1,2024-05-01,c1,0.5,0.5\n",
            "export.csv:1: error: `eval/all/avg_score` has both a single-value column and",
        ),
    ],
    ids=[
        "not-a-number",
        "bad-date",
        "duplicate-run-id",
        "missing-column",
        "short-row",
        "bad-trusted",
        "mixed",
    ],
)
def test_a_bad_row_exits_2_naming_file_and_line_and_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, csv: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = _import(tmp_path, csv, db)
    assert result.code == 2
    assert expected in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "h.db").exists()


def test_a_jsonl_error_names_the_line_and_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    good = json.dumps({"run_id": "a", "date": "2024-05-01", "commit": "c", "metrics": {EVAL: 0.5}})
    result = _import(
        tmp_path, good + '\n{"run_id": "b", "date": \n', f"sqlite:///{tmp_path / 'h.db'}", "x.jsonl"
    )
    assert result.code == 2
    assert "x.jsonl:2:" in result.err
    assert "malformed JSON" in result.err


def test_one_value_per_run_for_a_gate_over_steps_is_refused_at_the_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    gate_file = GATE_FILE.replace(
        "    steps: last\n    constraint: {rel_down: 0.2", "    steps: all\n    constraint: {rel_down: 0.2"
    )
    gates = _gates(tmp_path, gate_file)
    csv = f"run_id,date,commit,{EVAL},{REWARD}\nn1,2024-05-01,c1,0.5,0.3\n"
    result = _import(tmp_path, csv, f"sqlite:///{tmp_path / 'h.db'}", gates=gates)
    assert result.code == 2
    assert (
        "export.csv:1:39: error: rollout/raw_reward: `rollout/raw_reward` holds one value per run"
        in result.err
    )
    assert f"hint: give `{REWARD}@<step>` columns" in result.err


def test_a_run_id_stored_for_another_test_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gates = _gates(tmp_path)
    (gates / "other.yaml").write_text(
        f"test: other\ngates:\n  {EVAL}:\n    steps: last\n    constraint: null\n"
    )
    export = tmp_path / "other.csv"
    export.write_text(f"run_id,date,commit,{EVAL}\nshared,2024-05-01,c1,0.5\n")
    assert run_cli("import", "--test", "other", export, "--gates", gates, "--db", db).code == 0
    result = _import(tmp_path, f"run_id,date,commit,{EVAL}\nshared,2024-05-02,c2,0.5\n", db, gates=gates)
    assert result.code == 2
    assert "export.csv:2: error: run_id: run_id `shared` is already stored for test `other`" in result.err


def test_columns_no_gate_declares_are_named_not_imported(tmp_path: Path) -> None:
    csv = f"run_id,date,commit,{EVAL},perf/unknown\nn1,2024-05-01,c1,0.5,3\n"
    result = _import(tmp_path, csv, f"sqlite:///{tmp_path / 'h.db'}")
    assert result.code == 0
    assert "not imported: perf/unknown" in result.out
    assert f"absent from the export: {REWARD}" in result.out


@pytest.mark.usefixtures("store")
def test_a_store_failure_midway_exits_3_and_leaves_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_url: str
) -> None:
    scenario = write_scenario(tmp_path)
    insert = store_writes.insert_points
    calls = []

    def failing(*args: Any, **kwargs: Any) -> None:
        # The first batches go in, a later one fails: all of them are in the import's one transaction.
        calls.append(1)
        if len(calls) > 2:
            raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("disk I/O error"))
        insert(*args, **kwargs)

    monkeypatch.setattr(store_writes, "BATCH_VALUES", 50)
    monkeypatch.setattr(store_writes, "insert_points", failing)
    result = run_cli("import", "--test", TEST, scenario.export, "--gates", scenario.gates, "--db", store_url)
    assert result.code == 3
    assert len(calls) == 3
    assert "disk I/O error" in result.err
    assert "Traceback" not in result.err
    monkeypatch.undo()
    with Store.open(store_url) as store:
        assert store.runs() == []


def test_read_export_sorts_by_date_and_parses_both_step_shapes(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(
        f"run_id,date,commit,{REWARD}@0,{REWARD}@10,{EVAL}\nb,2024-05-02,c,1,2,\na,2024-05-01,,3,NaN,0.5\n"
    )
    export = read_export(path, "e.csv")
    runs = list(export.runs())
    assert [r.run_id for r in runs] == ["a", "b"]
    assert [e.run_id for e in export.entries] == ["a", "b"]
    a = runs[0]
    assert a.commit is None
    assert (a.record.points(REWARD)[0].step, a.record.points(REWARD)[0].value) == (0, 3.0)
    assert math.isnan(a.record.points(REWARD)[1].value or 0.0)
    assert a.single == frozenset({EVAL})
    assert runs[1].record.points(EVAL) == ()


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ("[[0, 0.5], [1, true]]", "true is not a number"),
        ("[[0, 0.5], [true, 0.6]]", "item 1 has step true, not a whole number from 0 to"),
        ('[[0, 0.5], [1, "0.6"]]', '"0.6" is not a number'),
        ("[[0, 0.5], [0, 0.6]]", "step 0 is given twice"),
        ("[[0, 0.5], [1.5, 0.6]]", "item 1 has step 1.5, not a whole number from 0 to"),
        ("[[0, 0.5], [-1, 0.6]]", "item 1 has step -1, not a whole number from 0 to"),
        ("[[0, 0.5], [1, 0.6, 7]]", "item 1 is not a [step, value] pair"),
        ("[[0, 0.5], {}]", "item 1 is not a [step, value] pair"),
    ],
    ids=["bool-value", "bool-step", "string-value", "duplicate-step", "fractional-step", "negative-step",
         "triple", "object"],
)  # fmt: skip
def test_a_bad_pair_in_jsonl_is_an_error_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pairs: str, expected: str
) -> None:
    # The bulk reading of [[step, value], ...] hands anything but whole steps and JSON numbers to the
    # item-by-item reading, which names the error: true is not 1, "0.6" is not 0.6.
    monkeypatch.chdir(tmp_path)
    good = json.dumps({"run_id": "a", "date": "2024-05-01", "trusted": True, "metrics": {REWARD: [[0, 0.4]]}})
    bad = f'{{"run_id": "b", "date": "2024-05-02", "trusted": true, "metrics": {{"{REWARD}": {pairs}}}}}'
    result = _import(tmp_path, f"{good}\n{bad}\n", f"sqlite:///{tmp_path / 'h.db'}", "x.jsonl")
    assert result.code == 2, result.out
    assert "x.jsonl:2:" in result.err
    assert expected in result.err
    assert not (tmp_path / "h.db").exists()  # checked before the store is opened: none was created


def test_a_jsonl_export_streams_in_date_order_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lines out of date order, steps out of order within a run, and batches of a few values: every run is
    # stored once, each judged against the runs dated before it.
    monkeypatch.setattr(store_writes, "BATCH_VALUES", 3)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gate_file = GATE_FILE.replace(
        "    steps: last\n    constraint: {rel_down: 0.2", "    steps: all\n    constraint: {rel_down: 0.2"
    )
    gates = _gates(tmp_path, gate_file)
    days = [3, 1, 4, 2, 5]
    lines = [
        json.dumps(
            {
                "run_id": f"n{day}",
                "date": f"2024-05-0{day}",
                "metrics": {REWARD: [[1, 0.5 + day], [0, 0.1 * day]], EVAL: 0.5},
            }
        )
        for day in days
    ]
    assert _import(tmp_path, "\n".join(lines) + "\n", db, name="e.jsonl", gates=gates).code == 0
    with Store.open(db) as store:
        history = store.history(test=TEST, metric=REWARD, step=1)
    assert [row.run_id for row in history] == ["n5", "n4", "n3", "n2", "n1"]
    n4 = next(row.point for row in history if row.run_id == "n4")
    assert n4.value == 4.5
    assert n4.ref == pytest.approx((1.5 + 2.5 + 3.5) / 3)


def test_runs_of_hundreds_of_steps_store_every_value_through_multi_row_inserts(tmp_path: Path) -> None:
    # 3 runs x 257 steps: whole statements of ROWS_PER_INSERT rows on SQLite, and the rows left over.
    assert 3 * 257 % store_writes.ROWS_PER_INSERT
    db = f"sqlite:///{tmp_path / 'h.db'}"
    gate_file = GATE_FILE.replace(
        "    steps: last\n    constraint: {rel_down: 0.2", "    steps: all\n    constraint: {rel_down: 0.2"
    )
    rng = np.random.default_rng(3)
    sent = {day: rng.normal(1.0, 0.1, 257) for day in (1, 2, 3)}
    lines = [
        json.dumps(
            {"run_id": f"n{day}", "date": f"2024-05-0{day}", "metrics": {REWARD: list(enumerate(v.tolist()))}}
        )
        for day, v in sent.items()
    ]
    assert (
        _import(tmp_path, "\n".join(lines) + "\n", db, name="e.jsonl", gates=_gates(tmp_path, gate_file)).code
        == 0
    )
    with Store.open(db) as store:
        for step in (0, 99, 100, 256):
            history = store.history(test=TEST, metric=REWARD, step=step)
            assert [(row.run_id, row.point.value) for row in history] == [
                (f"n{day}", sent[day][step]) for day in (3, 2, 1)
            ]


# --- made ahead: the next block judged while one is written ---------------------------------------------


def test_runs_made_ahead_come_in_order_while_the_thread_stays_at_most_depth_ahead() -> None:
    # No sleep: for each item the caller takes, it waits until the thread has made all it may (the two
    # queued and the one it blocks on putting), then counts what was made.
    made: list[int] = []
    changed = threading.Condition()
    taken: list[tuple[int, int]] = []

    def blocks() -> Iterator[int]:
        for n in range(20):
            with changed:
                made.append(n)
                changed.notify_all()
            yield n

    for n in made_ahead(blocks(), 2):
        ahead = min(n + 4, 20)
        with changed:
            assert changed.wait_for(lambda ahead=ahead: len(made) >= ahead, timeout=60)
            taken.append((n, len(made)))
    assert [n for n, _ in taken] == list(range(20))
    # Taken, queued (2) and the one being made: never more, and exactly that while the caller works.
    assert taken == [(n, min(n + 4, 20)) for n in range(20)]


def test_an_error_making_the_runs_is_raised_where_they_are_written() -> None:
    def blocks() -> Iterator[int]:
        yield 1
        raise sqlalchemy.exc.OperationalError("SELECT", {}, Exception("the store went away"))

    found = made_ahead(blocks(), 1)
    assert next(found) == 1
    with pytest.raises(sqlalchemy.exc.OperationalError, match="went away"):
        next(found)


def test_a_writer_that_stops_early_stops_the_thread_and_closes_what_it_read() -> None:
    closed = threading.Event()

    def blocks() -> Iterator[int]:
        try:
            yield from range(10**6)
        finally:
            closed.set()

    found = made_ahead(blocks(), 1)
    assert next(found) == 0
    found.close()  # as when writing a block fails
    assert closed.is_set()
    assert not any(t.name == "gatecfg-made-ahead" for t in threading.enumerate())


def test_a_scratch_folder_with_no_room_exits_2_naming_it_and_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The export's columns go to a scratch file as it is read: a full or missing TMPDIR is one line.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    good = json.dumps({"run_id": "a", "date": "2024-05-01", "commit": "c", "metrics": {EVAL: 0.5}})
    result = _import(tmp_path, good + "\n", f"sqlite:///{tmp_path / 'h.db'}", "x.jsonl")
    assert result.code == 2
    assert "x.jsonl: error" in result.err
    assert "cannot write the import's scratch file in" in result.err
    assert "TMPDIR" in result.err
    assert not (tmp_path / "h.db").exists()
