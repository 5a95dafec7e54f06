"""`gatecfg import`: backfill a test's history from a CSV or JSON Lines export, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gatecfg.analysis.backfill import backfill, stored_timeline
from gatecfg.analysis.backtest import stored_runs
from gatecfg.analysis.importer import read_export
from gatecfg.errors import EXIT_OK, InputError
from gatecfg.keys import series_key
from gatecfg.resolve import display_path, load_tree
from gatecfg.store import Store
from gatecfg.terminal import stage


def import_command(*, gates: Path, db: str, test: str, path: Path, labels: Mapping[str, str]) -> int:
    resolved = load_tree(gates).test(test)
    with stage("gatecfg import", f"reading {display_path(path)}"):
        export = read_export(path, display_path(path))
    series = series_key(test, labels)
    # A backfill is how a history starts: it may create the store, as a nightly `--write` does.
    with Store.open(db, create=True) as store:
        # Run ids are unique across the whole store, so a clash with another test's run is a mistake
        # (the wrong --test, or an export of another test), while one of this series is a re-import.
        known = {row.run.run_id: row for row in store.runs()}
        for run in export.runs:
            other = known.get(run.run_id)
            if other is not None and (other.run.test, other.run.series_key) != (test, series):
                raise InputError.at(
                    run.location,
                    f"run_id `{run.run_id}` is already stored for test `{other.run.test}`"
                    + (f" with labels {dict(other.run.labels)}" if other.run.test == test else ""),
                    dotted="run_id",
                    hint="check --test and --series, or give this export's runs their own ids",
                )
        fresh = tuple(run for run in export.runs if run.run_id not in known)
        this_series = [row for row in reversed(store.runs(test=test)) if row.run.series_key == series]
        when = {row.run.run_id: (row.run.created_at, row.trusted) for row in this_series}
        stored = [
            (when[run.run_id][0], run, when[run.run_id][1])
            for run in stored_runs(store, test, [g.metric for g in resolved.gates])
            if run.run_id in when
        ]
        with stage("gatecfg import", f"replaying {len(export.runs):,} runs with the gates"):
            plan = backfill(resolved, series, labels, export, stored_timeline(stored), already_stored=known)
        with stage("gatecfg import", f"writing {len(plan.runs):,} runs in one transaction"):
            written = store.write_runs(plan.runs) if plan.runs else []
        url = store.url
    skipped = len(export.runs) - sum(written)
    values = sum(len(points) for _, stored_points in plan.runs for points in stored_points.values())
    coordinates = {spec.coordinate for _, stored_points in plan.runs for spec in stored_points}
    print(f"imported {sum(written)} run(s) of {test} from {export.path} into {url}")
    if fresh:
        trusted = sum(run.trusted for run in fresh)
        print(
            f"  {fresh[0].created_at:%Y-%m-%d} to {fresh[-1].created_at:%Y-%m-%d}: {trusted} trusted, "
            f"{len(fresh) - trusted} untrusted; {values} values at {len(coordinates)} coordinate(s)"
        )
    if skipped:
        print(f"  {skipped} run(s) already stored, skipped (importing again never duplicates values)")
    if plan.undeclared:
        print(f"  not declared in {resolved.file}, not imported: {', '.join(plan.undeclared)}")
    if plan.missing:
        print(f"  declared in {resolved.file} but absent from the export: {', '.join(plan.missing)}")
    if resolved.gates:
        print(f"next: gatecfg regimes --test {test} --all")
    return EXIT_OK
