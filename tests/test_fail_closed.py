"""Fail closed: a store that does not exist is exit 3 and is not created (only a nightly `--write`, an
import or `db upgrade` create one), and a store without history for the series says so in every report."""

from __future__ import annotations

import json
import os
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import run_cli

TEST = "tests/e2e/test_reward_ci.py"
BASE = """\
version: 1
defaults:
  rollout/raw_reward:
    steps: all
    constraint: {rel_down: 0.2, abs_floor_down: 0.05}
    enforce: true
"""
NOTICE = f"NOTICE: no stored history for series {TEST}"


@pytest.fixture
def gates(tmp_path: Path) -> Path:
    root = tmp_path / "gates"
    root.mkdir()
    (root / "base.yaml").write_text(BASE, encoding="utf-8")
    (root / "reward.yaml").write_text(f"test: {TEST}\ngates:\n  rollout/raw_reward:\n", encoding="utf-8")
    return root


@pytest.fixture
def record(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"rollout/raw_reward": [[0, 0.2], [1, 0.5]]}) + "\n", encoding="utf-8")
    return path


def evaluate(gates: Path, record: Path, db: str, *extra: str) -> tuple[int, str, str]:
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, *extra)
    return result.code, result.out, result.err


@pytest.fixture
def missing_pg_database() -> Iterator[str]:
    """The URL (with a password) of a database that does not exist on the test server; checked absent
    afterwards."""
    server_url = os.environ.get("GATECFG_TEST_PG_URL")
    if not server_url:
        pytest.skip("GATECFG_TEST_PG_URL is not set: PostgreSQL store tests skipped")
    name = f"gatecfg_missing_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(server_url).set(database=name, password="s3cret-pw")
    yield url.render_as_string(hide_password=False)
    server = sa.create_engine(server_url)
    try:
        with server.connect() as conn:
            found = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).all()
    finally:
        server.dispose()
    assert found == [], "a store that did not exist was created"


@pytest.mark.parametrize(
    "extra", [pytest.param([], id="text"), pytest.param(["--format", "json"], id="json")]
)
def test_evaluate_against_a_missing_sqlite_store_exits_3_and_creates_nothing(
    tmp_path: Path, gates: Path, record: Path, extra: list[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'typo' / 'history.db'}"
    code, out, err = evaluate(gates, record, db, *extra)
    assert (code, out) == (3, "")
    assert err.splitlines() == [
        f"{db}: error: no history store at this URL: the file does not exist (nothing was created)",
        "  hint: check --db / GATECFG_DB_URL for a typo; a new store is created by the first nightly "
        f"`gatecfg evaluate ... --write` or by `gatecfg db upgrade --db {db}`",
    ]
    assert not (tmp_path / "typo").exists()


def test_an_empty_sqlite_file_is_not_a_store_and_is_left_alone(
    tmp_path: Path, gates: Path, record: Path
) -> None:
    path = tmp_path / "history.db"
    path.touch()
    code, _, err = evaluate(gates, record, f"sqlite:///{path}")
    assert code == 3
    assert "the file holds no gatecfg schema" in err
    assert path.stat().st_size == 0


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["history", "--test", TEST, "--metric", "rollout/raw_reward"], id="history"),
        pytest.param(["untrust", "--commit", "abc"], id="untrust"),
        pytest.param(["prune", "--orphaned", "--dry-run"], id="prune"),
    ],
)
def test_commands_that_read_a_store_never_create_one(tmp_path: Path, gates: Path, args: list[str]) -> None:
    db = f"sqlite:///{tmp_path / 'nope.db'}"
    result = run_cli(*args, "--db", db, *(["--gates", str(gates)] if args[0] == "prune" else []))
    assert result.code == 3
    assert "no history store at this URL" in result.err
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.postgres
def test_evaluate_against_a_missing_postgresql_database_exits_3_masking_the_password(
    gates: Path, record: Path, missing_pg_database: str
) -> None:
    code, out, err = evaluate(gates, record, missing_pg_database)
    shown = sa.make_url(missing_pg_database).render_as_string(hide_password=True)
    name = sa.make_url(missing_pg_database).database
    assert (code, out) == (3, "")
    assert "s3cret-pw" not in err
    first, hint = err.splitlines()
    assert first.startswith(f"{shown}: error: cannot connect to the history store: ")
    assert first.endswith(f'database "{name}" does not exist')
    assert hint.endswith(f"{name}`) and run `gatecfg db upgrade --db {shown}`")


