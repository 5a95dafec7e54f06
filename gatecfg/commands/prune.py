"""`gatecfg prune`: stored history nothing reads any more, listed, and deleted only with `--yes` (and
without `--dry-run`), in one transaction.

* `--orphaned`: the coordinates no declaration in the gate tree uses. A coordinate is used when a declared
  gate has its key (test, metric, steps, constraint; in any series, since labels come from the CI job, not
  the tree), or when a used coordinate continues its history through an active carry.
* `--keep N` (retention): per coordinate, the values of runs older than the newest N trusted values at
  each step (store/retention.py says exactly what stays). N below a declared `window` is refused: those
  values are still read by a baseline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.gate_files import display_path
from gatecfg.report.labels import series_text
from gatecfg.resolve import GateTree, ResolvedGate, load_tree
from gatecfg.store import CoordinateSummary, Store
from gatecfg.store.links import Carry
from gatecfg.store.retention import Retained
from gatecfg.wording import plural

Key = tuple[str, str, str, str]  # test, metric, steps_key, constraint_key


def prune_command(*, gates: Path, db: str, dry_run: bool, yes: bool) -> int:
    tree = _declaring(gates, "every stored coordinate would look orphaned")
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
    print(f"deleted {count} ({plural(deleted, 'value')}) from {store.url}")
    return EXIT_OK


def keep_command(*, gates: Path, db: str, keep: int, dry_run: bool, yes: bool) -> int:
    tree = _declaring(gates, f"--keep {keep} cannot be checked against the baseline windows it declares")
    _check_windows(tree, keep)
    with Store.open(db) as store:
        planned = store.retention_plan(keep)
        if not planned:
            print(
                f"nothing to prune: no coordinate in {store.url} holds more than {keep} trusted values a step"
            )
            return EXIT_OK
        print(_retention_listing(planned, keep))
        if dry_run or not yes:
            why = "--dry-run" if dry_run else "pass --yes to delete them"
            print(f"{_retention_count(planned)}; nothing deleted ({why})")
            return EXIT_OK
        done, deleted = store.retain(keep)
    print(f"deleted {_retention_count(done)} ({plural(deleted, 'value')}) from {store.url}")
    return EXIT_OK


def _declaring(gates: Path, otherwise: str) -> GateTree:
    tree = load_tree(gates)
    if tree.problems:
        raise InputError(tree.problems)
    if not tree.tests:
        raise InputError.at(
            Location(display_path(gates)),
            f"no gate file here declares a test, so {otherwise}",
            hint="pass --gates DIR with the gate tree whose history this store holds",
        )
    return tree


def _check_windows(tree: GateTree, keep: int) -> None:
    """Refuse a --keep that would delete values some declared baseline window still reads."""
    test = max(tree.tests.values(), key=lambda t: t.policy.window)
    if keep < test.policy.window:
        where = test.policy.sources.get("window") or test.file
        raise InputError.at(
            Location(where),
            f"--keep {keep} would delete values that the baseline of {test.test} still reads "
            f"(window {test.policy.window}): nothing deleted",
            dotted="policy.window",
            hint=f"pass --keep {test.policy.window} or more (a few more than the window leave room to "
            "untrust a run by hand)",
        )


def _retention_count(planned: Sequence[Retained]) -> str:
    runs = len({run_pk for r in planned for run_pk in r.doomed})
    values = sum(r.values_doomed for r in planned)
    return f"{values} value(s) of {runs} run(s) at {len(planned)} coordinate(s)"


def _retention_listing(planned: Sequence[Retained], keep: int) -> str:
    """What goes, by test and metric: per coordinate, what stays and what goes."""
    lines = [
        f"values older than the newest {keep} trusted values at each step (kept: run records, newer runs):"
    ]
    ordered = sorted(planned, key=lambda r: (r.spec.test, r.spec.metric, r.spec.series_key, r.spec.steps_key))
    for test, group in groupby(ordered, key=lambda r: r.spec.test):
        lines.append(f"  {test}")
        for r in group:
            labels = json.loads(r.spec.series_key).get("labels") or {}
            shown = f" [{series_text(labels)}]" if labels else ""
            lines += [
                f"    {r.spec.metric}{shown}: steps {r.spec.steps_key}, constraint {r.spec.constraint_key}",
                f"      {r.spec.coordinate} · deletes {plural(r.values_doomed, 'value')} of "
                f"{plural(len(r.doomed), 'run')} · keeps {plural(r.values_kept, 'value')} of "
                f"{plural(r.runs_kept, 'run')}",
            ]
    return "\n".join(lines)


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
            shown = f" [{series_text(labels)}]" if labels else ""
            written = f"{s.last_written:%Y-%m-%d %H:%M}" if s.last_written else "never"
            lines += [
                f"    {s.spec.metric}{shown}: steps {s.spec.steps_key}, constraint {s.spec.constraint_key}",
                f"      {s.spec.coordinate} · {plural(s.n_values, 'value')} ({s.n_trusted_values} trusted) "
                f"in {plural(s.n_runs, 'run')} · last written {written}",
                f"      {_why(s, tree)}",
            ]
    return "\n".join(lines)
