"""A fleet of nightlies finishing at once: N `gatecfg evaluate --write` processes started together against
one store, on SQLite (a file none of them finds at start, so they also race to create and migrate it) and
on PostgreSQL (a scratch database, created and dropped here). Prints runs per second, the p50 and p95 of
each process's wall time, and the stored row counts, checked exact: every run once and whole, a run id
raced by two processes stored once.

    python benchmarks/concurrent_writers.py [--processes 32] [--steps 200] [--stores sqlite,postgresql]
        [--server postgresql+psycopg://postgres@127.0.0.1:5432/test]

Not part of the test suite (tests/test_concurrency.py runs 16 writers on each store).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

TEST = "tests/e2e/test_fleet_ci.py"
RACED = "raced-run"
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
COORDINATES = 3


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECFG_", "GITHUB_")) and k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    )
    return env


def _record(path: Path, steps: int, *, score: float) -> Path:
    rows = [{"_step": step, "train/loss": 2.0 - step / (10 * steps)} for step in range(steps)]
    rows.append({"_step": steps, "eval/score": score, "perf/mfu": 0.41})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run(db: str, folder: Path, processes: int, steps: int) -> dict[str, object]:
    """Start every process, then wait for all: the figures and the checked counts."""
    gates = folder / "gates"
    gates.mkdir()
    (gates / "fleet.yaml").write_text(GATES, encoding="utf-8")
    passing = _record(folder / "pass.jsonl", steps, score=0.9)
    failing = _record(folder / "fail.jsonl", steps, score=0.3)
    # The last two race for one run id; every fourth of the others fails its enforced limit (exit 1).
    plan = [(f"run-{i:02d}", failing if i % 4 == 0 else passing) for i in range(processes - 2)]
    plan += [(RACED, passing), (RACED, passing)]
    env = _env()
    started = time.monotonic()
    children = []
    for i, (run_id, record) in enumerate(plan):
        argv = [sys.executable, "-m", "gatecfg", "evaluate", "--gates", str(gates), "--test", TEST,
                "--record", str(record), "--db", db, "--write", "--run-id", run_id, "--commit", f"c{i:02d}",
                "--format", "json", "--output", str(folder / f"report-{i}.json")]  # fmt: skip
        # Output to files: a pipe nobody reads until the process ends would stall it once full.
        err = (folder / f"err-{i}.txt").open("wb")
        child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        err.close()
        children.append((run_id, i, time.monotonic(), child))
    latencies, codes, written = [], [], []
    pending = list(children)
    while pending:
        for item in list(pending):
            run_id, i, start, child = item
            if child.poll() is None:
                continue
            latencies.append(time.monotonic() - start)
            expected = 1 if run_id != RACED and i % 4 == 0 else 0
            if child.returncode != expected:
                err = (folder / f"err-{i}.txt").read_text(encoding="utf-8")
                raise SystemExit(f"{run_id} exited {child.returncode}, expected {expected}:\n{err}")
            codes.append(child.returncode)
            report = json.loads((folder / f"report-{i}.json").read_text(encoding="utf-8"))
            written.append(report["run"]["written"])
            pending.remove(item)
        time.sleep(0.01)
    wall = time.monotonic() - started
    counts = _counts(db)
    runs = processes - 1  # the raced pair stores one run
    points = steps + 2
    expected_counts = {"runs": runs, "run_coordinates": runs * COORDINATES, "metric_points": runs * points,
                       "coordinates": COORDINATES}  # fmt: skip
    if counts != expected_counts:
        raise SystemExit(f"stored {counts}, expected {expected_counts}")
    if sorted(written).count(True) != runs:
        raise SystemExit(f"{sorted(written).count(True)} processes say they wrote; {runs} runs are stored")
    ordered = sorted(latencies)
    return {
        "processes": processes,
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 2),
        "p50_s": round(statistics.median(ordered), 2),
        "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        **counts,
    }


def _counts(db: str) -> dict[str, int]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return {
                table: conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
                for table in ("runs", "run_coordinates", "metric_points", "coordinates")
            }
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--server", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    for store in args.stores.split(","):
        with tempfile.TemporaryDirectory() as folder:
            if store == "sqlite":
                figures = run(
                    f"sqlite:///{Path(folder) / 'history.db'}", Path(folder), args.processes, args.steps
                )
            else:
                figures = _on_postgresql(args.server, Path(folder), args.processes, args.steps)
        print(f"{store}: " + ", ".join(f"{k} {v}" for k, v in figures.items()), flush=True)


def _on_postgresql(server_url: str, folder: Path, processes: int, steps: int) -> dict[str, object]:
    name = f"gatecfg_bench_{uuid.uuid4().hex[:12]}"
    server = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')  # a generated name
        db = sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        upgraded = subprocess.run(
            [sys.executable, "-m", "gatecfg", "db", "upgrade", "--db", db],
            check=False,
            env=_env(),
            capture_output=True,
        )
        if upgraded.returncode:
            raise SystemExit(upgraded.stderr.decode())
        return run(db, folder, processes, steps)
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.dispose()


if __name__ == "__main__":
    main()
