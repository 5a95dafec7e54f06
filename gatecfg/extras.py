"""Optional dependency groups (`pip install 'gatecfg[NAME]'`) and the one-line error when one is missing.

The core installs what `lint` and `evaluate` need; heavier libraries live in extras so that the
pre-commit hook's environment stays small. A command that needs an extra checks for it before it
imports anything, so a missing package reads as an instruction, never as an ImportError traceback.
"""

from __future__ import annotations

import importlib.util

from gatecfg.errors import InputError

# extra -> the top-level modules it provides (the names `import` uses, not the distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "analytics": ("scipy", "ruptures", "matplotlib"),
    "postgres": ("psycopg",),
}


def require(extra: str, command: str) -> None:
    """Raise an InputError (exit 2) naming the extra to install if any of its modules is missing."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        raise InputError.at(
            command,
            f"needs the `{extra}` extra, which is not installed (missing: {', '.join(missing)})",
            hint=f"pip install 'gatecfg[{extra}]'",
        )
