"""Inheritance: load a gate tree, resolve each gate against its base files, and say where literals came from.

Precedence, highest first (docs/gate-language.md, "Inheritance precedence"; tests/test_resolve.py checks
each adjacent pair):

1. a field written in the gate file, including an explicit `null` (`constraint: null`, `limits: null`);
2. `defaults.<metric>.<field>` in the nearest `base.yaml` (the gate file's folder, then each parent
   folder up to the gates root);
3. the same in the base file it `extends:`, then the one that extends, and so on;
4. for `enforce` and `false_alarm` only: `policy.enforce` / `policy.false_alarm` along the same chain,
   nearest first;
5. built-in: `enforce: false`, no `limits`, `tolerate: 0`, no `trials`; policy `window: 20`,
   `min_history: 1`, `reference: mean`, `baseline: trusted`, `false_alarm: 0.01`,
   `require_history: false`.

`steps` and `constraint` have no built-in: a gate that gets neither from 1-3 is an error.

A field is taken whole: a nearer `constraint` replaces a farther one, it is never merged key by key,
so `{rel_down: 0.1}` written anywhere really does leave the up side open.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatecfg.errors import GateFileError, InputError, Location, Problem
from gatecfg.keys import constraint_key, coordinate_hash, steps_key
from gatecfg.membership import Baseline
from gatecfg.models import (
    BaseFile,
    Constraint,
    GateFile,
    GateSpec,
    Limits,
    Missing,
    Reference,
    Rule,
    Steps,
    WritePolicy,
)
from gatecfg.parse import parse_doc
from gatecfg.same_code import SameCodePolicy
from gatecfg.wording import did_you_mean
from gatecfg.yamlio import MAX_BYTES, LoadedDoc, read_yaml

BASE_NAME = "base.yaml"
YAML_SUFFIXES = (".yaml", ".yml")
BUILTIN = "built-in default"
BUILTIN_POLICY: Mapping[str, Any] = {
    "window": 20,
    "min_history": 1,
    "enforce": False,
    "reference": "mean",
    "baseline": "trusted",
    "require_history": False,
    "false_alarm": 0.01,
    "write": None,
    "accept_shift_after": 5,
    "stale_after": 5,
    "missing": "fail",
    "same_code": "warn",
}
GATE_FIELDS = ("steps", "constraint", "limits", "enforce", "tolerate", "trials", "false_alarm")


def display_path(path: Path) -> str:
    """Paths in messages: relative to the working directory when below it, so editors can open them."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


def is_base_file(path: Path) -> bool:
    return path.name == BASE_NAME or path.name.endswith(".base.yaml")


@dataclass(frozen=True)
class Base:
    path: Path
    doc: LoadedDoc
    model: BaseFile

    def source(self, *key: str | int) -> str:
        return f"{self.doc.path}:{self.doc.line_of(key)}"


@dataclass(frozen=True)
class Policy:
    window: int
    min_history: int
    enforce: bool
    sources: Mapping[str, str]
    reference: Reference = "mean"
    baseline: Baseline = "trusted"
    require_history: bool = False
    false_alarm: float = BUILTIN_POLICY["false_alarm"]
    write: WritePolicy | None = None  # None: the CI's default branch, no pull requests
    accept_shift_after: int | None = BUILTIN_POLICY["accept_shift_after"]  # None: `never`
    stale_after: int = BUILTIN_POLICY["stale_after"]
    missing: Missing = BUILTIN_POLICY["missing"]
    same_code: SameCodePolicy = BUILTIN_POLICY["same_code"]


@dataclass(frozen=True)
class ResolvedGate:
    test: str
    file: str
    line: int
    metric: str
    steps: Steps
    constraint: Constraint | None
    limits: Limits | None
    enforce: bool
    sources: Mapping[str, str]
    tolerate: int | float = 0  # failing steps (or a fraction of them) the gate lets pass; not identity
    trials: int | None = None  # the metric is a mean of this many Bernoulli trials; not identity
    false_alarm: float = BUILTIN_POLICY["false_alarm"]  # a budget rule's share of clean nights; not identity

    @property
    def gated(self) -> bool:
        """A gate that can fail: a band, absolute limits, or both. Without either it is tracked."""
        return self.constraint is not None or self.limits is not None

    # Cached: reports and the store ask once per step, 40,000 times for 40 gates of 1,000 steps.
    @functools.cached_property
    def steps_key(self) -> str:
        return steps_key(self.steps)

    @functools.cached_property
    def constraint_key(self) -> str:
        return constraint_key(self.constraint)

    def coordinate(self, series: str) -> str:
        return coordinate_hash(series, self.metric, self.steps_key, self.constraint_key)

    def as_json(self, series: str) -> dict[str, Any]:
        return {
            "test": self.test,
            "file": self.file,
            "line": self.line,
            "metric": self.metric,
            "steps": list(self.steps) if isinstance(self.steps, tuple) else self.steps,
            "constraint": None if self.constraint is None else self.constraint.literal(),
            "limits": None if self.limits is None else self.limits.literal(),
            "enforce": self.enforce,
            "tolerate": self.tolerate,
            "trials": self.trials,
            "false_alarm": self.false_alarm,
            "steps_key": self.steps_key,
            "constraint_key": self.constraint_key,
            "coordinate": self.coordinate(series),
            "sources": {name: self.sources[name] for name in GATE_FIELDS},
        }


