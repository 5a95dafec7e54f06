"""Imported runs keyed through the test's gate file, with the verdicts `evaluate --write` would have stored.

Each gate selects its values from an imported run exactly as `evaluate` selects them from a record
(`gatecfg.select`), at the gate's coordinate for the series. Each value is then judged as if the runs had
been evaluated nightly in date order: every run, stored or imported, is judged against the runs before it
under the test's policy (a block of runs at a time, `gatecfg.analysis.matrix`), so the stored status,
reference and band are the ones a nightly `evaluate --write` would have written, and the report's
band-over-time plot covers the backfill.

Trust is what the export says (trusted unless a `trusted` column or key says otherwise), not the replayed
verdict: the team that exported the runs knows which nights were good. A stored run takes part in the
replay with the trust the store gives it now.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from queue import Full, Queue
from typing import TypeVar, cast

import numpy as np

from gatecfg import __version__
from gatecfg.analysis.importer import Entry, Export, ImportedRun
from gatecfg.analysis.matrix import GateMatrix, stored_columns
from gatecfg.analysis.replayer import StoredRun
from gatecfg.errors import InputError
from gatecfg.models import MAX_STEP
from gatecfg.resolve import ResolvedGate, ResolvedTest
from gatecfg.select import select
from gatecfg.store import STATUSES, CoordinateSpec, PointColumns, RunInfo, ValueColumns

# `replay` reads only the values of the runs it judges; the status a value was written with is for
# backtest's "recorded" comparison, which an import never makes.
UNJUDGED = STATUSES.index("cold")
WRITTEN_BY = f"{__version__} (import)"

Points = dict[CoordinateSpec, PointColumns]
T = TypeVar("T")
# Values of imported runs judged as one block (a matrix per gate): a few runs of a large test at a time.
# Two blocks are alive at once (one judged while the one before is written), each ~40 MB at this size.
BLOCK_VALUES = 100_000


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
    """The runs of an export to write, judged in date order among the series' stored runs, produced one
    at a time (`runs`); what was produced is counted as it goes."""

    test: ResolvedTest
    series: str
    labels: Mapping[str, str]
    export: Export
    values: int = 0
    coordinates: set[str] = field(default_factory=set)

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
        """The runs of `blocks`, one at a time."""
        return itertools.chain.from_iterable(self.blocks(stored, already_stored=already_stored))

    def blocks(
        self, stored: Iterable[tuple[datetime, StoredRun]], *, already_stored: Collection[str] = ()
    ) -> Iterator[list[tuple[RunInfo, Points]]]:
        """The export's runs but `already_stored` ones, oldest first, with the points `evaluate --write`
        would have stored, a judged block of runs at a time: each judged against the runs before it,
        imported or `stored` (the series' stored runs, oldest first, with the trust the store gives them
        now), stored-first at equal times.

        Every run's trust is known (the export's, the store's), so whether it joins the baselines is too:
        the runs are judged a block at a time, each gate's block as one matrix (`GateMatrix`), exactly as
        one by one."""
        check_shapes(self.test, self.export)
        tails: dict[str, GateMatrix] = {}
        earlier = iter(stored)
        pending = next(earlier, None)
        block: list[tuple[StoredRun, ImportedRun | None]] = []
        size = 0
        for run in self.export.runs(skip=already_stored):
            # The stored runs up to this one's time only join the baselines: their trust is set.
            while pending is not None and pending[0] <= run.created_at:
                block.append((pending[1], None))
                pending = next(earlier, None)
            imported = self._stored_run(run)
            block.append((imported, run))
            size += sum(map(len, imported.values.values()))
            if size >= BLOCK_VALUES:
                yield list(self._judged(block, tails))
                block, size = [], 0
        if block:
            yield list(self._judged(block, tails))

    def _judged(
        self, block: Sequence[tuple[StoredRun, ImportedRun | None]], tails: dict[str, GateMatrix]
    ) -> Iterator[tuple[RunInfo, Points]]:
        """The imported runs of `block` with their points; `tails` carries each gate's baselines on."""
        policy = self.test.policy
        runs = [run for run, _ in block]
        qualifies = np.array(
            [
                run.trust_override if policy.baseline == "trusted" else not run.untrusted_by_hand
                for run in runs
            ],
            bool,
        )
        judged = np.array([i for i, (_, imported) in enumerate(block) if imported is not None], np.int64)
        points: list[Points] = [{} for _ in judged]
        for gate in self.test.gates:
            key = (gate.metric, gate.steps_key)
            matrix = GateMatrix.stored(gate, [run.values.get(key) for run in runs])
            matrix = matrix.after(tails.get(gate.metric))
            carried = len(matrix.values) - len(runs)  # the tail's rows come first
            pooled = np.concatenate([np.ones(carried, bool), qualifies])
            spec = CoordinateSpec(
                coordinate=gate.coordinate(self.series),
                series_key=self.series,
                test=self.test.test,
                metric=gate.metric,
                steps_key=gate.steps_key,
                constraint_key=gate.constraint_key,
            )
            for found, kept in zip(
                points, stored_columns(matrix, pooled, policy, judged + carried), strict=True
            ):
                if kept is not None and len(kept):
                    found[spec] = kept
                    self.values += len(kept)
                    self.coordinates.add(spec.coordinate)
            tails[gate.metric] = matrix.tail(pooled, policy.window)
        for at, found in zip(judged.tolist(), points, strict=True):
            yield self._info(cast(ImportedRun, block[at][1])), found

    def _stored_run(self, run: ImportedRun) -> StoredRun:
        columns = {(g.metric, g.steps_key): _column(g, run) for g in self.test.gates}
        return StoredRun(
            run_id=run.run_id,
            commit=run.commit,
            series_key=self.series,
            labels=dict(self.labels),
            trust_override=run.trusted,
            gate_trusted=run.trusted,
            values={key: column for key, column in columns.items() if column is not None},
        )

    def _info(self, run: ImportedRun) -> RunInfo:
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
            gate_trusted=run.trusted,
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
