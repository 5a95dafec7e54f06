"""Exports teams already have (CSV, JSON Lines), parsed into runs with their metrics as records.

CSV: a header with `run_id`, `date` (ISO 8601), `commit`, an optional `trusted`, then one column per
metric: `metric` for a single value per run (stored as step `last`), or `metric@STEP` for a step. An empty
cell means the run did not log that value.

JSON Lines: `{"run_id": ..., "date": ..., "commit": ..., "metrics": {metric: value | [[step, value], ...]}}`,
with an optional `"trusted": true|false`.

A date without a zone is UTC: CI exports rarely say, and the runs only need a consistent order. Values are
JSON numbers or the non-finite spellings records accept (`NaN`, `Infinity`, `-Infinity`); any other text is
an error that names the file and line, since a backfill that silently drops cells is worse than none.

An export is read once, a line at a time, so that its size never sits in memory: `read_export` checks
every run, indexes it (date, id) and spills its columns as arrays to a scratch file (16 bytes a value, in
the temporary folder, gone with the export), from which `Export.runs` reads the runs back in date order,
one at a time, as the import writes them, without parsing the export again.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import dataclasses
import itertools
import json
import math
import os
import pickle
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, Literal, cast

import numpy as np
import orjson

from gatecfg.dates import CLOCK_SKEW, parse_date
from gatecfg.errors import InputError, Location
from gatecfg.models import MAX_STEP, name_problem
from gatecfg.records import Column, Record, shorten
from gatecfg.records.builder import unique_keys
from gatecfg.textio import open_user_file

# An export is streamed a line at a time (its runs spilled to a scratch store), so its size bounds time,
# not memory: 8 GB is far above a history of years of nightlies.
MAX_EXPORT_BYTES = 8_000_000_000
# A line is read whole: one run's values, at most a few MB.
MAX_LINE_BYTES = 64_000_000
RESERVED = ("run_id", "date", "commit", "trusted")
REQUIRED = ("run_id", "date", "commit")
SINGLE_STEP = 0  # the logged step a single value gets; `steps: last` stores it at step -1 whatever it is
TRUE = frozenset({"true", "1", "yes", "y", "t"})
FALSE = frozenset({"false", "0", "no", "n", "f"})
NONFINITE = {
    "nan": math.nan,
    "infinity": math.inf,
    "-infinity": -math.inf,
    "inf": math.inf,
    "-inf": -math.inf,
}
JSONL_KEYS = frozenset({"run_id", "date", "commit", "metrics", "trusted"})
SHAPE_HINT = (
    'one object per line: {"run_id": "n1", "date": "2024-05-01", "commit": "3f2a9c1", '
    '"metrics": {"eval/score": 0.58, "train/loss": [[0, 2.1], [1, 1.9]]}}'
)


@dataclass(frozen=True)
class ImportedRun:
    run_id: str
    created_at: datetime
    commit: str | None
    trusted: bool
    record: Record
    single: frozenset[str]  # metrics given as one value per run (no step)
    location: Location  # the row or line

    def __post_init__(self) -> None:
        # What `evaluate --write` asks of the run it stores, whichever export or file name this one came
        # from: a printable run id and commit (a newline would forge report lines), and a date that is
        # not in the future (it would be every baseline's newest night, ahead of every later nightly).
        for dotted, value in (("run_id", self.run_id), ("commit", self.commit)):
            problem = None if value is None else name_problem(value)
            if problem is not None:
                raise InputError.at(
                    self.location,
                    f"{shorten(repr(value))} {problem}",
                    dotted=dotted,
                    hint="give a printable id",
                )
        now = datetime.now(UTC).replace(microsecond=0)
        if self.created_at > now + CLOCK_SKEW:
            raise InputError.at(
                self.location,
                f"{self.created_at.isoformat()} is in the future (it is {now.isoformat()})",
                dotted="date",
                hint="a run is dated when it ran: check the export's dates and time zones",
            )


@dataclass(frozen=True)
class Entry:
    """What the reading keeps of a run in memory: enough to order it and to find its columns again."""

    run_id: str
    created_at: datetime
    commit: str | None
    trusted: bool
    location: Location  # the row or line
    spilled: tuple[int, int]  # where its columns are in the scratch file: offset, size
    metrics: frozenset[str]  # the metrics it gives a value of


class Scratch:
    """The columns of an export's runs, spilled as arrays to an anonymous temporary file as they are read
    (which the system removes when it is closed), and read back by position."""

    def __init__(self, shown: str) -> None:
        self._shown = shown
        with self._errors():
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as its export is
        self._size = 0

    def add(self, run: ImportedRun) -> tuple[int, int]:
        columns = [
            (metric, np.asarray(column.steps, np.int64), np.asarray(column.values, np.float64))
            for metric, column in run.record.columns.items()
        ]
        data = pickle.dumps((sorted(run.single), columns), protocol=5)
        with self._errors():
            self._file.write(data)
        at, self._size = self._size, self._size + len(data)
        return at, len(data)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise InputError.at(
                Location(self._shown),
                f"cannot write the import's scratch file in {tempfile.gettempdir()}: {exc.strerror or exc}",
                hint="point TMPDIR at a folder with room for 16 bytes per value of the export",
            ) from None

    def run(self, entry: Entry) -> ImportedRun:
        self._file.flush()
        offset, size = entry.spilled
        single, columns = pickle.loads(os.pread(self._file.fileno(), size, offset))
        return ImportedRun(
            run_id=entry.run_id,
            created_at=entry.created_at,
            commit=entry.commit,
            trusted=entry.trusted,
            record=_record(
                {metric: (steps.tolist(), values.tolist()) for metric, steps, values in columns},
                entry.location,
            ),
            single=frozenset(single),
            location=entry.location,
        )


@dataclass(frozen=True)
class Export:
    path: str  # as shown in messages
    kind: str  # "csv" or "jsonl"
    entries: tuple[Entry, ...]  # ordered by date; equal dates keep the file's order
    header: Mapping[str, Location]  # metric -> where it was first named (CSV header cell, or a line)
    metrics: frozenset[str]  # every metric some run gives
    single: Mapping[str, Location]  # metrics some run gives as one value: the first such run
    scratch: Scratch = dataclasses.field(repr=False, compare=False)

    def runs(self, skip: Collection[str] = ()) -> Iterator[ImportedRun]:
        """The export's runs in date order, but those of `skip` (run ids), read back one at a time."""
        for entry in self.entries:
            if entry.run_id not in skip:
                yield self.scratch.run(entry)


