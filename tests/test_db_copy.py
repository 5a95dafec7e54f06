"""`gatecfg db status` and `gatecfg db copy`: what a store holds, and every table of it copied into
another store (SQLite <-> PostgreSQL) in one transaction, counts checked, a non-empty target refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from helpers import count, run_cli
from test_evaluate_cli import TEST, seed_nightlies, write_gates, write_record

from gatecfg.store import transfer
from gatecfg.store.facts import SCHEMA_REVISION

TABLES = [table.name for table in transfer.TABLES]


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, str]:
    """Twenty nightlies of one test in a SQLite store, one of them untrusted by hand."""
    gates = write_gates(tmp_path)
    db = f"sqlite:///{tmp_path / 'source.db'}"
    seed_nightlies(tmp_path, gates, db)
    assert run_cli("untrust", "--run-id", "night-03", "--db", db, "--reason", "flaky").code == 0
    return gates, db


def counts(url: str) -> dict[str, int]:
    return {table: count(url, f"SELECT count(*) FROM {table}") for table in TABLES}


def verdicts(gates: Path, record: Path, db: str) -> list[dict[str, object]]:
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--format", "json")  # fmt: skip
    assert result.code == 0, result.err
    return [
        {k: v[k] for k in ("coordinate", "step", "ref", "n", "lo")}
        for v in json.loads(result.out)["verdicts"]
    ]


def test_status_shows_revision_runs_values_and_size(source: tuple[Path, str]) -> None:
    _, db = source
    result = run_cli("db", "status", "--db", db)
    assert result.code == 0, result.err
    assert f"schema revision  {SCHEMA_REVISION}\n" in result.out
    assert "runs             20" in result.out
    assert "values           40 at 1 coordinate(s)" in result.out
    assert " KiB" in result.out


def test_status_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    result = run_cli("db", "status", "--db", tmp_path / "none.db")
    assert result.code == 3
    assert "no history store at this URL: the file does not exist (nothing was created)" in result.err
    assert list(tmp_path.iterdir()) == []


def test_status_of_a_database_without_the_schema_says_so(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("an empty SQLite file is no store (the test above)")
    result = run_cli("db", "status", "--db", store_url)
    assert result.code == 0, result.err
    assert "schema revision  none (no gatecfg schema: `gatecfg db upgrade` creates it)" in result.out
    assert "runs             0" in result.out


def test_copy_holds_every_row_and_judges_alike_then_takes_new_runs(
    source: tuple[Path, str], store_url: str, tmp_path: Path
) -> None:
    gates, db = source
    result = run_cli("db", "copy", "--from", db, "--to", store_url)
    assert result.code == 0, result.err
    assert "every table's count checked against the source" in result.out
    assert counts(store_url) == counts(db)
    record = write_record(tmp_path / "pr.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.45)]})
    assert verdicts(gates, record, store_url) == verdicts(gates, record, db)
    # The copy's keys continue: the next nightly is written after the copied ones (PostgreSQL sequences).
    nightly = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", store_url,
                      "--write", "--run-id", "after-copy")  # fmt: skip
    assert nightly.code == 0, nightly.err
    assert counts(store_url)["runs"] == 21
    back = f"sqlite:///{tmp_path / 'back.db'}"
    assert run_cli("db", "copy", "--from", store_url, "--to", back).code == 0
    assert counts(back) == counts(store_url)


def test_copy_refuses_a_non_empty_target_unless_replace(source: tuple[Path, str], tmp_path: Path) -> None:
    gates, db = source
    target = f"sqlite:///{tmp_path / 'target.db'}"
    record = write_record(tmp_path / "one.jsonl", {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]})
    run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", target, "--write")
    refused = run_cli("db", "copy", "--from", db, "--to", target)
    assert refused.code == 3
    assert (
        f"{target}: error: the target store is not empty (1 coordinates, 1 runs, 1 run_coordinates"
        in refused.err
    )
    assert "hint: copy into an empty store, or pass --replace" in refused.err
    assert counts(target)["runs"] == 1
    replaced = run_cli("db", "copy", "--from", db, "--to", target, "--replace")
    assert replaced.code == 0, replaced.err
    assert counts(target) == counts(db)


def test_copy_needs_both_ends_and_takes_no_db(tmp_path: Path) -> None:
    assert "the following arguments are required: --to" in run_cli("db", "copy", "--from", "a.db").err
    assert (
        "unrecognized arguments: --db c" in run_cli("db", "copy", "--from", "a", "--to", "b", "--db", "c").err
    )
    assert "unrecognized arguments: --from a.db" in run_cli("db", "status", "--from", "a.db").err


def test_each_db_action_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    from gatecfg.cli import main

    for action, flag in (("copy", "--from URL --to URL [--replace]"), ("upgrade", "[--db URL]")):
        with pytest.raises(SystemExit):
            main(["db", action, "--help"])
        shown = capsys.readouterr().out
        assert shown.startswith(f"usage: gatecfg db {action} [-h] [--debug] {flag}")


def test_copy_from_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    result = run_cli("db", "copy", "--from", tmp_path / "none.db", "--to", tmp_path / "target.db")
    assert result.code == 3
    assert not (tmp_path / "target.db").exists()


def test_a_missing_psycopg_is_exit_2_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a)
    )
    result = run_cli("db", "status", "--db", "postgresql+psycopg://ci@127.0.0.1:1/none")
    assert result.code == 2
    assert "needs the `postgres` extra, which is not installed (missing: psycopg)" in result.err
    assert "hint: pip install 'gatecfg[postgres]'" in result.err
