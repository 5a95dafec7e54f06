"""`gatecfg compare RUN_A RUN_B` (or `RUN_A --record FILE`): two runs of one test side by side, a row per
gate (`--steps`: per step), each value with its spread, the change between them and the change in spread,
the way `asv compare` reads two commits (docs/analytics.md#compare).

A gate's value is the mean over the steps both runs hold; a step's spread is the `sd` stored with it
(a budget gate's night-to-night spread, as `history` shows `value vs ref ± sd`), else the sample standard
deviation of the baseline window it was judged against: the newest `policy.window` values before it that
joined the baseline (gatecfg.membership); a gate's spread is the mean of its steps'."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatecfg.band import fmt, near
from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import terminal
from gatecfg.membership import Baseline, Facts, joining
from gatecfg.moments import mean, stdev
from gatecfg.provenance import check_name
from gatecfg.records import read_metrics
from gatecfg.report.labels import series_text
from gatecfg.resolve import ResolvedTest, load_tree
from gatecfg.select import select
from gatecfg.store import HistoryRow, RunRow, Store
from gatecfg.terminal import TextReport
from gatecfg.wording import did_you_mean, plural

COMMIT_CHARS = 7

Quantity = tuple[str, str]  # (metric, steps_key): what pairs a gate of one run with the other's


@dataclass(frozen=True)
class Step:
    """One step's value in one run, and its spread (None: fewer than two window values and no sd)."""

    value: float
    spread: float | None
    spread_from: str | None  # "sd" (stored with the value) or "window" (the baseline window's)


@dataclass(frozen=True)
class Side:
    """What one run holds of a gate: a value per step (finite values only)."""

    steps: dict[int, Step]


@dataclass(frozen=True)
class Compared:
    """A gate (step None) or one of its steps: each run's value and spread, where it has one."""

    metric: str
    steps_key: str
    step: int | None
    a: Step | None
    b: Step | None
    n_steps: int  # the steps a gate's row averages over (1 for a step's row)

    @property
    def change(self) -> float | None:
        return None if self.a is None or self.b is None else self.b.value - self.a.value

    @property
    def change_pct(self) -> float | None:
        change = self.change
        if change is None or self.a is None or self.a.value == 0:
            return None
        return 100.0 * change / abs(self.a.value)

    @property
    def spread_change(self) -> float | None:
        if self.a is None or self.b is None or self.a.spread is None or self.b.spread is None:
            return None
        return self.b.spread - self.a.spread


def compare(
    *,
    gates: Path,
    db: str,
    run_a: str,
    run_b: str | None,
    records: Sequence[Path],
    per_step: bool,
    fmt_name: str,
) -> int:
    """The CLI guarantees `run_b` or `records`, never both."""
    with Store.open(db) as store:
        first = _stored_run(store, run_a, "RUN_A")
        second = None if run_b is None else _stored_run(store, run_b, "RUN_B")
        test = first.run.test
        if second is not None and second.run.test != test:
            raise InputError.at(
                "RUN_B",
                terminal(f"run {run_b} is a run of test {second.run.test}, run {run_a} of test {test}"),
                hint="compare two runs of one test: `gatecfg history --test T --metric M` lists them",
            )
        resolved = load_tree(gates).test(test)
        policy = resolved.policy
        # Only the two runs' series: a coordinate (and its window) lies within one series.
        series = sorted({r.run.series_key for r in (first, second) if r is not None})
        history = {
            m: [row for key in series for row in store.history(test=test, metric=m, series_key=key)]
            for m in store.metrics(test=test)
        }
    window, baseline = policy.window, policy.baseline
    a = _stored_side(history, first, window=window, baseline=baseline)
    if second is not None:
        b = _stored_side(history, second, window=window, baseline=baseline)
    else:
        b = _record_side(resolved, records, history, first.run.series_key, window=window, baseline=baseline)
    rows = _compared(a, b, per_step=per_step or fmt_name == "json")  # JSON always lists the steps
    if fmt_name == "json":
        print(json.dumps(_json(test, first, second, records, rows), indent=2))
        return EXIT_OK
    print(_text(test, first, second, records, rows))
    return EXIT_OK


