"""Imported runs keyed through the test's gate file, with the verdicts `evaluate --write` would have stored.

Each gate selects its values from an imported run exactly as `evaluate` selects them from a record
(`gatecfg.select`), at the gate's coordinate for the series. The runs are then replayed in date order as
nightly `evaluate --write`s (`gatecfg.analysis.replayer`, which reads baselines through
`gatecfg.membership` as the live path does): each value is stored with the status, band, per-gate trust and
rejoin the nightly would have stored, and the shifts it would have accepted are recorded. A run the
export marks untrusted is untrusted by hand. `import --trust-all` trusts every run instead (today's
"the export is clean"). A stored run takes part in the replay with the trust the store gives it now, and
keeps it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from queue import Full, Queue
from typing import TypeVar, cast

import numpy as np

from gatecfg import __version__
from gatecfg.analysis.importer import Entry, Export, ImportedRun
from gatecfg.analysis.replayer import Replayer, RunReplay, StoredRun
from gatecfg.errors import InputError
from gatecfg.models import MAX_STEP
from gatecfg.resolve import ResolvedGate, ResolvedTest
from gatecfg.select import select
from gatecfg.shifts import Shift
from gatecfg.store import STATUSES, CoordinateSpec, PointColumns, RunInfo, ValueColumns
from gatecfg.verdicts import trusted

# `replay` reads only the values of the runs it judges; the status a value was written with is for
# backtest's "recorded" comparison, which an import never makes.
UNJUDGED = STATUSES.index("cold")
WRITTEN_BY = f"{__version__} (import)"

Points = dict[CoordinateSpec, PointColumns]
T = TypeVar("T")


def check_shapes(test: ResolvedTest, export: Export) -> None:
    """A single value per run is a `last` value; a gate over steps needs `metric@STEP` columns."""
    for gate in test.gates:
        if gate.steps == "last" or gate.metric not in export.single:
            continue
        where = export.header.get(gate.metric, export.single[gate.metric])
        raise InputError.at(
            where,
            f"`{gate.metric}` holds one value per run, stored as step `last`, but its gate declares "
            f"steps: {gate.steps_key} ({gate.sources['steps']})",
            dotted=gate.metric,
            hint=f"give `{gate.metric}@<step>` columns, or in JSON Lines [[step, value], ...]",
        )


def check_runs(test: ResolvedTest, runs: Iterable[Entry]) -> None:
    """Each run to import holds a value of some gate of the test."""
    declared = {g.metric for g in test.gates}
    for run in runs:
        if not declared & run.metrics:
            # A run of nothing but unusable columns (`m@-1`, `m@abc`, metrics no gate declares) would be
            # stored with no value at all, yet count as a night in every analysis.
            holds = ", ".join(f"`{m}`" for m in sorted(run.metrics)) or "no values"
            raise InputError.at(
                run.location,
                f"run `{run.run_id}` holds no value of any gate of {test.test} (it has {holds})",
                dotted="run_id",
                hint=f"columns are `<metric>` or `<metric>@<step>` (step 0 to {MAX_STEP}) for the gates "
                f"of {test.file}: " + ", ".join(sorted(declared)),
            )


def _column(gate: ResolvedGate, run: ImportedRun) -> ValueColumns | None:
    """The gate's selected values of one run, a non-finite one kept so that the replay errors on it."""
    chosen = select(run.record, gate.metric, gate.steps, gated=gate.gated)
    numbers = chosen.numbers()
    if np.isnan(numbers).any():
        record = run.record.column(gate.metric)
        logged: dict[int | None, float | None] = (
            {} if record is None else dict(zip(record.steps, record.values, strict=True))
        )
        kept = {
            s.step: value
            for s in chosen
            if (value := s.value if s.value is not None else logged.get(s.logged_step)) is not None
        }
        steps, values = np.array(sorted(kept), np.int64), np.array([kept[s] for s in sorted(kept)])
    else:
        steps, values = np.array(chosen.steps, np.int64), numbers
        if len(steps) > 1 and (np.diff(steps) < 0).any():  # a steps list declared out of order
            order = np.argsort(steps, kind="stable")
            steps, values = steps[order], values[order]
    if not len(steps):
        return None
    return ValueColumns(steps, values, np.full(len(steps), UNJUDGED, np.int8))


