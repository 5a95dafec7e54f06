"""Run metric records (docs/evaluate.md): a run's metrics from record files (JSON Lines, or a logger's
format) and points given in Python, parsed and merged into one Record.

The package reads one way: `values` (Point, Column, Record) <- `builder` (the builder and the JSON Lines
reader) <- `formats` (TensorBoard, W&B, MLflow, into the same builder) <- this module (which picks the
reader for each file). The names the rest of gatecfg uses are re-exported here."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from gatecfg.errors import Location, RecordError
from gatecfg.records.builder import (
    LOGGED,
    RECORD_HINT,
    Points,
    _Builder,
    read_record_text,
)
from gatecfg.records.values import Column, Point, Record, shorten

__all__ = [
    "LOGGED",
    "RECORD_HINT",
    "Column",
    "Metrics",
    "Point",
    "Points",
    "Record",
    "read_metrics",
    "read_record_text",
    "read_records",
    "shorten",
]

# What the Python API and the pytest plugin accept as a run's metrics: {metric: [(step, value), ...]},
# or record files.
Metrics = Points | str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Record


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
    from gatecfg.records import formats  # the logger formats' readers load only for their files

    kind = formats.sniff(path)
    if kind == "jsonl":
        builder.add_text(read_record_text(path), path)
    else:
        formats.read(kind, path, builder)
