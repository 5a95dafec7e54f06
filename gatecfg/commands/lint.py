"""`gatecfg lint`: schema and semantic checks of gate files, every error of every file in one run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gatecfg.errors import EXIT_INPUT, EXIT_OK, Problem, format_problems
from gatecfg.resolve import is_base_file, load_tree


def lint(paths: Sequence[Path], *, gates: Path, fmt: str) -> int:
    problems: list[Problem] = []
    checked = 0
    for root, files in _roots(paths, gates):
        tree = load_tree(root)
        checked += len(tree.files)
        problems.extend(p for p in tree.problems if _selected(p.location.path, files))
    output = format_problems(problems, fmt)
    if output:
        print(output)
    if fmt == "text":
        errors = sum(p.severity == "error" for p in problems)
        summary = f"gatecfg lint: {checked} files checked, {errors} error{'s' * (errors != 1)}"
        print(summary, file=sys.stderr)
    return EXIT_INPUT if any(p.severity == "error" for p in problems) else EXIT_OK


def _roots(paths: Sequence[Path], gates: Path) -> list[tuple[Path, set[str] | None]]:
    """Group the given paths by the gates root that resolves them; None selects a whole tree.

    A path inside `--gates` is resolved against it (its base files live there); any other folder
    is a gates root of its own, and any other file is resolved against its own folder.
    """
    if not paths:
        return [(gates, None)]
    groups: dict[Path, set[str] | None] = {}
    gates_root = gates.resolve()
    for path in paths:
        full = path.resolve()
        if full.is_relative_to(gates_root):
            root = gates
        elif path.is_dir():
            root = path
        else:
            root = path.parent
        selection = groups.setdefault(root, set())
        if path.is_dir() and full == root.resolve():
            groups[root] = None
        elif selection is not None:
            selection.add(str(full))
    return list(groups.items())


def _selected(shown: str, files: set[str] | None) -> bool:
    """Problems of the selected files, and of every base file: a broken base breaks its whole folder."""
    if files is None:
        return True
    full = Path(shown).resolve()
    return (
        is_base_file(full)
        or str(full) in files
        or any(str(full).startswith(f.rstrip("/") + "/") for f in files)
    )
