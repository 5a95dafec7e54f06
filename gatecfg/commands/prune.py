"""`gatecfg prune --orphaned`: the stored coordinates no declaration in the gate tree uses any more.

A coordinate is used when a declared gate has its key (test, metric, steps, constraint; in any series, since
labels come from the CI job, not the tree), or when a used coordinate continues its history through an
active carry. The rest are listed, and deleted only with `--yes` and without `--dry-run`, in one
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.resolve import GateTree, ResolvedGate, display_path, load_tree
from gatecfg.store import CoordinateSummary, Store
from gatecfg.store.links import Carry

Key = tuple[str, str, str, str]  # test, metric, steps_key, constraint_key


def prune_command(*, gates: Path, db: str, dry_run: bool, yes: bool) -> int:
    tree = load_tree(gates)
    if tree.problems:
        raise InputError(tree.problems)
    if not tree.tests:
        raise InputError.at(
            Location(display_path(gates)),
            "no gate file here declares a test, so every stored coordinate would look orphaned",
            hint="pass --gates DIR with the gate tree whose history this store holds",
        )
    with Store.open(db) as store:
        orphans = orphaned(store.summaries(), tree, store.carries(active_only=True))
        if not orphans:
            print(f"no orphaned coordinates: every coordinate in {store.url} is declared under {gates}/")
            return EXIT_OK
        print(_listing(orphans, tree))
        values = sum(s.n_values for s in orphans)
        count = f"{len(orphans)} orphaned coordinate(s) holding {values} value(s)"
        if dry_run or not yes:
            why = "--dry-run" if dry_run else "pass --yes to delete them"
            print(f"{count}; nothing deleted ({why})")
            return EXIT_OK
        deleted = store.prune({s.spec.coordinate: s.n_values for s in orphans})
    print(f"deleted {count} ({deleted} values) from {store.url}")
    return EXIT_OK


def orphaned(
    stored: Sequence[CoordinateSummary], tree: GateTree, carries: Sequence[Carry]
) -> list[CoordinateSummary]:
    """Stored coordinates that no declared gate uses, directly or through active carries."""
    declared = {_key(g) for t in tree.tests.values() for g in t.gates}
    used = {s.spec.coordinate for s in stored if _spec_key(s) in declared}
    # A carry's new coordinate may not be stored yet (no run since the carry): its key decides.
    used |= {c.coordinate for c in carries if (c.test, c.metric, c.steps_key, c.constraint_key) in declared}
    reads: dict[str, list[str]] = {}
    for c in carries:
        reads.setdefault(c.coordinate, []).append(c.from_coordinate)
    queue = list(used)
    while queue:
        for source in reads.get(queue.pop(), ()):
            if source not in used:
                used.add(source)
                queue.append(source)
    return sorted(
        (s for s in stored if s.spec.coordinate not in used),
        key=lambda s: (
            s.spec.test,
            s.spec.metric,
            s.spec.series_key,
            s.spec.steps_key,
            s.spec.constraint_key,
        ),
    )


def _key(gate: ResolvedGate) -> Key:
    return (gate.test, gate.metric, gate.steps_key, gate.constraint_key)


def _spec_key(s: CoordinateSummary) -> Key:
    return (s.spec.test, s.spec.metric, s.spec.steps_key, s.spec.constraint_key)


def _why(s: CoordinateSummary, tree: GateTree) -> str:
    test = tree.tests.get(s.spec.test)
    if test is None:
        return "no gate file declares this test"
    gate = test.gate(s.spec.metric)
    if gate is None:
        return f"{test.file} does not declare this metric"
    return (
        f"re-keyed: {gate.file}:{gate.line} declares steps {gate.steps_key}, constraint {gate.constraint_key}"
    )


def _listing(orphans: Sequence[CoordinateSummary], tree: GateTree) -> str:
    """Orphans by test and metric: each with its key, its history, its last write, and why it is orphaned."""
    lines = ["orphaned coordinates (no declaration under the gates folder uses them):"]
    for test, group in groupby(orphans, key=lambda s: s.spec.test):
        lines.append(f"  {test}")
        for s in group:
            labels = json.loads(s.spec.series_key).get("labels") or {}
            shown = f" [{', '.join(f'{k}={v}' for k, v in sorted(labels.items()))}]" if labels else ""
            written = f"{s.last_written:%Y-%m-%d %H:%M}" if s.last_written else "never"
            lines += [
                f"    {s.spec.metric}{shown}: steps {s.spec.steps_key}, constraint {s.spec.constraint_key}",
                f"      {s.spec.coordinate} · {s.n_values} values ({s.n_trusted_values} trusted) "
                f"in {s.n_runs} runs · last written {written}",
                f"      {_why(s, tree)}",
            ]
    return "\n".join(lines)
