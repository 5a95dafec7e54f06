"""What a run's metrics are once read: points, one column per metric, the record of a run."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from gatecfg.errors import Location


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
    # A metric logged in decomposed Unicode (NFD) is the composed (NFC) name gate files use: its name here,
    # and the spelling the record logged.
    spellings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def spelling_notes(self, metrics: Sequence[str]) -> list[str]:
        """For each of `metrics` that the record logged in another spelling, a note that shows both."""
        return [
            f"the record logs `{metric}` decomposed (`{_escaped(self.spellings[metric])}`); judged as the "
            f"gate's composed `{metric}` (`{_escaped(metric)}`)"
            for metric in metrics
            if metric in self.spellings
        ]

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


def _json_text(value: object) -> str:
    """A logged JSON value as JSON text, for messages."""
    if type(value) is float and math.isfinite(value):
        return repr(value)  # the JSON text of a finite float, and faster than json.dumps
    if type(value) is int:
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=repr)  # default: a Python object logged via the API


def _escaped(name: str) -> str:
    """A name with every character beyond ASCII as its escape: two spellings that look alike differ."""
    return name.encode("ascii", "backslashreplace").decode("ascii")


def shorten(text: str) -> str:
    """A logged value's JSON text cut to fit in a message: a logged histogram can run to kilobytes."""
    return text if len(text) <= 60 else text[:57] + "..."
