"""gatecfg: declarative history gates for nightly ML training runs."""

from __future__ import annotations

__version__ = "0.1.0.dev0"
