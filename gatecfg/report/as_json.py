"""The stable JSON report of SPEC §6 (documented in docs/report-json.md)."""

from __future__ import annotations

import json
from typing import Any

from gatecfg.band import tidy
from gatecfg.evaluate import GateOutcome, Verdict, outcomes
from gatecfg.report import RunReport

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


def outcome_json(o: GateOutcome) -> dict[str, Any]:
    return {
        "metric": o.gate.metric,
        "coordinate": o.coordinate,
        "status": o.status,
        "enforced": o.enforced,
        "steps": o.steps,
        "failing": o.failing,
        "tolerate": o.gate.tolerate,
        "allowed": o.allowed,
        "reason": o.reason,
    }


def render_json(report: RunReport) -> str:
    run = report.run
    document = {
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
        "verdicts": [verdict_json(v) for v in report.verdicts],
        "gates": [outcome_json(o) for o in outcomes(report.verdicts)],
        "warnings": [w.as_json() for w in report.warnings],
        "exit_code": report.exit_code,
    }
    return json.dumps(document, indent=2, allow_nan=False)
