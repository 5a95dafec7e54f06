"""Run metric records (SPEC §5): JSON Lines in series or row shape, parsed and merged into one Record.

Logger formats (TensorBoard, W&B, MLflow) are read by `gatecfg.record_formats` into the same builder, so
they are judged exactly as the equivalent JSON Lines; a mapping of points (the Python API) goes in too."""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from gatecfg.errors import InputError, Location, RecordError
from gatecfg.models import MAX_STEP
from gatecfg.textio import read_text

# The non-finite spellings accepted as strings, keyed by their lower-case form.
_NONFINITE = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "-infinity": -math.inf,
}

_SHAPES_HINT = (
    'write one JSON object per line: a series {"metric": [[0, 0.2], [1, 0.4]]} '
    'or a row {"_step": 1, "metric": 0.4}'
)
_STEP_HINT = "a step is a whole number >= 0, e.g. 3"
_DUPLICATE_HINT = (
    "log each step of a metric once; a resumed run can repeat steps, keep only the lines of its last attempt"
)


@dataclass(frozen=True, slots=True)
class Point:
    """One logged value.

    Points compare (and hash) by step and raw only. The value is read from raw, so raw stands for it, and
    comparing floats would make a NaN point unequal to itself. Where a point was logged is provenance.
    """

    step: int
    value: float | None = field(compare=False)  # None when the logged value is not a number
    raw: str  # JSON text of the value as logged, for messages
    location: Location = field(compare=False)


class Column:
    """One metric's logged points in step order, as parallel lists: step selection reads them in bulk, and
    a `Point` (with the JSON text of its value) is built only when something asks for it."""

    __slots__ = ("_logged", "_points", "locations", "steps", "values")

    def __init__(
        self,
        steps: Sequence[int],
        values: Sequence[float | None],
        logged: Sequence[object],
        locations: Sequence[Location],
    ) -> None:
        self.steps = steps
        self.values = values  # the number each logged value denotes, None when it is not one
        self._logged = logged  # the JSON values as parsed, for the text of messages
        self.locations = locations
        self._points: tuple[Point, ...] | None = None

    @classmethod
    def of_points(cls, points: Sequence[Point]) -> Column:
        column = cls([p.step for p in points], [p.value for p in points], [], [p.location for p in points])
        column._points = tuple(points)
        return column

    def __len__(self) -> int:
        return len(self.steps)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Column) and self.points() == other.points()

    __hash__ = None  # type: ignore[assignment]  # equal by content, and not immutable

    def point(self, index: int) -> Point:
        if self._points is not None:
            return self._points[index]
        logged = self._logged[index]
        return Point(self.steps[index], self.values[index], _json_text(logged), self.locations[index])

    def points(self) -> tuple[Point, ...]:
        if self._points is None:
            self._points = tuple(self.point(i) for i in range(len(self.steps)))
        return self._points


@dataclass(frozen=True)
class Record:
    """The metrics of one run: each metric's points sorted by step, and the files they came from."""

    columns: Mapping[str, Column]
    files: tuple[str, ...]

    @classmethod
    def of_points(cls, series: Mapping[str, Sequence[Point]], files: tuple[str, ...]) -> Record:
        """A record of points made elsewhere (`gatecfg import`), each metric's sorted by step."""
        return cls(MappingProxyType({m: Column.of_points(points) for m, points in series.items()}), files)

    @property
    def series(self) -> Mapping[str, tuple[Point, ...]]:
        return {metric: column.points() for metric, column in self.columns.items()}

    def points(self, metric: str) -> tuple[Point, ...]:
        column = self.columns.get(metric)
        return () if column is None else column.points()

    def column(self, metric: str) -> Column | None:
        return self.columns.get(metric)


def parse_record_text(text: str, path: str) -> Record:
    """Parse one record file's text; `path` is only used to locate points and errors."""
    builder = _Builder()
    builder.add_text(text, path)
    return builder.build()


# What the Python API and the pytest plugin accept as a run's metrics: {metric: [(step, value), ...]},
# or record files.
Points = Mapping[str, Iterable[tuple[int, float]]]
Metrics = Points | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Record
# The largest text record (JSON Lines, a W&B export) read: all of it is held in memory at once, and a real
# nightly's is a few MB; a TensorBoard event file is streamed and has its own bound (record_formats).
MAX_RECORD_BYTES = 256 * 1024 * 1024
RECORD_HINT = (
    "pass the file the training run wrote its metrics to: JSON Lines, a TensorBoard event file or log "
    "folder, a W&B history export, or an MLflow run folder (mlruns/<experiment>/<run>)"
)
LOGGED = "<logged metrics>"  # where points given in Python are said to come from, in messages


def read_metrics(metrics: Metrics) -> Record:
    """A run's metrics given as a mapping of points or as record files (str, path, or a sequence of them);
    a Record (built by the pytest plugin from files and points) as it is."""
    if isinstance(metrics, Record):
        return metrics
    if isinstance(metrics, Mapping):
        return read_records((), metrics)
    if isinstance(metrics, str | os.PathLike):
        return read_records([metrics])
    return read_records(metrics)