@dataclass(frozen=True)
class ResolvedTest:
    test: str
    file: str
    gates: tuple[ResolvedGate, ...]
    policy: Policy
    bases: tuple[str, ...]

    def gate(self, metric: str) -> ResolvedGate | None:
        return next((g for g in self.gates if g.metric == metric), None)


@dataclass
class GateTree:
    """Everything under a gates root: resolved tests, and every problem found on the way."""

    root: Path
    tests: dict[str, ResolvedTest] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def test(self, name: str) -> ResolvedTest:
        """The test declared as `name`, or as the path `name` spells another way: `./tests/x.py`, or an
        absolute path inside the working directory or the repository that holds the gates root."""
        if self.problems:
            raise GateFileError(self.problems)
        found = self.tests.get(name) or next(
            (self.tests[c] for c in self._spellings(name) if c in self.tests), None
        )
        if found is None:
            known = "\n    ".join(sorted(self.tests)) or "(none)"
            near = did_you_mean(name, self.tests, n=3)
            raise GateFileError.at(
                Location(display_path(self.root)),
                f"no gate file declares `test: {name}`" + (f"; {near}" if near else ""),
                hint=f"searched {len(self.files)} files under {display_path(self.root)}/; "
                f"tests declared there:\n    {known}",
            )
        return found

    def _spellings(self, name: str) -> list[str]:
        """`name` as a declaration writes it: a relative POSIX path without `./` or `..` detours."""
        if not os.path.isabs(name):
            return [posixpath.normpath(name.replace(os.sep, "/"))]
        path = Path(os.path.normpath(name))
        bases = [
            Path.cwd(),
            *(folder for folder in self.root.resolve().parents if (folder / ".git").exists()),
        ]
        found = []
        for base in bases:
            try:
                found.append(path.relative_to(base).as_posix())
            except ValueError:
                continue
        return found


def load_tree(
    root: Path, files: Iterable[Path] | None = None, *, wanted: Callable[[Path], bool] | None = None
) -> GateTree:
    """Load and resolve every gate file under `root` (or just `files`), collecting all problems.

    With `wanted`, only the files it picks are resolved, with every base file (each is small, and a
    broken one is reported with every file below it) and, of the other gate files, those that may
    declare one of the tests the picked files declare (`_may_declare`): one test has one gate file, and
    which file is told "already gated" depends on them (`gatecfg lint` of the files a commit changed
    reads the files those need, not the whole tree).
    """
    tree = GateTree(root)
    if not root.is_dir():
        tree.problems.append(
            Problem(
                Location(display_path(root)),
                "the gates folder does not exist",
                hint="pass --gates DIR, or run from the repository that has gates/",
            )
        )
        return tree
    paths = sorted(files) if files is not None else _yaml_files(root, tree.problems)
    loader = _Loader(root.resolve(), tree.problems)
    loaded: dict[Path, ResolvedTest | None] = {}

    def load(batch: Iterable[Path]) -> None:
        for path in batch:
            if is_base_file(path):
                loader.base(path.resolve(), display_path(path))
                loaded[path] = None
            else:
                loaded[path] = loader.test(path)

    if wanted is None:
        load(paths)
    else:
        load(path for path in paths if is_base_file(path) or wanted(path))
        declared = {resolved.test for resolved in loaded.values() if resolved is not None}
        load(path for path in paths if path not in loaded and _may_declare(path, declared))
    for path in sorted(loaded):
        tree.files.append(display_path(path))
        resolved = loaded[path]
        if resolved is None:
            continue
        previous = tree.tests.get(resolved.test)
        if previous is not None:
            tree.problems.append(
                Problem(
                    loader.docs[resolved.file].location(("test",)),
                    f"test `{resolved.test}` is already gated by {previous.file}",
                    dotted="test",
                    hint="one gate file per test: merge the two files",
                )
            )
            continue
        tree.tests[resolved.test] = resolved
    tree.problems.sort(key=lambda p: (p.location, p.message))
    return tree


