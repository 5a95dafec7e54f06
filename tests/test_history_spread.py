"""`gatecfg history` shows what a budget gate's verdict read: "value vs usual ± spread" and the edges where
the step fails alone, from the spread stored with each value (migration 0007); band gates' values, and
every value written before 0007, show no spread."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from helpers import run_cli
from test_store import migrations_config

from gatecfg import terminal
from gatecfg.store import Store

TEST = "tests/e2e/test_spread_ci.py"
BASE = "version: 1\ndefaults: {}\npolicy:\n  window: 20\n"
GATES = (
    f"test: {TEST}\ngates:\n"
    "  train/loss:\n    steps: all\n    constraint: {budget: up}\n"
    "  eval/score:\n    steps: last\n    constraint: {rel_down: 0.1}\n"
)
STEPS = 4


def write_gates(root: Path) -> Path:
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "spread.yaml").write_text(GATES, encoding="utf-8")
    return gates


def record(path: Path, losses: list[float], score: float) -> Path:
    rows = {"train/loss": [[s, v] for s, v in enumerate(losses)], "eval/score": [[9, score]]}
    path.write_text(json.dumps(rows) + "\n", encoding="utf-8")
    return path


def nightlies(tmp_path: Path, gates: Path, db: str, nights: int = 8) -> dict[str, object]:
    """`nights` noisy nightlies written; the last one's JSON report."""
    rng = random.Random(7)
    out: dict[str, object] = {}
    for night in range(nights):
        losses = [2.0 - 0.1 * s + rng.gauss(0, 0.02) for s in range(STEPS)]
        tonight = record(tmp_path / f"n{night}.jsonl", losses, 0.8 + rng.gauss(0, 0.01))
        done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tonight, "--db", db,
                       "--write", "--run-id", f"night-{night}", "--format", "json")  # fmt: skip
        assert done.code == 0, done.err
        out = json.loads(done.out)
    return out


def history_json(db: str, metric: str) -> list[dict[str, object]]:
    done = run_cli("history", "--test", TEST, "--metric", metric, "--db", db, "--format", "json")
    assert done.code == 0, done.err
    rows: list[dict[str, object]] = json.loads(done.out)
    return rows


def value_lines(db: str, metric: str) -> list[str]:
    """The rows of the text history, a line per stored value."""
    text = run_cli("history", "--test", TEST, "--metric", metric, "--db", db).out
    assert "value vs ref ± sd" in text
    return [line for line in text.splitlines() if " night-" in line]


def test_history_shows_a_budget_steps_value_vs_usual_and_its_spread(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    report = nightlies(tmp_path, gates, db)
    judged = {
        v["step"]: v
        for v in report["verdicts"]  # type: ignore[attr-defined]
        if v["metric"] == "train/loss"
    }

    newest = [r for r in history_json(db, "train/loss") if r["run_id"] == "night-7"]

    assert len(newest) == STEPS
    for row in newest:
        verdict = judged[row["step"]]
        assert isinstance(row["sd"], float)
        assert row["sd"] > 0
        assert (row["ref"], row["sd"], row["hi"]) == (verdict["ref"], verdict["sd"], verdict["hi"])
    newest_lines = [line for line in value_lines(db, "train/loss") if " night-7 " in line]
    assert len(newest_lines) == STEPS
    assert all(" vs " in line and " ± " in line for line in newest_lines)


def test_a_band_gates_values_store_no_spread(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    nightlies(tmp_path, gates, db, nights=3)

    rows = history_json(db, "eval/score")

    assert [r["sd"] for r in rows] == [None, None, None]
    assert rows[0]["ref"] is not None
    lines = value_lines(db, "eval/score")
    assert len(lines) == 3
    assert all("±" not in line for line in lines)
    assert all(" vs " in line for line in lines[:2])  # the first night is cold: no reference


def test_values_written_before_0007_read_without_a_spread(tmp_path: Path) -> None:
    """An existing store upgrades in place: its values keep their band and read as having no spread."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    gates = write_gates(tmp_path)
    nightlies(tmp_path, gates, url, nights=6)
    config = migrations_config()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0006")
            assert "sd" not in {c["name"] for c in sa.inspect(conn).get_columns("metric_points")}
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()

    rows = history_json(url, "train/loss")

    assert len(rows) == 6 * STEPS
    assert {r["sd"] for r in rows} == {None}
    assert all(r["ref"] is not None for r in rows if r["run_id"] == "night-5")
    assert all("±" not in line for line in value_lines(url, "train/loss"))
    # The next nightly stores its spreads again.
    nightlies(tmp_path, gates, url, nights=7)
    assert all(r["sd"] for r in history_json(url, "train/loss") if r["run_id"] == "night-6")


def test_db_copy_keeps_every_spread(tmp_path: Path, store_url: str) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    gates = write_gates(tmp_path)
    nightlies(tmp_path, gates, source)
    copied = run_cli("db", "copy", "--from", source, "--to", store_url)
    assert copied.code == 0, copied.err

    assert history_json(store_url, "train/loss") == history_json(source, "train/loss")
    back = f"sqlite:///{tmp_path / 'back.db'}"  # and back: PostgreSQL's reader, SQLite's bulk writer
    assert run_cli("db", "copy", "--from", store_url, "--to", back).code == 0
    assert history_json(back, "train/loss") == history_json(source, "train/loss")
    with Store.open(store_url) as store:
        spreads = [r.point.sd for r in store.history(test=TEST, metric="train/loss")]
    assert sum(sd is not None for sd in spreads) == 3 * STEPS  # the nights after the five cold ones


def test_history_fits_80_columns_without_folding_a_word(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo suggests `gatecfg history`; with the spread column its table folded words at 80 columns
    # (`writte` / `n`, `truste` / `d`).
    nightlies(tmp_path, write_gates(tmp_path), db)
    monkeypatch.setattr(terminal, "width", lambda: 80)

    text = run_cli("history", "--test", TEST, "--metric", "train/loss", "--db", db).out

    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert {"written", "commit", "baseline", "status", "in", "night-7"} <= set(text.split())
