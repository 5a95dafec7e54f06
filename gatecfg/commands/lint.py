"""`gatecfg lint`: the checks of `gatecfg.linting`, printed in the chosen format with a summary line."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from gatecfg.errors import EXIT_INPUT, EXIT_OK, format_problems
from gatecfg.linting import check, over_budget
from gatecfg.textio import write_text


def lint(
    paths: Sequence[Path],
    *,
    gates: Path,
    fmt: str,
    reports: Sequence[tuple[str, Path]] = (),
    db: str | None = None,
    max_false_alarm: float | None = None,
    labels: Mapping[str, str] | None = None,
) -> int:
    """Problems of the gate files; with `db` and `max_false_alarm`, also a warning for every gate whose
    estimated false-alarm rate on that history is above the budget (warnings keep exit 0). `reports`:
    (format, file) the problems are also written to."""
    problems, checked, tests = check(paths, gates)
    if db is not None and max_false_alarm is not None:
        problems += over_budget(tests, db, max_false_alarm, labels or {})
    output = format_problems(problems, fmt)
    if output:
        print(output)
    for report_fmt, path in reports:
        written = format_problems(problems, report_fmt)
        write_text(path, f"{written}\n" if written else "", what="report")
    if fmt == "text":
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        also = f"{warnings} warning{'s' * (warnings != 1)}, " if warnings else ""
        counted = f"{len(checked)} file{'s' * (len(checked) != 1)}"
        summary = f"gatecfg lint: {counted} checked, {also}{errors} error{'s' * (errors != 1)}"
        print(summary, file=sys.stderr)
    return EXIT_INPUT if any(p.severity == "error" for p in problems) else EXIT_OK
