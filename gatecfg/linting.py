"""Schema and semantic checks of gate files, every error of every file in one run: what `gatecfg.lint`
returns and `gatecfg lint` prints (with, on request, the gates whose false-alarm rate is over a budget)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gatecfg.errors import InputError, Location, Problem
from gatecfg.gate_files import BASE_NAME, YAML_SUFFIXES, is_base_file
from gatecfg.resolve import ResolvedGate, ResolvedTest, load_tree
from gatecfg.yamlio import read_yaml


def find_problems(paths: Sequence[Path], *, gates: Path) -> list[Problem]:
    """The problems of the gate files `paths` select (all under `gates` when none): what `gatecfg.lint`
    returns and the command prints."""
    return check(paths, gates)[0]


def check(paths: Sequence[Path], gates: Path) -> tuple[list[Problem], set[str], list[ResolvedTest]]:
    """The problems of the selected files (each once), the files checked, and their resolved tests."""
    problems: list[Problem] = [p for path in paths if (p := _not_lintable(path)) is not None]
    lintable = [path for path in paths if _not_lintable(path) is None]
    checked: set[str] = set()
    tests: dict[str, ResolvedTest] = {}
    # Paths given, none of them lintable: their problems are the answer, not the whole --gates tree.
    for root, files in (_roots(lintable, gates) if lintable or not paths else {}).items():
        tree = load_tree(root, wanted=_picked(files))
        checked.update(f for f in tree.files if _selected(f, files))
        problems.extend(p for p in tree.problems if _selected(p.location.path, files))
        tests.update((t.file, t) for t in tree.tests.values() if _selected(t.file, files))
    # Two paths under one root, or a folder and a file in it, must not report an error twice.
    return list(dict.fromkeys(problems)), checked, list(tests.values())


def over_budget(
    tests: Sequence[ResolvedTest], db: str, budget: float, labels: Mapping[str, str]
) -> list[Problem]:
    # Deferred: scipy and the store are only needed when a budget is asked for, not in pre-commit.
    from gatecfg.analysis.false_alarm import current_estimates
    from gatecfg.keys import series_key
    from gatecfg.store import Store

    warnings: list[Problem] = []
    with Store.open(db) as store:
        for test in sorted(tests, key=lambda t: t.file):
            estimates = current_estimates(store, test, series_key(test.test, labels))
            for gate in test.gates:
                estimate = estimates[gate.metric]
                if estimate is None or estimate.probability <= budget:
                    continue
                warnings.append(
                    Problem(
                        Location(gate.file, gate.line),
                        f"estimated false-alarm rate {estimate.describe()} per night is above "
                        f"--max-false-alarm {budget:g}",
                        dotted=f"gates.{gate.metric}",
                        hint=f"{_budget_hint(gate, budget)}; see it on history with "
                        f"`gatecfg backtest --test {test.test} --metric {gate.metric}`",
                        severity="warning",
                    )
                )
    return warnings


def _budget_hint(gate: ResolvedGate, budget: float) -> str:
    """What to change, in the keys this gate's rule takes: a budget rule has no band to widen and
    refuses `tolerate`; its false-alarm rate is its `false_alarm`."""
    if gate.constraint is not None and gate.constraint.budget is not None:
        return (
            f"a budget gate fails a clean night with probability `false_alarm` ({gate.false_alarm:g}, from "
            f"{gate.sources['false_alarm']}): write `false_alarm: {budget:g}` on the gate (or in "
            "`policy:`), add `min_change:` to its constraint when smaller changes do not matter (re-keys), "
            "give `trials:` for a share of counts, or track it (`constraint: null`)"
        )
    return (
        "widen the band (sigma_down/sigma_up, rel_*), tolerate a few steps (`tolerate:`), or track it "
        "(`constraint: null`)"
    )


def _roots(paths: Sequence[Path], gates: Path) -> dict[Path, set[str] | None]:
    """Group the given paths by the gates root that resolves them (None selects a whole tree).

    A path inside `--gates` is resolved against it. Any other path is resolved against its own gates
    root (`gates_root`), whatever the working directory: pre-commit passes the changed files of a tree
    that may live anywhere, e.g. `ci/gates/`. A changed base file selects its whole tree: any gate file
    may inherit it, directly or through `extends:`.
    """
    if not paths:
        return {gates: None}
    groups: dict[Path, set[str] | None] = {}
    gates_root = gates.resolve()
    for path in paths:
        full = path.resolve()
        root = gates_root if full.is_relative_to(gates_root) else gates_root_of(full)
        selection = groups.setdefault(root, set())
        if (full.is_dir() and full == root) or is_base_file(full):
            groups[root] = None
        elif selection is not None:
            selection.add(str(full))
    return groups


def gates_root_of(path: Path) -> Path:
    """The gates root of a path outside `--gates`: the nearest folder at or above it whose base.yaml
    extends no other file (the top of its inheritance chain), searched up to the top of the git
    repository; without one, the path's own folder."""
    start = path if path.is_dir() else path.parent
    for folder in (start, *start.parents):
        base = folder / BASE_NAME
        if base.is_file() and not _extends(base):
            return folder
        if (folder / ".git").exists():
            break
    return start


def _extends(base: Path) -> bool:
    try:
        data = read_yaml(base).data
    except InputError:
        return False  # a broken base file is a root of its own: its errors are reported there
    return isinstance(data, dict) and data.get("extends") is not None


def _not_lintable(path: Path) -> Problem | None:
    """A path given on the command line that names no gate file nor folder: an error, not "0 errors"."""
    shown = str(path)
    try:
        if path.is_dir():
            return None
        if path.is_symlink() and not path.exists():
            return Problem(Location(shown), f"is a link to {os.readlink(path)}, which does not exist")
        if not path.exists():
            return Problem(Location(shown), "no such file or folder")
        if path.suffix not in YAML_SUFFIXES:
            return Problem(
                Location(shown),
                "is not a YAML file (.yaml or .yml)",
                hint="pass gate files, base files or the folders that hold them",
            )
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Problem(Location(shown), f"cannot read it: {reason}")
    return None


def _picked(files: set[str] | None) -> Callable[[Path], bool] | None:
    """What a tree loads of a selection (None: all of it), `load_tree`'s `wanted`: reading only what the
    selected files need makes linting the files a commit changed cost what those files cost."""
    if files is None:
        return None
    return lambda path: _selected(str(path), files)


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
