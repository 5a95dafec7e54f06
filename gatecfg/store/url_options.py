"""The options a store URL may carry (`?timeout=5`), checked before a driver sees them: a value the driver
would choke on, an option given twice or one that would silently change what a command does is an error
naming the URL (exit 2); an option SQLite ignores is a one-line warning, and is dropped."""

from __future__ import annotations

import math
import sys

from sqlalchemy.engine import URL

from gatecfg.errors import InputError

URL_HINT = "write sqlite:///path/to/history.db or postgresql+psycopg://user@host:5432/dbname"
# What SQLAlchemy's pysqlite dialect passes to sqlite3.connect, and how it reads each.
_NUMBER = ("timeout",)
_COUNT = ("cached_statements", "detect_types")
_FLAG = ("check_same_thread", "uri")
_TRUE = ("true", "yes", "on", "y", "t", "1")
_FALSE = ("false", "no", "off", "n", "f", "0")
# SQLite's own URI options (`mode=ro`): without a `file:` URI and `uri=true` SQLAlchemy drops them, so a
# store meant read-only was written all the same.
_SQLITE_URI = ("mode", "cache", "immutable", "nolock", "vfs", "psow", "modeof")


def checked(url: URL, shown: str) -> URL:
    """`url` with its options checked (`shown`: the URL as messages show it, credentials masked); for
    SQLite, without the options it would ignore, each named in a warning on stderr."""
    for key, value in url.query.items():
        if not isinstance(value, str):
            raise InputError.at(
                "--db", f"`?{key}=` is given {len(value)} times in `{shown}`", hint="give each option once"
            )
    if url.get_backend_name() != "sqlite":
        return url  # PostgreSQL's options go to libpq, which refuses an unknown one by name (exit 3)
    if url.host or url.username or url.password or url.port:
        raise InputError.at(
            "--db",
            f"`{shown}` names a host, which a SQLite store has none of: a SQLite URL has three slashes "
            "before a relative path and four before an absolute one",
            hint=f"e.g. sqlite:///{url.host or 'history.db'} (a file in this folder) or "
            "sqlite:////abs/path/history.db",
        )
    # `sqlite:///file:/path/h.db?mode=ro&uri=true`: a SQLite URI, whose options SQLite itself applies
    # (`mode=ro`: a write fails, exit 3), and passes over where it does not know them.
    uri = (url.database or "").startswith("file:") and str(url.query.get("uri", "")).lower() in _TRUE
    for key, value in url.query.items():
        assert isinstance(value, str)  # checked above
        _check_sqlite_option(key, value, shown, uri=uri)
    ignored = [] if uri else sorted(set(url.query) - {*_NUMBER, *_COUNT, *_FLAG})
    for key in ignored:
        print(
            f"gatecfg: warning: `?{key}=` in the store URL is no option SQLite takes; ignored "
            f"(it takes {', '.join(sorted((*_NUMBER, *_COUNT, *_FLAG)))})",
            file=sys.stderr,
        )
    return url.difference_update_query(ignored) if ignored else url


def _check_sqlite_option(key: str, value: str, shown: str, *, uri: bool) -> None:
    problem = None
    if key in _SQLITE_URI and not uri:
        problem = (
            f"`?{key}=` is a SQLite URI option, which SQLite applies only to a `file:` URI with "
            f"`uri=true` (sqlite:///file:history.db?{key}={value}&uri=true): here it was dropped and a "
            "--write wrote"
        )
    elif key == "isolation_level":
        problem = "`?isolation_level=` is not taken: gatecfg runs each command's transactions itself"
    elif key in _NUMBER:
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds < math.inf:
            problem = f"`?{key}=` in `{shown}` is not a number of seconds"
    elif key in _COUNT and not (value.isascii() and value.isdigit() and len(value) <= 9):
        problem = f"`?{key}=` in `{shown}` is not a whole number >= 0 (got `{value}`)"
    elif key in _FLAG and value.strip().lower() not in (*_TRUE, *_FALSE):
        problem = f"`?{key}=` in `{shown}` is not true or false (got `{value}`)"
    elif key == "uri" and value.strip().lower() in _TRUE and not uri:
        # A path that is no `file:` URI would become a file named after the options (`h.db?mode=ro`).
        problem = "`?uri=true` reads the path as a SQLite URI, which starts with `file:`"
    if problem is not None:
        raise InputError.at("--db", problem, hint=URL_HINT)