def read_records(paths: Sequence[str | os.PathLike[str]], logged: Points | None = None) -> Record:
    """Read, parse and merge record files in any supported format, and points logged in Python; a step
    logged twice for one metric, in any of them, is an error."""
    builder = _Builder()
    seen: dict[Path, str] = {}
    for given in paths:
        path = os.fspath(given)
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: pathlib's symlink loop
            raise RecordError.at(Location(path), f"cannot read the record file: {exc}") from None
        if resolved in seen:
            raise RecordError.at(
                Location(path),
                f"record file given twice, first as {seen[resolved]}",
                hint="pass each record file once",
            )
        seen[resolved] = path
        _read_file(builder, path)
    if logged:
        builder.add_logged(logged)
    return builder.build()


def _read_file(builder: _Builder, path: str) -> None:
    from gatecfg import record_formats  # the logger formats' readers load only for their files

    kind = record_formats.sniff(path)
    if kind == "jsonl":
        builder.add_text(read_record_text(path), path)
    else:
        record_formats.read(kind, path, builder)


def read_record_text(path: str) -> str:
    try:
        return read_text(
            Path(path),
            path,
            what="record file",
            hint=RECORD_HINT,
            limit=MAX_RECORD_BYTES,
        )
    except InputError as exc:
        raise RecordError(exc.problems) from None


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json keeps the last of two equal keys silently; a metric logged twice on one line must not vanish.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _loads(line: str, location: Location) -> object:
    try:
        return _DECODER.decode(line)
    except json.JSONDecodeError as exc:
        raise RecordError.at(
            Location(location.path, location.line, exc.colno), f"malformed JSON: {exc.msg}", hint=_SHAPES_HINT
        ) from None
    except _DuplicateKeyError as exc:
        raise RecordError.at(
            location,
            f"key {json.dumps(exc.key)} appears twice in one JSON object",
            hint="write each key once per line",
        ) from None
    except RecursionError:
        raise RecordError.at(location, "malformed JSON: nested too deeply", hint=_SHAPES_HINT) from None
    except ValueError:
        # The only ValueError json raises besides JSONDecodeError: Python's limit on integer digits.
        raise RecordError.at(
            location,
            f"malformed JSON: an integer longer than {sys.get_int_max_str_digits()} digits",
            hint="log the value as a float, e.g. 1.5e300",
        ) from None


def _as_step(value: object) -> int | None:
    """The step a JSON value denotes, or None when it is not a whole number in [0, MAX_STEP]."""
    if type(value) is int:
        return value if 0 <= value <= MAX_STEP else None
    if type(value) is float and value.is_integer() and 0 <= value <= MAX_STEP:
        return int(value)
    return None


def _not_a_step(value: object) -> str:
    whole = type(value) is int or (type(value) is float and value.is_integer())
    if whole and isinstance(value, int | float) and value > MAX_STEP:
        return f"beyond the largest step the history store holds ({MAX_STEP})"
    return "not a whole number >= 0"


def _number(value: object) -> float | None:
    """The number a logged JSON value denotes: None when it is not one."""
    # `type(...) is` rather than isinstance: it is faster, and a bool must not pass for an int.
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            # Beyond the float range: JSON reads 1e400 as Infinity, so a 400-digit integer is one too.
            return math.inf if value > 0 else -math.inf
    if type(value) is str:
        return _NONFINITE.get(value.lower())
    return None


def _json_text(value: object) -> str:
    """A logged JSON value as JSON text, for messages."""
    if type(value) is float and math.isfinite(value):
        return repr(value)  # the JSON text of a finite float, and faster than json.dumps
    if type(value) is int:
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=repr)  # default: a Python object logged via the API


