"""Re-key detection: a gate whose coordinate has no history while the same series and metric has history
under another key (SPEC §4). Used at evaluate time; `gatecfg diff` finds the same before merge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gatecfg.resolve import ResolvedGate


@dataclass(frozen=True)
class OldKey:
    coordinate: str
    steps_key: str
    constraint_key: str
    values: int
    trusted_values: int
    runs: int
    last_written: datetime | None


@dataclass(frozen=True)
class Difference:
    field: str
    old: Any
    new: Any

    def describe(self) -> str:
        return f"{self.field}: {_show(self.old)} -> {_show(self.new)}"


@dataclass(frozen=True)
class RekeyWarning:
    gate: ResolvedGate
    coordinate: str
    old: OldKey
    differences: tuple[Difference, ...]
    nightlies_to_active: int

    @property
    def orphaned(self) -> int:
        """Trusted values that formed this gate's baseline and no longer count."""
        return self.old.trusted_values

    @property
    def message(self) -> str:
        changed = "; ".join(d.describe() for d in self.differences) or "key literal changed"
        return (
            f"{self.gate.metric} re-keyed ({changed}): {self.orphaned} trusted values under "
            f"{self.old.coordinate} no longer count; {self.coordinate} starts cold and gates again after "
            f"{self.nightlies_to_active} trusted nightl{'y' if self.nightlies_to_active == 1 else 'ies'}. "
            f"Accept it, or continue the old history with `gatecfg carry` if only the constraint changed."
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": "rekey",
            "metric": self.gate.metric,
            "old": {
                "coordinate": self.old.coordinate,
                "steps_key": self.old.steps_key,
                "constraint_key": self.old.constraint_key,
                "values": self.old.values,
                "trusted_values": self.old.trusted_values,
                "runs": self.old.runs,
                "last_written": self.old.last_written.isoformat() if self.old.last_written else None,
            },
            "new": {
                "coordinate": self.coordinate,
                "steps_key": self.gate.steps_key,
                "constraint_key": self.gate.constraint_key,
            },
            "differences": [{"field": d.field, "old": d.old, "new": d.new} for d in self.differences],
            "orphaned": self.orphaned,
            "nightlies_to_active": self.nightlies_to_active,
            "source": f"{self.gate.file}:{self.gate.line}",
            "message": self.message,
        }


def differences(old_steps: str, old_constraint: str, gate: ResolvedGate) -> tuple[Difference, ...]:
    """The literals that differ between a stored key and a gate, field by field."""
    found: list[Difference] = []
    old_s, new_s = json.loads(old_steps), json.loads(gate.steps_key)
    if old_s != new_s:
        found.append(Difference("steps", old_s, new_s))
    old_c, new_c = json.loads(old_constraint), json.loads(gate.constraint_key)
    if old_c != new_c:
        if isinstance(old_c, dict) and isinstance(new_c, dict):
            for key in sorted(set(old_c) | set(new_c)):
                if old_c.get(key) != new_c.get(key):
                    found.append(Difference(f"constraint.{key}", old_c.get(key), new_c.get(key)))
        else:
            found.append(Difference("constraint", old_c, new_c))
    return tuple(found)


def rekey_warnings(
    gate: ResolvedGate, coordinate: str, stored: Sequence[OldKey], min_history: int
) -> list[RekeyWarning]:
    """Warnings for `gate` given every stored key of its series and metric (its own included)."""
    if any(k.coordinate == coordinate and k.trusted_values for k in stored):
        return []
    return [
        RekeyWarning(
            gate=gate,
            coordinate=coordinate,
            old=old,
            differences=differences(old.steps_key, old.constraint_key, gate),
            nightlies_to_active=max(min_history, 1),
        )
        for old in stored
        if old.coordinate != coordinate and old.trusted_values
    ]


def _show(value: Any) -> str:
    return "absent" if value is None else json.dumps(value)
