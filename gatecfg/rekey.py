"""Re-key detection (docs/identity-and-rekeying.md). At evaluate time: a gate whose coordinate has no
history while the same series and metric has history under another key. Before merge (`gatecfg diff`,
`gatecfg carry`): the gates whose key an edit of the gate tree moves, grouped by the literal that moved
them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gatecfg.errors import Location
from gatecfg.gate_files import is_base_file
from gatecfg.resolve import GateTree, ResolvedGate
from gatecfg.yamlio import LoadedDoc, dotted, read_yaml

if TYPE_CHECKING:  # the store (SQLAlchemy, Alembic) loads only for commands that open one
    from gatecfg.store.rows import CoordinateSummary

# The resolved fields whose literals are part of a coordinate's key (besides the series and metric).
IDENTITY = ("steps", "constraint")


@dataclass(frozen=True)
class OldKey:
    coordinate: str
    steps_key: str
    constraint_key: str
    values: int
    trusted_values: int
    runs: int
    last_written: datetime | None


@dataclass(frozen=True)
class Difference:
    field: str
    old: Any
    new: Any

    def describe(self) -> str:
        return f"{self.field}: {self.shown()}"

    def shown(self) -> str:
        """`old -> new`: a missing constraint side reads `absent`, a whole tracked constraint `null`."""
        whole = self.field == "constraint"
        return f"{_show(self.old, whole=whole)} -> {_show(self.new, whole=whole)}"


@dataclass(frozen=True)
class RekeyWarning:
    gate: ResolvedGate
    coordinate: str
    old: OldKey
    differences: tuple[Difference, ...]
    nightlies_to_active: int

    @property
    def orphaned(self) -> int:
        """Trusted values that formed this gate's baseline and no longer count."""
        return self.old.trusted_values

    @property
    def literals(self) -> dict[str, str]:
        """Where each differing field's new literal is written (file:line), e.g. a default in base.yaml."""
        fields = {d.field.split(".")[0] for d in self.differences}
        return {name: self.gate.sources[name] for name in IDENTITY if name in fields}

    @property
    def message(self) -> str:
        changed = "; ".join(d.describe() for d in self.differences) or "key literal changed"
        where = ", ".join(self.literals.values())
        if where:
            changed += f", written at {where}"
        return (
            f"{self.gate.metric} re-keyed ({changed}): {self.orphaned} trusted values under "
            f"{self.old.coordinate} no longer count; {self.coordinate} starts cold and gates again after "
            f"{self.nightlies_to_active} trusted nightl{'y' if self.nightlies_to_active == 1 else 'ies'}. "
            f"Accept it, or continue the old history with `gatecfg carry` if only the constraint changed."
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": "rekey",
            "metric": self.gate.metric,
            "old": {
                "coordinate": self.old.coordinate,
                "steps_key": self.old.steps_key,
                "constraint_key": self.old.constraint_key,
                "values": self.old.values,
                "trusted_values": self.old.trusted_values,
                "runs": self.old.runs,
                "last_written": self.old.last_written.isoformat() if self.old.last_written else None,
            },
            "new": {
                "coordinate": self.coordinate,
                "steps_key": self.gate.steps_key,
                "constraint_key": self.gate.constraint_key,
            },
            "differences": [{"field": d.field, "old": d.old, "new": d.new} for d in self.differences],
            "literals": self.literals,
            "orphaned": self.orphaned,
            "nightlies_to_active": self.nightlies_to_active,
            "source": f"{self.gate.file}:{self.gate.line}",
            "message": self.message,
        }


def differences(old_steps: str, old_constraint: str, gate: ResolvedGate) -> tuple[Difference, ...]:
    """The literals that differ between a stored key and a gate, field by field."""
    found: list[Difference] = []
    old_s, new_s = json.loads(old_steps), json.loads(gate.steps_key)
    if old_s != new_s:
        found.append(Difference("steps", old_s, new_s))
    old_c, new_c = json.loads(old_constraint), json.loads(gate.constraint_key)
    if old_c != new_c:
        if isinstance(old_c, dict) and isinstance(new_c, dict):
            for key in sorted(set(old_c) | set(new_c)):
                if old_c.get(key) != new_c.get(key):
                    found.append(Difference(f"constraint.{key}", old_c.get(key), new_c.get(key)))
        else:
            found.append(Difference("constraint", old_c, new_c))
    return tuple(found)


def rekey_warnings(
    gate: ResolvedGate, coordinate: str, stored: Sequence[OldKey], min_history: int
) -> list[RekeyWarning]:
    """Warnings for `gate` given every stored key of its series and metric (its own included)."""
    if any(k.coordinate == coordinate and k.trusted_values for k in stored):
        return []
    return [
        RekeyWarning(
            gate=gate,
            coordinate=coordinate,
            old=old,
            differences=differences(old.steps_key, old.constraint_key, gate),
            nightlies_to_active=max(min_history, 1),
        )
        for old in stored
        if old.coordinate != coordinate and old.trusted_values
    ]


