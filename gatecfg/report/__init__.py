"""The result of one evaluation and its renderings (text, json, markdown, junit, github)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from gatecfg.evaluate import Verdict, gate_status
from gatecfg.rekey import RekeyWarning

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
    test: str
    gate_file: str
    series: Mapping[str, str]
    run: RunSummary
    verdicts: Sequence[Verdict]
    warnings: Sequence[RekeyWarning]
    exit_code: int
    store: str
    enforce_disabled: bool = False
    notes: Sequence[str] = field(default_factory=tuple)

    def counts(self) -> Counter[str]:
        return Counter(v.status for v in self.verdicts)

    def gates(self) -> Iterator[tuple[str, list[Verdict]]]:
        """Verdicts grouped per gate, in declaration order."""
        for _, group in groupby(self.verdicts, key=lambda v: (v.gate.metric, v.coordinate)):
            items = list(group)
            yield items[0].gate.metric, items


def step_label(v: Verdict) -> str:
    if v.logged_step is None and v.step == -1:
        return str(v.gate.steps_key).strip('"')  # the metric is missing: no step was selected
    return "last" if v.step == -1 else str(v.step)


def worst(verdicts: Sequence[Verdict]) -> str:
    """A gate's status in reports: its worst step, where a step its `tolerate` absorbs counts as a pass."""
    return gate_status(verdicts)


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
