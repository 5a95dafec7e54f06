"""`gatecfg history`: stored values of a metric, newest first, with trust and the band they were judged by."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gatecfg.band import Band, fmt, near
from gatecfg.commands.shifts import describe
from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import terminal
from gatecfg.keys import series_key
from gatecfg.membership import mark
from gatecfg.store import HistoryRow, Store
from gatecfg.store.links import Carry
from gatecfg.terminal import TextReport
from gatecfg.wording import did_you_mean, plural

LISTED = 10  # stored names a hint lists when none is near


def history(
    *,
    db: str,
    test: str,
    metric: str,
    step: int | None,
    labels: Mapping[str, str] | None,
    limit: int | None,
    fmt_name: str,
) -> int:
    series = series_key(test, labels) if labels is not None else None
    with Store.open(db) as store:
        rows = store.history(test=test, metric=metric, step=step, series_key=series, limit=limit)
        if not rows:
            _check_names(store, test, metric)
        carries = [c for c in store.carries(test=test, metric=metric) if series in (None, c.series_key)]
        shifted = [
            s
            for s in store.shifts(test=test, active=False)
            if s.metric == metric and series in (None, s.series_key)
        ]
    if fmt_name == "json":
        into: dict[str, list[str]] = {}
        for c in carries:
            if c.active:
                into.setdefault(c.from_coordinate, []).append(c.coordinate)
        print(
            json.dumps(
                [{**_json(r), "carried_into": into.get(r.coordinate.coordinate, [])} for r in rows], indent=2
            )
        )
        return EXIT_OK
    if not rows:
        where = f" at step {step}" if step is not None else ""
        print(f"no stored values for {metric}{where} of {test} in {store.url}")
    else:
        print(_table(rows, limit))
    if carries:
        print(_carries(carries))
    if shifted:
        lines = [
            "accepted shifts (`gatecfg shifts`): the baseline of the key starts at the shift's first run"
        ]
        print("\n".join(lines + [f"  {describe(s)}" for s in shifted]))
    return EXIT_OK


def _check_names(store: Store, test: str, metric: str) -> None:
    """Exit 2 when the test or the metric is not in the store, naming the stored ones near it (a typo
    must not read as "no values yet"); a stored metric with no values in this series or step passes."""
    metrics = store.metrics(test=test)
    if metric in metrics:
        return
    if metrics:
        raise InputError.at(
            "--metric",
            terminal(f"no stored values of {metric} for test {test} in {store.url}"),
            hint=did_you_mean(metric, metrics, n=3) or f"stored for the test: {_listed(metrics)}",
        )
    tests = store.tests()
    raise InputError.at(
        "--test",
        terminal(f"no stored run of test {test} in {store.url}"),
        hint=did_you_mean(test, tests, n=3)
        or (
            f"stored tests: {_listed(tests)}"
            if tests
            else "the store holds no run yet: `gatecfg evaluate --write` stores a nightly"
        ),
    )


def _listed(names: list[str]) -> str:
    """Up to `LISTED` names, then how many more."""
    more = len(names) - LISTED
    return ", ".join(names[:LISTED]) + (f" and {plural(more, 'more', 'more')}" if more > 0 else "")


def _carries(carries: list[Carry]) -> str:
    """Carried history, newest first: which key reads which, since when, on what commit, and why."""
    lines = ["carried history (`gatecfg carry`): the first key's baselines also read the second's values"]
    for c in carries:
        state = "" if c.active else f" · UNDONE {c.undone_at:%Y-%m-%d %H:%M}" if c.undone_at else ""
        lines.append(
            f"  {c.created_at:%Y-%m-%d %H:%M}  {c.coordinate} continues {c.from_coordinate}{state}\n"
            f"    constraint {c.from_constraint_key} -> {c.constraint_key} · commit {(c.commit or '-')[:10]}"
            f" · reason: {c.reason}"
        )
        if c.undo_reason:
            lines.append(f"    undone because: {c.undo_reason}")
    return "\n".join(lines)


def _json(row: HistoryRow) -> dict[str, Any]:
    p = row.point
    return {
        "run_id": row.run_id,
        "commit": row.commit,
        "branch": row.branch,
        "created_at": row.created_at.isoformat(),
        "trusted": row.trusted,
        "gate_trusted": row.gate_trusted,
        "trust_override": row.trust_override,
        # The value as its gate's baseline reads it (gatecfg.membership): in or out, and why.
        "in_baseline": row.standing().joins,
        "baseline_reason": row.standing().why,
        "coordinate": row.coordinate.coordinate,
        "steps_key": row.coordinate.steps_key,
        "constraint_key": row.coordinate.constraint_key,
        "series_key": row.coordinate.series_key,
        "step": p.step,
        "value": None if p.value != p.value else p.value,  # NaN is not JSON
        "status": p.status,
        "ref": p.ref,
        "lo": p.lo,
        "hi": p.hi,
        "sd": p.sd,
    }


# What a row's value is shown against: its reference, where its rule gave one its spread, and the edges
# it was judged against (a budget gate's: where the step fails alone), in one column so that the table
# fits 80 columns without folding a word.
VERSUS = "value vs ref ± sd [edges]"
COMMIT_CHARS = 7  # git's short form


def _table(rows: list[HistoryRow], limit: int | None) -> str:
    coordinates = sorted({row.coordinate.coordinate for row in rows})
    # One coordinate (the usual case: one test, metric and step) is named once above the table.
    several = len(coordinates) > 1
    table: list[list[str]] = []
    for row in rows:
        p = row.point
        trust = mark(row.standing())
        band = _band(p.ref, p.lo, p.hi, p.sd)
        table.append(
            [
                row.created_at.strftime("%Y-%m-%d"),  # the time is in --format json
                row.run_id,
                (row.commit or "-")[:COMMIT_CHARS],
                trust,
                *([row.coordinate.coordinate] if several else []),
                "last" if p.step == -1 else str(p.step),
                p.status,
                versus(p.value, p.ref, p.sd) + ("" if band == "-" else f" {band}"),
            ]
        )
    out = TextReport()
    if not several:
        out.line(f"coordinate {coordinates[0]}")
    columns = ("written", "run", "commit", "baseline", *(["coordinate"] if several else []), "step", "status")
    out.table((*columns, VERSUS), table)
    if limit is not None and len(rows) == limit:
        out.line(f"showing the newest {limit} values; --limit 0 shows all, --step S narrows to one step")
    return out.text().rstrip()


def versus(value: float, ref: float | None, sd: float | None) -> str:
    """A stored value against its reference and spread as the evaluate report reads it (`2.503 vs 2.082
    ± 0.022`, to the decimals the spread makes meaningful); without a spread (a band gate, or a value
    stored before revision 0007) `2.503 vs 2.082`; without history the value alone."""
    if ref is None:
        return fmt(value)
    if sd is None:
        return f"{fmt(value)} vs {fmt(ref)}"
    return f"{near(value, sd)} vs {near(ref, sd)} ± {near(sd, sd)}"


def _band(ref: float | None, lo: float | None, hi: float | None, sd: float | None) -> str:
    """The edges the value was judged against (a budget gate's: where the step fails alone)."""
    if ref is None:
        return "-"
    if sd is None:
        return Band(ref, 0, lo, hi).interval()
    return f"[{'-inf' if lo is None else near(lo, sd)},{'inf' if hi is None else near(hi, sd)}]"
