"""The result of one evaluation and its renderings (text, json, markdown, junit, github)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The labels every format shows, re-exported: the renderers import them from `labels`, not from here, so
# that the package (which imports its renderers on first use) is not imported back by them.
from gatecfg.report.labels import band_label, role, step_label, step_reason

if TYPE_CHECKING:  # numpy and the store stay unimported for commands that only parse arguments
    from gatecfg.rekey import RekeyWarning
    from gatecfg.verdicts import GateVerdicts, Verdict

__all__ = [
    "FORMATS",
    "Output",
    "RunReport",
    "RunSummary",
    "band_label",
    "render",
    "role",
    "step_label",
    "step_reason",
]

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
