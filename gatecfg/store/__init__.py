"""The history store: stored runs and values per coordinate, baselines, trust, and the schema."""

from __future__ import annotations

from gatecfg.store.rows import (
    STATUSES,
    Baseline,
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