def _stored_run(store: Store, run_id: str, flag: str) -> RunRow:
    """The stored run `run_id`, or exit 2 naming the stored run ids near it (or what makes it no run id:
    a control character, a length no run id has)."""
    check_name(run_id, flag)
    found = store.runs_by_id([run_id]).get(run_id)
    if found is not None:
        return found
    ids = [r.run.run_id for r in store.runs()]
    raise InputError.at(
        flag,
        terminal(f"no stored run has run id {run_id} ({store.url})"),
        hint=did_you_mean(run_id, ids, n=3)
        or f"{plural(len(ids), 'stored run')}; `gatecfg history --test T --metric M` lists them",
    )


def _window_spread(older: Sequence[HistoryRow], baseline: Baseline, window: int) -> float | None:
    """The sample standard deviation of the baseline window the newest-first `older` rows give."""
    # A step's window: its newest `window` finite values among the rows that join (gatecfg.membership).
    joined = (r.point.value for r in joining(older, _facts, baseline) if math.isfinite(r.point.value))
    values = list(itertools.islice(joined, window))
    return stdev(values) if len(values) >= 2 else None


def _facts(row: HistoryRow) -> Facts:
    return row.facts


def _step(
    value: float, sd: float | None, older: Sequence[HistoryRow], window: int, baseline: Baseline
) -> Step:
    if sd is not None:
        return Step(value, sd, "sd")
    spread = _window_spread(older, baseline, window)
    return Step(value, spread, None if spread is None else "window")


def _stored_side(
    history: dict[str, list[HistoryRow]], run: RunRow, *, window: int, baseline: Baseline
) -> dict[Quantity, Side]:
    """Each gate of a stored run: its finite values, with the spread each was judged with."""
    sides: dict[Quantity, Side] = {}
    for rows in history.values():
        by_cell: dict[tuple[str, int], list[HistoryRow]] = {}
        for row in rows:  # newest first
            by_cell.setdefault((row.coordinate.coordinate, row.point.step), []).append(row)
        for cell in by_cell.values():
            at = next((i for i, r in enumerate(cell) if r.run_id == run.run.run_id), None)
            if at is None or not math.isfinite(cell[at].point.value):
                continue
            mine = cell[at]
            quantity = (mine.coordinate.metric, mine.coordinate.steps_key)
            side = sides.setdefault(quantity, Side({}))
            side.steps[mine.point.step] = _step(
                mine.point.value, mine.point.sd, cell[at + 1 :], window, baseline
            )
    return sides


def _record_side(
    resolved: ResolvedTest,
    records: Sequence[Path],
    history: dict[str, list[HistoryRow]],
    series: str,
    *,
    window: int,
    baseline: Baseline,
) -> dict[Quantity, Side]:
    """Each gate of the record, selected as evaluate selects it, in the stored run's series: its spread
    is the window the store would judge it against now."""
    record = read_metrics(records)
    sides: dict[Quantity, Side] = {}
    for gate in resolved.gates:
        coordinate = gate.coordinate(series)
        stored: dict[int, list[HistoryRow]] = {}
        for row in history.get(gate.metric, []):
            if row.coordinate.coordinate == coordinate:
                stored.setdefault(row.point.step, []).append(row)
        selection = select(record, gate.metric, gate.steps, gated=gate.gated)
        steps = {
            s: _step(v, None, stored.get(s, []), window, baseline)
            for s, v in zip(selection.steps, selection.values, strict=True)
            if v is not None
        }
        if steps:
            sides[gate.metric, gate.steps_key] = Side(steps)
    return sides


def _compared(a: dict[Quantity, Side], b: dict[Quantity, Side], *, per_step: bool) -> list[Compared]:
    """A row per gate of either run (by metric), then with `per_step` a row per step under it."""
    rows: list[Compared] = []
    for metric, steps_key in sorted(a.keys() | b.keys()):
        one = a.get((metric, steps_key), Side({})).steps
        other = b.get((metric, steps_key), Side({})).steps
        both = sorted(one.keys() & other.keys())
        n = len(both) or max(len(one), len(other))
        rows.append(Compared(metric, steps_key, None, _whole(one, both), _whole(other, both), n))
        if per_step:
            for s in sorted(one.keys() | other.keys()):
                rows.append(Compared(metric, steps_key, s, one.get(s), other.get(s), 1))
    return rows


