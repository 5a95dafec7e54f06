"""`gatecfg diff --base REV`: before merge, the gates whose keys an edit moves, grouped by the literal that
moved them, with the history each re-key orphans (`--db`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gatecfg.errors import EXIT_GATE_FAILED, EXIT_OK, Location, Problem, Severity, format_problems
from gatecfg.gitrev import commit_of, diff_against, repo_top
from gatecfg.keys import series_key
from gatecfg.rekey import Cause, Rekeyed, TreeDiff, stored_under
from gatecfg.resolve import ResolvedGate
from gatecfg.textio import write_text

if TYPE_CHECKING:  # the store loads only with --db
    from gatecfg.store import CoordinateSummary, Store

GATES_PER_ANNOTATION = 20  # GitHub truncates long annotations; the text report lists them all


@dataclass(frozen=True)
class Stored:
    """What the store holds under a gate's old key, over its series; `carried` of them continue (carry)."""

    values: int = 0
    trusted_values: int = 0
    series: int = 0
    carried: int = 0
    orphaned_values: int = 0
    orphaned_trusted: int = 0
    last_written: datetime | None = None

    @property
    def fully_carried(self) -> bool:
        return self.series > 0 and self.carried == self.series

    def describe(self) -> str:
        if self.series == 0:
            return "no stored history under the old key"
        parts = []
        if self.orphaned_values:
            parts.append(
                f"{self.orphaned_values} stored values orphaned ({self.orphaned_trusted} trusted)"
                + (f" in {self.series - self.carried} series" if self.series - self.carried > 1 else "")
            )
        if self.carried:
            parts.append(f"history carried in {self.carried} series (gatecfg carry)")
        if self.last_written is not None:
            parts.append(f"last written {self.last_written:%Y-%m-%d %H:%M}")
        return ", ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {
            "values": self.values,
            "trusted_values": self.trusted_values,
            "series": self.series,
            "carried_series": self.carried,
            "orphaned": self.orphaned_values,
            "orphaned_trusted": self.orphaned_trusted,
            "last_written": None if self.last_written is None else self.last_written.isoformat(),
        }


@dataclass(frozen=True)
class DiffReport:
    base: str
    commit: str
    gates: Path
    top: Path
    labels: Mapping[str, str]
    diff: TreeDiff
    base_problems: Sequence[Problem]
    stored: Mapping[tuple[str, str], Stored] | None  # by (test, metric) of the old gate; None without --db

    def history(self, gate: ResolvedGate) -> Stored | None:
        return None if self.stored is None else self.stored.get((gate.test, gate.metric), Stored())

    def cold(self) -> list[Rekeyed]:
        """Re-keyed gates whose history does not continue: all of them unless `--db` shows carries."""
        return [r for r in self.diff.rekeyed if not ((h := self.history(r.old)) and h.fully_carried)]


def diff_command(
    *,
    base: str,
    gates: Path,
    db: str | None,
    labels: Mapping[str, str] | None,
    fmt_name: str,
    fail_on_rekey: bool,
    reports: Sequence[tuple[str, Path]] = (),
) -> int:
    """The re-keys of the working tree against `base`, printed as `fmt_name` and written to each
    (format, file) of `reports`; exit 1 when `fail_on_rekey` and a gate starts cold."""
    comparison = diff_against(base, gates)
    diff, base_problems = comparison.diff, comparison.before.problems
    stored = None
    if db is not None:
        from gatecfg.store import Store

        with Store.open(db) as store:
            stored = stored_history(store, diff, labels)
    report = DiffReport(
        base=base,
        commit=commit_of(base, gates),
        gates=gates,
        top=repo_top(gates),
        labels=dict(labels or {}),
        diff=diff,
        base_problems=base_problems,
        stored=stored,
    )
    if base_problems:
        print(
            f"gatecfg diff: the gate tree at {base} has problems; the gates of those files are not "
            "compared:\n" + format_problems(base_problems, "text"),
            file=sys.stderr,
        )
    print(render(report, fmt_name, fail_on_rekey=fail_on_rekey))
    for fmt, path in reports:
        write_text(path, render(report, fmt, fail_on_rekey=fail_on_rekey) + "\n", what="report")
    return EXIT_GATE_FAILED if fail_on_rekey and report.cold() else EXIT_OK


