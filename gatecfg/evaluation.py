"""The evaluation core: one request (record + gates + store) -> verdicts, the stored run, the run report.

`run_evaluation` is the one evaluator under every entry point: `gatecfg.evaluate` (the Python API, which
`gatecfg evaluate` calls), the pytest plugin and `gatecfg demo` each build a `Request` from their own input
and render the `RunReport` it returns; nothing here prints, and nothing here imports an entry point."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gatecfg import __version__
from gatecfg.ci import CiJob, ci_job
from gatecfg.errors import EXIT_GATE_FAILED, InputError
from gatecfg.following import Following, follow
from gatecfg.gitrev import head_commit
from gatecfg.keys import series_key
from gatecfg.provenance import Provenance, provenance
from gatecfg.records import Metrics, Record, read_metrics
from gatecfg.rekey import OldKey, RekeyWarning, rekey_warnings
from gatecfg.report import Changes, RunReport, RunSummary
from gatecfg.report.labels import series_text
from gatecfg.resolve import Policy, ResolvedGate, ResolvedTest, load_tree
from gatecfg.select import Selection, select
from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, RunRow
from gatecfg.store.direct import DirectStore
from gatecfg.store.protocol import StoreReads
from gatecfg.tail import reach
from gatecfg.verdicts import GateVerdicts, evaluate, exit_code, needed_history, trusted
from gatecfg.windows import Baselines
from gatecfg.write_policy import check_write


@dataclass(frozen=True)
class Request:
    gates: Path
    test: str
    records: Metrics  # {metric: [(step, value), ...]}, or record files
    db: str
    write: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    run_id: str | None = None
    commit: str | None = None
    branch: str | None = None
    url: str | None = None
    enforce: bool = True  # False: GATECFG_ENFORCE=0, every enforced gate runs as a shadow gate
    require_history: bool = False  # --require-history; the policy field `require_history` does the same
    # --override-write-policy REASON, stored with the run: as each entry point's `check_override` gave it.
    write_override: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)  # --meta KEY=VALUE, stored with the run
    # A second run of the same code (--confirm-with): a gate fails only where both runs fail it.
    confirm_with: Metrics | None = None
    # --date: the written run's time (aware, checked by dates.run_date), else now. It stamps the run only:
    # the baseline is still the store's newest runs, so a backfill writes its runs in date order.
    created_at: datetime | None = None


def run_evaluation(req: Request) -> RunReport:
    """Every stage of an evaluation, without printing: what tests and the CLI both call."""
    test, labels = req.test, req.labels
    # The write policy comes first after the gates that hold it: a refused write reads no record and
    # opens no store.
    resolved = load_tree(req.gates).test(test)
    job = ci_job()  # read once: the branch the policy judges is the branch stored
    test = resolved.test  # as declared: `./tests/x.py` and an absolute path store the same series
    if req.write:
        check_write_policy(resolved, req.write_override, job)
    record = read_metrics(req.records)
    # Read up front, so that a broken confirmation record is an error whatever tonight's verdicts are.
    second = None if req.confirm_with is None else read_metrics(req.confirm_with)
    series = series_key(test, labels)
    selected = [
        (gate, gate.coordinate(series), select(record, gate.metric, gate.steps, gated=gate.gated))
        for gate in resolved.gates
    ]
    origin = _origin(req, test, job)
    # Only the nightly creates a store: a PR run against a mistyped URL must fail, not pass cold. A plain
    # SQLite store is read without SQLAlchemy (store/direct.py): its import was half of the process's.
    with DirectStore.open(req.db, create=req.write) as store:
        baselines = _baselines(store, selected, resolved.policy, exclude_run_id=origin.run_id)
        results = evaluate(selected, baselines, resolved.policy, enforce=req.enforce)
        unconfirmed = _unconfirmed(second, resolved, series, results, baselines, enforce=req.enforce)
        warnings = _rekeys(store, resolved, series, results)
        # A gate with history proves the series has some; only an all-cold run pays for the query.
        unseen = not any(r.has_history for r in results) and not store.has_runs(
            series, exclude_run_id=origin.run_id
        )
        required = req.require_history or resolved.policy.require_history
        notes = [_no_history(test, labels, store.url, required=required)] if unseen else []
        now = datetime.now(UTC) if req.created_at is None else req.created_at
        followed = follow(
            store,
            results,
            resolved.policy,
            run_id=origin.run_id,
            commit=origin.commit,
            now=now,
            has_history=not unseen,
            writing=req.write,
            meta=origin.meta,
        )
        notes += followed.notes()
        notes += [f"NOT CONFIRMED: {_not_confirmed(r)}" for r in results if r.coordinate in unconfirmed]
        notes += [missing_note(r) for r in results if r.missing]
        notes += record.spelling_notes([gate.metric for gate in resolved.gates])
        is_trusted = trusted(results)
        # Only a run with a failing gate asks what changed since the baseline's newest run.
        newest = (
            None
            if is_trusted
            else store.newest_run(series, baseline=resolved.policy.baseline, exclude_run_id=origin.run_id)
        )
        stored = req.write and _store_run(
            store, req, origin, results, followed, trusted=is_trusted, test=test, series=series, now=now
        )
        return RunReport(
            test=test,
            gate_file=resolved.file,
            series=dict(labels),
            run=_summary(origin, written=stored, already_stored=req.write and not stored, trusted=is_trusted),
            results=results,
            warnings=warnings,
            exit_code=EXIT_GATE_FAILED if unseen and required else _exit_code(results, followed, unconfirmed),
            store=store.url,
            enforce_disabled=not req.enforce,
            notes=notes,
            shifts=followed.shifts,
            stale=followed.stale,
            same_code=followed.same_code,
            changes=_changes(newest, commit=origin.commit, meta=origin.meta),
        )


def _summary(origin: Provenance, *, written: bool, already_stored: bool, trusted: bool) -> RunSummary:
    return RunSummary(
        run_id=origin.run_id,
        commit=origin.commit,
        branch=origin.branch,
        url=origin.url,
        written=written,
        already_stored=already_stored,
        trusted=trusted,
        source=origin.source,
    )


def _origin(req: Request, test: str, job: CiJob) -> Provenance:
    """Where the run comes from: the request's words, else the CI's, else the checked-out commit."""
    origin = provenance(
        test=test,
        run_id=req.run_id,
        commit=req.commit,
        branch=req.branch,
        url=req.url,
        meta=req.meta,
        job=job,
    )
    if origin.commit is None:  # neither --commit nor a CI: a local run, made on the checked-out commit
        origin = dataclasses.replace(origin, commit=head_commit(req.gates))
    return origin


def _store_run(
    store: DirectStore,
    req: Request,
    origin: Provenance,
    results: Sequence[GateVerdicts],
    followed: Following,
    *,
    trusted: bool,
    test: str,
    series: str,
    now: datetime,
) -> bool:
    """Write the run and its points; False when a run of that id was already stored."""
    info = RunInfo(
        run_id=origin.run_id,
        test=test,
        series_key=series,
        labels=dict(req.labels),
        commit=origin.commit,
        branch=origin.branch,
        ci_run_id=origin.ci_run_id,
        ci_run_attempt=origin.ci_run_attempt,
        url=origin.url,
        created_at=now,
        gate_trusted=trusted,
        written_by=__version__,
        write_override=req.write_override,
        meta=origin.meta,
    )
    stored = store.write_run(
        info, _points(results, series, test), rejoin=followed.rejoin, accept=followed.accept
    )
    if not stored:
        _check_same_series(store, info)
    return stored


def _exit_code(results: Sequence[GateVerdicts], followed: Following, unconfirmed: set[str]) -> int:
    """The verdicts' exit code, less the failures on unchanged code `policy.same_code: warn` excuses and
    those the confirmation run did not show."""
    excused = followed.excused() | unconfirmed
    return exit_code([r for r in results if r.coordinate not in excused])


def _unconfirmed(
    second: Record | None,
    resolved: ResolvedTest,
    series: str,
    results: Sequence[GateVerdicts],
    baselines: Baselines,
    *,
    enforce: bool,
) -> set[str]:
    """The coordinates whose gate fails the run but not its confirmation run (`second`), judged against
    the same baselines: one slow run is not a regression, what both runs show is."""
    failing = [r for r in results if r.blocks_trust]
    if second is None or not failing:
        return set()
    wanted = {r.gate.metric for r in failing}
    again = evaluate(
        [
            (gate, gate.coordinate(series), select(second, gate.metric, gate.steps, gated=gate.gated))
            for gate in resolved.gates
            if gate.metric in wanted
        ],
        baselines,
        resolved.policy,
        enforce=enforce,
    )
    confirmed = {r.coordinate for r in again if r.blocks_trust}
    return {r.coordinate for r in failing} - confirmed


def _not_confirmed(result: GateVerdicts) -> str:
    return (
        f"{result.gate.metric} failed on this run but not on its confirmation run of the same code "
        "(--confirm-with): one slow run, not a regression; not failing the job (its values stay out of "
        "the baseline)"
    )


def _changes(newest: RunRow | None, *, commit: str | None, meta: Mapping[str, str]) -> Changes | None:
    """What changed since the baseline's newest run, when there is one and something to say."""
    if newest is None:
        return None
    found = Changes.of(newest.run, commit=commit, meta=meta)
    return None if found.empty else found


