"""Exports teams already have (CSV, JSON Lines), parsed into runs with their metrics as records.

CSV: a header with `run_id`, `date` (ISO 8601), `commit`, an optional `trusted`, then one column per
metric: `metric` for a single value per run (stored as step `last`), or `metric@STEP` for a step. An empty
cell means the run did not log that value.

JSON Lines: `{"run_id": ..., "date": ..., "commit": ..., "metrics": {metric: value | [[step, value], ...]}}`,
with an optional `"trusted": true|false`.

A date without a zone is UTC: CI exports rarely say, and the runs only need a consistent order. Values are
JSON numbers or the non-finite spellings records accept (`NaN`, `Infinity`, `-Infinity`); any other text is
an error that names the file and line, since a backfill that silently drops cells is worse than none.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gatecfg.errors import InputError, Location
from gatecfg.models import MAX_STEP
from gatecfg.records import Point, Record, shorten
from gatecfg.textio import read_text

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


@dataclass(frozen=True)
class Export:
    path: str
    runs: tuple[ImportedRun, ...]  # ordered by date; equal dates keep the file's order
    header: Mapping[str, Location]  # metric -> where it was first named (CSV header cell, or a line)


def read_export(path: Path, shown: str) -> Export:
    text = _read_text(path, shown)
    kind = _kind(path, text)
    runs, header = _csv(text, shown) if kind == "csv" else _jsonl(text, shown)
    if not runs:
        raise InputError.at(Location(shown), "the export holds no runs", hint=_format_hint(kind))
    seen: dict[str, Location] = {}
    for run in runs:
        if run.run_id in seen:
            raise InputError.at(
                run.location,
                f"run_id `{run.run_id}` appears twice, first at {seen[run.run_id]}",
                dotted="run_id",
                hint="each row is one run: keep one of them",
            )
        seen[run.run_id] = run.location
    ordered = sorted(runs, key=lambda r: r.created_at)
    return Export(shown, tuple(ordered), header)


def _format_hint(kind: str) -> str:
    if kind == "csv":
        return "a header `run_id,date,commit,<metric>,<metric>@<step>...` and one row per run"
    return SHAPE_HINT


def _read_text(path: Path, shown: str) -> str:
    return read_text(path, shown, what="export file", hint="pass a .csv or .jsonl file")


def _kind(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def parse_date(raw: str, location: Location, dotted: str = "date") -> datetime:
    text = raw.strip()
    try:
        value = datetime.fromisoformat(text)
        # Near the ends of time a zone's offset moves the instant out of datetime's range.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise InputError.at(
            location, f"`{shorten(text)}` is out of the range of dates", dotted=dotted, hint="check the year"
        ) from None
    except ValueError:
        raise InputError.at(
            location,
            f"`{shorten(text)}` is not an ISO 8601 date",
            dotted=dotted,
            hint="write e.g. 2024-05-01 or 2024-05-01T02:30:00Z (a time without a zone is read as UTC)",
        ) from None


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


def _split_metric(name: str) -> tuple[str, int | None]:
    metric, sep, step = name.rpartition("@")
    if sep and metric and step.isdigit() and int(step) <= MAX_STEP:
        return metric, int(step)
    return name, None


def _csv(text: str, path: str) -> tuple[list[ImportedRun], dict[str, Location]]:
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader)
    except StopIteration:
        return [], {}
    except csv.Error as exc:
        raise InputError.at(Location(path, 1), f"malformed CSV: {exc}") from None
    names = [h.strip() for h in header]
    columns = _columns(names, path)
    header_at = {c.metric: Location(path, 1, _header_col(header, c.index)) for c in reversed(columns)}
    index = {name: i for i, name in enumerate(names)}
    runs: list[ImportedRun] = []
    line = 1
    try:
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            location = Location(path, line)
            if len(row) != len(names):
                raise InputError.at(
                    location,
                    f"the row has {len(row)} cells, the header {len(names)}",
                    hint="quote cells that hold commas; leave a cell empty rather than out",
                )
            runs.append(_csv_run(row, index, columns, location))
    except csv.Error as exc:
        raise InputError.at(Location(path, line + 1), f"malformed CSV: {exc}") from None
    return runs, header_at


def _header_col(header: list[str], index: int) -> int:
    """1-based column of a header cell, for an unquoted header (the usual case)."""
    return sum(len(h) + 1 for h in header[:index]) + 1


def _columns(names: list[str], path: str) -> list[_Column]:
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
        metric, step = _split_metric(name)
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
    row: list[str], index: Mapping[str, int], columns: list[_Column], location: Location
) -> ImportedRun:
    run_id = row[index["run_id"]].strip()
    if not run_id:
        raise InputError.at(location, "run_id is empty", dotted="run_id", hint="every run needs a unique id")
    commit = row[index["commit"]].strip() or None
    trusted = _trusted(row[index["trusted"]], location) if "trusted" in index else True
    series: dict[str, dict[int, Point]] = {}
    single: set[str] = set()
    for column in columns:
        raw = row[column.index]
        if not raw.strip():
            continue
        name = column.metric if column.step is None else f"{column.metric}@{column.step}"
        value = _number(raw, location, name)
        step = SINGLE_STEP if column.step is None else column.step
        if column.step is None:
            single.add(column.metric)
        series.setdefault(column.metric, {})[step] = Point(step, value, raw.strip(), location)
    return ImportedRun(
        run_id=run_id,
        created_at=parse_date(row[index["date"]], location),
        commit=commit,
        trusted=trusted,
        record=_record(series, location.path),
        single=frozenset(single),
        location=location,
    )


def _record(series: Mapping[str, Mapping[int, Point]], path: str) -> Record:
    return Record.of_points(
        {m: [points[s] for s in sorted(points)] for m, points in sorted(series.items())}, (path,)
    )


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json keeps the last of two equal keys silently; a metric given twice on one line must not vanish.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {json.dumps(key)} appears twice in one object")
            seen.add(key)
    return obj


def _lines(text: str, path: str) -> Iterator[tuple[Location, dict[str, object]]]:
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        location = Location(path, number)
        try:
            obj = decoder.decode(line)
        except json.JSONDecodeError as exc:
            raise InputError.at(
                Location(path, number, exc.colno), f"malformed JSON: {exc.msg}", hint=SHAPE_HINT
            ) from None
        except (ValueError, RecursionError) as exc:
            raise InputError.at(location, f"malformed JSON: {exc}", hint=SHAPE_HINT) from None
        if type(obj) is not dict:
            raise InputError.at(location, "the line is not a JSON object", hint=SHAPE_HINT)
        yield location, obj


def _jsonl(text: str, path: str) -> tuple[list[ImportedRun], dict[str, Location]]:
    runs: list[ImportedRun] = []
    first_seen: dict[str, Location] = {}
    for location, obj in _lines(text, path):
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
        series: dict[str, dict[int, Point]] = {}
        single: set[str] = set()
        for metric, given in metrics.items():
            first_seen.setdefault(metric, location)
            dotted = f"metrics.{metric}"
            if type(given) is list:
                series[metric] = _pairs(given, location, dotted)
            else:
                single.add(metric)
                series[metric] = {SINGLE_STEP: _json_point(SINGLE_STEP, given, location, dotted)}
        runs.append(
            ImportedRun(
                run_id=run_id.strip(),
                created_at=parse_date(date, location),
                commit=(commit.strip() or None) if commit is not None else None,
                trusted=trusted,
                record=_record(series, path),
                single=frozenset(single),
                location=location,
            )
        )
    return runs, first_seen


def _pairs(given: list[object], location: Location, dotted: str) -> dict[int, Point]:
    points: dict[int, Point] = {}
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
        points[step] = _json_point(step, pair[1], location, dotted)
    return points


def _json_point(step: int, value: object, location: Location, dotted: str) -> Point:
    if type(value) is float or type(value) is int:
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range, as JSON reads 1e400
            number = math.inf if value > 0 else -math.inf
        return Point(step, number, json.dumps(value), location)
    if type(value) is str and value.lower() in NONFINITE:
        return Point(step, NONFINITE[value.lower()], json.dumps(value), location)
    raise InputError.at(
        location,
        f"{shorten(json.dumps(value))} is not a number",
        dotted=dotted,
        hint='write a number, "NaN" or "Infinity", or a list of [step, value] pairs',
    )
