"""The terminal: the width text reports are drawn at, and signs of life on stderr during long commands.

Tables fit the terminal they are shown in (`COLUMNS` wins, as everywhere); without one (a CI log, a pipe)
they are drawn NOT_A_TTY_WIDTH wide. Progress goes to stderr: rich's progress bar on a terminal, else a
line every HEARTBEAT_S seconds while a stage runs, so a quick command prints nothing extra.
"""

from __future__ import annotations

import io
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console

NOT_A_TTY_WIDTH = 120
MIN_WIDTH = 60
HEARTBEAT_S = 5.0


def width() -> int:
    return max(MIN_WIDTH, shutil.get_terminal_size((NOT_A_TTY_WIDTH, 24)).columns)


def text_console() -> Console:
    """A console that renders plain text into a string, as wide as the terminal. markup=False: a name
    holding `[bold]` or `[/]` is text, not rich markup."""
    return Console(file=io.StringIO(), width=width(), color_system=None, highlight=False, markup=False)


Advance = Callable[[int], None]


@contextmanager
def stage(
    command: str, what: str, total: int | None = None, *, stream: TextIO | None = None
) -> Iterator[Advance]:
    """Report a stage of `command` (e.g. `replaying 1,200 runs`) while it runs; yields `advance(n)` for
    stages that count their items (`total`)."""
    out = stream if stream is not None else sys.stderr
    if out.isatty():
        with _bar(out, f"{command}: {what}", total) as bar_advance:
            yield bar_advance
        return
    done = [0]
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            counted = f" {done[0]:,}/{total:,}" if total else ""
            print(f"{command}: {what}:{counted} ({time.monotonic() - start:.0f} s)", file=out, flush=True)

    def count(n: int = 1) -> None:
        done[0] += n

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join()


@contextmanager
def _bar(out: TextIO, label: str, total: int | None) -> Iterator[Advance]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), *Progress.get_default_columns()[:1]]
    if total:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=Console(file=out), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
