"""The settings every entry point shares, resolved in one place: the history store, the gates root and
whether enforced gates are enforced.

Precedence, highest first (the same for the CLI, the Python API and the pytest plugin):

1. what the caller gave: `--db` / `--gates`, `gatecfg.evaluate(db=..., gates=...)`, or the pytest
   plugin's `--gatecfg-db` option, else its ini's `gatecfg_db` (the plugin passes the one it has);
2. the environment: `GATECFG_DB_URL` for the store, `GATECFG_ENFORCE` for enforcement;
3. the defaults below.

An entry point passes `None` for what its user did not give and gets the resolved value back; nothing
else reads these environment variables. A bare path given as a store is a SQLite file.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DB = "sqlite:///.gatecfg/history.db"
DEFAULT_GATES = Path("gates")
DB_ENV = "GATECFG_DB_URL"
ENFORCE_ENV = "GATECFG_ENFORCE"


def db_url(value: str | None) -> str:
    """The store: `value`, else $GATECFG_DB_URL, else the embedded SQLite file."""
    return _as_url(value or os.environ.get(DB_ENV) or DEFAULT_DB)


def optional_db_url(value: str | None) -> str | None:
    """The store of a command that reads one only when it is named (`gatecfg diff`): `value`, else
    $GATECFG_DB_URL, else None rather than the default file."""
    url = value or os.environ.get(DB_ENV)
    return _as_url(url) if url else None


def enforce() -> bool:
    """False when GATECFG_ENFORCE turns it off (0, false, no, off): enforced gates run as shadow gates."""
    return os.environ.get(ENFORCE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _as_url(url: str) -> str:
    return url if "://" in url else f"sqlite:///{url}"