def _show(value: Any, *, whole: bool = False) -> str:
    if value is None:
        return "null" if whole else "absent"
    return json.dumps(value)


# --- Before merge: the keys an edit of the gate tree moves, grouped by the literal that moved them -------

CauseKind = Literal["changed", "now-written", "no-longer-written", "moved", "renamed"]


@dataclass(frozen=True)
class Change:
    """One differing literal and where it is written in the working tree (its field's line if it is gone)."""

    difference: Difference
    location: Location
    dotted: str


@dataclass(frozen=True)
class Cause:
    """Why keys moved: one identity field of one writer (a base file's default or a gate file), or a test
    whose `test:` was renamed. Every gate that takes the field from the same writer shares the cause."""

    field: str  # steps, constraint or test
    kind: CauseKind
    old_source: str  # REV:path:line of the old literal
    new_source: str  # path:line of the new one, in the working tree
    location: Location  # the line to point at in the working tree
    dotted: str
    changes: tuple[Change, ...]

    def lines(self) -> list[str]:
        """The cause as the text report prints it: file:line, dotted path, old -> new."""
        if self.kind == "changed":
            return [f"{c.location}: {c.dotted}: {c.difference.shown()}" for c in self.changes]
        detail = [f"    {c.difference.describe()}" for c in self.changes]
        return [f"{self.location}: {self.dotted}: {self.summary()}", *detail]

    def summary(self) -> str:
        if self.kind == "changed":
            return "; ".join(f"{c.dotted}: {c.difference.shown()}" for c in self.changes)
        if self.kind == "renamed":
            return (
                f"test renamed {self.changes[0].difference.shown()}: the test is part of every key it stores"
            )
        was = {
            "now-written": f"now written in the gate file, was inherited from {self.old_source}",
            "no-longer-written": f"no longer written in the gate file, now inherited from {self.new_source} "
            f"(was written at {self.old_source})",
            "moved": f"now comes from {self.new_source} (was {self.old_source})",
        }[self.kind]
        return f"{was}: " + "; ".join(c.difference.describe() for c in self.changes)


@dataclass(frozen=True)
class Rekeyed:
    """A gate declared before and after an edit, under another key after it."""

    old: ResolvedGate
    new: ResolvedGate

    @property
    def carriable(self) -> bool:
        """Only a constraint changed: the stored values are the same quantity under another band."""
        return self.old.test == self.new.test and self.old.steps_key == self.new.steps_key


@dataclass(frozen=True)
class TreeDiff:
    """The re-keys between a gate tree at a revision and the working tree, plus gates added and removed."""

    causes: tuple[tuple[Cause, tuple[Rekeyed, ...]], ...]
    added: tuple[ResolvedGate, ...]
    removed: tuple[ResolvedGate, ...]
    uncompared: tuple[ResolvedGate, ...]  # gates of files that did not resolve at the revision

    @property
    def rekeyed(self) -> list[Rekeyed]:
        """Every re-keyed gate once, by test and metric."""
        found = {(r.new.test, r.new.metric): r for _, group in self.causes for r in group}
        return [found[key] for key in sorted(found)]

    def causes_of(self, gate: Rekeyed) -> list[Cause]:
        return [cause for cause, group in self.causes if gate in group]


