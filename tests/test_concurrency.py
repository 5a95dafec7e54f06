"""Concurrent writers: 16 `gatecfg evaluate --write` processes at once against one store (SPEC §7).

Every run is stored exactly once and whole, every process exits with the code its own record earns, and
a run id raced by two processes is stored once. On SQLite the 16 processes also race to create and
migrate the store file, which none of them finds at start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import subprocess_env

from gatecfg.store import Store

TEST = "tests/e2e/test_fleet_ci.py"
STEPS = 50
PROCESSES = 16
RACED = "raced-run"
# Per run: 50 loss steps, the score (`last`) and the tracked mfu (`last`).
POINTS_PER_RUN = STEPS + 2
GATES = f"""\
test: {TEST}
gates:
  train/loss:
    steps: all
    constraint: {{rel_up: 0.5, abs_floor_up: 0.1}}
  eval/score:
    steps: last
    constraint: null
    limits: {{min: 0.5}}
    enforce: true
  perf/mfu:
    steps: last
    constraint: null
"""
# Seconds a process may take on a loaded 2-CPU runner; far above the few it needs, only there so a hang
# fails the test instead of the whole CI job.
PROCESS_TIMEOUT_S = 300


def _record(path: Path, *, score: float) -> Path:
    rows = [{"_step": step, "train/loss": 2.0 - step / 100} for step in range(STEPS)]
    rows.append({"_step": STEPS, "eval/score": score, "perf/mfu": 0.41})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _launch(tmp_path: Path, db: str, run_id: str, record: Path, index: int) -> subprocess.Popen[bytes]:
    gates = tmp_path / "gates"
    argv = [sys.executable, "-m", "gatecfg", "evaluate", "--gates", str(gates), "--test", TEST,
            "--record", str(record), "--db", db, "--write", "--run-id", run_id, "--commit", f"c{index:02d}",
            "--format", "json", "--output", str(tmp_path / f"report-{index}.json")]  # fmt: skip
    return subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run_all(tmp_path: Path, db: str) -> dict[int, tuple[str, int, str, dict[str, object]]]:
    """Start every process before waiting for any: index -> (run id, exit code, stderr, JSON report).

    Processes 0..13 write their own run ids; 14 and 15 race for one. Every fourth record fails the
    enforced score limit, and the raced pair's record passes.
    """
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "fleet.yaml").write_text(GATES, encoding="utf-8")
    passing = _record(tmp_path / "pass.jsonl", score=0.9)
    failing = _record(tmp_path / "fail.jsonl", score=0.3)
    plan = {i: (f"run-{i:02d}", failing if i % 4 == 0 else passing) for i in range(PROCESSES - 2)}
    plan |= {PROCESSES - 2: (RACED, passing), PROCESSES - 1: (RACED, passing)}
    started = {i: _launch(tmp_path, db, run_id, record, i) for i, (run_id, record) in plan.items()}
    results = {}
    for i, process in started.items():
        _, err = process.communicate(timeout=PROCESS_TIMEOUT_S)
        report_path = tmp_path / f"report-{i}.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        results[i] = (plan[i][0], process.returncode, err.decode(), report)
    return results


def _stored(db: str) -> dict[str, tuple[bool, int, int]]:
    """run id -> (gate_trusted, points, run_coordinates rows), read straight from the tables."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT r.run_id, r.gate_trusted,"
                " (SELECT count(*) FROM metric_points p WHERE p.run_pk = r.pk),"
                " (SELECT count(*) FROM run_coordinates c WHERE c.run_pk = r.pk)"
                " FROM runs r"
            ).all()
    finally:
        engine.dispose()
    return {run_id: (bool(trusted), points, coordinates) for run_id, trusted, points, coordinates in rows}


def _check(results: dict[int, tuple[str, int, str, dict[str, object]]], db: str) -> None:
    for i, (run_id, code, err, report) in results.items():
        expected = 1 if run_id != RACED and i % 4 == 0 else 0
        assert code == expected, f"process {i} ({run_id}) exited {code}, expected {expected}:\n{err}"
        assert "Traceback" not in err, err
        assert report["exit_code"] == expected
    stored = _stored(db)
    assert sorted(stored) == sorted({run_id for run_id, *_ in results.values()})
    for i, (run_id, _, _, report) in results.items():
        trusted, points, coordinates = stored[run_id]
        assert (points, coordinates) == (POINTS_PER_RUN, 3), f"{run_id} stored partially"
        assert trusted is (run_id == RACED or i % 4 != 0)
        if run_id != RACED:
            assert report["run"]["written"] is True  # type: ignore[index]
    raced = [report["run"] for run_id, _, _, report in results.values() if run_id == RACED]
    assert sorted((r["written"], r["already_stored"]) for r in raced) == [(False, True), (True, False)]  # type: ignore[index]


def test_sixteen_writers_on_one_new_sqlite_file_store_each_run_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'history.db'}"
    _check(_run_all(tmp_path, db), db)


@pytest.mark.postgres
def test_sixteen_writers_on_one_postgresql_database_store_each_run_once(
    tmp_path: Path, postgresql_url: str
) -> None:
    with Store.open(postgresql_url, check_schema=False) as store:
        store.upgrade()
    _check(_run_all(tmp_path, postgresql_url), postgresql_url)