@dataclass
class Backfill:
    """The runs of an export to write, replayed in date order among the series' stored runs as nightly
    `evaluate --write`s of them (`gatecfg.analysis.replayer`): the statuses, per-gate trust, rejoins and
    accepted shifts a nightly would have stored. With `trust_all`, every run is trusted instead, as the
    export's `trusted` column says (a history known to be clean). What was produced is counted."""

    test: ResolvedTest
    series: str
    labels: Mapping[str, str]
    export: Export
    trust_all: bool = False
    values: int = 0
    coordinates: set[str] = field(default_factory=set)
    # What the replay accepted, in order, with the run that accepted it: recorded after the runs.
    shifts: list[tuple[Shift, RunInfo]] = field(default_factory=list)
    # Runs the export marks untrusted: kept out of every baseline, as `gatecfg untrust` keeps them.
    untrusted: list[str] = field(default_factory=list)
    failing: int = 0  # imported runs a gate kept out of its baseline when judged
    # (coordinate, run id) of imported values their gate failed that a later night let rejoin.
    rejoined: list[tuple[str, str]] = field(default_factory=list)

    @property
    def undeclared(self) -> tuple[str, ...]:
        """Metrics of the export that no gate of the test declares."""
        return tuple(sorted(self.export.metrics - {g.metric for g in self.test.gates}))

    @property
    def missing(self) -> tuple[str, ...]:
        """Gates of the test that no run of the export holds."""
        return tuple(sorted({g.metric for g in self.test.gates} - self.export.metrics))

    def runs(
        self, stored: Iterable[tuple[datetime, StoredRun]], *, already_stored: Collection[str] = ()
    ) -> Iterator[tuple[RunInfo, Points]]:
        """The export's runs but `already_stored` ones, oldest first, with the points a nightly `evaluate
        --write` of each would have stored, one at a time as they are judged: each against the runs
        before it, imported or `stored` (the series' stored runs, oldest first, with the trust the store
        gives them now, which the import does not change), stored-first at equal times. Once the last is
        made, `rejoined` holds the values a later night let rejoin (the lists `shifts`, `rejoined` and
        `untrusted` grow in place, so a writer handed them before the runs reads them complete after)."""
        check_shapes(self.test, self.export)
        replayer = Replayer(self.test, self.series, self.test.policy, hand_over=True)
        earlier = iter(stored)
        pending = next(earlier, None)
        imported: set[str] = set()
        for run in self.export.runs(skip=already_stored):
            while pending is not None and pending[0] <= run.created_at:
                replayer.judge(pending[1])
                pending = next(earlier, None)
            replayed = replayer.judge(self._stored_run(run), at=run.created_at)
            info = self._info(
                run, run.trusted if self.trust_all else trusted(list(replayed.results.values()))
            )
            self.shifts += [(shift, info) for shift in replayed.following.accept]
            imported.add(run.run_id)
            yield info, self._points(run, replayed)
        if not self.trust_all:
            # A failed value's rejoin is known once a later night passes: recorded after the runs, as
            # an accepted shift is (store/follow.py, under the shift's stored number).
            self.rejoined.extend(
                (coordinate, row.run_id)
                for coordinate, history in replayer.histories.items()
                for row in history.rows
                if row.facts.rejoined == "recovered" and row.run_id in imported
            )

    def _points(self, run: ImportedRun, replayed: RunReplay) -> Points:
        points: dict[CoordinateSpec, PointColumns] = {}
        for r in replayed.results.values():
            kept = replayed.stored[r.gate.metric]
            if not len(kept):
                continue
            spec = CoordinateSpec(
                coordinate=r.coordinate,
                series_key=self.series,
                test=self.test.test,
                metric=r.gate.metric,
                steps_key=r.gate.steps_key,
                constraint_key=r.gate.constraint_key,
            )
            # Trusting every run stores only the run's trust, which then counts for each gate.
            points[spec] = dataclasses.replace(
                kept, gate_trusted=None if self.trust_all else not r.blocks_trust
            )
            self.values += len(kept)
            self.coordinates.add(spec.coordinate)
        self.failing += not trusted(list(replayed.results.values()))
        if not run.trusted and not self.trust_all:
            self.untrusted.append(run.run_id)
        return points

    def _stored_run(self, run: ImportedRun) -> StoredRun:
        columns = {(g.metric, g.steps_key): _column(g, run) for g in self.test.gates}
        # The export's word on a run is trust set by hand: a run it marks untrusted never joins; trusting
        # every run trusts each of them so.
        hand = run.trusted if self.trust_all else (None if run.trusted else False)
        return StoredRun(
            run_id=run.run_id,
            commit=run.commit,
            series_key=self.series,
            labels=dict(self.labels),
            trust_override=hand,
            gate_trusted=run.trusted,
            values={key: column for key, column in columns.items() if column is not None},
            created_at=run.created_at,
        )

    def _info(self, run: ImportedRun, is_trusted: bool) -> RunInfo:
        return RunInfo(
            run_id=run.run_id,
            test=self.test.test,
            series_key=self.series,
            labels=dict(self.labels),
            commit=run.commit,
            branch=None,
            ci_run_id=None,
            ci_run_attempt=None,
            url=None,
            created_at=run.created_at,
            gate_trusted=is_trusted,
            written_by=WRITTEN_BY,
        )


def with_current_trust(run: StoredRun, trusted: bool) -> StoredRun:
    """A stored run as the replay should see it: with the trust the store gives it now."""
    return dataclasses.replace(run, trust_override=trusted)


def made_ahead(items: Iterable[T], depth: int) -> Iterator[T]:
    """`items` as a thread of their own makes them, at most `depth` ahead of the caller: an import judges
    the next block of runs while this thread writes the one before, since both store drivers release the
    GIL while the database works on a statement. An error in making them is raised here; a caller that
    stops early stops the thread at its next item."""
    queue: Queue[tuple[bool, T | None, BaseException | None]] = Queue(depth)
    stop = threading.Event()

    def put(entry: tuple[bool, T | None, BaseException | None]) -> bool:
        while not stop.is_set():
            with contextlib.suppress(Full):
                queue.put(entry, timeout=0.05)
                return True
        return False

    def make() -> None:
        made = iter(items)
        try:
            for item in made:
                if not put((False, item, None)):
                    break
            else:
                put((True, None, None))
        except BaseException as exc:  # handed over to the caller, whatever it is
            put((True, None, exc))
        finally:
            if isinstance(made, Generator):
                made.close()  # in this thread: a store read's connection goes back to its pool

    thread = threading.Thread(target=make, name="gatecfg-made-ahead", daemon=True)
    thread.start()
    try:
        while True:
            done, item, error = queue.get()
            if error is not None:
                raise error
            if done:
                return
            yield cast(T, item)
    finally:
        stop.set()
        thread.join()
