"""The builder of a Record, and the JSON Lines reader that feeds it (series or row shape, docs/evaluate.md).

`gatecfg.records.formats` reads the logger formats into the same builder, and the Python API's points go
in through `add_logged`, so every source is judged exactly as the equivalent JSON Lines."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import operator
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from gatecfg.errors import InputError, Location, RecordError
from gatecfg.models import MAX_STEP
from gatecfg.records.values import Column, Record, shorten
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


# What the Python API and the pytest plugin accept as a run's metrics: {metric: [(step, value), ...]},
# or record files.
Points = Mapping[str, Iterable[tuple[int, float]]]
# The largest text record (JSON Lines, a W&B export) read: all of it is held in memory at once, and a real
# nightly's is a few MB; a TensorBoard event file is streamed and has its own bound (records/formats.py).
MAX_RECORD_BYTES = 256_000_000
RECORD_HINT = (
    "pass the file the training run wrote its metrics to: JSON Lines, a TensorBoard event file or log "
    "folder, a W&B history export, or an MLflow run folder (mlruns/<experiment>/<run>)"
)
LOGGED = "<logged metrics>"  # where points given in Python are said to come from, in messages


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


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {json.dumps(key)} appears twice in one object")
        self.key = key


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json's `object_pairs_hook` for records and exports: the object, or DuplicateKeyError. json keeps the
    last of two equal keys silently; a metric logged twice on one line (or in one row of a W&B export,
    records/formats.py, or of an import, analysis/importer.py) must not vanish."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


JSON_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)


def _loads(line: str, location: Location) -> object:
    try:
        return JSON_DECODER.decode(line)
    except json.JSONDecodeError as exc:
        raise RecordError.at(
            Location(location.path, location.line, exc.colno), f"malformed JSON: {exc.msg}", hint=_SHAPES_HINT
        ) from None
    except DuplicateKeyError as exc:
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


class _Builder:
    """Accumulates points from one or more files, rejecting a step logged twice for one metric."""

    def __init__(self) -> None:
        # Per metric: each step's index in the lists that follow, the logged values and their locations.
        self._series: dict[str, tuple[dict[int, int], list[object], list[Location]]] = {}
        self._files: list[str] = []
        self._spellings: dict[str, str] = {}  # NFC name -> the first other spelling logged

    def build(self) -> Record:
        columns: dict[str, Column] = {}
        for metric, found in sorted(self._series.items()):
            steps, logged, locations = _in_step_order(*found)
            columns[metric] = Column(steps, [_number(v) for v in logged], logged, locations)
        return Record(MappingProxyType(columns), tuple(self._files), MappingProxyType(self._spellings))

    def add_logged(self, logged: Points) -> None:
        """Points given in Python: numpy scalars count as the numbers they are, as in a JSON file."""
        self._files.append(LOGGED)
        for metric, points in logged.items():
            if type(metric) is not str:
                # A JSON key is always a string; a Python one may be anything, and would never match a gate.
                raise RecordError.at(
                    Location(LOGGED),
                    f"a metric name is {shorten(repr(metric))} ({type(metric).__name__}), not a string",
                    hint="name each metric as its gate does, e.g. 'eval/score'",
                )
            if isinstance(points, str | bytes | Mapping) or not isinstance(points, Iterable):
                raise RecordError.at(
                    Location(LOGGED),
                    f"the points are {shorten(repr(points))}, not a sequence of (step, value) pairs",
                    dotted=metric,
                    hint="log a metric's points as a list of (step, value), e.g. [(0, 2.3), (1, 1.9)]",
                )
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
        # Split on line breaks only (a JSON string holds no raw CR or LF): str.splitlines also splits on
        # U+2028, U+0085 and friends, which a JSON string (a metric's name) may hold.
        lines = text.split("\n") if "\r" not in text else re.split(r"\r\n|\r|\n", text)
        for number, line in enumerate(lines, start=1):
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
            # One metric, one spelling: a name in decomposed Unicode (NFD) is the NFC name gate files use
            # (models.MetricName), so both spellings in one record are one metric (a step twice is an error).
            if not metric.isascii():
                spelled, metric = metric, unicodedata.normalize("NFC", metric)
                if spelled != metric:
                    self._spellings.setdefault(metric, spelled)
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
    """A step given in Python as JSON would read it: any integer type (numpy's too) as an int, any real
    number type (`np.float64(2.0)`) as a float, which is a step when it is whole; a bool, numpy's
    included (no `numbers` type), stays what it is and is refused as a step."""
    if isinstance(step, bool):
        return step
    try:
        return operator.index(step)  # type: ignore[arg-type]  # anything with __index__
    except TypeError:
        pass
    if isinstance(step, numbers.Real):
        return float(step)
    return step


def _python_value(value: object) -> object:
    """A value given in Python as JSON would read it: a number of any type (numpy's, Decimal, Fraction)
    as a float, and an integer past the float range as the int it is (JSON's 400-digit integer is read
    as infinite). A bool, numpy's `np.bool_` included (no `numbers` type), is not a number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return value
    try:
        return float(value)  # type: ignore[arg-type]  # a Number: numpy scalars, Decimal, Fraction
    except OverflowError:
        return operator.index(value) if isinstance(value, numbers.Integral) else value
    except (TypeError, ValueError):
        return value  # complex: not a number a gate reads


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
