"""A folder (or a glob, or a list) of the record files `gatecfg evaluate --record` reads, as one export
for `gatecfg import`: one run per file, in file-name order.

Each file is a run's whole record in any `--record` format (JSON Lines in either shape, or a logger's
files). Its run id, date and commit come from its name, matched in full (without the suffix) by
NAME_PATTERN or `--name-pattern`, whose named groups `run_id`, `date` and `commit` are each optional:
the run id is the file's name without its suffix unless the pattern says otherwise, and a file without a
date in its name takes one from `--start` (the first file, then one day later per file). The default
reads `2024-05-01_3f2a9c1.jsonl` (a date, then a commit) and `2024-05-01.jsonl`.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType

from gatecfg.analysis.importer import Entry, Export, ImportedRun, Scratch, checked, entry_of
from gatecfg.dates import parse_date
from gatecfg.errors import InputError, Location
from gatecfg.gate_files import display_path
from gatecfg.records import read_records

NAME_PATTERN = r"(?P<date>\d{4}-\d{2}-\d{2})(?:_(?P<commit>[0-9a-fA-F]{7,40}))?(?:_.*)?"
PATTERN_HINT = (
    "name the files DATE[_COMMIT].jsonl (e.g. 2024-05-01_3f2a9c1.jsonl), or pass --name-pattern REGEX "
    "with named groups run_id, date, commit, or --start DATE to date the files one day apart in name order"
)
GLOB = re.compile(r"[*?[]")


def selects_records(given: Sequence[Path]) -> bool:
    """Several paths, a folder or a glob: record files, one run each (one file is an export)."""
    first = given[0]
    return len(given) > 1 or first.is_dir() or bool(GLOB.search(str(first)) and not first.exists())


def record_files(given: Sequence[Path]) -> list[Path]:
    """The record files of a folder, a glob or several files, sorted by name; a folder's hidden files
    (`.DS_Store`) are skipped."""
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif GLOB.search(str(path)) and not path.exists():
            matched = sorted(Path(p) for p in glob.glob(str(path)) if Path(p).is_file())
            if not matched:
                raise InputError.at(Location(str(path)), "the pattern matches no file", hint=PATTERN_HINT)
            found += matched
        elif path.is_file():
            found.append(path)
        else:
            raise InputError.at(Location(str(path)), "no such file or folder")
    return sorted(dict.fromkeys(found), key=lambda p: (p.name, str(p)))


def read_record_folder(files: Sequence[Path], *, pattern: str | None, start: datetime | None) -> Export:
    """Every file as one run, checked (any error names the file and line) before anything is written."""
    try:
        compiled = re.compile(pattern or NAME_PATTERN)
    except re.error as exc:
        raise InputError.at("--name-pattern", f"is not a regular expression: {exc}") from None
    shown = display_path(files[0].parent) if files else "."
    scratch = Scratch(shown)
    entries: list[Entry] = []
    metrics: set[str] = set()
    for number, path in enumerate(files):
        where = Location(display_path(path))
        run_id, date, commit = _named(compiled, path, where, pattern)
        if date is not None:
            created = parse_date(date, where, "file name")
        elif start is not None:
            created = start + timedelta(days=number)
        else:
            raise InputError.at(where, "the file name holds no date", hint=PATTERN_HINT)
        record = read_records([path])
        run = ImportedRun(
            run_id=run_id,
            created_at=created,
            commit=commit,
            trusted=True,
            record=record,
            single=frozenset(),
            location=where,
        )
        metrics.update(record.columns)
        entries.append(entry_of(run, scratch))
    export = Export(
        path=shown,
        kind="records",
        entries=tuple(entries),
        header=MappingProxyType({}),
        metrics=frozenset(metrics),
        single=MappingProxyType({}),
        scratch=scratch,
    )
    return checked(export, hint=PATTERN_HINT)


def _named(
    compiled: re.Pattern[str], path: Path, where: Location, given: str | None
) -> tuple[str, str | None, str | None]:
    stem = path.name.split(".")[0] if not path.name.startswith(".") else path.name
    match = compiled.fullmatch(stem)
    if match is None:
        if given is None:
            return stem, None, None  # no date: --start dates it, else the caller says what to do
        raise InputError.at(where, f"the file name `{stem}` does not match --name-pattern", hint=PATTERN_HINT)
    groups = match.groupdict()
    return groups.get("run_id") or stem, groups.get("date"), groups.get("commit")
