"""`gatecfg prune --orphaned`: list the stored coordinates no declaration uses; delete them only with --yes.

End to end through the CLI in a temporary git repository with the project's gates, on SQLite and (when
configured) PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import count, run_cli
from rekey_helpers import (
    GSM8K,
    GSM8K_FILE,
    NIGHTS,
    RAW_REWARD_DEFAULT,
    RAW_REWARD_EDITED,
    edit,
    gsm8k_record,
    seed_nightlies,
)

from gatecfg.errors import StoreError
from gatecfg.store import Store

OLD_CONSTRAINT = '{"abs_floor_down":0.05,"rel_down":0.2}'


def raw_reward_values(url: str) -> int:
    return count(url, "SELECT count(*) FROM metric_values WHERE metric = 'rollout/raw_reward'")


def test_dry_run_lists_the_old_coordinates_after_a_rekey_and_deletes_nothing(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    result = run_cli("prune", "--orphaned", "--dry-run", "--db", db)

    assert result.code == 0, result.err
    assert GSM8K in result.out
    assert f'rollout/raw_reward: steps "last", constraint {OLD_CONSTRAINT}' in result.out
    assert f"{NIGHTS} values ({NIGHTS} trusted) in {NIGHTS} runs · last written 20" in result.out
    assert f"re-keyed: {GSM8K_FILE}:9 declares" in result.out
    assert "1 orphaned coordinate(s) holding 5 value(s); nothing deleted (--dry-run)" in result.out
    assert "train/grad_norm" not in result.out  # still declared
    assert raw_reward_values(db) == NIGHTS


def test_an_orphan_of_one_run_reads_one_run(repo: Path, db: str) -> None:
    record = gsm8k_record(repo / "night.jsonl", 0.5)
    assert run_cli("evaluate", "--test", GSM8K, "--record", record, "--db", db, "--write").code == 0
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    result = run_cli("prune", "--orphaned", "--dry-run", "--db", db)

    assert "1 value (1 trusted) in 1 run · last written 20" in result.out


def test_without_yes_nothing_is_deleted(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    result = run_cli("prune", "--orphaned", "--db", db)

    assert result.code == 0
    assert "nothing deleted (pass --yes to delete them)" in result.out
    assert raw_reward_values(db) == NIGHTS


def test_yes_deletes_the_orphans_and_nothing_declared(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    before = count(db, "SELECT count(*) FROM metric_values")
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    result = run_cli("prune", "--orphaned", "--yes", "--db", db)

    assert result.code == 0, result.err
    assert f"deleted 1 orphaned coordinate(s) holding {NIGHTS} value(s)" in result.out
    assert raw_reward_values(db) == 0
    assert count(db, "SELECT count(*) FROM metric_values") == before - NIGHTS
    assert count(db, "SELECT count(*) FROM coordinates WHERE metric = 'rollout/raw_reward'") == 0
    assert count(db, "SELECT count(*) FROM run_coordinates") == 3 * NIGHTS  # the three declared gates
    again = run_cli("prune", "--orphaned", "--yes", "--db", db)
    assert "no orphaned coordinates" in again.out


def test_dry_run_wins_over_yes(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)

    result = run_cli("prune", "--orphaned", "--dry-run", "--yes", "--db", db)

    assert "nothing deleted (--dry-run)" in result.out
    assert raw_reward_values(db) == NIGHTS


def test_a_carried_coordinate_is_not_orphaned(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    assert run_cli("carry", "--base", "HEAD", "--reason", "widened", "--db", db).code == 0

    result = run_cli("prune", "--orphaned", "--yes", "--db", db)

    assert "no orphaned coordinates" in result.out
    assert raw_reward_values(db) == NIGHTS


def test_a_test_no_gate_file_declares_is_orphaned_with_the_reason(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    (repo / GSM8K_FILE).unlink()

    result = run_cli("prune", "--orphaned", "--dry-run", "--db", db)

    assert "4 orphaned coordinate(s)" in result.out
    assert result.out.count("no gate file declares this test") == 4


@pytest.mark.parametrize("broken", ["empty", "invalid"])
def test_a_gate_tree_that_declares_nothing_or_is_broken_prunes_nothing(
    repo: Path, db: str, broken: str
) -> None:
    seed_nightlies(repo, db)
    gates = repo / "gates"
    if broken == "empty":
        gates = repo / "empty"
        gates.mkdir()
    else:
        edit(repo / GSM8K_FILE, "    enforce: true", "    enforce: yes")

    result = run_cli("prune", "--orphaned", "--yes", "--gates", gates, "--db", db)

    assert result.code == 2
    assert "Traceback" not in result.err
    assert raw_reward_values(db) == NIGHTS


def test_a_coordinate_written_since_it_was_listed_stops_the_whole_prune(
    repo: Path, db: str, store: Store
) -> None:
    seed_nightlies(repo, db)
    [grad_norm, reward] = [
        s for s in store.summaries() if s.spec.metric in ("train/grad_norm", "rollout/raw_reward")
    ]

    with pytest.raises(StoreError, match="changed since they were listed"):
        store.prune(
            {grad_norm.spec.coordinate: grad_norm.n_values, reward.spec.coordinate: reward.n_values - 1}
        )

    assert count(db, "SELECT count(*) FROM coordinates") == 4
    assert raw_reward_values(db) == NIGHTS