def render(report: DiffReport, fmt: str, *, fail_on_rekey: bool) -> str:
    """The report as `--format FMT` prints it (github: the annotations, then the text report)."""
    if fmt == "json":
        return json.dumps(as_json(report, fail_on_rekey), indent=2)
    if fmt == "github":
        return f"{github(report, fail_on_rekey=fail_on_rekey)}\n{text(report)}"
    if fmt == "markdown":
        return f"### gatecfg diff\n\n```\n{text(report)}\n```"
    return text(report)


def stored_history(
    store: Store, diff: TreeDiff, labels: Mapping[str, str] | None
) -> dict[tuple[str, str], Stored]:
    """Per re-keyed or removed gate, what its old key holds; one read of the store, one of its carries."""
    old_gates = [r.old for r in diff.rekeyed] + list(diff.removed)
    summaries = store.summaries(tests=sorted({g.test for g in old_gates}))
    new_of = {(r.old.test, r.old.metric): r.new for r in diff.rekeyed if r.carriable}
    continued: list[str] = []
    per_gate: dict[tuple[str, str], list[CoordinateSummary]] = {}
    for gate in old_gates:
        series = series_key(gate.test, labels) if labels else None
        found = per_gate[(gate.test, gate.metric)] = stored_under(gate, summaries, series)
        new = new_of.get((gate.test, gate.metric))
        if new is not None:
            continued += [new.coordinate(s.spec.series_key) for s in found]
    active = {(c.coordinate, c.from_coordinate) for c in store.carries(into=continued, active_only=True)}
    result: dict[tuple[str, str], Stored] = {}
    for (test, metric), found in per_gate.items():
        new = new_of.get((test, metric))
        carried = [
            s
            for s in found
            if new is not None and (new.coordinate(s.spec.series_key), s.spec.coordinate) in active
        ]
        orphaned = [s for s in found if s not in carried]
        written = [s.last_written for s in found if s.last_written is not None]
        result[(test, metric)] = Stored(
            values=sum(s.n_values for s in found),
            trusted_values=sum(s.n_trusted_values for s in found),
            series=len(found),
            carried=len(carried),
            orphaned_values=sum(s.n_values for s in orphaned),
            orphaned_trusted=sum(s.n_trusted_values for s in orphaned),
            last_written=max(written, default=None),
        )
    return result


def _series(report: DiffReport, test: str) -> str:
    return series_key(test, report.labels)


def _gate_line(report: DiffReport, r: Rekeyed) -> list[str]:
    old = r.old.coordinate(_series(report, r.old.test))
    new = r.new.coordinate(_series(report, r.new.test))
    lines = [f"    {r.new.test}: {r.new.metric}  ({r.new.file}:{r.new.line})", f"      key {old} -> {new}"]
    history = report.history(r.old)
    if history is not None:
        lines[-1] += f" · {history.describe()}"
    return lines


def text(report: DiffReport) -> str:
    diff = report.diff
    rekeyed, cold = diff.rekeyed, report.cold()
    head = [
        f"gatecfg diff: {report.gates}/ in the working tree against {report.base} ({report.commit[:12]})",
        f"{len(diff.causes)} cause(s) re-key {len(rekeyed)} gate(s); "
        f"{len(diff.added)} gate(s) added, {len(diff.removed)} removed",
    ]
    if not (diff.causes or diff.added or diff.removed or diff.uncompared):
        return "\n".join([*head, "no gate changes key: every baseline keeps its history"])
    lines = head
    for cause, group in diff.causes:
        lines += ["", *cause.lines(), f"  re-keys {len(group)} gate(s):"]
        for r in group:
            lines += _gate_line(report, r)
    if diff.added:
        lines += ["", "added (new keys, they start cold):"]
        lines += [f"  {g.file}:{g.line}: {g.test}: {g.metric}" for g in diff.added]
    if diff.removed:
        lines += ["", "removed (their stored history is no longer read):"]
        for g in diff.removed:
            history = report.history(g)
            extra = f" · {history.describe()}" if history is not None else ""
            lines.append(f"  {g.file}:{g.line}: {g.test}: {g.metric}{extra}")
    if diff.uncompared:
        lines += ["", f"not compared (their files do not resolve at {report.base}):"]
        lines += [f"  {g.file}:{g.line}: {g.test}: {g.metric}" for g in diff.uncompared]
    if cold:
        lines += ["", *_next_steps(report, cold)]
    return "\n".join(lines)


