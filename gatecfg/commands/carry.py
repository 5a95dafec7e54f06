"""`gatecfg carry`: after a constraint-only re-key, the new keys continue the history of the old ones.

Values stored under a gate's old key measured the same quantity the new key measures when only the band
changed, so the new key's baselines may read them (same window, same trust rules). A `steps` change is
refused: step -1 (`last`, the last logged point) and a value per logged step are different quantities. So
is a renamed test: the series is what keeps one test's values out of another test's baseline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from gatecfg.errors import EXIT_OK, InputError, Location, Problem
from gatecfg.gitrev import Comparison, commit_of, diff_against, head_commit
from gatecfg.keys import series_key
from gatecfg.rekey import Rekeyed, stored_under
from gatecfg.report.labels import series_text
from gatecfg.store import CoordinateSummary, Store
from gatecfg.store.links import Carry


def carry_command(
    *,
    base: str,
    gates: Path,
    db: str,
    test: str | None,
    metric: str | None,
    labels: Mapping[str, str] | None,
    reason: str,
    commit: str | None,
    dry_run: bool = False,
) -> int:
    if not reason.strip():
        raise InputError.at("--reason", "the reason is empty", hint="say why the old history still holds")
    comparison = diff_against(base, gates)
    selected = _selected(comparison, test, metric)
    if not selected:
        print(
            f"nothing to carry: no{_scope(test, metric)} gate changes key between {base} and the working tree"
        )
        return EXIT_OK
    refused = [_refusal(comparison, r) for r in selected if not r.carriable]
    if refused:
        raise InputError(refused)
    base_commit = commit_of(base, gates)
    commit = commit or head_commit(gates)  # the commit the carry is made on
    with Store.open(db) as store:
        summaries = store.summaries(tests=sorted({r.old.test for r in selected}))
        items, empty = _carries(
            selected, summaries, labels, reason=reason.strip(), commit=commit, base_commit=base_commit
        )
        if dry_run:
            active = {(c.coordinate, c.from_coordinate) for c in store.carries(active_only=True)}
            created = [(item.coordinate, item.from_coordinate) not in active for item in items]
        else:
            created = store.carry(items) if items else []
    _print_carries(items, created, summaries, dry_run=dry_run)
    for r in empty:
        print(f"nothing stored under the old key of {r.new.test}: {r.new.metric}: no history to carry")
    if dry_run:
        print(
            f"dry run: {sum(created)} carry(ies) would be recorded in {store.url}; nothing was written "
            "(run it again without --dry-run to record them)"
        )
    elif any(created):
        print(
            f"{sum(created)} carry(ies) recorded with reason {reason.strip()!r} "
            f"at commit {commit or 'unknown'} in {store.url}\n"
            f"undo with: gatecfg carry --undo --base {base}"
            + (f" --test {test}" if test else "")
            + (f" --metric {metric}" if metric else "")
        )
    elif items:
        print("nothing new recorded: every carry was already active (`gatecfg history` shows when and why)")
    return EXIT_OK


def _carries(
    selected: Sequence[Rekeyed],
    summaries: Sequence[CoordinateSummary],
    labels: Mapping[str, str] | None,
    *,
    reason: str,
    commit: str | None,
    base_commit: str | None,
) -> tuple[list[Carry], list[Rekeyed]]:
    """A carry per stored coordinate under each re-keyed gate's old key, and the gates with none."""
    now = datetime.now(UTC)
    items: list[Carry] = []
    empty: list[Rekeyed] = []
    for r in selected:
        found = stored_under(r.old, summaries, series_key(r.old.test, labels) if labels else None)
        if not found:
            empty.append(r)
        items += [
            Carry(
                coordinate=r.new.coordinate(s.spec.series_key),
                from_coordinate=s.spec.coordinate,
                series_key=s.spec.series_key,
                test=r.new.test,
                metric=r.new.metric,
                steps_key=r.new.steps_key,
                constraint_key=r.new.constraint_key,
                from_constraint_key=r.old.constraint_key,
                reason=reason,
                commit=commit,
                base_commit=base_commit,
                created_at=now,
            )
            for s in found
        ]
    return items, empty


def _print_carries(
    items: Sequence[Carry], created: Sequence[bool], summaries: Sequence[CoordinateSummary], *, dry_run: bool
) -> None:
    values = {s.spec.coordinate: s for s in summaries}
    for item, new in zip(items, created, strict=True):
        held = values[item.from_coordinate]
        state = "already carried" if not new else "would carry" if dry_run else "carried"
        print(
            f"{state}: {item.test}: {item.metric}{_labels(item.series_key)}\n"
            f"  {item.coordinate} continues {item.from_coordinate}: {held.n_values} stored values "
            f"({held.n_trusted_values} trusted)\n"
            f"  constraint {item.from_constraint_key} -> {item.constraint_key}"
        )


