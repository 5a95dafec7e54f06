"""`gatecfg db upgrade`: apply the history store's migrations (PostgreSQL needs this once per release)."""

from __future__ import annotations

from gatecfg.errors import EXIT_OK
from gatecfg.store import Store


def upgrade(*, db: str) -> int:
    with Store.open(db, check_schema=False) as store:
        store.upgrade()
    print(f"history store {store.url} is at the current schema")
    return EXIT_OK