def read_export(path: Path, shown: str) -> Export:
    """Check every run of the export and index them by date: any error (file:line) comes from here,
    before the import writes anything."""
    with _open(path, shown) as handle:
        lines = _Lines(handle, shown)
        first = lines.peek()
        kind = _kind(path, first)
        scan = _scan_csv if kind == "csv" else _scan_jsonl
        export = scan(lines, shown, Scratch(shown))
    return checked(export, hint=_format_hint(kind))


def checked(export: Export, *, hint: str) -> Export:
    """The export with its runs in date order, once checked that it holds some, each run id once."""
    if not export.entries:
        raise InputError.at(Location(export.path), "the export holds no runs", hint=hint)
    seen: dict[str, Location] = {}
    for entry in export.entries:
        if entry.run_id in seen:
            raise InputError.at(
                entry.location,
                f"run_id `{entry.run_id}` appears twice, first at {seen[entry.run_id]}",
                dotted="run_id",
                hint="each row is one run: keep one of them",
            )
        seen[entry.run_id] = entry.location
    # Stable: runs of the same time keep the file's order.
    return dataclasses.replace(export, entries=tuple(sorted(export.entries, key=lambda e: e.created_at)))


def entry_of(run: ImportedRun, scratch: Scratch) -> Entry:
    return Entry(
        run.run_id,
        run.created_at,
        run.commit,
        run.trusted,
        run.location,
        scratch.add(run),
        frozenset(run.record.columns),
    )


def _open(path: Path, shown: str) -> AbstractContextManager[BinaryIO]:
    """The export, once it is known to be a regular file of at most MAX_EXPORT_BYTES (a FIFO, a device
    or a runaway file is an error, never a hang): it is streamed a line at a time."""
    return open_user_file(
        path, shown, what="export file", limit=MAX_EXPORT_BYTES, hint="pass a .csv or .jsonl file"
    )


