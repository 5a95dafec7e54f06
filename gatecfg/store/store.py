"""The Store: one history database, its schema revision, and every read and write as one transaction."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from gatecfg.alerts import Cause, OpenGate, Triaged, Verdict
from gatecfg.errors import StoreError
from gatecfg.membership import Baseline
from gatecfg.shifts import Recent, Shift
from gatecfg.store import (
    baselines,
    follow,
    inventory,
    links,
    reads,
    retention,
    statements,
    transfer,
    triage,
    writes,
)
from gatecfg.store.engine import (
    CONNECT_HINT,
    SQLITE_CONNECT_HINT,
    WRITE,
    parse_url,
    redact,
    shared_engine,
    store_errors,
)
from gatecfg.store.facts import SCHEMA_REVISION, STORE_HINT, VERSION_TABLE
from gatecfg.store.links import Carry
from gatecfg.store.protocol import StoreReads
from gatecfg.store.retention import Retained
from gatecfg.store.rows import (
    CoordinateSummary,
    HistoryRow,
    RunInfo,
    RunRow,
    ValueColumns,
)
from gatecfg.store.tables import runs
from gatecfg.store.transfer import Inventory
from gatecfg.windows import Baselines

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
MISSING_DATABASE = re.compile(r'database "[^"]*" does not exist')
# Serialises concurrent `db upgrade`s on one PostgreSQL database (any constant shared by all gatecfgs).
PG_UPGRADE_LOCK = 0x6761746563666701


# SQLite's page cache while `write_runs` writes (negative: KiB).
BULK_CACHE_KIB = -32_768


class Store(StoreReads):
    """A history store. Open with `Store.open(url)`; use as a context manager or call `close()`."""

    def __init__(self, engine: Engine, url: str, *, kept: bool = False) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})
        self._kept = kept  # the process's engine for this URL (`shared_engine`): close leaves it open
        self.url = url

    @classmethod
    def open(
        cls, url: str, *, check_schema: bool = True, create: bool = False, exists: bool = False
    ) -> Store:
        """Connect and make sure the schema is current.

        A store that does not exist is an error (exit 3) unless `create`: a mistyped URL must never turn
        into an empty history that judges every value cold. With `create` (the nightly `evaluate --write`,
        `import`), a SQLite store is created and migrated on first use. A PostgreSQL store without the
        current schema is an error either way: the CI role should not need DDL rights, `gatecfg db upgrade`
        applies them. `check_schema=False` is for that command, which opens a store in order to create or
        upgrade it; with `exists` too (`db status`), a SQLite file must exist all the same.
        """
        parsed = parse_url(url)
        if (check_schema and not create) or exists:
            _require_file(parsed)
        engine, kept = shared_engine(parsed)
        store = cls(engine, redact(parsed), kept=kept)
        try:
            current = store._current_revision()
            if check_schema and current != SCHEMA_REVISION:
                store._reach_head(current)
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        if not self._kept:
            self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def upgrade(self) -> None:
        """Apply the migrations up to head, in one transaction that concurrent upgraders wait for."""
        # Imported here: only an upgrade needs Alembic, and a CI job's start pays a tenth of a second for it.
        from alembic import command
        from alembic.util import CommandError

        with (
            store_errors(self.url, "upgrade the history store schema", hint=STORE_HINT, also=(CommandError,)),
            self._writer.begin() as conn,
        ):
            if conn.dialect.name == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(PG_UPGRADE_LOCK)))
            config = _alembic_config()
            # Handed over inside a transaction, so Alembic runs every migration in it (SQLite included,
            # which Alembic otherwise runs without one).
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def write_run(
        self,
        run: RunInfo,
        points: writes.Points,
        *,
        rejoin: Sequence[str] = (),
        accept: Sequence[Shift] = (),
    ) -> bool:
        """Store a run and all its points at once; False, writing nothing, if the run id is stored. In the
        same transaction, the failed values of the `rejoin` coordinates rejoin their baselines, and each
        shift of `accept` is recorded as accepted (store/follow.py)."""
        with self._errors(f"write run {run.run_id!r} to the history store"), self._writer.begin() as conn:
            [stored] = writes.write_runs(conn, [(run, points)], where=self.url)
            if stored:
                follow.rejoin(conn, rejoin)
                for shift in accept:
                    follow.accept(conn, shift, series_key=run.series_key, test=run.test, at=run.created_at)
                triage.hold(conn, run.run_id, run.created_at)
            return stored

    def recent(
        self, coordinates: Sequence[str], *, depth: int, exclude_run_id: str | None = None
    ) -> dict[str, list[Recent]]:
        """Per coordinate, its newest `depth` runs as its baseline sees them, newest first."""
        with self._errors("read recent runs from the history store"), self._engine.connect() as conn:
            return follow.recent(conn, coordinates, depth=depth, exclude_run_id=exclude_run_id)

    def shifts(self, *, test: str | None = None, active: bool = False) -> list[follow.ShiftRow]:
        """Accepted shifts, newest first (`active`: those not undone)."""
        with self._errors("read shifts from the history store"), self._engine.connect() as conn:
            return follow.listed(conn, test=test, active=active)

    def undo_shift(self, pk: int, *, reason: str | None = None) -> bool:
        """Undo accepted shift `pk`; False when no active shift has that number."""
        with self._errors("undo a shift in the history store"), self._writer.begin() as conn:
            return follow.undo(conn, pk, at=datetime.now(UTC), reason=reason)

    def alerts(self, *, test: str | None = None) -> triage.Snapshot:
        """The open gates of one test or of the whole store (`gatecfg alerts`, store/triage.py)."""
        with self._errors("read alerts from the history store"), self._engine.connect() as conn:
            return triage.snapshot(conn, test=test)

    def decide(
        self,
        choose: Callable[[triage.Snapshot], tuple[Cause, Sequence[OpenGate]]],
        *,
        verdict: Verdict,
        reason: str,
        link: str | None,
        who: str,
        test: str | None = None,
    ) -> tuple[int, Cause, Sequence[OpenGate]]:
        """Triage one alert in one transaction: `choose` picks its cause and gates from the open gates
        read in it (raising when it names none); the decision's number, the cause and the gates."""
        with self._errors("record an alert decision in the history store"), self._writer.begin() as conn:
            cause, gates = choose(triage.snapshot(conn, test=test))
            pk = triage.decide(
                conn,
                alert=cause.id,
                cause=cause,
                verdict=verdict,
                reason=reason,
                link=link,
                who=who,
                at=datetime.now(UTC),
                gates=gates,
            )
            return pk, cause, gates

    def undo_decision(self, pk: int, *, who: str, reason: str | None = None) -> bool:
        """Undo alert decision `pk`, restoring what it changed; False when no active decision has it."""
        with self._errors("undo an alert decision in the history store"), self._writer.begin() as conn:
            return triage.undo(conn, pk, who=who, at=datetime.now(UTC), reason=reason)

    def decisions(self, *, everything: bool = False) -> list[triage.DecisionRow]:
        """Alert decisions, newest first (`everything`: undone ones too)."""
        with self._errors("read alert decisions from the history store"), self._engine.connect() as conn:
            return triage.listed(conn, everything=everything)

    def triaged(self, *, test: str | None = None) -> list[Triaged]:
        """Every gate of every active alert decision (`alerts --stats`)."""
        with self._errors("read alert decisions from the history store"), self._engine.connect() as conn:
            return triage.triaged(conn, test=test)

    def write_runs(
        self,
        items: Iterable[tuple[RunInfo, writes.Points]],
        *,
        shifts: Sequence[tuple[Shift, RunInfo]] = (),
        rejoined: Sequence[tuple[str, str]] = (),
        untrusted: Sequence[str] = (),
    ) -> list[bool]:
        """Store several runs in one transaction (`gatecfg import`): all of them, or on any error none.

        `items` is consumed as it is written, in bounded batches: an import streams its runs through here.
        Per run as `write_run`: False, writing nothing for it, when its run id is already stored. Then, in
        the same transaction, what a replay of the runs as nightlies found, read only once every item is
        written (an import's replay fills these as it makes the items): each accepted shift of `shifts`,
        recorded as the nightly write of its run (given beside it) records it; the (coordinate, run id)
        values of `rejoined`, failed values a later night let rejoin; the runs of `untrusted`, untrusted
        by hand. On SQLite the transaction holds the store's write lock until the last run is written.
        """
        with self._errors("write runs to the history store"), self._writer.begin() as conn:
            written = _bulk_write(conn, items, where=self.url)
            for shift, run in shifts:
                follow.accept(conn, shift, series_key=run.series_key, test=run.test, at=run.created_at)
            follow.rejoin_values(conn, rejoined)
            if untrusted:
                writes.set_trust(
                    conn,
                    trusted=False,
                    selector=runs.c.run_id.in_(list(untrusted)),
                    reason="untrusted in the imported export",
                )
            return written

    def baselines(
        self,
        coordinates: Sequence[str],
        *,
        window: int,
        baseline: Baseline = "trusted",
        exclude_run_id: str | None = None,
    ) -> Baselines:
        """Per (coordinate hash, step): finite values of the newest `window` qualifying runs, newest first.

        `trusted` runs: the trust override, else the verdict when written. `nightly`: every run not
        explicitly untrusted. A (coordinate, step) without such values is absent from the result.
        """
        with self._errors("read baselines from the history store"), self._engine.connect() as conn:
            # A coordinate that continues others (`gatecfg carry`) reads their values too.
            carried = links.sources(conn, coordinates)
            found = baselines.baselines(
                conn,
                [c for c in coordinates if c not in carried],
                window=window,
                baseline=baseline,
                exclude_run_id=exclude_run_id,
            )
            if carried:
                values = links.baselines(
                    conn, carried, window=window, baseline=baseline, exclude_run_id=exclude_run_id
                )
                found.windows.update(Baselines.from_values(values).windows)
            return found

    def has_runs(self, series_key: str, *, exclude_run_id: str | None = None) -> bool:
        """Whether any run of this series is stored (besides `exclude_run_id`, the run being judged)."""
        with self._errors("read runs from the history store"), self._engine.connect() as conn:
            return conn.execute(statements.has_runs(series_key, exclude_run_id)).first() is not None

    def coordinates_for(self, series_key: str, metric: str) -> list[CoordinateSummary]:
        """Every stored key of one series and metric with its amount of history, most recent first."""
        with self._errors("read coordinates from the history store"), self._engine.connect() as conn:
            return reads.coordinates_for(conn, series_key, metric)

    def summaries(
        self, *, tests: Sequence[str] | None = None, hashes: Sequence[str] | None = None
    ) -> list[CoordinateSummary]:
        """Stored coordinates (of these tests, these hashes, or all) with their amount of history."""
        with self._errors("read coordinates from the history store"), self._engine.connect() as conn:
            return inventory.summaries(conn, tests=tests, hashes=hashes)

    def prune(self, listed: Mapping[str, int]) -> int:
        """Delete coordinates and their values in one transaction, if each still holds the number of values
        it was listed with (hash -> values); else nothing. Returns the number of values deleted."""
        with self._errors("delete coordinates from the history store"), self._writer.begin() as conn:
            return inventory.delete(conn, listed, where=self.url)

    def retention_plan(self, keep: int) -> list[Retained]:
        """What `retain(keep)` would delete now, per coordinate (only coordinates that lose something)."""
        with self._errors("read the history store"), self._engine.connect() as conn:
            return retention.plan(conn, keep)

    def retain(self, keep: int) -> tuple[list[Retained], int]:
        """Per coordinate, delete the values of runs no baseline of at most `keep` values reaches, in one
        transaction (store/retention.py); returns what was deleted and the number of values."""
        with self._errors("delete old values from the history store"), self._writer.begin() as conn:
            planned = retention.plan(conn, keep)
            return planned, retention.delete(conn, planned)

    def carries(
        self,
        *,
        test: str | None = None,
        metric: str | None = None,
        into: Sequence[str] | None = None,
        active_only: bool = False,
    ) -> list[Carry]:
        """Recorded carries, newest first, undone ones included unless `active_only`."""
        with self._errors("read carries from the history store"), self._engine.connect() as conn:
            return links.listed(conn, test=test, metric=metric, into=into, active_only=active_only)

    def carry(self, items: Sequence[Carry]) -> list[bool]:
        """Record carries in one transaction; False for each that was already active."""
        with self._errors("record carried history in the history store"), self._writer.begin() as conn:
            return links.add(conn, items)

    def undo_carries(self, pairs: Sequence[tuple[str, str]], *, reason: str | None) -> int:
        """Undo the active carries of these (coordinate, from_coordinate) pairs; how many were active."""
        with self._errors("undo carried history in the history store"), self._writer.begin() as conn:
            return links.undo(conn, pairs, at=datetime.now(UTC), reason=reason)

    def set_trust(
        self,
        *,
        trusted: bool,
        run_id: str | None = None,
        commit: str | None = None,
        ci_run_id: str | None = None,
        reason: str | None = None,
        metric: str | None = None,
    ) -> tuple[int, int]:
        """Override the trust of the runs one selector picks: (matched, changed). Deletes nothing. With
        `metric`, only that metric's values in those runs (its gate's baseline): (runs holding it,
        changed)."""
        selectors = [
            column == value
            for column, value in (
                (runs.c.run_id, run_id),
                (runs.c.commit_sha, commit),
                (runs.c.ci_run_id, ci_run_id),
            )
            if value is not None
        ]
        if len(selectors) != 1:
            raise ValueError("set_trust takes exactly one of run_id, commit and ci_run_id")
        with self._errors("change run trust in the history store"), self._writer.begin() as conn:
            if metric is not None:
                return writes.set_metric_trust(
                    conn, trusted=trusted, selector=selectors[0], metric=metric, reason=reason
                )
            return writes.set_trust(conn, trusted=trusted, selector=selectors[0], reason=reason)

    def history(
        self,
        *,
        test: str,
        metric: str,
        step: int | None = None,
        series_key: str | None = None,
        limit: int | None = None,
    ) -> list[HistoryRow]:
        """Stored values of a test's metric, newest run first."""
        with self._errors("read the history store"), self._engine.connect() as conn:
            return reads.history(
                conn, test=test, metric=metric, step=step, series_key=series_key, limit=limit
            )

    def run_values(
        self,
        *,
        test: str,
        metrics: Sequence[str],
        series_key: str | None = None,
        statuses: Collection[str] | None = None,
    ) -> Iterator[tuple[RunRow, dict[tuple[str, str], ValueColumns]]]:
        """Every stored run of `test` (of one series, or all), oldest first, with its values of `metrics`
        as arrays per (metric, steps_key) (see `reads.run_values`), read a batch of runs at a time as the
        caller goes: millions of values never sit in memory at once unless the caller keeps them. The
        statuses they were written with are read for the metrics of `statuses` only (None: all)."""
        with self._errors("read the history store"), self._engine.connect() as conn:
            listed = reads.keyed_runs(conn, test=test, series_key=series_key)
            for row, values in reads.run_values(conn, listed, test=test, metrics=metrics, statuses=statuses):
                yield cast(RunRow, row), values

    def metric_overrides(self, *, test: str) -> dict[str, dict[str, bool]]:
        """Trust set by hand on one metric's values of a run (`trust --metric`), by run id and metric."""
        with self._errors("read the history store"), self._engine.connect() as conn:
            return reads.metric_overrides(conn, test=test)

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """The stored runs among `run_ids`, by run id."""
        with self._errors("read runs from the history store"), self._engine.connect() as conn:
            return reads.runs_by_id(conn, run_ids)

    def newest_run(
        self, series_key: str, *, baseline: Baseline, exclude_run_id: str | None = None
    ) -> RunRow | None:
        """The newest run of a series that forms baselines (`trusted`, or every `nightly` not untrusted by
        hand), besides `exclude_run_id`: what tonight's run is compared with when a gate fails."""
        with self._errors("read runs from the history store"), self._engine.connect() as conn:
            return reads.newest_run(conn, series_key, baseline=baseline, exclude_run_id=exclude_run_id)

    def runs(self, *, test: str | None = None) -> list[RunRow]:
        """Stored runs, newest first."""
        with self._errors("read runs from the history store"), self._engine.connect() as conn:
            return reads.run_rows(conn, test=test)

    def tests(self) -> list[str]:
        """The tests with a stored run, by name."""
        with self._errors("read runs from the history store"), self._engine.connect() as conn:
            return reads.stored_tests(conn)

    def metrics(self, *, test: str) -> list[str]:
        """The metrics stored for `test`, by name."""
        with self._errors("read coordinates from the history store"), self._engine.connect() as conn:
            return reads.stored_metrics(conn, test=test)

    def inventory(self) -> Inventory:
        """Schema revision, rows per table and size (`gatecfg db status`)."""
        database = sa.make_url(self.url).database if self._engine.dialect.name == "sqlite" else None
        with self._errors("read the history store"), self._engine.connect() as conn:
            return transfer.inventory(conn, database)

    def copy_into(self, target: Store, *, replace: bool) -> dict[str, int]:
        """Every row of this store into `target`, in one transaction of the target's; rows per table."""
        # A snapshot of the source: nightlies may keep writing to it while it is copied.
        pg = self._engine.dialect.name == "postgresql"
        snapshot = {"isolation_level": "REPEATABLE READ"} if pg else {}  # SQLite's BEGIN is one already
        with (
            self._errors("read the history store to copy"),
            self._engine.connect().execution_options(**snapshot) as source,
            source.begin(),
            target._errors(f"copy into the history store {target.url}"),
            target._writer.begin() as conn,
        ):
            return transfer.copy_tables(source, conn, replace=replace, where=target.url)

    def revision(self) -> str | None:
        """The schema revision the store is at, or None for a store with no gatecfg schema yet."""
        return self._current_revision()

    def _errors(self, action: str, hint: str = STORE_HINT) -> AbstractContextManager[None]:
        return store_errors(self.url, action, hint=hint)

    def _current_revision(self) -> str | None:
        """The schema revision Alembic recorded, read without importing Alembic, or None for a store with
        no gatecfg schema."""
        sqlite = self._engine.dialect.name == "sqlite"
        hint = SQLITE_CONNECT_HINT if sqlite else CONNECT_HINT
        try:
            with self._errors("connect to the history store", hint=hint), self._engine.connect() as conn:
                if not sa.inspect(conn).has_table(VERSION_TABLE):
                    return None
                revision: str | None = conn.execute(
                    sa.select(sa.column("version_num")).select_from(sa.table(VERSION_TABLE))
                ).scalar()
                return revision
        except StoreError as exc:
            # The server's words (psycopg gives no SQLSTATE for a failed connection): a missing database
            # is most often a typo in the URL, else a store nobody has created yet.
            if sqlite or not MISSING_DATABASE.search(str(exc)):
                raise
            url = sa.make_url(self.url)
            raise StoreError.at(
                self.url,
                exc.problems[0].message,
                hint="check --db / GATECFG_DB_URL for a typo; else create the database "
                f"(`createdb -h {url.host or 'localhost'} -U {url.username or 'postgres'} {url.database}`) "
                f"and run `gatecfg db upgrade --db {self.url}`",
            ) from exc

    def _reach_head(self, current: str | None) -> None:
        if current is not None and current not in _known_revisions():
            raise StoreError.at(
                self.url,
                f"the history store is at schema revision {current}, which this gatecfg does not know",
                hint="a newer gatecfg wrote it: upgrade gatecfg",
            )
        if self._engine.dialect.name == "sqlite":
            self.upgrade()
            return
        has = "no gatecfg schema yet" if current is None else f"schema revision {current}"
        raise StoreError.at(
            self.url,
            f"the history store has {has}; this gatecfg needs revision {SCHEMA_REVISION}",
            hint=f"run `gatecfg db upgrade --db {self.url}` once, as a role that may create tables",
        )


