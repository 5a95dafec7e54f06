"""The result of one evaluation and its renderings (text, json, markdown, junit, github)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and the store stay unimported for commands that only parse arguments
    from gatecfg.rekey import RekeyWarning
    from gatecfg.shifts import Shift, Stale
    from gatecfg.verdicts import GateVerdicts, Verdict

FORMATS = ("text", "json", "markdown", "junit", "github")


@dataclass(frozen=True)
class Output:
    fmt: str
    path: Path | None  # None: stdout


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    commit: str | None
    branch: str | None
    url: str | None
    written: bool
    already_stored: bool
    trusted: bool


@dataclass(frozen=True)
class RunReport:
    """One evaluated run: per-gate results, every step's verdict, re-key warnings and the exit code the
    CLI would return (0 ok, 1 an enforced gate failed)."""

    test: str
    gate_file: str
    series: Mapping[str, str]
    run: RunSummary
    results: Sequence[GateVerdicts]  # one per gate, in declaration order
    warnings: Sequence[RekeyWarning]
    exit_code: int
    store: str
    enforce_disabled: bool = False
    notes: Sequence[str] = field(default_factory=tuple)  # shown at the top of every format
    shifts: Sequence[Shift] = field(default_factory=tuple)  # sustained shifts tonight continues or accepts
    stale: Sequence[Stale] = field(default_factory=tuple)  # baselines that took no value for N nightlies

    @functools.cached_property
    def verdicts(self) -> list[Verdict]:
        """Every step's verdict, gate after gate: built on first use, which the JSON report makes."""
        return [v for result in self.results for v in result]

    def to_dict(self) -> dict[str, Any]:
        """The `--format json` document as plain values (docs/evaluate.md describes its fields)."""
        from gatecfg.report.as_json import document

        return document(self)

    def render(self, fmt: str = "text") -> str:
        """The report as `gatecfg evaluate --format FMT` prints it: text, json, markdown, junit or github."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown report format {fmt!r}: one of {', '.join(FORMATS)}")
        return render(self, fmt)

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for result in self.results:
            total.update(result.counts)
        return total


def role(result: GateVerdicts) -> str:
    if not result.gate.gated:
        return "tracked"
    return "enforced" if result.enforced else "shadow"


def band_label(v: Verdict) -> str:
    """The band a step was judged against, `-` where none was: no history, no constraint, or a budget
    rule (which judges the steps together; its reason says against what)."""
    if v.gate.constraint is None or v.gate.constraint.budget is not None or not v.band.n:
        return "-"
    return v.band.interval()


def step_label(v: Verdict) -> str:
    if v.logged_step is None and v.step == -1:
        return str(v.gate.steps_key).strip('"')  # the metric is missing: no step was selected
    return "last" if v.step == -1 else str(v.step)


def step_reason(v: Verdict) -> str:
    """The reason without the status it may start with (`cold: ...`), for lines that show the status."""
    return v.reason.removeprefix(f"{v.status}: ")


def render(report: RunReport, fmt: str) -> str:
    if fmt == "json":
        from gatecfg.report.as_json import render_json

        return render_json(report)
    if fmt == "markdown":
        from gatecfg.report.markdown import render_markdown

        return render_markdown(report)
    if fmt == "junit":
        from gatecfg.report.junit import render_junit

        return render_junit(report)
    if fmt == "github":
        from gatecfg.report.github import render_github

        return render_github(report)
    from gatecfg.report.text import render_text

    return render_text(report)