def _whole(side: dict[int, Step], both: list[int]) -> Step | None:
    """A gate's value over the steps both runs hold (all of its own when they share none)."""
    if not side:
        return None
    steps = [side[s] for s in (both or sorted(side))]
    spreads = [s.spread for s in steps if s.spread is not None]
    sources = {s.spread_from for s in steps if s.spread_from is not None}
    return Step(
        mean([s.value for s in steps]),
        mean(spreads) if spreads else None,
        sources.pop() if len(sources) == 1 else ("mixed" if sources else None),
    )


def _run_json(run: RunRow) -> dict[str, Any]:
    return {
        "run_id": run.run.run_id,
        "commit": run.run.commit,
        "created_at": run.run.created_at.isoformat(),
        "series": dict(run.run.labels),
    }


def _step_json(step: Step | None) -> dict[str, Any] | None:
    if step is None:
        return None
    return {"value": step.value, "spread": step.spread, "spread_from": step.spread_from}


def _json(
    test: str, first: RunRow, second: RunRow | None, records: Sequence[Path], rows: list[Compared]
) -> dict[str, Any]:
    gates: list[dict[str, Any]] = []
    for r in rows:
        item = {
            "a": _step_json(r.a),
            "b": _step_json(r.b),
            "change": r.change,
            "change_pct": r.change_pct,
            "spread_change": r.spread_change,
        }
        if r.step is None:
            gates.append(
                {"metric": r.metric, "steps_key": r.steps_key, "n_steps": r.n_steps, **item, "steps": []}
            )
        else:
            gates[-1]["steps"].append({"step": r.step, **item})
    b = _run_json(second) if second is not None else {"records": [str(p) for p in records]}
    return {"test": test, "a": _run_json(first), "b": b, "gates": gates}


def _shown(step: Step | None) -> str:
    if step is None:
        return "-"
    if step.spread is None:
        return fmt(step.value)
    return f"{near(step.value, step.spread)} ± {near(step.spread, step.spread)}"


def _change(r: Compared) -> str:
    change, pct = r.change, r.change_pct
    if change is None:
        return "-"
    spread = min((s.spread for s in (r.a, r.b) if s is not None and s.spread), default=0.0)
    text = f"{'+' if change >= 0 else ''}{near(change, spread)}"
    return text + ("" if pct is None else f" ({pct:+.1f}%)")


def _spread_change(r: Compared) -> str:
    change = r.spread_change
    if change is None or r.a is None or r.a.spread is None:
        return "-"
    ratio = (
        "" if r.a.spread == 0 or r.b is None or r.b.spread is None else f" (x{r.b.spread / r.a.spread:.2f})"
    )
    return f"{change:+.3g}{ratio}"


def _about(run: RunRow) -> str:
    labels = series_text(run.run.labels)
    return terminal(
        f"run {run.run.run_id} (commit {(run.run.commit or '-')[:COMMIT_CHARS]}, "
        f"{run.run.created_at:%Y-%m-%d %H:%M} UTC{', ' + labels if labels else ''})"
    )


def _text(
    test: str,
    first: RunRow,
    second: RunRow | None,
    records: Sequence[Path],
    rows: list[Compared],
) -> str:
    out = TextReport()
    out.line(terminal(f"compare {test}"))
    out.line(f"  a: {_about(first)}")
    given = terminal("record " + ", ".join(map(str, records)))
    out.line(f"  b: {_about(second) if second is not None else given}")
    if not rows:
        out.line("no gate holds a finite value in either run")
        return out.text().rstrip()
    table = [
        [
            terminal(r.metric) if r.step is None else "",
            plural(r.n_steps, "step") if r.step is None else ("last" if r.step == -1 else str(r.step)),
            _shown(r.a),
            _shown(r.b),
            _change(r),
            _spread_change(r),
        ]
        for r in rows
    ]
    out.table(("gate", "steps", "a ± spread", "b ± spread", "change b - a", "spread change"), table)
    out.line(
        "a gate's value is the mean over the steps both runs hold; a spread is the stored sd, else the sd "
        "of the baseline window the value was judged against"
    )
    return out.text().rstrip()
