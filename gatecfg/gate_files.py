"""The files of a gates tree: which YAML files lie under its root, which are base files, which may declare
a test, and how a path is shown in messages (docs/gate-language.md)."""

from __future__ import annotations

import os
from pathlib import Path

from gatecfg.errors import InputError, Location, Problem
from gatecfg.yamlio import MAX_BYTES, LoadedDoc, read_yaml

BASE_NAME = "base.yaml"
YAML_SUFFIXES = (".yaml", ".yml")


def display_path(path: Path) -> str:
    """Paths in messages: relative to the working directory when below it, so editors can open them."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


def is_base_file(path: Path) -> bool:
    return path.name == BASE_NAME or path.name.endswith(".base.yaml")


def may_declare(path: Path, tests: set[str]) -> bool:
    """Whether the gate file at `path` may declare one of `tests`, from its bytes alone, erring towards
    yes. A YAML scalar reads as its text but for escapes (a backslash), a doubled quote inside single
    quotes and a line folded into a space: so a file that declares a test holds its name as written,
    unless the name has a quote or a space, or the file a backslash."""
    if not tests:
        return False
    try:
        # A link (which may leave the root), not a regular file (a FIFO would block the read) or too big:
        # the loader says what is wrong with it.
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return True
        raw = path.read_bytes()
    except OSError:
        return True
    if b"\\" in raw:
        return True
    return any("'" in test or any(c.isspace() for c in test) or test.encode() in raw for test in tests)


def require_gate_keys(doc: LoadedDoc) -> None:
    """A mapping with neither `test:` nor `gates:` is some other YAML (CI config, compose file), not a gate
    file with mistakes: one error that says so, rather than one per key."""
    if not isinstance(doc.data, dict) or {"test", "gates"} & doc.data.keys():
        return
    keys = ", ".join(f"`{k}`" for k in list(doc.data)[:5]) + (", ..." if len(doc.data) > 5 else "")
    raise InputError.at(
        Location(doc.path, 1, 1),
        f"not a gatecfg gate file: it has neither `test:` nor `gates:` (its keys: {keys or 'none'})",
        hint="keep other YAML out of the gates folder, or narrow the paths (the hook's `files:`) to gate "
        "files; a base file is named base.yaml",
    )


def is_gate_file(path: Path) -> bool:
    """Whether `path` reads as a gate file; one that does not load at all is left to `base` to report."""
    try:
        data = read_yaml(path).data
    except InputError:
        return False
    return isinstance(data, dict) and ("test" in data or "gates" in data) and "version" not in data


# Folders below the gates root that are walked (a real tree is a few deep).
MAX_FOLDER_DEPTH = 64


def yaml_files(root: Path, problems: list[Problem]) -> list[Path]:
    """Every .yaml/.yml file under `root`. One that cannot be read (a dangling link, a link loop) and a
    folder that cannot be listed are problems: skipping them would report "0 errors" for what lint never
    read."""

    def unreadable(exc: OSError) -> None:
        where = display_path(Path(exc.filename)) if exc.filename else display_path(root)
        problems.append(Problem(Location(where), f"cannot list the folder: {exc.strerror or exc}"))

    found: list[Path] = []
    real_root = root.resolve()
    for folder, dirs, names in os.walk(root, onerror=unreadable):
        if dirs and len(Path(folder).relative_to(root).parts) >= MAX_FOLDER_DEPTH:
            # os.walk recurses a level per folder: a tree 1,200 deep raised RecursionError.
            problems.append(
                Problem(
                    Location(display_path(Path(folder) / dirs[0])),
                    f"is nested more than {MAX_FOLDER_DEPTH} folders below the gates root; gatecfg reads "
                    "no deeper",
                    hint="keep gate files a few folders deep, e.g. gates/<area>/<test>.yaml",
                )
            )
            dirs[:] = []
        # os.walk does not follow a link to a folder; one that leaves the gates root would hide what it
        # holds, so it is an error (one inside the root is walked where it really is).
        for name in dirs:
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(real_root):
                problems.append(
                    Problem(
                        Location(display_path(path)),
                        f"is a link to the folder {display_path(path.resolve())}, outside the gates root "
                        f"{display_path(real_root)}",
                        hint="gate and base files live inside the gates folder: move the folder in",
                    )
                )
        for name in names:
            path = Path(folder) / name
            if path.suffix not in YAML_SUFFIXES:
                continue
            try:
                path.stat()
            except OSError as exc:
                link = f" (a link to {os.readlink(path)})" if path.is_symlink() else ""
                reason = f"cannot read the file{link}: {exc.strerror or exc}"
                problems.append(Problem(Location(display_path(path)), reason))
                continue
            # Not only regular files: a FIFO, socket or device named like a gate file is read, and refused
            # there with its kind (a link out of the root at the link), never skipped with "0 errors".
            if not path.is_dir():
                found.append(path)
    return sorted(found)
