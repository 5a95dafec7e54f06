"""Imported runs keyed through the test's gate file, with the verdicts `evaluate --write` would have stored.

Each gate selects its values from an imported run exactly as `evaluate` selects them from a record
(`gatecfg.select`), at the gate's coordinate for the series. Each value is then judged as if the runs had
been evaluated nightly in date order: `backtest.replay` judges every run, stored or imported, against the
runs before it under the test's policy, so the stored status, reference and band are the ones a nightly
`evaluate --write` would have written, and the report's band-over-time plot covers the backfill.

Trust is what the export says (trusted unless a `trusted` column or key says otherwise), not the replayed
verdict: the team that exported the runs knows which nights were good. A stored run takes part in the
replay with the trust the store gives it now.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gatecfg import __version__
from gatecfg.analysis.backtest import StoredRun, StoredValue, replay
from gatecfg.analysis.importer import Export, ImportedRun
from gatecfg.errors import InputError
from gatecfg.models import MAX_STEP
from gatecfg.resolve import ResolvedGate, ResolvedTest
from gatecfg.select import select
from gatecfg.store import CoordinateSpec, RunInfo, Status, StoredPoint

# `replay` reads only the values of the runs it judges; the status a value was written with is for
# backtest's "recorded" comparison, which an import never makes.
UNJUDGED: Status = "cold"
WRITTEN_BY = f"{__version__} (import)"

Points = dict[CoordinateSpec, list[StoredPoint]]


@dataclass(frozen=True)
class Backfill:
    runs: tuple[tuple[RunInfo, Points], ...]  # the runs to write, oldest first
    undeclared: tuple[str, ...]  # metrics of the export that no gate of the test declares
    missing: tuple[str, ...]  # gates of the test that no run of the export holds


def check_shapes(test: ResolvedTest, export: Export) -> None:
    """A single value per run is a `last` value; a gate over steps needs `metric@STEP` columns."""
    for gate in test.gates:
        if gate.steps == "last":
            continue
        for run in export.runs:
            if gate.metric in run.single:
                where = export.header.get(gate.metric, run.location)
                raise InputError.at(
                    where,
                    f"`{gate.metric}` holds one value per run, stored as step `last`, but its gate declares "
                    f"steps: {gate.steps_key} ({gate.sources['steps']})",
                    dotted=gate.metric,
                    hint=f"give `{gate.metric}@<step>` columns, or in JSON Lines [[step, value], ...]",
                )


def _values(gate: ResolvedGate, run: ImportedRun) -> dict[int, StoredValue]:
    """The gate's selected values of one run, a non-finite one kept so that the replay errors on it."""
    values: dict[int, StoredValue] = {}
    points = {p.step: p for p in run.record.points(gate.metric)}
    for chosen in select(run.record, gate.metric, gate.steps, gated=gate.gated):
        if chosen.value is not None:
            values[chosen.step] = StoredValue(chosen.value, UNJUDGED)
        elif chosen.logged_step is not None:
            logged = points[chosen.logged_step].value
            if logged is not None:
                values[chosen.step] = StoredValue(logged, UNJUDGED)
    return values


def backfill(
    test: ResolvedTest,
    series: str,
    labels: Mapping[str, str],
    export: Export,
    stored: Sequence[tuple[datetime, StoredRun]],
    *,
    already_stored: Collection[str] = (),
) -> Backfill:
    """The runs of `export` to write (all but those `already_stored`), their points judged in date order
    among the series' `stored` runs; which metrics the export holds is read from all of its runs."""
    check_shapes(test, export)
    fresh = [run for run in export.runs if run.run_id not in already_stored]
    declared = {g.metric for g in test.gates}
    for run in fresh:
        if not declared & set(run.record.columns):
            # A run of nothing but unusable columns (`m@-1`, `m@abc`, metrics no gate declares) would be
            # stored with no value at all, yet count as a night in every analysis.
            holds = ", ".join(f"`{m}`" for m in sorted(run.record.columns)) or "no values"
            raise InputError.at(
                run.location,
                f"run `{run.run_id}` holds no value of any gate of {test.test} (it has {holds})",
                dotted="run_id",
                hint=f"columns are `<metric>` or `<metric>@<step>` (step 0 to {MAX_STEP}) for the gates "
                f"of {test.file}: " + ", ".join(sorted(declared)),
            )
    imported = [
        (
            run.created_at,
            StoredRun(
                run_id=run.run_id,
                commit=run.commit,
                series_key=series,
                labels=dict(labels),
                trust_override=run.trusted,
                gate_trusted=run.trusted,
                values={(g.metric, g.steps_key): _values(g, run) for g in test.gates},
            ),
        )
        for run in fresh
    ]
    # Stable: a stored run and an imported one of the same time keep stored-first order.
    timeline = sorted([*stored, *imported], key=lambda item: item[0])
    replayed = replay(test, series, [run for _, run in timeline], test.policy)
    by_id = {r.run.run_id: r for r in replayed.runs}
    specs = {
        g.metric: CoordinateSpec(
            coordinate=g.coordinate(series),
            series_key=series,
            test=test.test,
            metric=g.metric,
            steps_key=g.steps_key,
            constraint_key=g.constraint_key,
        )
        for g in test.gates
    }
    writes: list[tuple[RunInfo, Points]] = []
    for run in fresh:
        points: Points = {}
        for metric, result in by_id[run.run_id].results.items():
            kept = result.stored_points()  # as evaluate --write stores them
            if kept:
                points[specs[metric]] = kept
        info = RunInfo(
            run_id=run.run_id,
            test=test.test,
            series_key=series,
            labels=dict(labels),
            commit=run.commit,
            branch=None,
            ci_run_id=None,
            ci_run_attempt=None,
            url=None,
            created_at=run.created_at,
            gate_trusted=run.trusted,
            written_by=WRITTEN_BY,
        )
        writes.append((info, points))
    given = {m for run in export.runs for m in run.record.columns}
    return Backfill(
        runs=tuple(writes),
        undeclared=tuple(sorted(given - declared)),
        missing=tuple(sorted(declared - given)),
    )


def stored_timeline(runs: Sequence[tuple[datetime, StoredRun, bool]]) -> list[tuple[datetime, StoredRun]]:
    """Stored runs as the replay should see them: with the trust the store gives them now."""
    return [(at, dataclasses.replace(run, trust_override=trusted)) for at, run, trusted in runs]
