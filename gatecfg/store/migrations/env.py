"""Alembic environment: migrates the connection `Store.upgrade` hands over, inside its transaction."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from gatecfg.store.tables import metadata


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    # There is no alembic.ini: the Store owns the engine, the locking and the transaction.
    if not isinstance(connection, Connection):
        raise RuntimeError(
            "gatecfg migrations run through `gatecfg db upgrade`, which supplies the connection"
        )
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