def missing_note(result: GateVerdicts) -> str:
    """The note of a gate whose run lacks steps its baseline holds (status `missing`)."""
    return f"MISSING STEPS: {result.gate.metric}: {result.missing_text()}"


def _no_history(test: str, labels: Mapping[str, str], store: str, *, required: bool) -> str:
    shown = series_text(labels)
    series = f"{test} ({shown})" if shown else test
    consequence = (
        "failing: history is required (--require-history / policy.require_history)"
        if required
        else "every gate is cold and cannot fail; the first nightly `--write` starts the history"
    )
    return f"NOTICE: no stored history for series {series} in {store}: {consequence}"


def _check_same_series(store: DirectStore, run: RunInfo) -> None:
    """A run id already stored is this run written again (idempotent) only when it is this test's and
    series': under another, the write would vanish behind exit 0 (`import` refuses the same case)."""
    other = store.runs_by_id([run.run_id]).get(run.run_id)
    if other is None or (other.run.test, other.run.series_key) == (run.test, run.series_key):
        return
    labels = f" with labels {dict(other.run.labels)}" if other.run.test == run.test else ""
    raise InputError.about(
        "run_id",
        f"run id `{run.run_id}` is already stored for test `{other.run.test}`{labels}; "
        "this run was not written",
        hint="run ids are unique across the store: give each test's nightly its own id "
        "(e.g. append the test name to the CI run id), or check the test and its series labels",
    )


