"""`gatecfg evaluate`, the CI step: what the command adds to the evaluation core (`gatecfg.evaluation`):
the re-key banner, the report files and the GitHub step summary."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from gatecfg import terminal as screen
from gatecfg.errors import EXIT_GATE_FAILED, EXIT_OK
from gatecfg.escape import terminal
from gatecfg.outputs import Reads, collision
from gatecfg.rekey import RekeyWarning
from gatecfg.report import Output, RunReport, render
from gatecfg.shifts import Shift
from gatecfg.textio import check_writable, write_text

BANNER_WIDTH = 78


def banner(warnings: Sequence[RekeyWarning]) -> str:
    """The stderr banner a person cannot miss when baselines cold-start."""
    line = "!" * BANNER_WIDTH
    body = [line, f"!!  RE-KEY: {len(warnings)} gate(s) lost their baseline and start cold", line]
    for w in warnings:
        body.append(f"!!  {w.gate.metric}  ({w.gate.file}:{w.gate.line})")
        body.append(
            f"!!    {w.old.coordinate} -> {w.coordinate}: {w.orphaned} trusted values no longer count"
        )
        for d in w.differences:
            body.append(f"!!    {d.describe()}")
        for source in w.literals.values():
            body.append(f"!!    written at {source}")
        body.append(f"!!    gates again after {w.nightlies_to_active} trusted nightly run(s)")
    body.append("!!  see `gatecfg diff --base origin/main`, or `gatecfg carry` if only a constraint changed")
    body.append(line)
    return "\n".join(body)


def shift_banner(shifts: Sequence[Shift]) -> str:
    """The stderr banner of sustained shifts: a gate failing night after night on a new level."""
    line = "!" * BANNER_WIDTH
    body = [line, f"!!  SHIFT: {len(shifts)} gate(s) sit on a new level night after night", line]
    for s in shifts:
        body.append(f"!!  {terminal(s.describe())}")
        if s.accepted:
            body.append("!!    undo with `gatecfg shifts --undo N` (N: `gatecfg shifts` lists it)")
    body.append(line)
    return "\n".join(body)


def fail_on_rekey(report: RunReport) -> RunReport:
    """`--fail-on-rekey`: a run that passes although a gate re-keyed (and starts cold) fails (exit 1),
    with a note saying why in every format and the re-keys' annotations errors."""
    if not report.warnings or report.exit_code != EXIT_OK:
        return report
    note = f"{len(report.warnings)} gate(s) re-keyed and start cold, and --fail-on-rekey is set: exit 1"
    return dataclasses.replace(
        report, exit_code=EXIT_GATE_FAILED, notes=(*report.notes, note), rekey_fails=True
    )


def open_outputs(outputs: Sequence[Output], reads: Reads) -> TextIO | None:
    """Check every file the command will write, before the run is evaluated and stored (a typo in
    --output must not fail the job after the run went into history); open the step summary, unless it
    is a file the command reads."""
    for output in outputs:
        if output.path is not None:
            check_writable(output.path, what="report")
    return _step_summary(reads)


def print_report(
    report: RunReport, outputs: Sequence[Output], summary: TextIO | None, *, verbose: bool = False
) -> int:
    """The banner, the reports and the step summary of an evaluation; returns its exit code. `verbose`:
    the text report's tables of steps and gates too."""
    for note in report.notes:
        print(f"gatecfg evaluate: {terminal(note)}", file=sys.stderr)
    if report.shifts:
        print(shift_banner(report.shifts), file=sys.stderr)
    if report.warnings:
        print(banner(report.warnings), file=sys.stderr)
    for output in outputs:
        # Wrapped only on a terminal: a file or a CI log keeps each finding on one line.
        width = screen.width() if output.path is None else None
        text = render(report, output.fmt, verbose=verbose, width=width)
        if output.path is None:
            sys.stdout.write(text)
        else:
            write_text(output.path, text, what="report")
    if summary is not None:
        try:
            with summary:
                summary.write(render(report, "markdown"))
        except OSError as exc:
            print(
                f"gatecfg: warning: GITHUB_STEP_SUMMARY: cannot write: {exc.strerror or exc}", file=sys.stderr
            )
    return report.exit_code


def _step_summary(reads: Reads) -> TextIO | None:
    """The job summary file GitHub names, opened for appending; a warning (not a failed job) and no
    summary when it cannot be, or is a file the command reads (appended to, the store would be
    corrupt): the verdict and the history do not depend on it."""
    name = os.environ.get("GITHUB_STEP_SUMMARY")
    if not name:
        return None
    overwritten = collision(Path(name), reads)
    if overwritten is not None:
        print(
            f"gatecfg: warning: GITHUB_STEP_SUMMARY={terminal(name)} is {terminal(overwritten)}: the "
            "markdown summary is not appended to it; the run is evaluated without it",
            file=sys.stderr,
        )
        return None
    try:
        # Without blocking: a FIFO nobody reads would hold the job at open(); only a regular file is
        # appended to (GitHub's always is).
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(0, "not a regular file")
        os.set_blocking(fd, True)
        return open(fd, "a", encoding="utf-8")
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(
            f"gatecfg: warning: GITHUB_STEP_SUMMARY={terminal(name)}: cannot append the markdown summary: "
            f"{reason}; the run is evaluated without it",
            file=sys.stderr,
        )
        return None
