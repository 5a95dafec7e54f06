"""`evaluate --write --date` and the API's `date=`: a backfill stamps each run with its own time; a date in
the future, a naive datetime object, text that is no date, or a date without a write is exit 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import run_cli
from test_evaluate_cli import TEST, write_gates, write_record

import gatecfg
from gatecfg.store import Store

POINTS = {"rollout/raw_reward": [(0, 0.2), (1, 0.5)]}


def stored_dates(db: str) -> dict[str, str]:
    with Store.open(db) as store:
        return {row.run.run_id: row.run.created_at.isoformat() for row in store.runs()}


def evaluate_cli(tmp_path: Path, db: str, *extra: str) -> tuple[int, str]:
    gates = write_gates(tmp_path)
    record = write_record(tmp_path / "night.jsonl", POINTS)
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db, *extra)
    return result.code, result.err


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        pytest.param("2026-01-05T02:30:00+02:00", "2026-01-05T00:30:00+00:00", id="with-zone"),
        pytest.param("2026-01-05T02:30:00", "2026-01-05T02:30:00+00:00", id="naive-is-utc"),
        pytest.param("2026-01-05", "2026-01-05T00:00:00+00:00", id="a-day"),
    ],
)
def test_write_with_a_date_stores_the_run_at_that_time(
    tmp_path: Path, db: str, given: str, stored: str
) -> None:
    code, err = evaluate_cli(tmp_path, db, "--write", "--run-id", "back-1", "--date", given)
    assert code == 0, err
    assert stored_dates(db) == {"back-1": stored}


def test_a_backfill_in_date_order_lists_each_run_at_its_own_date(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    for day in (3, 4, 5):
        record = write_record(tmp_path / f"night{day}.jsonl", POINTS)
        result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                         "--write", "--run-id", f"day-{day}", "--date", f"2026-01-0{day}T02:00Z")  # fmt: skip
        assert result.code == 0, result.err
    history = run_cli("history", "--test", TEST, "--metric", "rollout/raw_reward", "--step", "1",
                      "--db", db, "--format", "json")  # fmt: skip
    rows = json.loads(history.out)
    assert [(r["run_id"], r["created_at"]) for r in rows] == [
        ("day-5", "2026-01-05T02:00:00+00:00"),
        ("day-4", "2026-01-04T02:00:00+00:00"),
        ("day-3", "2026-01-03T02:00:00+00:00"),
    ]
    # Each night was judged against the nights written before it.
    assert [r["ref"] for r in rows] == [0.5, 0.5, None]


def test_a_date_within_a_minute_of_clock_skew_is_not_the_future(tmp_path: Path, db: str) -> None:
    ahead = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    code, err = evaluate_cli(tmp_path, db, "--write", "--run-id", "skewed", "--date", ahead)
    assert code == 0, err
    assert list(stored_dates(db)) == ["skewed"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            ("--write", "--date", "2999-01-01"),
            "--date: error: 2999-01-01T00:00:00+00:00 is in the future",
            id="future",
        ),
        pytest.param(
            ("--write", "--date", "yesterday"),
            "--date: error: `yesterday` is not an ISO 8601 date",
            id="text",
        ),
        pytest.param(
            ("--date", "2026-01-05"), "--date: error: only means something with --write", id="without-write"
        ),
    ],
)
def test_a_date_that_cannot_stamp_a_run_is_exit_2_and_writes_nothing(
    tmp_path: Path, db: str, extra: tuple[str, ...], message: str
) -> None:
    code, err = evaluate_cli(tmp_path, db, "--run-id", "refused", *extra)
    assert code == 2
    assert message in err
    assert stored_dates(db) == {}


def test_the_api_takes_an_aware_datetime_or_iso_text(tmp_path: Path, db: str) -> None:
    gates = write_gates(tmp_path)
    in_paris = datetime(2026, 1, 5, 3, 30, tzinfo=timezone(timedelta(hours=1)))
    gatecfg.evaluate(TEST, POINTS, gates=gates, db=db, write=True, run_id="aware", date=in_paris)
    gatecfg.evaluate(TEST, POINTS, gates=gates, db=db, write=True, run_id="text", date="2026-01-06T01:00")
    assert stored_dates(db) == {"aware": "2026-01-05T02:30:00+00:00", "text": "2026-01-06T01:00:00+00:00"}


@pytest.mark.parametrize(
    ("date", "write", "message"),
    [
        pytest.param(datetime(2026, 1, 5, 2, 30), True, "2026-01-05T02:30:00 has no time zone", id="naive"),
        pytest.param(datetime(2999, 1, 1, tzinfo=UTC), True, "is in the future", id="future"),
        pytest.param("2026-01-05", False, "only means something with write=True", id="without-write"),
        pytest.param(20260105, True, "20260105 is int, not datetime or a string", id="not-a-date"),
    ],
)
def test_the_api_refuses_a_date_that_cannot_stamp_a_run(
    tmp_path: Path, db: str, date: object, write: bool, message: str
) -> None:
    gates = write_gates(tmp_path)
    with pytest.raises(gatecfg.InputError, match=message) as raised:
        gatecfg.evaluate(TEST, POINTS, gates=gates, db=db, write=write, run_id="refused", date=date)  # type: ignore[arg-type]
    assert str(raised.value).startswith("date: error: ")
    assert stored_dates(db) == {}
