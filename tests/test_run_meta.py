"""What a run carries beyond its identity (`--meta`, the API's `meta=`, `--gatecfg-meta`, the CI's runner):
stored with the run, and named with the commits since the baseline's newest run when a gate fails."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from helpers import flat, run_cli
from test_store import migrations_config

import gatecfg
from gatecfg.store import Store

TEST = "tests/e2e/test_meta_ci.py"
BASE = "version: 1\ndefaults:\n  eval/score: {steps: last, constraint: {rel_down: 0.1}}\n"
GATES = f"test: {TEST}\ngates:\n  eval/score:\n    enforce: true\n"


@pytest.fixture
def gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("RUNNER_NAME", "RUNNER_OS", "RUNNER_ARCH", "ImageOS", "ImageVersion"):
        monkeypatch.delenv(name, raising=False)
    root = Path("gates")
    root.mkdir()
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "meta.yaml").write_text(GATES, encoding="utf-8")
    return root


def record(tmp_path: Path, score: float) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"eval/score": [[9, score]]}) + "\n", encoding="utf-8")
    return path


def nightlies(gates: Path, tmp_path: Path, db: str, image: str = "26.02") -> None:
    for night in range(3):
        done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record(tmp_path, 0.8),
                       "--db", db, "--write", "--run-id", f"night-{night}", "--commit", f"c{night}",
                       "--meta", f"image={image}", "--meta", "cuda=12.8")  # fmt: skip
        assert done.code == 0, done.err


def test_meta_and_the_ci_runner_are_stored_with_the_run(
    gates: Path, tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_NAME", "gpu-runner-7")
    monkeypatch.setenv("ImageOS", "ubuntu24")
    monkeypatch.setenv("ImageVersion", "20260126.1")

    nightlies(gates, tmp_path, db)

    with Store.open(db) as store:
        [newest, *_] = store.runs(test=TEST)
    assert dict(newest.run.meta) == {
        "cuda": "12.8",
        "image": "26.02",
        "runner": "gpu-runner-7",
        "runner.image": "ubuntu24 20260126.1",
    }


def test_a_failing_gate_names_what_changed_since_the_baselines_newest_run(
    gates: Path, tmp_path: Path, db: str
) -> None:
    nightlies(gates, tmp_path, db)
    args = ("evaluate", "--gates", gates, "--test", TEST, "--record", record(tmp_path, 0.5), "--db", db,
            "--commit", "d4e5f6", "--meta", "image=26.04", "--meta", "cuda=12.8")  # fmt: skip

    text, as_json, junit = (run_cli(*args, "--format", f) for f in ("text", "json", "junit"))

    changed = "since the baseline's newest run night-2 (commit c2): image 26.02 -> 26.04; commits c2..d4e5f6"
    assert text.code == 1
    assert f"CHANGED {changed}" in flat(text.out)
    assert json.loads(as_json.out)["changes"] == {
        "since_run": "night-2",
        "since_commit": "c2",
        "commit": "d4e5f6",
        "meta": [{"key": "image", "baseline": "26.02", "tonight": "26.04"}],
    }
    [failure] = ET.fromstring(junit.out.split("\n", 1)[1]).iter("failure")
    assert (failure.get("message") or "").endswith(f"; changed {changed}")


def test_a_passing_run_asks_nothing_about_changes(gates: Path, tmp_path: Path, db: str) -> None:
    nightlies(gates, tmp_path, db)

    tonight = record(tmp_path, 0.8)
    done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tonight, "--db", db,
                   "--meta", "image=26.04", "--format", "json")  # fmt: skip

    assert done.code == 0
    assert json.loads(done.out)["changes"] is None


def test_the_python_api_takes_meta(gates: Path, tmp_path: Path, db: str) -> None:
    nightlies(gates, tmp_path, db)

    report = gatecfg.evaluate(TEST, {"eval/score": [(9, 0.5)]}, gates=gates, db=db, meta={"image": "26.04"})

    assert report.changes is not None
    assert report.changes.meta == (("image", "26.02", "26.04"),)  # cuda not given tonight: not a change


def test_meta_the_run_does_not_give_is_not_reported_as_changed(gates: Path, tmp_path: Path, db: str) -> None:
    nightlies(gates, tmp_path, db)
    # A pull request's run: no --meta at all, and a gate fails.
    done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record(tmp_path, 0.5),
                   "--db", db, "--commit", "d4e5f6")  # fmt: skip

    assert done.code == 1
    assert "CHANGED since the baseline's newest run night-2 (commit c2): commits c2..d4e5f6" in flat(done.out)
    assert "(none)" not in done.out


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param("image", "--meta: error: `image` is not KEY=VALUE", id="no-equals"),
        pytest.param("=26.04", "--meta: error: `=26.04` is not KEY=VALUE", id="no-key"),
    ],
)
def test_a_malformed_meta_is_a_one_line_error(
    gates: Path, tmp_path: Path, db: str, given: str, message: str
) -> None:
    tonight = record(tmp_path, 0.8)
    done = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tonight, "--db", db,
                   "--meta", given)  # fmt: skip

    assert done.code == 2
    assert message in done.err
    assert "Traceback" not in done.err


def test_a_store_from_before_meta_upgrades_and_keeps_its_runs_readable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with Store.open(url, create=True):
        pass
    config = migrations_config()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0004")
            conn.execute(
                sa.text(
                    "INSERT INTO runs (run_id, test, series_key, labels, created_at, written_by, "
                    "gate_trusted) VALUES ('old', :test, 's', '{}', '2026-11-01 00:00:00.000000', '0.9', 1)"
                ),
                {"test": TEST},
            )
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()

    with Store.open(url) as store:
        [old] = store.runs(test=TEST)
    assert (old.run.run_id, dict(old.run.meta)) == ("old", {})