class _Lines:
    """A file's lines as text, a line at a time, counting them."""

    def __init__(self, handle: BinaryIO, shown: str) -> None:
        self._handle = handle
        self._shown = shown
        self.number = 0  # lines read so far
        self._peeked: str | None = None

    def peek(self) -> str:
        """The first line, without reading past it (the kind of an export without a suffix)."""
        if self._peeked is None:
            self._peeked = next(self, "")
        return self._peeked

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._peeked is not None:
            peeked, self._peeked = self._peeked, None
            return peeked
        raw = self._handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            raise StopIteration
        self.number += 1
        if len(raw) > MAX_LINE_BYTES:
            # One run is one line: a line this long is no run (a file of NULs, a binary file).
            raise InputError.at(
                Location(self._shown, self.number),
                f"the line is longer than {MAX_LINE_BYTES:,} bytes",
                hint="an export holds one run per line; the file is binary or damaged",
            )
        if self.number == 1:
            # Editors and Windows tools may prepend a byte order mark, which is not an error.
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            col = len(raw[: exc.start].decode("utf-8")) + 1
            raise InputError.at(
                Location(self._shown, self.number, col),
                f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
                hint="save the export file as UTF-8 text",
            ) from None
        if "\x00" in text:
            # The csv module passes a NUL through inside a field; no name, id or number holds one.
            raise InputError.at(
                Location(self._shown, self.number, text.index("\x00") + 1),
                "a NUL byte (\\x00): an export is text",
                hint="the file is binary or damaged; export it again as CSV or JSON Lines",
            )
        return text


def _format_hint(kind: str) -> str:
    if kind == "csv":
        return "a header `run_id,date,commit,<metric>,<metric>@<step>...` and one row per run"
    return SHAPE_HINT


