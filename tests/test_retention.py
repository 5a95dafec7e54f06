"""`gatecfg prune --keep N` (retention): per coordinate, the values of runs older than the newest N trusted
values at each step are listed, and deleted only with --yes, without changing any baseline of a window up
to N. End to end through the CLI, and against a plain reading of random histories, on SQLite and (when
configured) PostgreSQL."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import count, run_cli

from gatecfg.store import CoordinateSpec, RunInfo, Store, StoredPoint

TEST = "tests/e2e/test_retention_ci.py"
METRIC = "train/grad_norm"
WINDOW = 3
T0 = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(
        "version: 1\ndefaults:\n"
        f"  {METRIC}: {{steps: all, constraint: {{rel_up: 0.5, abs_floor_up: 0.1}}}}\n"
        # A step few runs log is what this file tests, not a run missing steps (test_living_baselines).
        f"policy:\n  window: {WINDOW}\n  missing: ignore\n",
        encoding="utf-8",
    )
    (root / "retention.yaml").write_text(f"test: {TEST}\ngates:\n  {METRIC}:\n", encoding="utf-8")
    return root


def nightly(tmp_path: Path, gates: Path, db: str, night: int, steps: dict[int, float]) -> None:
    """Write one nightly through `evaluate --write`; a value far above the band makes it untrusted."""
    record = tmp_path / f"night{night}.jsonl"
    record.write_text(json.dumps({METRIC: [[s, v] for s, v in steps.items()]}) + "\n", encoding="utf-8")
    result = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--write",
        "--run-id", f"night-{night}",
    )  # fmt: skip
    assert result.code == 0, result.err


def baselines_of(tmp_path: Path, gates: Path, db: str, steps: int) -> list[tuple[object, ...]]:
    """Every step's reference, number of values and status, as a PR's evaluate sees them."""
    record = tmp_path / "pr.jsonl"
    record.write_text(json.dumps({METRIC: [[s, 1.0] for s in range(steps)]}) + "\n", encoding="utf-8")
    result = run_cli(
        "evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, "--format", "json"
    )
    assert result.code == 0, result.err
    return [(v["step"], v["ref"], v["n"], v["status"]) for v in json.loads(result.out)["verdicts"]]


def seed(tmp_path: Path, gates: Path, db: str, nights: int = 8) -> None:
    """`nights` nightlies at steps 0 and 1; night 5 fails its band, so it is stored untrusted."""
    for night in range(nights):
        value = 50.0 if night == 5 else 1.0 + 0.01 * night
        nightly(tmp_path, gates, db, night, {0: value, 1: value})


def test_dry_run_lists_what_goes_and_deletes_nothing(tmp_path: Path, gates: Path, db: str) -> None:
    seed(tmp_path, gates, db)

    result = run_cli("prune", "--keep", str(WINDOW), "--dry-run", "--gates", gates, "--db", db)

    assert result.code == 0, result.err
    assert TEST in result.out
    # 8 nights, night 5 untrusted: the newest 3 trusted are 7, 6, 4; 5 stays (newer), 0-3 go.
    assert "deletes 8 values of 4 runs · keeps 8 values of 4 runs" in result.out
    assert "8 value(s) of 4 run(s) at 1 coordinate(s); nothing deleted (--dry-run)" in result.out
    assert count(db, "SELECT count(*) FROM metric_points") == 16


def test_without_yes_nothing_is_deleted(tmp_path: Path, gates: Path, db: str) -> None:
    seed(tmp_path, gates, db)

    result = run_cli("prune", "--keep", str(WINDOW), "--gates", gates, "--db", db)

    assert "nothing deleted (pass --yes to delete them)" in result.out
    assert count(db, "SELECT count(*) FROM metric_points") == 16


def test_yes_keeps_every_baseline_and_the_untrusted_runs_newer_than_it(
    tmp_path: Path, gates: Path, db: str
) -> None:
    seed(tmp_path, gates, db)
    before = baselines_of(tmp_path, gates, db, steps=2)

    result = run_cli("prune", "--keep", str(WINDOW), "--yes", "--gates", gates, "--db", db)

    assert result.code == 0, result.err
    assert "deleted 8 value(s) of 4 run(s) at 1 coordinate(s) (8 values)" in result.out
    assert baselines_of(tmp_path, gates, db, steps=2) == before
    kept = "SELECT r.run_id FROM runs r JOIN run_coordinates rc ON rc.run_pk = r.pk ORDER BY r.run_id"
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            assert [r for (r,) in conn.execute(sa.text(kept))] == [f"night-{n}" for n in (4, 5, 6, 7)]
    finally:
        engine.dispose()
    assert count(db, "SELECT count(*) FROM runs") == 8  # run records stay
    # Trusting the untrusted night again by hand finds its values.
    assert run_cli("trust", "--run-id", "night-5", "--reason", "was fine", "--db", db).code == 0
    assert baselines_of(tmp_path, gates, db, steps=2)[0][2] == WINDOW
    again = run_cli("prune", "--keep", str(WINDOW + 1), "--yes", "--gates", gates, "--db", db)
    assert "nothing to prune" in again.out


def test_a_step_few_runs_log_keeps_its_newest_values(tmp_path: Path, gates: Path, db: str) -> None:
    # Step 1 is logged every other night: its newest 3 values reach back to night 2.
    for night in range(8):
        nightly(
            tmp_path,
            gates,
            db,
            night,
            {0: 1.0 + night / 100} | ({1: 2.0 + night / 100} if night % 2 == 0 else {}),
        )
    before = baselines_of(tmp_path, gates, db, steps=2)

    result = run_cli("prune", "--keep", str(WINDOW), "--yes", "--gates", gates, "--db", db)

    assert result.code == 0, result.err
    # Night 2 holds step 1's third newest value and stays; nights 0, 1 and 3 go.
    assert "deleted 4 value(s) of 3 run(s)" in result.out
    assert baselines_of(tmp_path, gates, db, steps=2) == before
    assert [row[2] for row in before] == [WINDOW, WINDOW]


def test_a_keep_below_a_declared_window_is_refused(tmp_path: Path, gates: Path, db: str) -> None:
    seed(tmp_path, gates, db)

    result = run_cli("prune", "--keep", str(WINDOW - 1), "--yes", "--gates", gates, "--db", db)

    assert result.code == 2
    assert result.err.startswith(f"{gates / 'base.yaml'}:5: error: policy.window: --keep 2 would delete")
    assert f"hint: pass --keep {WINDOW} or more" in result.err
    assert count(db, "SELECT count(*) FROM metric_points") == 16


@pytest.mark.parametrize("argv", [["--keep", "0"], ["--keep", "3", "--orphaned"], []], ids=str)
def test_prune_needs_one_positive_rule(gates: Path, db: str, argv: list[str]) -> None:
    result = run_cli("prune", *argv, "--gates", gates, "--db", db)

    assert result.code == 2
    assert "Traceback" not in result.err


@pytest.mark.parametrize("keep", [1, 2, 3, 5])
def test_retention_never_changes_a_baseline_of_a_window_up_to_keep(store: Store, keep: int) -> None:
    """Random histories: runs storing different sets of steps, untrusted and trust-flipped runs, NaNs, and
    runs shared by several coordinates."""
    rng = random.Random(keep)
    series = json.dumps({"labels": {}, "test": TEST}, separators=(",", ":"))
    specs = [CoordinateSpec(f"keep{i:08d}", series, TEST, f"m{i}", '"all"', "null") for i in range(4)]
    patterns = [(0, 1, 2), (0, 2), (1, 3), (0, 1, 2, 3)]
    for day in range(14):
        run = RunInfo(
            run_id=f"d{day}", test=TEST, series_key=series, labels={}, commit=None, branch="main",
            ci_run_id=None, ci_run_attempt="1", url=None, created_at=T0 + timedelta(days=day),
            gate_trusted=rng.random() < 0.7, written_by="test",
        )  # fmt: skip
        chosen = {spec: rng.choice(patterns) for spec in specs if rng.random() < 0.9}
        store.write_run(
            run,
            {
                spec: [
                    StoredPoint(
                        step, math.nan if rng.random() < 0.1 else float(day), "pass", None, None, None
                    )
                    for step in steps
                ]
                for spec, steps in chosen.items()
            },
        )
        if rng.random() < 0.15:
            store.set_trust(trusted=not run.gate_trusted, run_id=run.run_id, reason="test")
    hashes = [spec.coordinate for spec in specs]
    before = {window: store.baselines(hashes, window=window) for window in range(1, keep + 1)}
    nightly = {
        window: store.baselines(hashes, window=window, baseline="nightly") for window in range(1, keep + 1)
    }

    planned, deleted = store.retain(keep)

    assert deleted > 0
    assert sum(r.values_doomed for r in planned) == deleted
    for window in range(1, keep + 1):
        assert store.baselines(hashes, window=window) == before[window], window
        assert store.baselines(hashes, window=window, baseline="nightly") == nightly[window], window
    assert store.retention_plan(keep) == []
