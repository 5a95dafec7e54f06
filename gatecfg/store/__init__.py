"""The history store: stored runs and values per coordinate, baselines, trust, and the schema.

`Store` loads on first use (it brings SQLAlchemy): `evaluate` and `regimes` read a SQLite store without
it (store/direct.py), and the row types here are plain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gatecfg.membership import Baseline
from gatecfg.store.rows import (
    STATUSES,
    CoordinateSpec,
    CoordinateSummary,
    HistoryRow,
    PointColumns,
    RunInfo,
    RunRow,
    Status,
    StoredPoint,
    ValueColumns,
)

if TYPE_CHECKING:
    from gatecfg.store.store import Store

__all__ = [
    "STATUSES",
    "Baseline",
    "CoordinateSpec",
    "CoordinateSummary",
    "HistoryRow",
    "PointColumns",
    "RunInfo",
    "RunRow",
    "Status",
    "Store",
    "StoredPoint",
    "ValueColumns",
]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from gatecfg.store.store import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
