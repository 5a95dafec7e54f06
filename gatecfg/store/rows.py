"""The plain values that go into the history store and come out of it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from gatecfg.membership import Baseline, Facts, Standing, standing

Status = Literal["pass", "fail", "tracked", "cold", "error"]
# A status as a small integer where values are read in bulk: its index here.
STATUSES: tuple[Status, ...] = ("pass", "fail", "tracked", "cold", "error")


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

    `step` is -1 for `steps: last`. A NaN value reads back as NaN (it is stored as NULL). `sd` is the
    step's night-to-night spread in the metric's units where its rule gave one (a budget gate), else None.
    """

    step: int
    value: float
    status: Status
    ref: float | None
    lo: float | None
    hi: float | None
    sd: float | None = None


@dataclass(frozen=True)
class PointColumns:
    """A run's points at one coordinate as parallel columns, the shape bulk writes take: a run of 40,000
    values, or an import of millions, builds no object per value. None in refs, los, his, sds as in
    `StoredPoint`."""

    steps: Sequence[int]
    values: Sequence[float]
    statuses: Sequence[Status]
    refs: Sequence[float | None]
    los: Sequence[float | None]
    his: Sequence[float | None]
    sds: Sequence[float | None]
    # The gate's own trust of these values (its verdict: it neither failed nor errored); None where
    # only the run's trust is known (an import), which then counts for the gate too.
    gate_trusted: bool | None = None

    @classmethod
    def of_points(cls, points: Sequence[StoredPoint]) -> PointColumns:
        return cls(
            [p.step for p in points],
            [p.value for p in points],
            [p.status for p in points],
            [p.ref for p in points],
            [p.lo for p in points],
            [p.hi for p in points],
            [p.sd for p in points],
        )

    def points(self) -> list[StoredPoint]:
        return [
            StoredPoint(*row)
            for row in zip(
                self.steps, self.values, self.statuses, self.refs, self.los, self.his, self.sds, strict=True
            )
        ]

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True, eq=False)
class ValueColumns:
    """A run's stored values of one quantity (metric, steps_key) as arrays, in step order: the value (NaN
    as NaN) and its status's index in STATUSES (None: not read). Runs that hold the same steps share one
    steps array."""

    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    statuses: npt.NDArray[np.int8] | None

    @classmethod
    def of(cls, values: Mapping[int, float], status: Status) -> ValueColumns:
        """The columns of `{step: value}`, every value with `status`."""
        steps = sorted(values)
        return cls(
            np.array(steps, np.int64),
            np.array([values[s] for s in steps], np.float64),
            np.full(len(steps), STATUSES.index(status), np.int8),
        )

    def __len__(self) -> int:
        return len(self.steps)

    def status_at(self, step: int) -> Status | None:
        """The status of the value at `step`; None where there is none."""
        at = int(np.searchsorted(self.steps, step))
        return STATUSES[self.status_codes()[at]] if at < len(self.steps) and self.steps[at] == step else None

    def status_codes(self) -> npt.NDArray[np.int8]:
        if self.statuses is None:
            raise ValueError("the statuses of these values were not read")
        return self.statuses


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
    # What the run carries beyond its identity (`--meta`, the CI's runner and image): not part of any key,
    # shown when a gate fails so that a container bump reads as one cause.
    meta: Mapping[str, str] = field(default_factory=dict)

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
    facts: Facts  # what the baseline rule reads of the value's gate in its run

    def standing(self, baseline: Baseline = "trusted") -> Standing:
        """Whether the value is in its gate's baseline (older runs aside) and why: gatecfg.membership."""
        return standing(self.facts, baseline)


# Where the run's time sits among those columns: each reader decodes it its own way before `history_row`.
HISTORY_CREATED_AT = 11


def history_row(columns: Sequence[Any], coordinate: CoordinateSpec, created_at: datetime) -> HistoryRow:
    """A `Store.history` row from the columns both readers select (point: step, value, status, ref, lo,
    hi, sd; run: run_id, commit, branch, created_at, gate_trusted, trust_override, after the coordinate's
    pk; then the gate's own trust in the run, its override, its rejoin and whether an accepted shift
    starts after it), with the run's time as the reader decoded it."""
    (_, step, value, status, ref, lo, hi, sd, run_id, commit, branch, _, gate_trusted, trust_override,
     own_trust, own_override, rejoined, before_shift) = columns  # fmt: skip
    facts = Facts.stored((own_trust, gate_trusted, own_override, trust_override, rejoined), before_shift)
    return HistoryRow(
        run_id=run_id,
        commit=commit,
        branch=branch,
        created_at=created_at,
        # Effective trust: an explicit trust/untrust wins over the verdict when written.
        trusted=bool(gate_trusted if trust_override is None else trust_override),
        gate_trusted=bool(gate_trusted),
        trust_override=None if trust_override is None else bool(trust_override),
        coordinate=coordinate,
        point=StoredPoint(
            step=step,
            value=math.nan if value is None else value,
            status=cast(Status, status),
            ref=ref,
            lo=lo,
            hi=hi,
            sd=sd,
        ),
        facts=facts,
    )
