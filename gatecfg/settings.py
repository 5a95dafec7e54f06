"""The settings every entry point shares, resolved in one place: the history store, the gates root, the
default series labels and whether enforced gates are enforced.

Precedence, highest first, the same for the CLI, the Python API and the pytest plugin: what the caller
gave, the environment (`GATECFG_DB_URL`, `GATECFG_GATES`, `GATECFG_SERIES`, `GATECFG_ENFORCE`), the
nearest `.gatecfg.toml` or `[tool.gatecfg]`, the defaults below; a value comes whole from one level
(docs/configuration.md, "Precedence"). An entry point passes `None` for what its user did not give;
nothing else reads these environment variables or files.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from gatecfg.errors import InputError
from gatecfg.textio import decode_utf8, read_bytes

DEFAULT_DB = "sqlite:///.gatecfg/history.db"
DEFAULT_GATES = Path("gates")
DB_ENV = "GATECFG_DB_URL"
GATES_ENV = "GATECFG_GATES"
SERIES_ENV = "GATECFG_SERIES"
ENFORCE_ENV = "GATECFG_ENFORCE"
CONFIG_NAME = ".gatecfg.toml"
PYPROJECT = "pyproject.toml"
KEYS = ("gates", "db", "series")
# A settings file is a few lines (a pyproject.toml a few hundred): past this it is no settings file.
MAX_SETTINGS_BYTES = 4_000_000
KEYS_HINT = "the keys are `gates` (a folder), `db` (a store URL) and `series` (a table of labels)"


@dataclass(frozen=True)
class FileSettings:
    """What the project's settings file says (None: the key is not set, or there is no file)."""

    path: Path | None = None
    gates: Path | None = None
    db: str | None = None
    series: dict[str, str] | None = field(default=None)


def db_url(value: str | None) -> str:
    """The store: `value`, else $GATECFG_DB_URL, else the settings file's `db`, else the SQLite file."""
    return _as_url(_given_db(value) or project().db or DEFAULT_DB)


def optional_db_url(value: str | None) -> str | None:
    """The store of a command that can do without one (`gatecfg diff`): as `db_url`, except that the
    default SQLite file counts only when it exists (a clone without history gets no error)."""
    url = _given_db(value) or project().db
    if url:
        return _as_url(url)
    return DEFAULT_DB if Path(DEFAULT_DB.removeprefix("sqlite:///")).is_file() else None


def _given_db(value: str | None) -> str | None:
    """`value`, else $GATECFG_DB_URL; one of blanks only is an error (it named a store file of blanks)."""
    for given, where in ((value, "--db"), (os.environ.get(DB_ENV), DB_ENV)):
        if given is not None and given != "":
            if not given.strip():
                raise InputError.at(
                    where, "is blank", hint="give a store URL, e.g. sqlite:///history.db, or unset it"
                )
            return given
    return None


def gates_root(value: str | os.PathLike[str] | None) -> Path:
    """The gates root: `value`, else $GATECFG_GATES, else the settings file's `gates`, else gates/."""
    if value is not None:
        return Path(value)
    env = os.environ.get(GATES_ENV)
    return Path(env) if env else project().gates or DEFAULT_GATES


def series_labels(given: dict[str, str] | None) -> dict[str, str]:
    """The series labels: `given` (from --series; `{}` is an explicit none), else $GATECFG_SERIES, else
    the file's `series`."""
    if given is not None:
        return given
    env = os.environ.get(SERIES_ENV, "").strip()
    if env:
        return _env_labels(env)
    return dict(project().series or {})


def enforce() -> bool:
    """False when GATECFG_ENFORCE turns it off (0, false, no, off): enforced gates run as shadow gates."""
    return os.environ.get(ENFORCE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def project(start: Path | None = None) -> FileSettings:
    """The nearest settings file at or above `start` (default: the working directory), read and checked;
    an empty FileSettings when there is none."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        # Whatever holds the name is the settings file: one that cannot be read (a dangling link, a
        # folder, a FIFO) is an error, never skipped for a file further up that names another store.
        dotfile = folder / CONFIG_NAME
        if os.path.lexists(dotfile):
            return _read(dotfile, _load(dotfile), "")
        pyproject = folder / PYPROJECT
        if os.path.lexists(pyproject):
            table = _load(pyproject).get("tool", {})
            if isinstance(table, dict) and "gatecfg" in table:
                return _read(pyproject, table["gatecfg"], "tool.gatecfg")
    return FileSettings()


def _load(path: Path) -> dict[str, Any]:
    shown = _shown(path)
    data = read_bytes(path, shown, what="settings file", limit=MAX_SETTINGS_BYTES, hint="")
    text = decode_utf8(data, shown, hint="TOML is UTF-8 text: save the file as UTF-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError.at(shown, f"is not valid TOML: {exc}") from None
    except RecursionError:
        raise InputError.at(shown, "is not valid TOML: arrays or tables nested too deeply") from None


def _read(path: Path, table: object, prefix: str) -> FileSettings:
    shown = _shown(path)

    def dotted(key: str) -> str:
        return f"{prefix}.{key}" if prefix else key

    if not isinstance(table, dict):
        raise InputError.at(shown, "is not a table", dotted=prefix, hint=KEYS_HINT)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise InputError.at(shown, f"unknown setting `{unknown[0]}`", dotted=prefix, hint=KEYS_HINT)
    here = path.parent
    gates, db, series = table.get("gates"), table.get("db"), table.get("series")
    for key, value in (("gates", gates), ("db", db)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError.at(shown, "must be a non-empty string", dotted=dotted(key))
    if series is not None and not (
        isinstance(series, dict) and all(isinstance(v, str) for v in series.values())
    ):
        raise InputError.at(
            shown,
            "must be a table of string labels",
            dotted=dotted("series"),
            hint='e.g. series = { hardware = "h100" }',
        )
    return FileSettings(
        path=path,
        gates=None if gates is None else _relative(here / gates),
        db=None if db is None else _file_db(db, here),
        series=None if series is None else {str(k): v for k, v in series.items()},
    )


def _file_db(value: str, here: Path) -> str:
    """A SQLite path in the file is relative to the file's folder, as its `gates` is."""
    url = _as_url(value)
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and ":memory:" not in url:
        return prefix + str(here / url.removeprefix(prefix))
    return url


def _env_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError.at(
                SERIES_ENV, f"`{item}` is not KEY=VALUE", hint="e.g. GATECFG_SERIES=hardware=h100,backend=x"
            )
        if key.strip() in labels:
            raise InputError.at(
                SERIES_ENV,
                f"label `{key.strip()}` is given twice",
                hint="give each label once: a run belongs to one series",
            )
        labels[key.strip()] = value.strip()
    return labels


def _relative(path: Path) -> Path:
    """Relative to the working directory when below it, as paths in messages are."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else Path(rel)


def _shown(path: Path) -> str:
    return str(_relative(path))


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
