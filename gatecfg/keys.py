"""Canonical keys: the one place that decides what identifies a stored value (docs/identity-and-rekeying.md).

Identity: the series (test + `--series` labels), the metric, the resolved `steps` literal and the
resolved `constraint` literal (`sigma_*` and `budget` included: the verdict literals decide which nights
entered a baseline). Not identity: `limits`, `enforce`, `tolerate`, `trials`, `false_alarm` (a budget's
threshold, like `tolerate`), policy, which file wrote a literal, and YAML style (key order, flow vs
block, comments, anchors, `1` vs `1.0`). Changing an identity literal moves a gate to a new coordinate
with no history; that is what `rekey` warns about.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from gatecfg.models import Constraint, Steps

# Bumped only if the hashed tuple itself changes shape; doing so re-keys every stored coordinate.
KEY_VERSION = 1
HASH_LENGTH = 12


def normalise(value: Any) -> Any:
    """Plain JSON types with numbers in one spelling: 1 == 1.0 == 1.00, -0.0 == 0."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"a key cannot hold a non-finite number: {value!r}")
        if number.is_integer() and abs(number) < 2**53:
            return int(number)
        return number
    if isinstance(value, Mapping):
        return {str(k): normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalise(v) for v in value]
    raise TypeError(f"cannot key a {type(value).__name__}")


def canonical_json(value: Any) -> str:
    return json.dumps(
        normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def steps_key(steps: Steps) -> str:
    """`"all"` (with its quotes), `"last"`, or `[0,1]` (sorted)."""
    return canonical_json(sorted(steps) if isinstance(steps, tuple) else steps)


def constraint_key(constraint: Constraint | None) -> str:
    """`null` for a tracked gate, else the written keys only: an open side is simply absent."""
    return canonical_json(None if constraint is None else constraint.literal())


def series_key(test: str, labels: Mapping[str, str] | None = None) -> str:
    return canonical_json({"test": test, "labels": dict(labels or {})})


def coordinate_hash(series: str, metric: str, steps: str, constraint: str) -> str:
    """A short, stable id of (series, metric, steps_key, constraint_key); the step is stored beside it."""
    literal = canonical_json(
        {"v": KEY_VERSION, "series": series, "metric": metric, "steps": steps, "constraint": constraint}
    )
    return hashlib.sha256(literal.encode("utf-8")).hexdigest()[:HASH_LENGTH]
