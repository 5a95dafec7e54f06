"""The Python API that `gatecfg` exports: evaluate a run, load the gate tree, lint gate files.

The CLI calls these same functions (`gatecfg evaluate` is `evaluate` plus printing), so a report from
Python and from the command line are the same document. Heavy modules load on first call, not on
`import gatecfg`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gatecfg import settings
from gatecfg.errors import GateFileError, InputError

if TYPE_CHECKING:
    from gatecfg.errors import Problem
    from gatecfg.records import Metrics
    from gatecfg.report import RunReport
    from gatecfg.resolve import GateTree

StrPath = str | os.PathLike[str]


def evaluate(
    test: str,
    metrics: Metrics,
    *,
    gates: StrPath | None = None,
    db: str | None = None,
    write: bool = False,
    run_id: str | None = None,
    commit: str | None = None,
    series: Mapping[str, str] | None = None,
    branch: str | None = None,
    url: str | None = None,
    require_history: bool = False,
    write_override: str | None = None,
    meta: Mapping[str, str] | None = None,
    confirm_with: Metrics | None = None,
    date: datetime | str | None = None,
) -> RunReport:
    """Judge one run of `test` against stored history, as `gatecfg evaluate` does.

    `metrics` is `{metric: [(step, value), ...]}` or record files (a path or a list of paths, in any
    supported format). `gates`, `db` and `series` not given follow the settings' precedence (docs/
    configuration.md): `$GATECFG_GATES` / `$GATECFG_DB_URL` / `$GATECFG_SERIES`, else the project's
    `.gatecfg.toml` or `[tool.gatecfg]`, else `gates/` and `.gatecfg/history.db`; a bare path is a SQLite
    file. With `write`, the run is stored (the nightly). Provenance not given is read from the CI
    environment, as the CLI does; `GATECFG_ENFORCE=0` turns enforced gates into shadow gates here too.
    A store that does not exist is a `StoreError` unless `write` (which creates a SQLite store); with
    `require_history` (or the policy field), no stored run of the series makes `exit_code` 1.
    A write the base file's `policy.write` refuses for this CI job raises `InputError`, unless
    `write_override` gives the reason it is written anyway (stored with the run). `meta` is what the run
    carries beyond its identity (`{"image": "26.04"}`, as `--meta image=26.04`): stored with the run, with
    what the CI tells of its runner, and named in the report when a gate fails and it differs from the
    baseline's newest run. `confirm_with` is a second run of the same code (metrics as `metrics`): a gate
    fails the job only where both runs fail it (docs/evaluate.md, "Confirmation"). `date` (with `write`;
    an aware datetime, or ISO 8601 text where no zone means UTC, never in the future) is the time the run
    is stored at, for a backfill: it stamps the run only, the baseline is still the store's newest runs,
    so a backfill writes its runs in date order.

    Raises `GateFileError` (invalid gate files, or none for `test`), `RecordError` (invalid metrics),
    `InputError` (another invalid argument) and `StoreError` (the history store could not be reached or
    written), each with the message the CLI prints.
    """
    from gatecfg.dates import run_date
    from gatecfg.evaluation import Request, run_evaluation
    from gatecfg.records import Record
    from gatecfg.write_policy import check_override

    _check_argument("test", test, str)
    _check_argument("metrics", metrics, Mapping | str | os.PathLike | Sequence | Record)
    _check_argument("gates", gates, str | os.PathLike | None)
    _check_argument("db", db, str | None)
    _check_argument("write", write, bool)
    _check_argument("require_history", require_history, bool)
    _check_argument("series", series, Mapping | None)
    _check_argument("meta", meta, Mapping | None)
    _check_argument("confirm_with", confirm_with, Mapping | str | os.PathLike | Sequence | Record | None)
    _check_argument("date", date, datetime | str | None)
    labels = _labels(series, meta)
    override = check_override(write_override, write=write, where="write_override", needs="write=True")
    created_at = None if date is None else run_date(date, write=write, where="date", needs="write=True")
    return run_evaluation(
        Request(
            gates=settings.gates_root(gates),
            test=test,
            records=metrics,
            db=settings.db_url(db),
            write=write,
            labels=labels,
            run_id=run_id,
            commit=commit,
            branch=branch,
            url=url,
            enforce=settings.enforce(),
            require_history=require_history,
            write_override=override,
            meta=dict(meta or {}),
            confirm_with=confirm_with,
            created_at=created_at,
        )
    )


def _labels(series: Mapping[str, str] | None, meta: Mapping[str, str] | None) -> dict[str, str]:
    """The series' labels (`series`, else as the settings give them), each label and `meta` entry checked
    by the validators of the CLI's `--series` and `--meta`."""
    from gatecfg.provenance import check_label

    labels = settings.series_labels(None if series is None else dict(series))
    for name, given in (("series", labels), ("meta", meta or {})):
        for key, value in given.items():
            check_label(key, value, key_at=name, value_at=f"{name}[{_shown(key)}]")
    if "test" in labels:
        raise InputError.at("series", "`test` is not a label: the test is always part of the series")
    return labels


def _shown(key: object) -> str:
    from gatecfg.records.values import shorten

    return shorten(repr(key))


def _check_argument(name: str, value: object, expected: Any) -> None:
    """An argument of the wrong type is an InputError naming it (as a flag is on the command line), not
    a TypeError from deep inside."""
    if not isinstance(value, expected):
        from gatecfg.records.values import shorten

        shown = shorten(repr(value))
        raise InputError.at(name, f"{shown} is {type(value).__name__}, not {_described(expected)}")


def _described(expected: Any) -> str:
    names = {
        str: "a string",
        os.PathLike: "a path",
        Mapping: "a mapping",
        Sequence: "a list of paths",
        bool: "True or False",
        type(None): "None",
    }
    return " or ".join(names.get(t, t.__name__) for t in getattr(expected, "__args__", (expected,)))


def load_gates(root: StrPath | None = None) -> GateTree:
    """Every gate file under `root` resolved: `tree.tests[test].gates`, each gate's literals with the
    `file:line` they came from (`gate.sources`). Raises `GateFileError` listing every problem."""
    from gatecfg.resolve import load_tree

    tree = load_tree(settings.gates_root(root))
    if tree.problems:
        raise GateFileError(tree.problems)
    return tree


def lint(paths: StrPath | Sequence[StrPath] = (), *, gates: StrPath | None = None) -> list[Problem]:
    """The problems `gatecfg lint` reports for these files or folders (default: the whole `gates` tree),
    errors and warnings, sorted by file and line. An empty list means the files are valid."""
    from gatecfg.linting import find_problems

    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    problems = find_problems([Path(p) for p in given], gates=settings.gates_root(gates))
    return sorted(problems, key=lambda p: (p.location, p.dotted, p.message))