def _bulk_write(
    conn: Connection, items: Iterable[tuple[RunInfo, writes.Points]], *, where: str
) -> list[bool]:
    if conn.dialect.name != "sqlite":
        return writes.write_runs(conn, items, where=where)
    # SQLite spills the dirty pages past its page cache (2 MB by default) to the write-ahead log
    # mid-transaction and writes a page again each time it changes after: a larger cache for this
    # connection while it writes thousands of runs (10% fewer CPU seconds per row at 800k rows).
    (cache,) = conn.exec_driver_sql("PRAGMA cache_size").one()
    conn.exec_driver_sql(f"PRAGMA cache_size = {BULK_CACHE_KIB}")
    try:
        return writes.write_runs(conn, items, where=where)
    finally:
        with contextlib.suppress(sa.exc.DBAPIError):  # the write's own error is the news
            conn.exec_driver_sql(f"PRAGMA cache_size = {int(cache)}")


def _require_file(url: URL) -> None:
    """A SQLite store must already exist as a file holding a gatecfg schema. Checked read-only before
    the engine connects: connecting would create the file and its folder, and switch it to WAL."""
    if url.get_backend_name() != "sqlite":
        return
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    path = Path(database)
    if not path.is_file():
        raise StoreError.at(
            redact(url),
            "no history store at this URL: the file does not exist (nothing was created)",
            hint=_create_hint(redact(url)),
        )
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)
            ).fetchall()
    except sqlite3.Error as exc:
        raise StoreError.at(
            redact(url), f"cannot read the history store: {exc}", hint=SQLITE_CONNECT_HINT
        ) from None
    if not found:
        raise StoreError.at(
            redact(url),
            "no history store at this URL: the file holds no gatecfg schema (left as it was)",
            hint=_create_hint(redact(url)),
        )


def _create_hint(url: str) -> str:
    return (
        "check --db / GATECFG_DB_URL for a typo; a new store is created by the first nightly "
        f"`gatecfg evaluate ... --write` or by `gatecfg db upgrade --db {url}`"
    )


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    # The option value goes through configparser interpolation, where a literal % must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    return config


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
