"""The stable JSON report (`--format json`; docs/evaluate.md, "The JSON report (stable)")."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from gatecfg.band import tidy
from gatecfg.report.labels import Noise
from gatecfg.verdicts import GateVerdicts, Verdict

if TYPE_CHECKING:
    from gatecfg.report import RunReport
    from gatecfg.shifts import Shift, Stale

SCHEMA_VERSION = 1


def _num(x: float | None) -> float | None:
    return None if x is None else tidy(x)


def verdict_json(v: Verdict) -> dict[str, Any]:
    return {
        "metric": v.gate.metric,
        "step": v.step,
        "logged_step": v.logged_step,
        "steps_key": v.gate.steps_key,
        "constraint_key": v.gate.constraint_key,
        "coordinate": v.coordinate,
        "status": v.status,
        "tolerated": v.tolerated,
        "enforced": v.enforced,
        "gated": v.gate.gated,
        "value": v.value,
        "ref": _num(v.band.ref),
        "n": v.band.n if v.band.ref is not None else None,
        "lo": _num(v.band.lo),
        "hi": _num(v.band.hi),
        "sd": _num(v.band.sd),
        "limits": None if v.gate.limits is None else v.gate.limits.literal(),
        "reason": v.reason,
        "source": f"{v.gate.file}:{v.gate.line}",
    }


def outcome_json(o: GateVerdicts) -> dict[str, Any]:
    return {
        "metric": o.gate.metric,
        "coordinate": o.coordinate,
        "status": o.status,
        "enforced": o.enforced,
        "steps": len(o),
        "failing": o.failing,
        "tolerate": o.gate.tolerate,
        "allowed": o.allowed,
        "reason": o.reason,
        "why": o.why,
        "missing": None
        if not o.missing
        else {"steps": list(o.missing), "policy": o.policy.missing, "message": o.missing_text()},
    }


def shift_json(s: Shift) -> dict[str, Any]:
    return {
        "status": "accepted" if s.accepted else "shifted",
        "metric": s.metric,
        "coordinate": s.coordinate,
        "first_run_id": s.first_run_id,
        "commit": s.commit,
        "direction": s.direction,
        "size": tidy(s.size),
        "nightlies": s.nightlies,
        "accept_shift_after": s.accept_after,
        "message": s.describe(),
    }


def stale_json(s: Stale) -> dict[str, Any]:
    return {
        "metric": s.metric,
        "nightlies": s.nightlies,
        "since_run_id": s.since_run_id,
        "since_commit": s.since_commit,
        "causes": list(s.causes),
        "command": s.command,
        "message": s.describe(),
    }


def render_json(report: RunReport) -> str:
    return dumps_indented(document(report))


def document(report: RunReport) -> dict[str, Any]:
    run = report.run
    return {
        "version": SCHEMA_VERSION,
        "test": report.test,
        "series": dict(report.series),
        "run": {
            "run_id": run.run_id,
            "commit": run.commit,
            "branch": run.branch,
            "url": run.url,
            "written": run.written,
            "already_stored": run.already_stored,
            "trusted": run.trusted,
        },
        "summary": dict(sorted(report.counts().items())),
        "enforce_disabled": report.enforce_disabled,
        "notes": list(report.notes),
        "verdicts": [verdict_json(v) for v in report.verdicts],
        "gates": [outcome_json(o) for o in report.results],
        "warnings": [w.as_json() for w in report.warnings],
        "shifts": [shift_json(s) for s in report.shifts],
        "stale": [stale_json(s) for s in report.stale],
        "same_code": [s.as_json() for s in report.same_code],
        "changes": None if report.changes is None else report.changes.as_json(),
        "noise": _noise(report),
        "exit_code": report.exit_code,
    }


def dumps_indented(value: Any) -> str:
    """Exactly `json.dumps(value, indent=2, allow_nan=False)`, at C speed for the scalars.

    Kept for speed by benchmarks/bench.py (`JSON report of N verdicts`); held equal to `json.dumps` by
    tests/test_fuzz.py::test_the_report_emitter_writes_what_json_dumps_writes. 40,000 verdicts: json with
    `indent` (pure Python) 0.42 s, this 0.23 s. orjson takes 0.01 s but writes other bytes (`0.00001` for
    `1e-05`, raw UTF-8 for `\\u00e9`, `null` for NaN instead of an error), which the test pins as json's.
    """
    parts: list[str] = []
    try:
        _emit(value, "\n", parts)
    except TypeError:  # a key that is not a string: json's own rules for it
        return json.dumps(value, indent=2, allow_nan=False)
    return "".join(parts)


_CONTAINERS = (dict, list, tuple)


def _emit(value: Any, newline: str, parts: list[str]) -> None:
    # Checked in order of frequency in a report; bool before int, since a bool is an int.
    kind = type(value)
    if kind is str:
        parts.append(encode_basestring_ascii(value))
    elif value is None:
        parts.append("null")
    elif kind is float:
        if not math.isfinite(value):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        parts.append(repr(value))
    elif kind is bool:
        parts.append("true" if value else "false")
    elif kind is int:
        parts.append(repr(value))
    elif kind is dict or kind is list or kind is tuple:
        if not value:
            parts.append("{}" if kind is dict else "[]")
            return
        inner = newline + "  "
        opening, closing = ("{", "}") if kind is dict else ("[", "]")
        separator = opening + inner
        for key, item in value.items() if kind is dict else ((None, item) for item in value):
            parts.append(separator)
            if key is not None:
                parts.append(encode_basestring_ascii(key) + ": ")
            if type(item) in _CONTAINERS and item:
                # Joined per item: 40,000 verdicts as 40,000 strings, not 1.6 million pieces held at once.
                item_parts: list[str] = []
                _emit(item, inner, item_parts)
                parts.append("".join(item_parts))
            else:
                _emit(item, inner, parts)
            separator = "," + inner
        parts.append(newline + closing)
    else:
        # Anything else (a subclass of int or dict, say) goes the way json itself encodes it.
        parts.append(json.dumps(value, indent=2, allow_nan=False).replace("\n", newline))


def _noise(report: RunReport) -> dict[str, Any]:
    noise = Noise.of(report.results)
    return {
        "judged": noise.judged,
        "failed": noise.failed,
        "expected": noise.expected,
        "uncounted": noise.uncounted,
        "statuses": dict(noise.statuses),
        "line": noise.line(),
    }