def undo_command(
    *,
    base: str | None,
    gates: Path,
    db: str,
    test: str | None,
    metric: str | None,
    labels: Mapping[str, str] | None,
    reason: str | None,
    dry_run: bool = False,
) -> int:
    """Undo the carries that `carry` with the same options made, or (without --base) every active carry
    into the gates of --test [--metric]. The carries stay on record, marked undone."""
    if base is None and test is None:
        raise InputError.at(
            "--undo",
            "say which carries to undo",
            hint="repeat the options of the carry (--base REV [--test T] [--metric M]), "
            "or pass --test T [--metric M] to undo every carry into that test's gates",
        )
    selected = _selected(diff_against(base, gates), test, metric) if base is not None else None
    with Store.open(db) as store:
        active = store.carries(test=test, metric=metric, active_only=True)
        if selected is not None:
            wanted = {
                (r.new.test, r.new.metric, r.new.constraint_key, r.old.constraint_key) for r in selected
            }
            active = [
                c for c in active if (c.test, c.metric, c.constraint_key, c.from_constraint_key) in wanted
            ]
        if labels:
            active = [c for c in active if c.series_key == series_key(c.test, labels)]
        pairs = [(c.coordinate, c.from_coordinate) for c in active]
        undone = len(pairs) if dry_run else store.undo_carries(pairs, reason=reason)
    if not undone:
        print(f"no active carry matches: nothing undone (store {store.url})")
        return EXIT_OK
    for c in active:
        print(
            f"{'would undo' if dry_run else 'undone'}: {c.test}: {c.metric}{_labels(c.series_key)}: "
            f"{c.coordinate} no longer reads {c.from_coordinate}"
        )
    if dry_run:
        print(f"dry run: {undone} carry(ies) would be undone; nothing was written")
    else:
        print(f"{undone} carry(ies) undone; they stay on record (`gatecfg history` shows them)")
    return EXIT_OK


def _selected(comparison: Comparison, test: str | None, metric: str | None) -> list[Rekeyed]:
    """The re-keyed gates the options pick; a --test or --metric that names nothing declared is an error."""
    if test is not None:
        declared = comparison.after.test(test)  # raises for an unknown test, listing the known ones
        if metric is not None and declared.gate(metric) is None:
            raise InputError.at(
                Location(declared.file),
                f"`{metric}` is not declared for test `{test}`",
                dotted="gates",
                hint=f"declared there: {', '.join(g.metric for g in declared.gates)}",
            )
    elif metric is not None and not any(t.gate(metric) for t in comparison.after.tests.values()):
        raise InputError.at(
            "--metric", f"no gate declares `{metric}`", hint="`gatecfg resolve` lists the gates"
        )
    return [
        r
        for r in comparison.diff.rekeyed
        if (test is None or r.new.test == test) and (metric is None or r.new.metric == metric)
    ]


def _refusal(comparison: Comparison, r: Rekeyed) -> Problem:
    causes = [c for c in comparison.diff.causes_of(r) if c.field in ("steps", "test")]
    cause = causes[0]
    change = cause.changes[0].difference
    if cause.field == "test":
        why = (
            f"its test was renamed {change.shown()}: the series (the test and its labels) is what keeps one "
            "test's values out of another test's baseline, so history does not follow a rename"
        )
        hint = "keep the old `test:` name to keep the history, or accept the cold start"
    else:
        why = (
            f"its steps changed {change.shown()} ({cause.location}): values stored under one `steps` are "
            "not the quantity measured under another (step -1 of `last` is the last logged point, `all` "
            "and lists hold a value per logged step), so the old values cannot form the new baseline"
        )
        hint = (
            "accept the cold start (the gate gates again after `min_history` trusted nightlies) or revert "
            "the steps change; --test/--metric carry the constraint-only changes on their own"
        )
    return Problem(
        Location(r.new.file, r.new.line),
        f"cannot carry the history of {r.new.metric} ({r.new.test}): {why}",
        dotted=f"gates.{r.new.metric}",
        hint=hint,
    )


def _scope(test: str | None, metric: str | None) -> str:
    parts = [f" `{metric}`" if metric else "", f" of `{test}`" if test else ""]
    return "".join(parts)


def _labels(series: str) -> str:
    """` [hardware=h100]` for a labelled series, nothing for the plain one."""
    labels = json.loads(series).get("labels") or {}
    return f" [{series_text(labels)}]" if labels else ""
