"""Optional dependency groups (`pip install 'gatecfg[NAME]'`) and the one-line error when one is missing.

The core installs what `lint` needs and no more, because the pre-commit hook's environment is the core
(docs/pre-commit.md); the history store and everything that reads it are the `store` extra, which every
other extra includes. A command that needs an extra checks for it before it imports anything, or the CLI
turns the ImportError of a module an extra provides into the same one line (`missing_extra`): a missing
package reads as an instruction, never as a traceback.
"""

from __future__ import annotations

import importlib.util

from gatecfg.errors import InputError

# extra -> the top-level modules it provides (the names `import` uses, not the distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "store": ("sqlalchemy", "alembic", "rich", "numpy", "orjson"),
    "analytics": ("scipy", "ruptures", "matplotlib"),
    "postgres": ("psycopg",),
}


def require(extra: str, command: str) -> None:
    """Raise an InputError (exit 2) naming the extra to install if any of its modules is missing."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        raise _needs(extra, missing, command)


def missing_extra(error: ImportError, command: str) -> InputError | None:
    """The one-line error for an ImportError of a module an extra provides, raised while `command` ran;
    None for any other ImportError (a bug, not an installation to complete)."""
    name = (error.name or "").split(".")[0]
    extra = next((extra for extra, modules in EXTRAS.items() if name in modules), None)
    return None if extra is None else _needs(extra, [name], command)


def _needs(extra: str, missing: list[str], command: str) -> InputError:
    return InputError.at(
        command,
        f"needs the `{extra}` extra, which is not installed (missing: {', '.join(missing)})",
        hint=f"pip install 'gatecfg[{extra}]'",
    )
