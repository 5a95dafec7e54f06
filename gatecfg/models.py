"""Pydantic models of base files and gate files (SPEC §3)."""

from __future__ import annotations

from typing import Literal

# `all`, `last`, or distinct steps >= 0 (kept sorted).
Steps = Literal["all", "last"] | tuple[int, ...]
