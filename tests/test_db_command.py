"""`gatecfg db upgrade` says what it did; `gatecfg db ACTION --help` is that action's help."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from helpers import run_cli
from test_store import migrations_config

from gatecfg.store.facts import SCHEMA_REVISION


def test_upgrade_says_it_created_then_that_nothing_was_left_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    created = run_cli("db", "upgrade", "--db", url)
    assert created.code == 0, created.err
    assert created.out == f"history store {url}: created the schema at revision {SCHEMA_REVISION}\n"
    again = run_cli("db", "upgrade", "--db", url)
    assert again.out == (
        f"history store {url} is already at the current schema (revision {SCHEMA_REVISION}): nothing to do\n"
    )


def test_upgrade_names_the_revisions_it_moved_between(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    assert run_cli("db", "upgrade", "--db", url).code == 0
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            config = migrations_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0004")
    finally:
        engine.dispose()
    upgraded = run_cli("db", "upgrade", "--db", url)
    assert (
        upgraded.out == f"history store {url}: upgraded the schema from revision 0004 to {SCHEMA_REVISION}\n"
    )
