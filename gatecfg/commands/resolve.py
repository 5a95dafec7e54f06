"""`gatecfg resolve`: what every declaration resolves to, its keys, and where each literal came from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatecfg.errors import EXIT_OK, InputError
from gatecfg.keys import series_key
from gatecfg.resolve import GATE_FIELDS, ResolvedGate, ResolvedTest, load_tree


def resolve(*, gates: Path, test: str | None, labels: Mapping[str, str], fmt: str) -> int:
    tree = load_tree(gates)
    if tree.problems:
        raise InputError(tree.problems)
    tests = [tree.test(test)] if test is not None else [tree.tests[name] for name in sorted(tree.tests)]
    if fmt == "json":
        rows = [g.as_json(series_key(t.test, labels)) for t in tests for g in t.gates]
        print(json.dumps(rows, indent=2))
    else:
        print("\n\n".join(_text(t, series_key(t.test, labels)) for t in tests))
    return EXIT_OK


def _text(test: ResolvedTest, series: str) -> str:
    policy = test.policy
    lines = [
        f"{test.test}  ({test.file})",
        f"  bases: {' -> '.join(test.bases) or '(none)'}",
        f"  policy: window={policy.window} ({policy.sources['window']}), "
        f"min_history={policy.min_history} ({policy.sources['min_history']}), "
        f"reference={policy.reference} ({policy.sources['reference']}), "
        f"baseline={policy.baseline} ({policy.sources['baseline']})",
    ]
    for gate in test.gates:
        kind = "gated" if gate.gated else "tracked"
        lines.append(f"  {gate.metric}  [{gate.coordinate(series)}] {kind}")
        width = max(len(_literal(gate, name)) for name in GATE_FIELDS)
        for name in GATE_FIELDS:
            lines.append(f"    {name:<10}  {_literal(gate, name):<{width}}  {gate.sources[name]}")
    return "\n".join(lines)


def _literal(gate: ResolvedGate, name: str) -> str:
    value: Any = getattr(gate, name)
    if name == "steps":
        return gate.steps_key.strip('"') if not isinstance(value, tuple) else gate.steps_key
    if value is None:
        return "null" if name == "constraint" else "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):  # tolerate, trials
        return f"{value:g}"
    # A number as `0.5`, a word (`budget: both`) as itself.
    items = ", ".join(
        f"{k}: {v:g}" if isinstance(v, int | float) else f"{k}: {v}" for k, v in value.literal().items()
    )
    return "{" + items + "}"
