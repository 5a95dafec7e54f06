"""An accepted shift is recorded once: nightlies that accept the same shift, one after another
or at once, leave one active row (`uq_shifts_active`, revision 0008); a store that recorded one twice
before upgrades to one active row, the duplicate undone and its values taken by the kept row."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from helpers import run_cli
from test_store import migrations_config

import gatecfg
from gatecfg.shifts import Shift
from gatecfg.store import Store
from gatecfg.store import follow as follow_rows

TEST = "tests/e2e/test_unique_shift_ci.py"
KL = "train/kl"
BASE = """\
version: 1
defaults:
  train/kl:
    steps: last
    constraint: {rel_up: 0.1}
policy:
  window: 20
  min_history: 1
  accept_shift_after: 5
"""
STEADY = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.02]


def shifted_history(tmp_path: Path, db: str) -> Path:
    gates = tmp_path / "gates"
    gates.mkdir(exist_ok=True)
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    (gates / "kl.yaml").write_text(f"test: {TEST}\ngates:\n  {KL}:\n", encoding="utf-8")
    for i, value in enumerate([*STEADY, 2.0, 2.02, 1.98, 2.01, 2.0]):
        gatecfg.evaluate(TEST, {KL: [(0, value)]}, gates=gates, db=db, write=True, run_id=f"n{i:02d}")
    return gates


def the_shift(db: str) -> Shift:
    """The shift the history accepted, as a nightly hands it to the store."""
    with Store.open(db) as store:
        [row] = store.shifts(active=True)
    return Shift(
        metric=row.metric,
        coordinate=row.coordinate,
        first_run_id=row.first_run_id,
        first_created_at=datetime.now(UTC) - timedelta(days=1),
        commit=row.commit,
        direction="up",
        size=1.0,
        nightlies=5,
        accepted=True,
        accept_after=5,
        runs=(row.first_run_id,),
    )


def active_rows(db: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(sa.text("SELECT count(*) FROM shifts WHERE undone_at IS NULL")).scalar_one()
            )
    finally:
        engine.dispose()


def test_a_shift_accepted_again_is_recorded_once(tmp_path: Path, db: str) -> None:
    shifted_history(tmp_path, db)
    shift = the_shift(db)
    engine = sa.create_engine(db)
    try:

        def accept() -> int:
            with engine.begin() as conn:
                return follow_rows.accept(conn, shift, series_key="s", test=TEST, at=datetime.now(UTC))

        first = accept()
        with ThreadPoolExecutor(4) as pool:
            again = list(pool.map(lambda _: accept(), range(4)))
    finally:
        engine.dispose()
    assert again == [first] * 4
    assert active_rows(db) == 1
    listed = json.loads(run_cli("shifts", "--db", db, "--format", "json").out)
    assert [row["id"] for row in listed] == [first]


def test_a_store_that_recorded_a_shift_twice_upgrades_to_one_active_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    shifted_history(tmp_path, url)
    config = migrations_config()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0007")
            # What two nightlies accepting one shift left before 0008: a second active row, and values
            # marked with its number.
            columns = (
                "coordinate, series_key, test, metric, first_run_id, first_created_at, commit_sha, "
                "direction, size, nightlies, accepted_run_id, created_at"
            )
            conn.execute(sa.text(f"INSERT INTO shifts ({columns}) SELECT {columns} FROM shifts"))
            [(kept, duplicate)] = conn.execute(sa.text("SELECT min(pk), max(pk) FROM shifts")).all()
            marked = conn.execute(
                sa.text("UPDATE run_coordinates SET rejoined = :dup WHERE rejoined = :kept"),
                {"dup": f"shift {duplicate}", "kept": f"shift {kept}"},
            ).rowcount
            assert marked == 5
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT pk, undone_at IS NULL, undo_reason FROM shifts ORDER BY pk")
            ).all()
            rejoined = {r for (r,) in conn.execute(sa.text("SELECT DISTINCT rejoined FROM run_coordinates"))}
    finally:
        engine.dispose()
    assert [(pk, bool(active)) for pk, active, _ in rows] == [(kept, True), (duplicate, False)]
    assert rows[1][2] == f"a duplicate of shift {kept}"
    assert f"shift {kept}" in rejoined
    assert f"shift {duplicate}" not in rejoined
    # Undoing the kept shift takes all five values out again, as it would have before the duplicate.
    assert run_cli("shifts", "--undo", str(kept), "--db", url).code == 0
    history = json.loads(
        run_cli("history", "--test", TEST, "--metric", KL, "--db", url, "--format", "json").out
    )
    assert sum(row["baseline_reason"] == "untrusted by hand" for row in history) == 5