def _may_declare(path: Path, tests: set[str]) -> bool:
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


def _require_gate_keys(doc: LoadedDoc) -> None:
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


def _is_gate_file(path: Path) -> bool:
    """Whether `path` reads as a gate file; one that does not load at all is left to `base` to report."""
    try:
        data = read_yaml(path).data
    except InputError:
        return False
    return isinstance(data, dict) and ("test" in data or "gates" in data) and "version" not in data


# Folders below the gates root that are walked (a real tree is a few deep).
MAX_FOLDER_DEPTH = 64


def _yaml_files(root: Path, problems: list[Problem]) -> list[Path]:
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


class _Loader:
    def __init__(self, root: Path, problems: list[Problem]) -> None:
        self.root = root
        self.problems = problems
        self.bases: dict[Path, Base | None] = {}
        self.chains: dict[Path, tuple[Base, ...] | None] = {}
        self.docs: dict[str, LoadedDoc] = {}  # gate files by shown path, to locate tree-wide problems

    def inside(self, path: Path, shown: str) -> bool:
        """Whether the file really lives under the gates root. A symlink out of it is refused, as `extends`
        out of it is: a change to the gates folder must not read (and quote in errors) files elsewhere."""
        real = path.resolve()
        if real.is_relative_to(self.root):
            return True
        self.problems.append(
            Problem(
                Location(shown, 1, 1),
                f"is a link to {display_path(real)}, outside the gates root {display_path(self.root)}",
                hint="gate and base files live inside the gates folder: copy the file in, do not link it",
            )
        )
        return False

    def base(self, path: Path, shown: str | None = None) -> Base | None:
        shown = shown or display_path(path)
        path = path.resolve()  # one entry per real file, however it is reached
        if path not in self.bases:
            self.bases[path] = None
            if not self.inside(path, shown):
                return None
            try:
                doc = read_yaml(path, shown)
                self.bases[path] = Base(path, doc, parse_doc(doc, BaseFile))
            except InputError as exc:
                self.problems.extend(exc.problems)
        return self.bases[path]

    def chain(self, start: Path) -> tuple[Base, ...] | None:
        """The base file at `start` and every file it extends, nearest first; None if any is broken."""
        if start in self.chains:
            return self.chains[start]
        chain: list[Base] = []
        path = start
        while True:
            base = self.base(path)
            if base is None:
                break
            chain.append(base)
            if base.model.extends is None:
                self.chains[start] = tuple(chain)
                return self.chains[start]
            target = (path.parent / base.model.extends).resolve()
            loc = base.doc.location(("extends",))
            if not target.is_relative_to(self.root):
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` is outside the gates root {display_path(self.root)}",
                        dotted="extends",
                        hint="base files may only extend files inside the gates folder",
                    )
                )
                break
            if not target.is_file():
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` does not exist ({display_path(target)})",
                        dotted="extends",
                        hint="the path is relative to the folder of this base file",
                    )
                )
                break
            if _is_gate_file(target):
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` is a gate file (it has `test:`/`gates:`), not a base file",
                        dotted="extends",
                        hint="extend a base file (`version: 1` with `defaults:`/`policy:`)",
                    )
                )
                break
            if any(b.path == target for b in chain):
                cycle = " -> ".join([*(b.doc.path for b in chain), display_path(target)])
                self.problems.append(
                    Problem(
                        loc,
                        f"base files extend each other in a cycle: {cycle}",
                        dotted="extends",
                        hint="remove `extends:` from one of them",
                    )
                )
                break
            path = target
        self.chains[start] = None
        return None

    def nearest_base(self, gate_file: Path) -> Path | None:
        folder = gate_file.parent
        while True:
            candidate = folder / BASE_NAME
            if candidate.is_file():
                return candidate
            if folder == self.root or not folder.is_relative_to(self.root):
                return None
            folder = folder.parent

    def test(self, path: Path) -> ResolvedTest | None:
        shown = display_path(path)
        if not self.inside(path, shown):
            return None
        try:
            doc = read_yaml(path, shown)
            self.docs[shown] = doc
            _require_gate_keys(doc)
        except InputError as exc:
            self.problems.extend(exc.problems)
            return None
        try:
            model = parse_doc(doc, GateFile)
        except InputError as exc:
            self.problems.extend(exc.problems)
            # Every error at once: the one-liners no base file defaults are wrong whatever the fix of
            # the schema errors, so they are reported beside them rather than after.
            chain = self.chain(nearest) if (nearest := self.nearest_base(path.resolve())) else ()
            written = doc.data.get("gates") if isinstance(doc.data, dict) else None
            if chain is not None and isinstance(written, dict):
                for metric, spec in written.items():
                    if spec is None and isinstance(metric, str) and not _defaulted(metric, chain):
                        self.missing_defaults(doc, metric, chain, ["steps", "constraint"], one_liner=True)
            return None
        nearest = self.nearest_base(path.resolve())
        chain = ()
        if nearest is not None:
            found = self.chain(nearest)
            if found is None:
                self.problems.append(
                    Problem(
                        Location(shown, 1, 1),
                        f"cannot resolve this file: its base file {display_path(nearest)} is invalid",
                        hint="fix the errors reported for the base file",
                    )
                )
                return None
            chain = found
        gates: list[ResolvedGate] = []
        policy = _policy(chain)
        for metric, spec in model.gates.items():
            gate = self.gate(
                doc=doc, test=model.test, metric=metric, spec=spec or GateSpec(), chain=chain, policy=policy
            )
            if gate is not None:
                gates.append(gate)
        self.check_rules(doc, model, path, chain, gates)
        if len(gates) != len(model.gates):
            return None
        return ResolvedTest(model.test, shown, tuple(gates), policy, tuple(b.doc.path for b in chain))

    def gate(
        self,
        *,
        doc: LoadedDoc,
        test: str,
        metric: str,
        spec: GateSpec,
        chain: tuple[Base, ...],
        policy: Policy,
    ) -> ResolvedGate | None:
        values: dict[str, Any] = {
            "limits": None,
            "enforce": policy.enforce,
            "tolerate": 0,
            "trials": None,
            "false_alarm": policy.false_alarm,
        }
        sources: dict[str, str] = {
            "limits": BUILTIN,
            "enforce": policy.sources["enforce"],
            "false_alarm": policy.sources["false_alarm"],
            "tolerate": BUILTIN,
            "trials": BUILTIN,
        }
        # Walk from lowest to highest precedence so that each nearer writer overwrites.
        writers: list[tuple[GateSpec, LoadedDoc, tuple[str, ...]]] = [
            (b.model.defaults[metric], b.doc, ("defaults", metric))
            for b in reversed(chain)
            if metric in b.model.defaults
        ]
        writers.append((spec, doc, ("gates", metric)))
        for written, source_doc, prefix in writers:
            for name in written.model_fields_set:
                values[name] = getattr(written, name)
                sources[name] = f"{source_doc.path}:{source_doc.line_of((*prefix, name))}"
        missing = [name for name in ("steps", "constraint") if name not in sources]
        if missing:
            self.missing_defaults(doc, metric, chain, missing, one_liner=not spec.model_fields_set)
            return None
        wrong = _tolerate_problem(values, sources)
        if wrong is not None:
            in_file = "tolerate" in spec.model_fields_set
            message, hint = wrong
            self.problems.append(
                Problem(
                    doc.location(("gates", metric, "tolerate") if in_file else ("gates", metric)),
                    message,
                    dotted=f"gates.{metric}.tolerate",
                    hint=hint,
                )
            )
            return None
        return ResolvedGate(
            test=test,
            file=doc.path,
            line=doc.line_of(("gates", metric)),
            metric=metric,
            steps=values["steps"],
            constraint=values["constraint"],
            limits=values["limits"],
            enforce=values["enforce"],
            sources=sources,
            tolerate=values["tolerate"],
            trials=values["trials"],
            false_alarm=values["false_alarm"],
        )

    def missing_defaults(
        self, doc: LoadedDoc, metric: str, chain: tuple[Base, ...], missing: list[str], *, one_liner: bool
    ) -> None:
        """A gate that neither writes nor inherits `missing` (steps, constraint); for a one-liner, the
        default it most likely meant (`train/grad_nrom` -> `train/grad_norm`)."""
        searched = (
            f"searched: {', '.join(b.doc.path for b in chain)}"
            if chain
            else "no base.yaml in this folder or above it"
        )
        loc = doc.location(("gates", metric), key=True)
        names = " and ".join(f"`{m}`" for m in missing)
        if one_liner:
            message = f"`{metric}` is a one-liner but no base file has defaults for it ({searched})"
        else:
            message = f"{names} not written here and not inherited ({searched})"
        fields = " and ".join(f"`{m}:`" for m in missing)
        hint = (
            f"write {fields} for it, or add `{metric}:` under `defaults:` in "
            f"{chain[0].doc.path if chain else 'a base.yaml'}"
        )
        close = did_you_mean(metric, {m for b in chain for m in b.model.defaults}) if one_liner else None
        if close:
            hint = f"{close} (a default of the base files); else {hint}"
        self.problems.append(Problem(loc, message, dotted=f"gates.{metric}", hint=hint))

    def check_rules(
        self,
        doc: LoadedDoc,
        model: GateFile,
        path: Path,
        chain: tuple[Base, ...],
        gates: list[ResolvedGate],
    ) -> None:
        relative = path.resolve().relative_to(self.root).as_posix()
        for base in chain:
            for index, rule in enumerate(base.model.rules):
                if not _rule_applies(rule, relative, gates):
                    continue
                absent = [m for m in rule.require if m not in model.gates]
                if not absent:
                    continue
                names = ", ".join(f"`{m}`" for m in absent)
                scope = f"every test matching `{rule.under}`" if rule.under else "every test"
                why = f"{scope} with a gated metric" if rule.when == "gated" else scope
                where = base.source("rules", index)
                message = f"rule `{rule.name}` ({where}): {why} must also declare {names}"
                if rule.reason:
                    message += f" ({rule.reason})"
                self.problems.append(
                    Problem(
                        doc.location(("gates",), key=True),
                        message,
                        dotted="gates",
                        hint=f"add {names} under `gates:` (tracked with `constraint: null` is fine)",
                    )
                )


def _defaulted(metric: str, chain: tuple[Base, ...]) -> bool:
    """Whether some base file of the chain gives `metric` both its steps and its constraint."""
    written = {
        name
        for b in chain
        if metric in b.model.defaults
        for name in b.model.defaults[metric].model_fields_set
    }
    return {"steps", "constraint"} <= written


def _rule_applies(rule: Rule, relative: str, gates: list[ResolvedGate]) -> bool:
    if rule.under is not None and not fnmatch.fnmatch(relative, rule.under):
        return False
    return rule.when == "always" or any(g.gated for g in gates)


def _tolerate_problem(values: Mapping[str, Any], sources: Mapping[str, str]) -> tuple[str, str] | None:
    """What is wrong with a gate's `tolerate`, as (message, hint), or None."""
    tolerate, constraint, steps = values["tolerate"], values["constraint"], values["steps"]
    if tolerate and constraint is not None and constraint.budget is not None:
        return (
            f"`tolerate: {tolerate}` ({sources['tolerate']}) has no meaning for a budget rule (`constraint` "
            f"from {sources['constraint']}), which judges the steps together",
            "a budget gate's failures per night are set by `false_alarm`; remove `tolerate`",
        )
    if _tolerates_everything(steps, tolerate):
        shown = steps if steps == "last" else list(steps)
        return (
            f"`tolerate: {tolerate}` ({sources['tolerate']}) lets every step of `steps: {shown}` fail, so "
            "the gate could never fail",
            "tolerate counts failing steps of a many-step gate (`steps: all`); write `tolerate: 0` here, or "
            "`constraint: null` to track the metric without gating it",
        )
    return None


def _tolerates_everything(steps: Steps, tolerate: int | float) -> bool:
    """A count that reaches the number of coordinates of `last` or a step list disables the gate."""
    if steps == "all" or isinstance(tolerate, float) or tolerate == 0:
        return False
    return tolerate >= (1 if steps == "last" else len(steps))


def _policy(chain: tuple[Base, ...]) -> Policy:
    values = dict(BUILTIN_POLICY)
    sources = dict.fromkeys(BUILTIN_POLICY, BUILTIN)
    for base in reversed(chain):
        for name in base.model.policy.model_fields_set:
            values[name] = getattr(base.model.policy, name)
            sources[name] = base.source("policy", name)
    return Policy(
        window=values["window"],
        min_history=values["min_history"],
        enforce=values["enforce"],
        sources=sources,
        reference=values["reference"],
        baseline=values["baseline"],
        require_history=values["require_history"],
        false_alarm=values["false_alarm"],
        write=values["write"],
        accept_shift_after=None if values["accept_shift_after"] == "never" else values["accept_shift_after"],
        stale_after=values["stale_after"],
        missing=values["missing"],
        same_code=values["same_code"],
    )
