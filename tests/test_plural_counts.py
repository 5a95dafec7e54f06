"""Counts read in the right number in the analytics' words (`1 run`, `1 nightly`), through
gatecfg.wording.plural: backtest, rebaseline, shifts and the HTML report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import run_cli
from test_living_baselines import LIVING, living_gates, nightly

from gatecfg.analysis.html import SeriesView, _latest
from gatecfg.commands.shifts import describe
from gatecfg.store.follow import ShiftRow

pytest.importorskip("scipy")  # backtest and rebaseline need the analytics extra


@pytest.fixture
def one_night(tmp_path: Path, db: str) -> Path:
    gates = living_gates(tmp_path)
    nightly(gates, db, "n1", reward=[(0, 0.5)], kl=[(0, 1.0)])
    return gates


def test_backtest_of_one_run_of_one_test_reads_in_the_singular(one_night: Path, db: str) -> None:
    done = run_cli("backtest", "--test", LIVING, "--gates", one_night, "--db", db)
    assert done.code == 0, done.err
    assert done.out.startswith("gatecfg backtest: 1 stored run of 1 test from ")


def test_rebaseline_of_a_one_run_regime_reads_in_the_singular(one_night: Path, db: str) -> None:
    done = run_cli("rebaseline", "--test", LIVING, "--gates", one_night, "--db", db, "--last", "1",
                   "--metric", "train/kl")  # fmt: skip
    assert done.code == 0, done.err
    assert "  regime  --last 1: 1 run n1 .. n1," in done.out
    assert "over 1 value\n" in done.out
    assert "would fail 0 of 1 run of the regime" in done.out
    assert "band    only 1 run of the regime in its baseline < window 20" in done.out


def test_a_shift_accepted_after_one_nightly_reads_in_the_singular() -> None:
    at = datetime(2026, 1, 5, tzinfo=UTC)
    shift = ShiftRow(pk=1, coordinate="c", test=LIVING, metric="train/kl", series_key="s", first_run_id="up0",
                     commit=None, direction="up", size=1.0, nightlies=1, accepted_run_id="up0", created_at=at,
                     undone_at=None, undo_reason=None)  # fmt: skip
    assert "UTC after 1 nightly (run up0)" in describe(shift)


def test_the_html_report_counts_one_run_in_the_singular() -> None:
    at = datetime(2026, 1, 5, tzinfo=UTC)
    series = SeriesView(labels={}, runs=1, latest_run="n1", latest_commit=None, latest_date=at,
                        latest_trusted=True, gates=[])  # fmt: skip
    assert _latest(series).startswith("1 run; latest <code>n1</code>")
