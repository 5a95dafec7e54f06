"""`gatecfg import`: backfill a test's history from a CSV or JSON Lines export, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gatecfg.analysis.backfill import Backfill, check_runs, check_shapes, made_ahead, with_current_trust
from gatecfg.analysis.importer import Export, read_export
from gatecfg.analysis.record_folder import read_record_folder, record_files, selects_records
from gatecfg.analysis.replayer import describe_policy, stored_run
from gatecfg.dates import parse_date
from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.gate_files import display_path
from gatecfg.keys import series_key
from gatecfg.resolve import load_tree
from gatecfg.store import RunRow, Store
from gatecfg.terminal import stage


def import_command(
    *,
    gates: Path,
    db: str,
    test: str,
    paths: Sequence[Path],
    labels: Mapping[str, str],
    name_pattern: str | None = None,
    start: str | None = None,
    trust_all: bool = False,
) -> int:
    resolved = load_tree(gates).test(test)
    # The whole export is checked before the store is touched; it is then read again as it is written.
    export = _read(paths, name_pattern, start)
    check_shapes(resolved, export)
    series = series_key(test, labels)
    plan = Backfill(resolved, series, labels, export, trust_all=trust_all)
    # A backfill is how a history starts: it may create the store, as a nightly `--write` does.
    with Store.open(db, create=True) as store:
        known = store.runs_by_id([entry.run_id for entry in export.entries])
        _check_run_ids(export, known, test, series)
        fresh = [entry for entry in export.entries if entry.run_id not in known]
        check_runs(resolved, fresh)
        written: list[bool] = []
        if fresh:
            # The series' stored runs, oldest first, read as the replay reaches their time.
            stored = (
                (row.run.created_at, with_current_trust(stored_run(row, values), row.trusted))
                for row, values in store.run_values(
                    test=test, metrics=[g.metric for g in resolved.gates], series_key=series, statuses=()
                )
            )
            with stage("gatecfg import", f"replaying and writing {len(fresh):,} runs in one transaction"):
                # The next run is judged while one is written; what the replay finds of the runs it
                # judged (shifts, rejoins) is complete, and written, after the last of them.
                items = made_ahead(plan.runs(stored, already_stored=known), 1)
                written = store.write_runs(
                    items, shifts=plan.shifts, rejoined=plan.rejoined, untrusted=plan.untrusted
                )
        url = store.url
    skipped = len(export.entries) - sum(written)
    print(f"imported {sum(written)} run(s) of {test} from {export.path} into {url}")
    if fresh:
        span = f"  {fresh[0].created_at:%Y-%m-%d} to {fresh[-1].created_at:%Y-%m-%d}"
        where = f"{plan.values} values at {len(plan.coordinates)} coordinate(s)"
        if trust_all:
            trusted = sum(entry.trusted for entry in fresh)
            print(f"{span}: every run trusted as given (--trust-all): {trusted} trusted, "
                  f"{len(fresh) - trusted} untrusted by the export; {where}")  # fmt: skip
        else:
            print(f"{span}: replayed as nightly `evaluate --write`s ({describe_policy(resolved.policy)}): "
                  f"{plan.failing} run(s) with a gate failing, {len(plan.untrusted)} untrusted by the "
                  f"export, {len(plan.shifts)} shift(s) accepted; {where}")  # fmt: skip
    if skipped:
        print(f"  {skipped} run(s) already stored, skipped (importing again never duplicates values)")
    if plan.undeclared:
        print(f"  not declared in {resolved.file}, not imported: {', '.join(plan.undeclared)}")
    if plan.missing:
        print(f"  declared in {resolved.file} but absent from the export: {', '.join(plan.missing)}")
    if resolved.gates:
        print(f"next: gatecfg regimes --test {test} --all")
    return EXIT_OK


def _read(paths: Sequence[Path], name_pattern: str | None, start: str | None) -> Export:
    """One file is an export (CSV, JSON Lines of runs); a folder, a glob, several files, or a file-name
    option make a run of each record file."""
    first = paths[0]
    if selects_records(paths) or name_pattern is not None or start is not None:
        files = record_files(paths)
        begin = None if start is None else parse_date(start, Location("--start"), "start")
        with stage("gatecfg import", f"reading {len(files):,} record files"):
            return read_record_folder(files, pattern=name_pattern, start=begin)
    with stage("gatecfg import", f"reading {display_path(first)}"):
        return read_export(first, display_path(first))


def _check_run_ids(export: Export, known: Mapping[str, RunRow], test: str, series: str) -> None:
    """Run ids are unique across the whole store, so a clash with another test's run is a mistake (the
    wrong --test, or an export of another test), while one of this series is a re-import."""
    for entry in export.entries:
        other = known.get(entry.run_id)
        if other is not None and (other.run.test, other.run.series_key) != (test, series):
            raise InputError.at(
                entry.location,
                f"run_id `{entry.run_id}` is already stored for test `{other.run.test}`"
                + (f" with labels {dict(other.run.labels)}" if other.run.test == test else ""),
                dotted="run_id",
                hint="check --test and --series, or give this export's runs their own ids",
            )