def check_write_policy(resolved: ResolvedTest, override: str | None, job: CiJob) -> None:
    """Refuse (exit 2, before anything is read or written) a write the policy does not allow."""
    check_write([resolved.policy.write], override, where="write", action="write a baseline", job=job)


def _rekeys(
    store: StoreReads, test: ResolvedTest, series: str, results: Sequence[GateVerdicts]
) -> list[RekeyWarning]:
    """Look for other keys only where a gate has no history at all: the cold ones are few."""
    with_history = {r.coordinate for r in results if r.has_history}
    warnings: list[RekeyWarning] = []
    seen: set[str] = set()
    for r in results:
        if r.coordinate in with_history or r.coordinate in seen:
            continue
        seen.add(r.coordinate)
        stored = [
            OldKey(
                coordinate=s.spec.coordinate,
                steps_key=s.spec.steps_key,
                constraint_key=s.spec.constraint_key,
                values=s.n_values,
                trusted_values=s.n_trusted_values,
                runs=s.n_runs,
                last_written=s.last_written,
            )
            for s in store.coordinates_for(series, r.gate.metric)
        ]
        # A sigma band needs two values, not just `min_history`, before it gates again.
        warnings += rekey_warnings(r.gate, r.coordinate, stored, needed_history(r.gate, test.policy))
    return warnings


def _points(results: Sequence[GateVerdicts], series: str, test: str) -> dict[CoordinateSpec, PointColumns]:
    """Every selected value, tracked ones included, with its verdict; a missing value stores nothing."""
    points: dict[CoordinateSpec, PointColumns] = {}
    for r in results:
        spec = CoordinateSpec(
            coordinate=r.coordinate,
            series_key=series,
            test=test,
            metric=r.gate.metric,
            steps_key=r.gate.steps_key,
            constraint_key=r.gate.constraint_key,
        )
        # The band alone, not the reason: a nightly stores 40,000 of them.
        stored = dataclasses.replace(r.stored_columns(), gate_trusted=not r.blocks_trust)
        if len(stored):
            points[spec] = stored
    return points


def _baselines(
    store: DirectStore,
    selected: Sequence[tuple[ResolvedGate, str, Selection]],
    policy: Policy,
    *,
    exclude_run_id: str | None,
) -> Baselines:
    """Every gate's baseline, read as deep as it reaches (`tail.reach`: the window, and for a one-value
    budget gate the stretch its tail is priced on), one read per depth."""
    by_depth: dict[int, list[str]] = {}
    for gate, coordinate, _ in selected:
        by_depth.setdefault(reach(gate, policy), []).append(coordinate)
    found = Baselines()
    for depth, coordinates in sorted(by_depth.items()):
        read = store.baselines(
            coordinates, window=depth, baseline=policy.baseline, exclude_run_id=exclude_run_id
        )
        found.windows.update(read.windows)
    return found