def _next_steps(report: DiffReport, cold: Sequence[Rekeyed]) -> list[str]:
    carriable = [r for r in cold if r.carriable]
    lines = [
        f"{len(cold)} gate(s) will start cold: each gates again after `min_history` trusted nightlies.",
    ]
    if carriable:
        lines.append(
            f"{len(carriable)} of them changed only their constraint; to continue their history instead: "
            f"gatecfg carry --base {report.base} --reason '...'"
        )
    return lines


def _repo_path(report: DiffReport, shown: str) -> str:
    """GitHub places annotations by the path from the repository's top."""
    try:
        return Path(shown).resolve().relative_to(report.top).as_posix()
    except ValueError:
        return shown


def github(report: DiffReport, *, fail_on_rekey: bool) -> str:
    """One warning per cause, on the changed YAML line, naming the gates it re-keys; an error each when
    `--fail-on-rekey` makes the re-key fail the job."""
    lines: list[str] = []
    for cause, group in report.diff.causes:
        named = [f"{r.new.test}: {r.new.metric}{_history_note(report, r.old)}" for r in group]
        if len(named) > GATES_PER_ANNOTATION:
            named = [*named[:GATES_PER_ANNOTATION], f"... and {len(named) - GATES_PER_ANNOTATION} more"]
        message = "\n".join(
            [_cause_text(cause), f"re-keys {len(group)} gate(s) to keys without history:", *named]
        )
        location = Location(_repo_path(report, cause.location.path), cause.location.line)
        severity: Severity = "error" if fail_on_rekey else "warning"
        lines.append(Problem(location, message, severity=severity).github())
    return "\n".join(lines)


def _cause_text(cause: Cause) -> str:
    return "\n".join(cause.lines()) if cause.kind == "changed" else f"{cause.dotted}: {cause.summary()}"


def _history_note(report: DiffReport, gate: ResolvedGate) -> str:
    history = report.history(gate)
    return "" if history is None else f" ({history.describe()})"


def _gate_json(report: DiffReport, gate: ResolvedGate, *, stored: bool = False) -> dict[str, Any]:
    history = report.history(gate) if stored else None
    return {
        "test": gate.test,
        "metric": gate.metric,
        "source": f"{gate.file}:{gate.line}",
        "steps_key": gate.steps_key,
        "constraint_key": gate.constraint_key,
        "coordinate": gate.coordinate(_series(report, gate.test)),
        "stored": None if history is None else history.as_json(),
    }


def as_json(report: DiffReport, fail_on_rekey: bool) -> dict[str, Any]:
    diff = report.diff

    def rekeyed(r: Rekeyed) -> dict[str, Any]:
        history = report.history(r.old)
        return {
            "test": r.new.test,
            "metric": r.new.metric,
            "source": f"{r.new.file}:{r.new.line}",
            "old": {
                "steps_key": r.old.steps_key,
                "constraint_key": r.old.constraint_key,
                "coordinate": r.old.coordinate(_series(report, r.old.test)),
            },
            "new": {
                "steps_key": r.new.steps_key,
                "constraint_key": r.new.constraint_key,
                "coordinate": r.new.coordinate(_series(report, r.new.test)),
            },
            "carriable": r.carriable,
            "stored": None if history is None else history.as_json(),
        }

    return {
        "base": report.base,
        "base_commit": report.commit,
        "series": dict(report.labels),
        "causes": [
            {
                "field": cause.field,
                "kind": cause.kind,
                "path": cause.location.path,
                "line": cause.location.line,
                "dotted": cause.dotted,
                "old_source": cause.old_source,
                "new_source": cause.new_source,
                "changes": [
                    {
                        "path": c.location.path,
                        "line": c.location.line,
                        "dotted": c.dotted,
                        "field": c.difference.field,
                        "old": c.difference.old,
                        "new": c.difference.new,
                    }
                    for c in cause.changes
                ],
                "message": cause.summary(),
                "gates": [rekeyed(r) for r in group],
            }
            for cause, group in diff.causes
        ],
        "rekeyed": len(diff.rekeyed),
        "cold": len(report.cold()),
        "added": [_gate_json(report, g) for g in diff.added],
        "removed": [_gate_json(report, g, stored=True) for g in diff.removed],
        "uncompared": [_gate_json(report, g) for g in diff.uncompared],
        "base_problems": [p.as_json() for p in report.base_problems],
        "exit_code": EXIT_GATE_FAILED if fail_on_rekey and report.cold() else EXIT_OK,
    }
