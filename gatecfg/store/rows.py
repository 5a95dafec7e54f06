"""The plain values that go into the history store and come out of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Status = Literal["pass", "fail", "tracked", "cold", "error"]
Baseline = Literal["trusted", "nightly"]


@dataclass(frozen=True)
class CoordinateSpec:
    """What a coordinate hash stands for; the hash itself is computed by `gatecfg.keys`."""

    coordinate: str
    series_key: str
    test: str
    metric: str
    steps_key: str
    constraint_key: str


@dataclass(frozen=True)
class StoredPoint:
    """One value of a run at one step of a coordinate, with the verdict it got when written.

    `step` is -1 for `steps: last`. A NaN value reads back as NaN (it is stored as NULL).
    """

    step: int
    value: float
    status: Status
    ref: float | None
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class RunInfo:
    """A nightly run's identity and provenance; `gate_trusted` is its verdict when written."""

    run_id: str
    test: str
    series_key: str
    labels: Mapping[str, str]
    commit: str | None
    branch: str | None
    ci_run_id: str | None
    ci_run_attempt: str | None
    url: str | None
    created_at: datetime
    gate_trusted: bool
    written_by: str
    # Why a job the write policy refuses wrote anyway (`--override-write-policy`); None for a normal write.
    write_override: str | None = None

    def __post_init__(self) -> None:
        # Runs are ordered by created_at across CI runners in different zones: a naive time is ambiguous.
        if self.created_at.tzinfo is None:
            raise ValueError(f"run {self.run_id!r}: created_at must be timezone-aware")


@dataclass(frozen=True)
class RunRow:
    """A stored run with its trust: `trusted` is the override when set, else the verdict when written."""

    run: RunInfo
    trusted: bool
    trust_override: bool | None
    trust_reason: str | None
    trust_changed_at: datetime | None


@dataclass(frozen=True)
class CoordinateSummary:
    """How much history a coordinate holds; re-key warnings compare these across keys of one metric."""

    spec: CoordinateSpec
    n_values: int
    n_trusted_values: int
    n_runs: int
    last_written: datetime | None


@dataclass(frozen=True)
class HistoryRow:
    """One stored value with the run it came from, newest first in `Store.history`."""

    run_id: str
    commit: str | None
    branch: str | None
    created_at: datetime
    trusted: bool
    gate_trusted: bool
    trust_override: bool | None
    coordinate: CoordinateSpec
    point: StoredPoint
