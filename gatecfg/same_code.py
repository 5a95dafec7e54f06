"""Code that did not change (pure): a gate that fails tonight on the same code as a stored run of the series
on which it passed, in the same environment, failed on noise or the machine, not on a code change
(docs/calibration.md, "Same code").

The code of a run is its commit, or the build label a CI gives it (`--meta build=...`); the environment is
the rest of what the run carries (`--meta`, the CI's runner image and OS), the runner's own name aside
(one machine of a pool is not an environment). `policy.same_code` says what such a failure does: `fail`
(it fails the job, and says so) or `warn` (it is reported and does not fail the job; its values stay out
of the baseline either way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

SameCodePolicy = Literal["fail", "warn"]
BUILD = "build"
# What a run carries that says which machine of a pool ran it, not what the machine is.
NOT_ENVIRONMENT = frozenset({BUILD, "runner"})


@dataclass(frozen=True)
class Earlier:
    """A stored run of the series, as the check reads it: its code, what it carried, and whether the
    gate (of the coordinate asked about) passed on it."""

    run_id: str
    commit: str | None
    meta: Mapping[str, str]
    passed: bool


@dataclass(frozen=True)
class SameCode:
    """Tonight's failure of `metric` on the code of `run_id`, which passed it."""

    metric: str
    coordinate: str
    run_id: str
    by: Literal["commit", "build"]
    code: str
    policy: SameCodePolicy

    def describe(self) -> str:
        consequence = (
            "policy.same_code: warn, so it does not fail the job"
            if self.policy == "warn"
            else "failing the job"
        )
        return (
            f"{self.metric} failed on the same code as run {self.run_id} ({self.by} {self.code}), which "
            f"passed it in the same environment: noise or the machine, not a code change; {consequence}"
        )

    def as_json(self) -> dict[str, str]:
        return {
            "metric": self.metric,
            "run_id": self.run_id,
            "by": self.by,
            "code": self.code,
            "policy": self.policy,
        }


def code_of(commit: str | None, meta: Mapping[str, str]) -> tuple[Literal["commit", "build"], str] | None:
    """What says which code a run measured: its commit, else its build label; None when it has neither."""
    if commit:
        return "commit", commit
    if meta.get(BUILD):
        return "build", meta[BUILD]
    return None


def environment(meta: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in meta.items() if key not in NOT_ENVIRONMENT}


def same_environment(tonight: Mapping[str, str], earlier: Mapping[str, str]) -> bool:
    """Every environment key both runs give holds the same value (a key one of them lacks says nothing)."""
    mine, theirs = environment(tonight), environment(earlier)
    return all(mine[key] == theirs[key] for key in mine.keys() & theirs.keys())


def find(
    *,
    metric: str,
    coordinate: str,
    commit: str | None,
    meta: Mapping[str, str],
    earlier: Sequence[Earlier],
    policy: SameCodePolicy,
) -> SameCode | None:
    """The newest run of `earlier` (newest first) with tonight's code and environment on which the gate
    passed; None when there is none or tonight carries no code."""
    found = code_of(commit, meta)
    if found is None:
        return None
    by, code = found
    for run in earlier:
        theirs = run.commit if by == "commit" else run.meta.get(BUILD)
        if run.passed and theirs == code and same_environment(meta, run.meta):
            return SameCode(metric, coordinate, run.run_id, by, code, policy)
    return None