class _Builder:
    """Accumulates points from one or more files, rejecting a step logged twice for one metric."""

    def __init__(self) -> None:
        # Per metric: each step's index in the lists that follow, the logged values and their locations.
        self._series: dict[str, tuple[dict[int, int], list[object], list[Location]]] = {}
        self._files: list[str] = []

    def build(self) -> Record:
        columns: dict[str, Column] = {}
        for metric, found in sorted(self._series.items()):
            steps, logged, locations = _in_step_order(*found)
            columns[metric] = Column(steps, [_number(v) for v in logged], logged, locations)
        return Record(MappingProxyType(columns), tuple(self._files))

    def add_logged(self, logged: Points) -> None:
        """Points given in Python: numpy scalars count as the numbers they are, as in a JSON file."""
        self._files.append(LOGGED)
        for metric, points in logged.items():
            for index, pair in enumerate(points, start=1):
                location = Location(LOGGED, index)
                try:
                    step, value = pair
                except (TypeError, ValueError):
                    raise RecordError.at(
                        location,
                        f"point {index} is {shorten(repr(pair))}, not a (step, value) pair",
                        dotted=metric,
                        hint="log each point as (step, value), e.g. (3, 0.8)",
                    ) from None
                self.add_point(metric, _python_step(step), _python_value(value), location)

    def add_file(self, path: str) -> None:
        """Name a file whose points a logger-format reader adds with `add_row` and `add_point`."""
        self._files.append(path)

    def add_text(self, text: str, path: str) -> None:
        self._files.append(path)
        # Split on "\n" only: str.splitlines also splits on U+2028 and friends, which JSON strings may hold.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            location = Location(path, number)
            obj = _loads(line, location)
            if type(obj) is not dict:
                raise RecordError.at(
                    location, f"line is a JSON {_json_kind(obj)}, not an object", hint=_SHAPES_HINT
                )
            if "_step" in obj or "step" in obj:
                self.add_row(obj, location)
            else:
                self._add_series(obj, location)

    def add_row(self, row: Mapping[str, object], location: Location) -> None:
        if "_step" in row and "step" in row:
            raise RecordError.at(
                location,
                'the row has both "_step" and "step"',
                hint='keep one of them; "step" is read as "_step"',
            )
        step_key = "_step" if "_step" in row else "step"
        step = _as_step(row[step_key])
        if step is None:
            raise RecordError.at(
                location,
                f"is {_show(row[step_key])}, {_not_a_step(row[step_key])}",
                dotted=step_key,
                hint=_STEP_HINT,
            )
        for metric, value in row.items():
            # Other "_" keys (_runtime, _timestamp, ...) are logger metadata, not metrics.
            if metric == step_key or metric.startswith("_"):
                continue
            self._add(metric, step, value, location)

    def add_point(self, metric: str, step: object, value: object, location: Location) -> None:
        """One point of a metric from a logger format, its step checked as a row's `_step` is."""
        checked = _as_step(step)
        if checked is None:
            raise RecordError.at(
                location, f"step is {_show(step)}, not a whole number >= 0", dotted=metric, hint=_STEP_HINT
            )
        self._add(metric, checked, value, location)

    def _add_series(self, obj: dict[str, object], location: Location) -> None:
        for metric, pairs in obj.items():
            if metric.startswith("_"):
                continue
            if type(pairs) is not list:
                raise RecordError.at(
                    location,
                    f'is {_show(pairs)}, not a list of [step, value] pairs, and the line has no "_step"',
                    dotted=metric,
                    hint=f'log a row with "_step": N beside the metrics, or a series {{{json.dumps(metric)}: '
                    "[[0, 0.2], [1, 0.4]]}",
                )
            for index, pair in enumerate(pairs):
                if type(pair) is not list or len(pair) != 2:
                    raise RecordError.at(
                        location,
                        f"pair {index} is {_show(pair)}, not a [step, value] pair",
                        dotted=metric,
                        hint="write each point as [step, value], e.g. [3, 0.8]",
                    )
                step = _as_step(pair[0])
                if step is None:
                    raise RecordError.at(
                        location,
                        f"pair {index} has step {_show(pair[0])}, {_not_a_step(pair[0])}",
                        dotted=metric,
                        hint=_STEP_HINT,
                    )
                self._add(metric, step, pair[1], location)

    def _add(self, metric: str, step: int, value: object, location: Location) -> None:
        found = self._series.get(metric)
        if found is None:
            found = self._series[metric] = ({}, [], [])
        index, logged, locations = found
        if step in index:
            first = locations[index[step]]
            where = "both on this line" if first == location else f"first at {first}"
            raise RecordError.at(
                location,
                f"step {step} is logged twice, {where}",
                dotted=metric,
                hint=_DUPLICATE_HINT,
            )
        index[step] = len(logged)
        logged.append(value)
        locations.append(location)


def _in_step_order(
    index: dict[int, int], logged: list[object], locations: list[Location]
) -> tuple[list[int], list[object], list[Location]]:
    """A metric's steps, values and locations sorted by step (they come in order unless files were
    merged or a logger wrote steps out of order)."""
    steps = list(index)
    if all(a < b for a, b in itertools.pairwise(steps)):
        return steps, logged, locations
    order = sorted(range(len(steps)), key=steps.__getitem__)
    return [steps[i] for i in order], [logged[i] for i in order], [locations[i] for i in order]


def _python_step(step: object) -> object:
    """A step given in Python: any integer type (numpy's too) as an int; anything else is checked later."""
    if isinstance(step, bool):
        return step
    try:
        return operator.index(step)  # type: ignore[arg-type]  # anything with __index__
    except TypeError:
        return step


def _python_value(value: object) -> object:
    """A value given in Python: any real number type (numpy's too) as a float, as JSON would read it."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    try:
        return float(value)  # type: ignore[arg-type]  # anything with __float__: numpy scalars, Decimal
    except (TypeError, ValueError):
        return value


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _show(value: object) -> str:
    return shorten(json.dumps(value, ensure_ascii=False, default=repr))


def shorten(text: str) -> str:
    """A logged value's JSON text cut to fit in a message: a logged histogram can run to kilobytes."""
    return text if len(text) <= 60 else text[:57] + "..."
