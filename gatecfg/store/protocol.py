"""What evaluate and the analytics read from the history store, as one protocol with two implementations:
`Store` (store/store.py: SQLAlchemy, every dialect, and every write) and `DirectStore` (store/direct.py: a
plain SQLite file read through sqlite3, without importing SQLAlchemy, handing to `Store` what it cannot
read). Code that only reads takes a `StoreReads` and runs on either."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gatecfg.membership import Baseline
    from gatecfg.store.rows import CoordinateSummary, HistoryRow
    from gatecfg.windows import Baselines


class StoreReads(Protocol):
    url: str  # as messages and reports show it: credentials masked

    def baselines(
        self,
        coordinates: Sequence[str],
        *,
        window: int,
        baseline: Baseline = "trusted",
        exclude_run_id: str | None = None,
    ) -> Baselines:
        """Per coordinate and step, the finite values of the newest `window` qualifying runs, newest
        first (`trusted`: the trust override, else the verdict when written; `nightly`: every run not
        untrusted by hand); a coordinate that carries history reads the carried keys too."""
        ...

    def has_runs(self, series_key: str, *, exclude_run_id: str | None = None) -> bool:
        """Whether any run of the series is stored (other than `exclude_run_id`)."""
        ...

    def coordinates_for(self, series_key: str, metric: str) -> list[CoordinateSummary]:
        """Every key one series and metric is stored under, with its amount of history, newest first."""
        ...

    def history(
        self,
        *,
        test: str,
        metric: str,
        step: int | None = None,
        series_key: str | None = None,
        limit: int | None = None,
    ) -> list[HistoryRow]:
        """One metric's stored values, newest run first, then by key and step."""
        ...