def diff_trees(before: GateTree, after: GateTree, *, rev: str, top: Path) -> TreeDiff:
    """Compare the tree at `rev` (paths shown `REV:path`, as `gitrev` loads it) with the working tree.

    A gate is the same gate when its test and metric are; a gate file whose `test:` changed is a rename,
    which moves every key of that file. A field's literal is attributed through the gates' `sources`:
    edited where it was written (`changed`), started or stopped being written in the gate file, or now
    coming from another base file (`moved`).
    """
    places = _Places(f"{rev}:", top)
    broken = {places.of(p.location.path) for p in before.problems}
    old_by_file = {places.of(t.file): t for t in before.tests.values()}
    groups: dict[tuple[str, ...], tuple[Cause, list[Rekeyed]]] = {}
    added: list[ResolvedGate] = []
    uncompared: list[ResolvedGate] = []
    matched: set[tuple[str, str]] = set()
    for test in after.tests.values():
        old_test = before.tests.get(test.test)
        renamed: Cause | None = None
        if old_test is None:
            old_test = old_by_file.get(places.of(test.file))
            if old_test is not None and old_test.test in after.tests:
                old_test = None  # that file's old test lives on elsewhere: this one is new
            if old_test is not None:
                renamed = _renamed(old_test.test, test.test, old_test.file, test.file, places)
        for gate in test.gates:
            old = old_test.gate(gate.metric) if old_test is not None else None
            if old is None:
                unknown = old_test is None and places.of(test.file) in broken
                (uncompared if unknown else added).append(gate)
                continue
            matched.add((old.test, old.metric))
            causes = [renamed] if renamed is not None else []
            # Equal literals key alike; only unequal ones (which may still key alike: 1 and 1.0) need keys.
            if (old.steps, old.constraint) != (gate.steps, gate.constraint):
                causes += [
                    _field_cause(name, old, gate, places)
                    for name, before, after in zip(IDENTITY, _keys(old), _keys(gate), strict=True)
                    if before != after
                ]
            for cause in causes:
                key = (cause.field, cause.kind, cause.old_source, cause.new_source)
                groups.setdefault(key, (cause, []))[1].append(Rekeyed(old, gate))
    removed = [g for t in before.tests.values() for g in t.gates if (g.test, g.metric) not in matched]
    ordered = sorted(groups.values(), key=lambda item: (item[0].location, item[0].dotted, item[0].kind))
    return TreeDiff(
        causes=tuple(
            (cause, tuple(sorted(group, key=lambda r: (r.new.test, r.new.metric))))
            for cause, group in ordered
        ),
        added=tuple(sorted(added, key=lambda g: (g.test, g.metric))),
        removed=tuple(sorted(removed, key=lambda g: (g.test, g.metric))),
        uncompared=tuple(sorted(uncompared, key=lambda g: (g.test, g.metric))),
    )


class _Places:
    """Repository-relative paths for both trees, and the working tree's files with their positions."""

    def __init__(self, rev_prefix: str, top: Path) -> None:
        self.rev_prefix = rev_prefix
        self.top = top
        self.docs: dict[str, LoadedDoc] = {}
        self.known: dict[str, str] = {}  # a default's file is every inheritor's source: resolve it once

    def of(self, shown: str) -> str:
        if shown.startswith(self.rev_prefix):
            return shown[len(self.rev_prefix) :]
        if shown not in self.known:
            try:
                self.known[shown] = Path(shown).resolve().relative_to(self.top).as_posix()
            except ValueError:
                self.known[shown] = shown
        return self.known[shown]

    def doc(self, shown: str) -> LoadedDoc:
        if shown not in self.docs:
            self.docs[shown] = read_yaml(Path(shown), shown)
        return self.docs[shown]


def _keys(gate: ResolvedGate) -> tuple[str, str]:
    """The gate's identity literals in IDENTITY order; each is canonical JSON, computed once here."""
    return gate.steps_key, gate.constraint_key


def _split(source: str) -> str:
    """The file of a `path:line` source."""
    return source.rpartition(":")[0]


def _field_cause(name: str, old: ResolvedGate, new: ResolvedGate, places: _Places) -> Cause:
    old_source, new_source = old.sources[name], new.sources[name]
    old_place, new_place = places.of(_split(old_source)), places.of(_split(new_source))
    old_base, new_base = is_base_file(Path(old_place)), is_base_file(Path(new_place))
    kind: CauseKind
    if old_place == new_place:
        kind = "changed"
    elif old_base and not new_base:
        kind = "now-written"
    elif new_base and not old_base:
        kind = "no-longer-written"
    else:
        kind = "moved"
    prefix = ("defaults" if new_base else "gates", new.metric)
    doc = places.doc(_split(new_source))
    changes = tuple(
        Change(d, doc.location(path, key=True), dotted(path))
        for d in differences(old.steps_key, old.constraint_key, new)
        if d.field.split(".")[0] == name
        for path in [(*prefix, *d.field.split("."))]
    )
    if kind == "no-longer-written":
        # The line that stopped writing it is gone; the gate's own line is where the edit was.
        location, where = Location(new.file, new.line), dotted(("gates", new.metric, name))
    else:
        location, where = changes[0].location, dotted((*prefix, name))
    return Cause(name, kind, old_source, new_source, location, where, changes)


def _renamed(old_test: str, new_test: str, old_file: str, new_file: str, places: _Places) -> Cause:
    location = places.doc(new_file).location(("test",))
    change = Change(Difference("test", old_test, new_test), location, "test")
    return Cause("test", "renamed", old_file, f"{new_file}:{location.line}", location, "test", (change,))


def stored_under(
    gate: ResolvedGate, stored: Sequence[CoordinateSummary], series: str | None = None
) -> list[CoordinateSummary]:
    """The stored coordinates of `gate`'s key: one per series, or only `series` when given."""
    return [
        s
        for s in stored
        if (s.spec.test, s.spec.metric, s.spec.steps_key, s.spec.constraint_key)
        == (gate.test, gate.metric, gate.steps_key, gate.constraint_key)
        and (series is None or s.spec.series_key == series)
    ]