@pytest.mark.postgres
def test_db_upgrade_of_a_missing_postgresql_database_names_createdb(missing_pg_database: str) -> None:
    result = run_cli("db", "upgrade", "--db", missing_pg_database)
    assert result.code == 3
    assert "createdb -h 127.0.0.1 -U postgres gatecfg_missing_" in result.err
    assert "s3cret-pw" not in result.err


def test_the_first_nightly_write_creates_a_sqlite_store(tmp_path: Path, gates: Path, record: Path) -> None:
    path = tmp_path / "new" / "history.db"
    code, out, err = evaluate(gates, record, f"sqlite:///{path}", "--write")
    assert code == 0, err
    assert path.is_file()
    assert NOTICE in out  # it is the first: nothing to judge against yet
    code, out, err = evaluate(gates, record, f"sqlite:///{path}")
    assert code == 0, err
    assert NOTICE not in out + err


def test_db_upgrade_creates_a_sqlite_store(tmp_path: Path, gates: Path, record: Path) -> None:
    path = tmp_path / "store" / "history.db"
    assert run_cli("db", "upgrade", "--db", f"sqlite:///{path}").code == 0
    code, _, err = evaluate(gates, record, f"sqlite:///{path}")
    assert code == 0
    assert NOTICE in err


def test_a_store_without_history_for_the_series_says_so_in_every_report(
    gates: Path, record: Path, db: str
) -> None:
    code, out, err = evaluate(gates, record, db)
    assert code == 0
    assert err.startswith(f"gatecfg evaluate: {NOTICE}")
    assert "every gate is cold and cannot fail" in err
    assert out.index(NOTICE) < out.index("result: ")  # above the verdict
    _, out, _ = evaluate(gates, record, db, "--format", "json")
    [note] = json.loads(out)["notes"]
    assert note.startswith(NOTICE)
    _, out, _ = evaluate(gates, record, db, "--format", "markdown")
    lines = out.splitlines()
    assert lines[lines.index("> [!WARNING]") + 1].startswith(f"> {NOTICE}")
    assert lines.index("> [!WARNING]") < lines.index("| | gate | role | steps | coordinates | source |")
    _, out, _ = evaluate(gates, record, db, "--format", "github")
    assert out.startswith(f"::warning file={gates / 'reward.yaml'},title=gatecfg::NOTICE: no stored history")
    _, out, _ = evaluate(gates, record, db, "--format", "junit")
    assert 'name="gatecfg.notice" value="NOTICE: no stored history' in out


def test_labels_separate_series_for_the_notice(gates: Path, record: Path, db: str) -> None:
    assert evaluate(gates, record, db, "--write", "--series", "hw=h100")[0] == 0
    assert NOTICE not in evaluate(gates, record, db, "--series", "hw=h100")[2]
    _, _, err = evaluate(gates, record, db, "--series", "hw=a100")
    assert f"{NOTICE} (hw=a100) in " in err


def test_require_history_fails_a_run_with_no_history(gates: Path, record: Path, db: str) -> None:
    code, _, err = evaluate(gates, record, db, "--require-history")
    assert code == 1
    assert "failing: history is required" in err
    assert evaluate(gates, record, db, "--write")[0] == 0
    assert evaluate(gates, record, db, "--require-history")[0] == 0


def test_require_history_fails_a_junit_testcase(gates: Path, record: Path, db: str) -> None:
    code, out, _ = evaluate(gates, record, db, "--require-history", "--format", "junit")
    assert code == 1
    suite = ET.fromstring(out.split("\n", 1)[1]).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase[@name='stored history']/failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(NOTICE)


def test_require_history_as_a_policy_field(gates: Path, record: Path, db: str) -> None:
    base = gates / "base.yaml"
    base.write_text(BASE + "policy:\n  require_history: true\n", encoding="utf-8")
    code, out, _ = evaluate(gates, record, db, "--format", "json")
    assert code == 1
    assert json.loads(out)["exit_code"] == 1
