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

from gatecfg.bases import Base, BaseFiles
from gatecfg.errors import GateFileError, InputError, Location, Problem
from gatecfg.gate_files import (
    display_path,
    is_base_file,
    may_declare,
    require_gate_keys,
    yaml_files,
)
from gatecfg.keys import constraint_key, coordinate_hash, steps_key
from gatecfg.membership import Baseline
from gatecfg.models import (
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
from gatecfg.yamlio import LoadedDoc, read_yaml

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
    declare one of the tests the picked files declare (`may_declare`): one test has one gate file, and
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
    paths = sorted(files) if files is not None else yaml_files(root, tree.problems)
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
        load(path for path in paths if path not in loaded and may_declare(path, declared))
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


class _Loader(BaseFiles):
    """Base files (`BaseFiles`) and the gate files resolved against them."""

    def __init__(self, root: Path, problems: list[Problem]) -> None:
        super().__init__(root, problems)
        self.docs: dict[str, LoadedDoc] = {}  # gate files by shown path, to locate tree-wide problems

    def test(self, path: Path) -> ResolvedTest | None:
        shown = display_path(path)
        if not self.inside(path, shown):
            return None
        try:
            doc = read_yaml(path, shown)
            self.docs[shown] = doc
            require_gate_keys(doc)
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
