"""What both readers of the store agree on, in a module that imports nothing: the schema revision this
gatecfg reads and the table Alembic records it in, the SQLite lock wait, the hint of a store error.

`Store` (store/store.py, SQLAlchemy) and `DirectStore` (store/direct.py, sqlite3) both import it, and
neither imports the other at module level: the direct reader opens `Store` on first need, inside a method.
"""

from __future__ import annotations

# The newest migration in store/migrations (a test holds the two together) and the table Alembic records
# it in; here, so that reading the revision needs neither SQLAlchemy nor Alembic.
SCHEMA_REVISION = "0009"
VERSION_TABLE = "alembic_version"
STORE_HINT = "check that the store named by --db / GATECFG_DB_URL is reachable and writable"
# The wait for another writer's lock, set as `PRAGMA busy_timeout` (milliseconds) by store/engine.py and
# as the driver's timeout by store/direct.py.
SQLITE_BUSY_TIMEOUT_S = 30.0
