"""The one guard in front of every file a command writes: never over a file the command reads.

A report written over the SQLite store replaced every stored run with the report; over a record, a gate
file or the settings file it destroyed what the next run reads. `check_outputs` refuses (exit 2, before
anything is evaluated or written) an output that is one of them under any spelling: a relative or
`..` path, a symlink, a hard link (the same inode), or a file that does not exist yet (a store the first
`--write` creates). docs/security.md lists what each command protects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from gatecfg.errors import InputError
from gatecfg.settings import db_url, gates_root, project
from gatecfg.textio import check_writable

# What SQLite keeps beside a database file: replacing one of these loses or corrupts committed runs too.
_STORE_COMPANIONS = ("", "-wal", "-shm", "-journal")
_SQLITE_URL = re.compile(r"sqlite(?:\+\w+)?://(?P<rest>.*)", re.DOTALL)
_GATE_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Reads:
    """What a command reads, so that none of its outputs may replace it: the store (a URL), the record
    files or folders being judged, the gates root (every YAML file under it) and the settings file."""

    store: str | None = None
    records: Sequence[Path] = ()
    gates: Path | None = None
    settings: Path | None = None


def settings_file() -> Path | None:
    """The settings file the command reads (`.gatecfg.toml` or `pyproject.toml`), if there is one; one
    that cannot be read is no file to protect (reading it is the settings' error to report)."""
    try:
        return project().path
    except InputError:
        return None


def project_reads(*, db: str | None = None, gates: Path | None = None) -> Reads:
    """What a command that reads no record reads by default: the store and gates root the settings name
    (`db` / `gates` when the command was given them) and the settings file. Settings that cannot be read
    protect nothing: the command that reads them reports the error."""
    try:
        store: str | None = db_url(db)
    except InputError:
        store = None
    try:
        root: Path | None = gates_root(gates)
    except InputError:
        root = None
    return Reads(store=store, gates=root, settings=settings_file())


def store_file(url: str) -> Path | None:
    """The file a SQLite store URL names (`sqlite:///h.db`, `sqlite:////abs/h.db?timeout=5`,
    `sqlite:///file:h.db?uri=true`); None for another store or an in-memory one."""
    found = _SQLITE_URL.fullmatch(url)
    if found is None or not found["rest"].startswith("/"):
        return None
    database = unquote(found["rest"][1:].partition("?")[0])
    if database.startswith("file:"):
        database = database.removeprefix("file:")
        database = "/" + database.lstrip("/") if database.startswith("//") else database
    if not database or database == ":memory:":
        return None
    return Path(database)


def collision(path: Path, reads: Reads) -> str | None:
    """What `path` would overwrite among `reads` ("the history store ..."), or None when it is a file of
    its own."""
    target = _real(path)
    if target is None:
        return None
    # An output that does not exist yet can only be a protected file that does not exist either (a store
    # the first write creates): the gate tree is walked, for its hard links and symlinks, only otherwise.
    for protected, what in _protected_files(reads, walk_gates=os.path.exists(path)):
        if _same(path, target, protected):
            return what
    for folder in reads.records:
        if _inside(target, folder):
            return f"inside the record folder `{folder}` being judged"
    if reads.gates is not None and target.suffix in _GATE_SUFFIXES and _inside(target, reads.gates):
        return f"a gate file under the gates root `{reads.gates}`"
    return None


def check_outputs(outputs: Sequence[tuple[str, Path]], reads: Reads) -> None:
    """Refuse (exit 2) an output (flag, path) that would overwrite what the command reads, or another
    output of the same command: one line naming the flag and the file."""
    seen: list[tuple[str, Path]] = []
    for flag, path in outputs:
        what = collision(path, reads)
        if what is None:
            what = next(
                (f"also the file of {other}" for other, given in seen if _same(path, _real(path), given)),
                None,
            )
        if what is not None:
            raise InputError.at(
                flag,
                f"`{path}` is {what}: writing it would destroy what this command reads; nothing was written",
                hint="give the output a file of its own, e.g. report.json beside the record",
            )
        seen.append((flag, path))


def checked_reports(reports: Sequence[tuple[str, Path]], reads: Reads) -> list[tuple[str, Path]]:
    """The (format, file) of each `--report`, each checked (exit 2) before the command's work: it may
    not overwrite what the command reads or another report, and must be a file that can be written."""
    check_outputs([("--report", path) for _, path in reports], reads)
    for _, path in reports:
        check_writable(path, what="report")
    return list(reports)


def _protected_files(reads: Reads, *, walk_gates: bool) -> Iterator[tuple[Path, str]]:
    if reads.store is not None:
        database = store_file(reads.store)
        if database is not None:
            for suffix in _STORE_COMPANIONS:
                shown = "the history store" if not suffix else f"the history store's `{suffix}` file"
                yield Path(f"{database}{suffix}"), shown
    for record in reads.records:
        yield record, "a record being judged"
    if reads.settings is not None:
        yield reads.settings, "the settings file being read"
    if reads.gates is not None and walk_gates:
        yield from ((gate, "a gate file being read") for gate in _gate_files(reads.gates))


def _gate_files(root: Path) -> Iterator[Path]:
    """The YAML files under the gates root, walked without recursion (a tree thousands of folders deep is
    the loader's to refuse) and without following links to folders: a gate file that is a symlink to a
    file elsewhere is compared by what it points to (`_same`)."""
    folders = [root]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                    elif entry.name.endswith(_GATE_SUFFIXES):
                        yield Path(entry.path)
        except OSError:
            continue  # a folder that cannot be listed is the loader's error to report


def _real(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _same(path: Path, target: Path | None, other: Path) -> bool:
    """Whether `path` (resolved: `target`) and `other` are one file: by their resolved names (a file
    neither has created yet included), else by device and inode (a hard link, another spelling of a
    case-insensitive name)."""
    if target is not None and target == _real(other):
        return True
    try:
        mine, theirs = os.stat(path), os.stat(other)
    except (OSError, ValueError):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def _inside(target: Path, folder: Path) -> bool:
    real = _real(folder)
    return real is not None and os.path.isdir(real) and target.is_relative_to(real) and target != real
