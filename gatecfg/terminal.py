"""The terminal: plain-text reports drawn at its width, and signs of life on stderr during long commands.

Without a terminal (a CI log, a pipe) nothing is wrapped: a finding stays one line for `grep` and a table
keeps its columns (docs/evaluate.md). Progress goes to stderr: rich's bar on a terminal, else a line every
HEARTBEAT_S seconds.

Tables are drawn here, not by rich, in rich's SIMPLE_HEAD layout (a table that fits: rich's bytes, stripped):
`evaluate` and `regimes` may not import rich (tests/test_light_imports.py), rich takes 60x the time per
table (200 rows: 80 ms against 1.4 ms), and the one-record-per-row fallback of a narrow terminal has no rich
counterpart. tests/test_terminal.py holds the layout; benchmarks/bench.py's evaluate figures (a text
report each) the speed.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Literal, TextIO

MIN_WIDTH = 60
HEARTBEAT_S = 5.0


def width() -> int | None:
    """The columns a report printed on stdout may take: `COLUMNS` when set, the terminal's width when stdout
    is one, else None (a pipe or a CI log: no wrapping)."""
    if os.environ.get("COLUMNS", "").strip().isdigit() or sys.stdout.isatty():
        return max(MIN_WIDTH, shutil.get_terminal_size().columns)
    return None


class TextReport:
    """A plain-text report: on a terminal (`columns` an int) lines wrapped at word boundaries (a word longer
    than the width is folded) and tables whose columns shrink, widest first, until the table fits; with
    `columns` None, every line and table as wide as it is. The default reads `width()` for stdout."""

    def __init__(self, columns: int | Literal["stdout"] | None = "stdout") -> None:
        self.width = width() if columns == "stdout" else columns
        self._lines: list[str] = []

    def line(self, text: str = "", *, wrap: bool = True, indent: int = 0) -> None:
        """One line, wrapped to the width unless `wrap` is false, its continuation lines indented by
        `indent` blanks (so that a reader sees where the next item starts)."""
        for part in text.split("\n"):
            if not wrap or self.width is None:
                self._lines.append(part)
                continue
            first, *rest = _wrapped(part, self.width)
            # The continuation is re-wrapped at the narrower width its indent leaves.
            self._lines.append(first)
            if rest:
                tail = _wrapped(" ".join(rest), self.width - indent)
                self._lines += [" " * indent + piece for piece in tail]

    def table(
        self, columns: Sequence[str], rows: Sequence[Sequence[str]], *, title: str | None = None
    ) -> None:
        """Columns left-aligned, one space of padding each side, a rule under the header (rich's
        SIMPLE_HEAD layout), a blank line before and after."""
        if title is not None:
            self.line(title)
        widths = [max([cells(column), *(cells(row[i]) for row in rows)]) for i, column in enumerate(columns)]
        # Two blanks of edge and padding per line, three between cells. Columns wrap at spaces first (down
        # to their longest word), and only then fold words.
        excess = 0 if self.width is None else sum(widths) + 3 * len(widths) + 1 - self.width
        if self.width is not None and excess > 0:
            words = [
                max(
                    [cells(word) for cell in (column, *(row[i] for row in rows)) for word in cell.split()]
                    or [1]
                )
                for i, column in enumerate(columns)
            ]
            titles = [max([cells(word) for word in column.split()] or [1]) for column in columns]
            if sum(titles) + 3 * len(titles) + 1 > self.width:
                # Not even the column titles fit unfolded: a record per row, wrapped at words, reads
                # better than a table whose every cell folds mid-word.
                self._records(columns, rows)
                return
            for floor in (words, [1] * len(widths)):
                while excess > 0:
                    slack = [w - f for w, f in zip(widths, floor, strict=True)]
                    if max(slack) <= 0:
                        break
                    widths[slack.index(max(slack))] -= 1
                    excess -= 1
        self._lines.append("")
        self._row(columns, widths)
        self._lines.append(" " + "\u2500" * (sum(widths) + 3 * len(widths) - 1))
        for row in rows:
            self._row(row, widths)
        self._lines.append("")

    def _records(self, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Each row as one wrapped line: its first cell, then `column value` for the others that hold one."""
        self._lines.append("")
        for row in rows:
            pairs = zip(columns[1:], row[1:], strict=True)
            rest = "; ".join(f"{column} {cell}" for column, cell in pairs if cell.strip())
            self.line(f"  {columns[0]} {row[0]}: {rest}", indent=4)
        self._lines.append("")

    def text(self) -> str:
        """The report, without trailing blanks on any line, ending in one newline."""
        return "\n".join(line.rstrip() for line in self._lines).rstrip() + "\n"

    def _row(self, cells: Sequence[str], widths: Sequence[int]) -> None:
        folded = [_wrapped(cell, w) for cell, w in zip(cells, widths, strict=True)]
        for k in range(max(len(parts) for parts in folded)):
            parts = (_padded(p[k] if k < len(p) else "", w) for p, w in zip(folded, widths, strict=True))
            self._lines.append("  " + "   ".join(parts))


def cells(text: str) -> int:
    """The columns `text` takes on a terminal: two for an East Asian wide or full-width character, none for
    a combining mark, one for anything else (reports escape control characters before they get here)."""
    if text.isascii():
        return len(text)
    return sum(_char_cells(char) for char in text)


def _char_cells(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _padded(text: str, width: int) -> str:
    return text + " " * (width - cells(text))


def _wrapped(text: str, at: int) -> list[str]:
    """`text` in lines of at most `at` cells, broken at spaces; only a word wider than the whole line (a
    long URL) is folded."""
    if cells(text) <= at:
        return [text]
    if text.isascii():
        return textwrap.wrap(text, at, break_on_hyphens=False) or [""]
    # textwrap counts characters; wide ones need their cells counted: words packed greedily, a word
    # wider than the line folded, as textwrap does.
    lines: list[str] = []
    line = ""
    for whole in text.split():
        word = whole
        while cells(word) > at:
            room = at - cells(line) - (1 if line else 0)
            if room < 1 or (line and room < cells(word[0])):
                lines.append(line)
                line = ""
                continue
            head = _prefix(word, room)
            lines.append(f"{line} {head}" if line else head)
            line, word = "", word[len(head) :]
        if not line:
            line = word
        elif cells(line) + 1 + cells(word) <= at:
            line = f"{line} {word}"
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines or [""]


def _prefix(word: str, room: int) -> str:
    """The longest start of `word` that takes at most `room` cells (at least one character)."""
    used = 0
    for i, char in enumerate(word):
        used += _char_cells(char)
        if used > room:
            return word[: max(i, 1)]
    return word


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
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), *Progress.get_default_columns()[:1]]
    if total:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=Console(file=out), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
