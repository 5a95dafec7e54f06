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
from gatecfg.report.labels import Noise, band_label, role, step_label, step_reason

if TYPE_CHECKING:  # numpy and the store stay unimported for commands that only parse arguments
    from gatecfg.rekey import RekeyWarning
    from gatecfg.same_code import SameCode
    from gatecfg.shifts import Shift, Stale
    from gatecfg.store.rows import RunInfo
    from gatecfg.verdicts import GateVerdicts, Verdict

__all__ = [
    "FORMATS",
    "Changes",
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
    source: str | None = None  # the repository at this commit on the CI's web UI (Provenance.source)


@dataclass(frozen=True)
class Changes:
    """What differs between tonight's run and the baseline's newest run (shown when a gate fails): the
    metadata whose value changed (`image 26.02 -> 26.04`) and the commits between them. A container bump
    that moves twenty tests reads as one cause, not twenty regressions."""

    since_run: str  # the baseline's newest run
    since_commit: str | None
    commit: str | None  # tonight's
    meta: tuple[tuple[str, str | None, str | None], ...]  # (key, baseline's value, tonight's), by key

    @classmethod
    def of(cls, newest: RunInfo, *, commit: str | None, meta: Mapping[str, str]) -> Changes:
        """Only the keys tonight's run gives: a key it does not give is unknown tonight, not removed (a
        pull request's run passes no `--meta image=...`), so it is never `image 26.04 -> (none)`."""
        differ = tuple(
            (key, newest.meta.get(key), meta[key])
            for key in sorted(meta)
            if newest.meta.get(key) != meta[key]
        )
        return cls(newest.run_id, newest.commit, commit, differ)

    @property
    def empty(self) -> bool:
        """Nothing to say: no metadata differs and tonight's commit or the baseline's is unknown."""
        return not self.meta and not (self.since_commit and self.commit)

    def line(self) -> str:
        """`since the baseline's newest run night-11 (commit c11): image 26.02 -> 26.04; commits c11..c12`."""
        parts = [f"{key} {old or '(none)'} -> {new or '(none)'}" for key, old, new in self.meta]
        if self.since_commit and self.commit and self.since_commit != self.commit:
            parts.append(f"commits {self.since_commit[:12]}..{self.commit[:12]}")
        elif self.since_commit and self.since_commit == self.commit:
            parts.append("the same commit")
        at = f" (commit {self.since_commit[:12]})" if self.since_commit else ""
        return f"since the baseline's newest run {self.since_run}{at}: " + "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {
            "since_run": self.since_run,
            "since_commit": self.since_commit,
            "commit": self.commit,
            "meta": [{"key": k, "baseline": old, "tonight": new} for k, old, new in self.meta],
        }


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
    rekey_fails: bool = False  # a re-key fails the job (`--fail-on-rekey`): its annotation an error
    notes: Sequence[str] = field(default_factory=tuple)  # shown at the top of every format
    shifts: Sequence[Shift] = field(default_factory=tuple)  # sustained shifts tonight continues or accepts
    stale: Sequence[Stale] = field(default_factory=tuple)  # baselines that took no value for N nightlies
    same_code: Sequence[SameCode] = field(default_factory=tuple)  # failures on code that did not change
    # What changed since the baseline's newest run, when a gate fails (and a baseline run exists).
    changes: Changes | None = None

    def __repr__(self) -> str:
        """`<RunReport tests/e2e/x.py run n1: exit 1, 1 of 2 gates failed (1 error)>`: what a REPL or a log
        line needs, not every verdict (`render()` and `to_dict()` give those)."""
        failed = Noise.of(self.results).line().split(";")[0]
        return f"<RunReport {self.test} run {self.run.run_id}: exit {self.exit_code}, {failed}>"

    @functools.cached_property
    def verdicts(self) -> list[Verdict]:
        """Every step's verdict, gate after gate: built on first use, which the JSON report makes."""
        return [v for result in self.results for v in result]

    def to_dict(self) -> dict[str, Any]:
        """The `--format json` document as plain values (docs/evaluate.md describes its fields)."""
        from gatecfg.report.as_json import document

        return document(self)

    def render(self, fmt: str = "text", *, verbose: bool = False, width: int | None = None) -> str:
        """The report as `gatecfg evaluate --format FMT` prints it: text, json, markdown, junit or github;
        `verbose`: the text report's tables of steps and gates too; `width`: wrap the text report to that
        many columns (by default a line is never wrapped)."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown report format {fmt!r}: one of {', '.join(FORMATS)}")
        return render(self, fmt, verbose=verbose, width=width)

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for result in self.results:
            total.update(result.counts)
        return total


def render(report: RunReport, fmt: str, *, verbose: bool = False, width: int | None = None) -> str:
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

    return render_text(report, verbose=verbose, width=width)
