"""The settings every entry point shares, resolved in one place: the history store, the gates root and
whether enforced gates are enforced.

Precedence, highest first (the same for the CLI, the Python API and the pytest plugin):

1. what the caller gave: `--db` / `--gates`, `gatecfg.evaluate(db=..., gates=...)`, or the pytest
   plugin's `--gatecfg-db` option, else its ini's `gatecfg_db` (the plugin passes the one it has);
2. the environment: `GATECFG_DB_URL` for the store, `GATECFG_ENFORCE` for enforcement;
3. the defaults below.

An entry point passes `None` for what its user did not give and gets the resolved value back; nothing
else reads these environment variables. A bare path given as a store is a SQLite file; a libpq
keyword DSN (`host=h dbname=d`) the PostgreSQL database it names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote, urlencode

from gatecfg.errors import InputError

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
    """A URL as given; a libpq keyword DSN (`host=... dbname=...`) as the PostgreSQL URL it means; any
    other bare path a SQLite file."""
    if "://" in url:
        return url
    if _LIBPQ_DSN.match(url):
        return _libpq_url(url)
    return f"sqlite:///{url}"


# A libpq connection string starts with one of its keywords and `=`: never read as a SQLite file name
# (which printed the password in the hint, and created a file named after it).
_LIBPQ_DSN = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|connect_timeout|"
    r"application_name|options|target_session_attrs)\s*=",
    re.IGNORECASE,
)
_LIBPQ_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _libpq_url(dsn: str) -> str:
    """The postgresql+psycopg URL of a libpq keyword DSN, parsed by libpq itself (through psycopg)."""
    hint = "or write it as a URL: postgresql+psycopg://user:password@host:5432/dbname"
    shown = _LIBPQ_PASSWORD.sub(r"\1***", dsn)
    try:
        from psycopg import Error as PsycopgError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise InputError.at(
            "--db",
            f"`{shown}` is a PostgreSQL keyword DSN, and the `postgres` extra is not installed",
            hint=f"pip install 'gatecfg[postgres]', {hint}",
        ) from None
    try:
        parts = conninfo_to_dict(dsn)
    except PsycopgError:
        # Neither psycopg's message nor the text is shown: around the mistake may be the password.
        raise InputError.at(
            "--db",
            "the value starts like a PostgreSQL keyword DSN (`host=... dbname=...`) but does not parse as "
            "one (not shown: it may hold a password)",
            hint="quote a value with spaces as key='a b', " + hint,
        ) from None
    if "hostaddr" in parts and "host" not in parts:
        parts["host"] = parts.pop("hostaddr")
    user, password = parts.pop("user", None), parts.pop("password", None)
    host, port, dbname = parts.pop("host", None), parts.pop("port", None), parts.pop("dbname", None)
    auth = quote(str(user), safe="") if user is not None else ""
    if password is not None:
        auth += ":" + quote(str(password), safe="")
    netloc = (auth + "@" if auth else "") + (str(host) if host is not None else "")
    netloc += f":{port}" if port is not None else ""
    query = urlencode({key: str(value) for key, value in parts.items()})
    return f"postgresql+psycopg://{netloc}/{quote(str(dbname or ''), safe='')}" + (
        f"?{query}" if query else ""
    )
