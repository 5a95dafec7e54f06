"""`python -m gatecfg`."""

from __future__ import annotations

from gatecfg.cli import run

run()