def _kind(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def _number(raw: str, location: Location, dotted: str) -> float:
    text = raw.strip()
    special = NONFINITE.get(text.lower())
    if special is not None:
        return special
    try:
        return float(text)
    except ValueError:
        raise InputError.at(
            location,
            f"`{shorten(text)}` is not a number",
            dotted=dotted,
            hint="write a number, NaN or Infinity, or leave the cell empty when the run did not log it",
        ) from None


def _trusted(raw: str, location: Location) -> bool:
    text = raw.strip().lower()
    if not text or text in TRUE:
        return True
    if text in FALSE:
        return False
    raise InputError.at(
        location, f"`{shorten(raw)}` is not true or false", dotted="trusted", hint="write true or false"
    )


@dataclass(frozen=True)
class _Column:
    index: int
    metric: str
    step: int | None  # None: a single value


def _split_metric(name: str, location: Location) -> tuple[str, int | None]:
    """`metric@step` -> (metric, step); a name without `@` is a single value. What follows the last `@`
    must be a step: a header `m@-1`, `m@1e3` or `m@<23 digits>` is an error at its cell, not a run that
    silently holds no value of the gate."""
    metric, sep, step = name.rpartition("@")
    if not sep:
        return name, None
    if metric and step.isascii() and step.isdigit() and int(step) <= MAX_STEP:
        return metric, int(step)
    if not metric:
        problem = "names no metric before `@`"
    elif not step:
        problem = "no step follows `@`"
    elif step.isascii() and step.isdigit():
        problem = f"step {shorten(step)} is beyond the largest step the history store holds"
    else:
        problem = f"`{shorten(step)}` is not a step"
    raise InputError.at(
        location,
        f"column `{shorten(name)}`: {problem}",
        hint=f"a column is `<metric>` or `<metric>@<step>`, a step a whole number from 0 to {MAX_STEP:,}; "
        "a metric whose name holds `@` is imported from JSON Lines",
    )


def _scan_csv(lines: _Lines, shown: str, scratch: Scratch) -> Export:
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        return Export(shown, "csv", (), {}, frozenset(), {}, scratch)
    except csv.Error as exc:
        raise InputError.at(Location(shown, 1), f"malformed CSV: {exc}") from None
    names = [h.strip() for h in header]
    columns = _columns(names, shown, header)
    header_at = {c.metric: Location(shown, 1, _header_col(header, c.index)) for c in reversed(columns)}
    index = _index(names)
    entries: list[Entry] = []
    given: set[str] = set()
    single: dict[str, Location] = {}
    line = 1
    try:
        while True:
            # A row opens on the line after the last one's end (a quoted cell may hold line breaks).
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            line = start
            if not any(cell.strip() for cell in row):
                continue
            location = Location(shown, line)
            if len(row) != len(names):
                raise InputError.at(
                    location,
                    f"the row has {len(row)} cells, the header {len(names)}",
                    hint="quote cells that hold commas; leave a cell empty rather than out",
                )
            run = _csv_run(row, index, tuple(columns), location)
            entries.append(entry_of(run, scratch))
            given.update(run.record.columns)
            for metric in run.single:
                single.setdefault(metric, location)
    except csv.Error as exc:
        raise InputError.at(Location(shown, line + 1), f"malformed CSV: {exc}") from None
    return Export(shown, "csv", tuple(entries), header_at, frozenset(given), single, scratch)


def _index(names: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(names)}


def _header_col(header: list[str], index: int) -> int:
    """1-based column of a header cell, for an unquoted header (the usual case)."""
    return sum(len(h) + 1 for h in header[:index]) + 1


def _columns(names: list[str], path: str, header_cells: list[str]) -> list[_Column]:
    header = Location(path, 1)
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise InputError.at(
            header,
            f"the header lacks {', '.join(f'`{m}`' for m in missing)}",
            hint="the first row names the columns: run_id,date,commit[,trusted],<metric>,<metric>@<step>...",
        )
    seen: set[str] = set()
    columns: list[_Column] = []
    shapes: dict[str, bool] = {}  # metric -> given as a single value
    for i, name in enumerate(names):
        if name in seen:
            raise InputError.at(header, f"column `{name}` appears twice", hint="name each column once")
        seen.add(name)
        if name in RESERVED:
            continue
        if not name:
            raise InputError.at(
                header, f"column {i + 1} has no name", hint="name it `<metric>` or `<metric>@<step>`"
            )
        metric, step = _split_metric(name, Location(path, 1, _header_col(header_cells, i)))
        single = step is None
        if shapes.setdefault(metric, single) != single:
            raise InputError.at(
                header,
                f"`{metric}` has both a single-value column and `{metric}@<step>` columns",
                hint=f"use `{metric}` alone (stored as step `last`) or only `{metric}@<step>` columns",
            )
        columns.append(_Column(i, metric, step))
    return columns


def _csv_run(
    row: list[str], index: Mapping[str, int], columns: Sequence[_Column], location: Location
) -> ImportedRun:
    run_id = row[index["run_id"]].strip()
    if not run_id:
        raise InputError.at(location, "run_id is empty", dotted="run_id", hint="every run needs a unique id")
    commit = row[index["commit"]].strip() or None
    trusted = _trusted(row[index["trusted"]], location) if "trusted" in index else True
    by_metric: dict[str, tuple[list[int], list[float]]] = {}
    single: set[str] = set()
    for column in columns:
        raw = row[column.index]
        if not raw.strip():
            continue
        name = column.metric if column.step is None else f"{column.metric}@{column.step}"
        value = _number(raw, location, name)
        if column.step is None:
            single.add(column.metric)
        steps, values = by_metric.setdefault(column.metric, ([], []))
        steps.append(SINGLE_STEP if column.step is None else column.step)
        values.append(value)
    return ImportedRun(
        run_id=run_id,
        created_at=parse_date(row[index["date"]], location),
        commit=commit,
        trusted=trusted,
        record=_record({m: _sorted(steps, values) for m, (steps, values) in by_metric.items()}, location),
        single=frozenset(single),
        location=location,
    )


def _sorted(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    if all(a < b for a, b in itertools.pairwise(steps)):
        return steps, values
    order = sorted(range(len(steps)), key=steps.__getitem__)
    return [steps[i] for i in order], [values[i] for i in order]


def _record(series: Mapping[str, tuple[list[int], list[float]]], location: Location) -> Record:
    """A run's record: each metric's steps (ascending) and values as a column, every value located at the
    run's row or line."""
    return Record(
        MappingProxyType(
            {
                metric: Column(steps, values, values, [location] * len(steps))
                for metric, (steps, values) in sorted(series.items())
            }
        ),
        (location.path,),
    )


def _runs(lines: Iterable[str], path: str) -> Iterator[ImportedRun]:
    """The run of each non-blank line (`lines` counts them)."""
    decoder = json.JSONDecoder(object_pairs_hook=unique_keys)
    for line in lines:
        if not line.strip():
            continue
        location = Location(path, lines.number if isinstance(lines, _Lines) else 0)
        run = None
        fast = _fast_object(line)
        if fast is not None:
            # orjson's object holds no string among its pairs (`_fast_object`); every null outside them too.
            plain = line.count("null") == _shallow(fast)[1]
            # On an error, json's object names it: orjson reads an integer beyond 64 bits as a float.
            with contextlib.suppress(InputError):
                run = _jsonl_run(fast, location, path, _numbers(line, fast, plain=plain))
        if run is None:
            obj = _decoded(decoder, line, location)
            run = _jsonl_run(obj, location, path, _numbers(line, obj, plain=False))
        yield run


def _decoded(decoder: json.JSONDecoder, line: str, location: Location) -> dict[str, object]:
    try:
        obj = decoder.decode(line)
    except json.JSONDecodeError as exc:
        raise InputError.at(
            dataclasses.replace(location, col=exc.colno), f"malformed JSON: {exc.msg}", hint=SHAPE_HINT
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InputError.at(location, f"malformed JSON: {exc}", hint=SHAPE_HINT) from None
    if type(obj) is not dict:
        raise InputError.at(location, "the line is not a JSON object", hint=SHAPE_HINT)
    return obj


def _numbers(line: str, obj: dict[str, object], *, plain: bool) -> Numbers:
    # A literal true or false among the values (beyond the run's `trusted`) takes the careful path.
    booleans = line.count("true") + line.count("false") > (type(obj.get("trusted")) is bool)
    return "booleans" if booleans else "numbers" if plain else "unknown"


# What a line's lists of pairs may hold, which decides how they are read: "booleans" (the line holds a
# literal true or false that is not `trusted`: read pair by pair, since arrays would take them for 1 and
# 0), "numbers" (proven to hold no strings, booleans or nulls: numbers, or something that is no number
# at all and fails to convert), or "unknown" (checked item by item before they are read as arrays).
Numbers = Literal["booleans", "numbers", "unknown"]


def _fast_object(line: str) -> dict[str, object] | None:
    """The line's object, read by orjson (2-3 times faster than json, in C), when that is provably what
    json would read: None for anything else, which `json` then reads (and names the error of).

    json keeps the last of two equal keys; here a duplicate would vanish unnoticed, so the line is taken
    only when its double quotes are exactly those of the keys and strings the object holds outside its
    lists: every key or string read accounts for two of them, a dropped duplicate key leaves two more
    (and so does a string inside a list of pairs, which the line must not hold to be read as numbers).
    """
    if "\\" in line:
        return None  # escapes make quotes uncountable
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:  # malformed, or NaN / Infinity literals, which json accepts
        return None
    if type(obj) is not dict or 2 * _shallow(obj)[0] != line.count('"'):
        return None
    return obj


def _shallow(obj: dict[str, object]) -> tuple[int, int]:
    """Keys and strings, and nulls, of an object and of the objects it holds, lists left out."""
    strings = nulls = 0
    for value in obj.values():
        strings += 1 + (type(value) is str)
        nulls += value is None
        if type(value) is dict:
            inner = _shallow(value)
            strings, nulls = strings + inner[0], nulls + inner[1]
    return strings, nulls


def _scan_jsonl(lines: _Lines, shown: str, scratch: Scratch) -> Export:
    entries: list[Entry] = []
    first_seen: dict[str, Location] = {}
    single: dict[str, Location] = {}
    for run in _runs(lines, shown):
        location = run.location
        entries.append(entry_of(run, scratch))
        for metric in run.record.columns:
            first_seen.setdefault(metric, location)
        for metric in run.single:
            single.setdefault(metric, location)
    return Export(shown, "jsonl", tuple(entries), first_seen, frozenset(first_seen), single, scratch)


def _jsonl_run(obj: dict[str, object], location: Location, path: str, numbers: Numbers) -> ImportedRun:
    unknown = sorted(set(obj) - JSONL_KEYS)
    if unknown:
        raise InputError.at(
            location,
            f"unknown key {json.dumps(unknown[0])}",
            hint=f'the keys are {", ".join(sorted(JSONL_KEYS))}; metrics go under "metrics"',
        )
    for key in ("run_id", "date", "metrics"):
        if key not in obj:
            raise InputError.at(location, f'the line has no "{key}"', hint=SHAPE_HINT)
    run_id, date, commit = obj["run_id"], obj["date"], obj.get("commit")
    if type(run_id) is not str or not run_id.strip():
        raise InputError.at(location, "run_id must be a non-empty string", dotted="run_id")
    if type(date) is not str:
        raise InputError.at(
            location, "date must be an ISO 8601 string", dotted="date", hint='e.g. "2024-05-01"'
        )
    if commit is not None and type(commit) is not str:
        raise InputError.at(location, "commit must be a string or null", dotted="commit")
    trusted = obj.get("trusted", True)
    if type(trusted) is not bool:
        raise InputError.at(location, "trusted must be true or false", dotted="trusted")
    metrics = obj["metrics"]
    if type(metrics) is not dict:
        raise InputError.at(location, "metrics must be an object of metric: value", dotted="metrics")
    series: dict[str, tuple[list[int], list[float]]] = {}
    single: set[str] = set()
    for metric, given in metrics.items():
        dotted = f"metrics.{metric}"
        if type(given) is list:
            fast = None if numbers == "booleans" else _fast_pairs(given, checked=numbers == "numbers")
            series[metric] = fast or _pairs(given, location, dotted)
        else:
            single.add(metric)
            series[metric] = ([SINGLE_STEP], [_json_number(given, location, dotted)])
    return ImportedRun(
        run_id=run_id.strip(),
        created_at=parse_date(date, location),
        commit=(commit.strip() or None) if commit is not None else None,
        trusted=trusted,
        record=_record(series, location),
        single=frozenset(single),
        location=location,
    )


def _fast_pairs(given: list[object], *, checked: bool) -> tuple[list[int], list[float]] | None:
    """`[[step, value], ...]` of JSON numbers only, whole steps >= 0 given once: the steps in order and
    their values, read as arrays; None for anything else, which `_pairs` reads (and names the error of).
    `checked`: the items are known to hold no strings, booleans or nulls (see `Numbers`), which then need
    no look at each item's type: anything else among them fails to convert."""
    try:
        pairs_ = cast(list[list[object]], given)  # checked here, at C speed: anything else is a TypeError
        if set(map(len, pairs_)) - {2} or (
            not checked and set(map(type, itertools.chain.from_iterable(pairs_))) - {int, float}
        ):
            return None
        items = itertools.chain.from_iterable(pairs_)
        pairs = np.fromiter(items, np.float64, 2 * len(pairs_)).reshape(-1, 2)
    except (TypeError, ValueError, OverflowError):  # not pairs, or an integer beyond the float range
        return None
    steps, values = pairs[:, 0], pairs[:, 1]
    if len(steps) and not (
        np.isfinite(steps).all() and steps.min() >= 0 and steps.max() <= MAX_STEP and (steps % 1 == 0).all()
    ):
        return None
    order = np.argsort(steps, kind="stable")
    ordered = steps[order]
    if (ordered[1:] == ordered[:-1]).any():
        return None
    return ordered.astype(np.int64).tolist(), values[order].tolist()


def _pairs(given: list[object], location: Location, dotted: str) -> tuple[list[int], list[float]]:
    points: dict[int, float] = {}
    for i, pair in enumerate(given):
        if type(pair) is not list or len(pair) != 2:
            raise InputError.at(
                location, f"item {i} is not a [step, value] pair", dotted=dotted, hint="e.g. [3, 0.8]"
            )
        step = pair[0]
        if type(step) is float and step.is_integer():
            step = int(step)
        if type(step) is not int or not 0 <= step <= MAX_STEP:
            raise InputError.at(
                location,
                f"item {i} has step {json.dumps(pair[0])}, not a whole number from 0 to {MAX_STEP:,}",
                dotted=dotted,
            )
        if step in points:
            raise InputError.at(
                location, f"step {step} is given twice", dotted=dotted, hint="give each step once"
            )
        points[step] = _json_number(pair[1], location, dotted)
    steps = sorted(points)
    return steps, [points[step] for step in steps]


def _json_number(value: object, location: Location, dotted: str) -> float:
    if type(value) is float or type(value) is int:
        try:
            return float(value)
        except OverflowError:  # an integer beyond the float range, as JSON reads 1e400
            return math.inf if value > 0 else -math.inf
    if type(value) is str and value.lower() in NONFINITE:
        return NONFINITE[value.lower()]
    raise InputError.at(
        location,
        f"{shorten(json.dumps(value))} is not a number",
        dotted=dotted,
        hint='write a number, "NaN" or "Infinity", or a list of [step, value] pairs',
    )
