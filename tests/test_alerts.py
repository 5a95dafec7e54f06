"""`gatecfg alerts` (issue 37, docs/alerts.md): a fleet's open failures grouped by the change that began
them, triaged once per cause through the facts the baseline rule reads, every decision undone exactly,
and what people said counted."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import run_cli

import gatecfg
from gatecfg.alerts import Night, OpenGate, Triaged, group, low_precision, tallies
from gatecfg.commands.alerts import ack, alerts, undo
from gatecfg.keys import series_key
from gatecfg.resolve import load_tree
from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store

METRICS = ("train/loss", "train/grad_norm", "train/kl", "perf/mfu", "eval/score")
GATE = "    steps: [0, 1, 2]\n    constraint: {rel_up: 0.1, rel_down: 0.1}\n"
POLICY = "policy:\n  window: 20\n  min_history: 1\n  accept_shift_after: 5\n"
START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def gate_tree(tmp_path: Path, tests: int) -> Path:
    """A gates root per test (`gates/tNN/`): each nightly loads only its own, as one repository's CI job
    would; they share one store."""
    defaults = "".join(f"  {m}:\n{GATE}" for m in METRICS)
    lines = "".join(f"  {m}:\n" for m in METRICS)
    for t in range(tests):
        root = tmp_path / "gates" / f"t{t:02d}"
        root.mkdir(parents=True)
        (root / "base.yaml").write_text(f"version: 1\ndefaults:\n{defaults}{POLICY}", encoding="utf-8")
        (root / "gate.yaml").write_text(f"test: {name(t)}\ngates:\n{lines}", encoding="utf-8")
    return tmp_path / "gates"


def name(t: int) -> str:
    return f"tests/e2e/test_fleet_{t:02d}.py"


class Fleet:
    """Nightlies of `tests` tests: steady noise of 1%, a level per test that a night can move."""

    def __init__(self, tmp_path: Path, db: str, tests: int) -> None:
        self.gates = gate_tree(tmp_path, tests)
        self.db = db
        self.tests = tests
        self.rng = random.Random(37)
        self.level = dict.fromkeys(range(tests), 1.0)
        self.image = dict.fromkeys(range(tests), "26.03")
        self.night = 0

    def seed(self, nights: int) -> None:
        """`nights` clean nightlies of every test, written in one transaction as the nightlies would have
        written them (each value within 1% of its level, well inside the 10% band: every gate passed), so
        that the history of a fleet costs a second rather than a nightly per test and night."""
        items = []
        for t in range(self.tests):
            resolved = load_tree(self.gates / f"t{t:02d}").test(name(t))
            series = series_key(resolved.test, {})
            for n in range(self.night, self.night + nights):
                run = RunInfo(
                    run_id=f"n{n:02d}-t{t:02d}",
                    test=resolved.test,
                    series_key=series,
                    labels={},
                    commit=f"c{n:02d}",
                    branch=None,
                    ci_run_id=None,
                    ci_run_attempt=None,
                    url=None,
                    created_at=START + timedelta(days=n),
                    gate_trusted=True,
                    written_by="tests",
                    meta={"image": self.image[t]},
                )
                points = {}
                for gate in resolved.gates:
                    spec = CoordinateSpec(
                        gate.coordinate(series),
                        series,
                        resolved.test,
                        gate.metric,
                        gate.steps_key,
                        gate.constraint_key,
                    )
                    values = [self.level[t] * (1.0 + 0.01 * self.rng.gauss(0.0, 1.0)) for _ in range(3)]
                    none: list[float | None] = [None] * 3
                    points[spec] = PointColumns([0, 1, 2], values, ["pass"] * 3, none, none, none, none, True)
                items.append((run, points))
        items.sort(key=lambda item: item[0].created_at)
        with Store.open(self.db, create=True) as store:
            store.write_runs(items)
        self.night += nights

    def nightly(self, *, spike: dict[int, str] | None = None) -> dict[int, gatecfg.RunReport]:
        """One night of every test, all on the night's commit; `spike`: one gate of a test fails once."""
        done = {}
        at = START + timedelta(days=self.night)
        for t in range(self.tests):
            record = {}
            for m in METRICS:
                value = self.level[t] * (1.5 if spike and spike.get(t) == m else 1.0)
                record[m] = [(s, value * (1.0 + 0.01 * self.rng.gauss(0.0, 1.0))) for s in range(3)]
            done[t] = gatecfg.evaluate(
                name(t),
                record,
                gates=self.gates / f"t{t:02d}",
                db=self.db,
                write=True,
                run_id=f"n{self.night:02d}-t{t:02d}",
                commit=f"c{self.night:02d}",
                meta={"image": self.image[t]},
                date=at,
            )
        self.night += 1
        return done


def baselines(db: str) -> dict[str, object]:
    """What the store's baseline reads give every stored coordinate, and the active shifts."""
    with Store.open(db) as store:
        hashes = [s.spec.coordinate for s in store.summaries()]
        found = store.baselines(hashes, window=20)
        windows = {
            f"{key}:{step}": [v for v in row if math.isfinite(v)]  # without the NaN padding
            for key, w in sorted(found.windows.items())
            for step, row in zip(w.steps, w.values.tolist(), strict=True)
        }
        shifts = sorted((s.coordinate, s.first_run_id) for s in store.shifts(active=True))
    return {"windows": windows, "shifts": shifts}


def groups_of(db: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert alerts(db=db, test=None, stats=False, fmt="json") == 0
    found: list[dict[str, object]] = json.loads(capsys.readouterr().out)["alerts"]
    return found


def test_a_fleet_red_night_is_two_alerts_one_per_cause_and_triage_follows_them(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = Fleet(tmp_path, db, tests=50)
    fleet.seed(29)
    fleet.nightly()
    assert groups_of(db, capsys) == []
    # Night 30: tests 0-29 move to image 26.04, which lifts them 30%; test 40 regresses on the commit.
    for t in range(30):
        fleet.image[t], fleet.level[t] = "26.04", 1.3
    fleet.level[40] = 0.7
    red = fleet.nightly()
    assert sum(not r.run.trusted for r in red.values()) == 31
    env, commit = groups_of(db, capsys)
    assert env["cause"] == {
        "night": "2026-12-01",
        "commit": "c30",
        "environment": [{"key": "image", "before": "26.03", "after": "26.04"}],
    }
    assert len(env["tests"]) == 30
    assert len(env["gates"]) == 150
    assert env["direction"] == "up"
    assert env["evidence"].startswith("150 of the 150 gates of the 30 tests whose first run with image=26.04")
    assert commit["cause"] == {"night": "2026-12-01", "commit": "c30", "environment": []}
    assert commit["tests"] == [name(40)]
    assert commit["direction"] == "down"

    before = baselines(db)
    assert (
        ack(db=db, alert=env["id"], verdict="environment", reason="image 26.04 rollout", link=None, test=None)
        == 0
    )
    assert baselines(db) != before
    [decision] = Store.open(db).decisions()
    assert undo(db=db, decision=decision.decided.pk, reason="acked too early") == 0
    assert baselines(db) == before  # the undo restores every baseline read exactly
    assert [g["id"] for g in groups_of(db, capsys)] == [env["id"], commit["id"]]

    assert (
        ack(db=db, alert=env["id"][:6], verdict="environment", reason="image 26.04", link=None, test=None)
        == 0
    )
    # Night 31: the 30 pass on the new level, the regression still fails; test 45 spikes once on noise.
    nxt = fleet.nightly(spike={45: "train/kl"})
    assert all(nxt[t].run.trusted for t in range(30))
    assert not nxt[40].run.trusted
    assert not nxt[45].run.trusted
    open_now = groups_of(db, capsys)
    assert [g["id"] for g in open_now if g["decision"] is None] != []
    assert env["id"] not in [g["id"] for g in open_now]
    noise = next(g for g in open_now if g["tests"] == [name(45)])
    assert noise["cause"]["commit"] == "c31"
    assert [x["metric"] for x in noise["gates"]] == ["train/kl"]
    before = baselines(db)
    assert (
        ack(db=db, alert=noise["id"], verdict="false-alarm", reason="one-off spike", link=None, test=None)
        == 0
    )
    spike_key = next(k for k in baselines(db)["windows"] if k.startswith(noise["gates"][0]["coordinate"]))
    assert max(baselines(db)["windows"][spike_key]) > 1.4  # the failed value rejoined its baseline
    pk = max(d.decided.pk for d in Store.open(db).decisions())
    undo(db=db, decision=pk, reason=None)
    assert baselines(db) == before
    # The regression is still open, under the commit of the night it began.
    assert any(g["tests"] == [name(40)] and g["cause"]["commit"] == "c30" for g in groups_of(db, capsys))


@pytest.fixture
def one_test(tmp_path: Path, db: str) -> Fleet:
    fleet = Fleet(tmp_path, db, tests=2)
    fleet.seed(12)
    fleet.level[0] = 0.7
    fleet.nightly()
    return fleet


def test_a_regression_keeps_failing_past_accept_shift_after_then_closes_by_itself(
    one_test: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    db = one_test.db
    [alert] = groups_of(db, capsys)
    ack(
        db=db,
        alert=alert["id"],
        verdict="regression",
        reason="router bug #812",
        link="https://x.test/812",
        test=None,
    )
    for _ in range(7):  # longer than policy.accept_shift_after: no shift follows a held regression
        assert not one_test.nightly()[0].run.trusted
    with Store.open(db) as store:
        assert store.shifts(active=True) == []
    [still] = groups_of(db, capsys)
    assert still["id"] == alert["id"]
    assert still["decision"]["verdict"] == "regression"
    assert still["gates"][0]["nightlies"] == 8
    one_test.level[0] = 1.0
    assert one_test.nightly()[0].run.trusted  # the level returned: judged against the old baseline
    capsys.readouterr()
    alerts(db=db, test=None, stats=True, fmt="text")
    out = capsys.readouterr().out
    assert "no open alerts" in out
    assert f"CLOSED BY ITSELF: alert {alert['id']}" in out
    assert "5 of its 5 gates passed again" in out
    [row] = Store.open(db).decisions()
    assert row.closed == 5
    assert row.decided.link == "https://x.test/812"


def test_undoing_a_regression_restores_the_values_it_held_since(
    one_test: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    db = one_test.db
    [alert] = groups_of(db, capsys)
    before = baselines(db)
    ack(db=db, alert=alert["id"], verdict="regression", reason="bug", link=None, test=None)
    one_test.level[1] = 1.0
    with Store.open(db) as store:
        [decision] = store.decisions()
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        held = conn.execute(
            sa.text("SELECT count(*) FROM run_coordinates WHERE trust_override = false")
        ).scalar()
    assert held == 5
    undo(db=db, decision=decision.decided.pk, reason=None)
    engine.dispose()
    assert baselines(db) == before


def test_the_cli_lists_acks_and_refuses_what_it_cannot_do(one_test: Fleet) -> None:
    db = one_test.db
    listed = run_cli("alerts", "--db", db, "--format", "json")
    [alert] = json.loads(listed.out)["alerts"]
    assert json.loads(listed.out)["version"] == 1
    text = run_cli("alerts", "--db", db)
    assert f"[{alert['id']}] commit c12 on 2026-11-13: 1 test, 5 gates, down -30." in text.out
    assert "untriaged: gatecfg alerts ack" in text.out
    md = run_cli("alerts", "--db", db, "--format", "markdown")
    assert md.out.startswith("### gatecfg alerts: 1 open alert")
    wrong = run_cli("alerts", "ack", "zzzz9999", "--as", "regression", "--reason", "x", "--db", db)
    assert wrong.code == 2
    assert "no open alert zzzz9999: nothing changed" in wrong.err
    blank = run_cli("alerts", "ack", alert["id"], "--as", "regression", "--reason", " ", "--db", db)
    assert blank.code == 2
    assert "--reason" in blank.err
    done = run_cli("alerts", "ack", alert["id"], "--as", "intended", "--reason", "new optimizer", "--db", db)
    assert done.code == 0
    assert "triaged as intended for 5 gates of 1 test" in done.out
    again = run_cli("alerts", "ack", alert["id"], "--as", "regression", "--reason", "x", "--db", db)
    assert again.code == 2
    assert "was triaged as intended" in again.err
    before_action = run_cli("alerts", "--db", db, "decisions")  # the command's --db holds for its action
    assert before_action.code == 0
    assert "new optimizer" in before_action.out
    audit = run_cli("alerts", "decisions", "--db", db)
    assert "alert " + alert["id"] in audit.out
    assert "intended by" in audit.out
    assert "new optimizer" in audit.out
    assert run_cli("alerts", "undo", "99", "--db", db).code == 2


def test_the_write_policy_decides_who_may_triage_from_ci(
    one_test: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = one_test.db
    [alert] = json.loads(run_cli("alerts", "--db", db, "--format", "json").out)["alerts"]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_ACTOR", "mallory")
    args = ("alerts", "ack", alert["id"], "--as", "intended", "--reason", "x", "--db", db)
    refused = run_cli(*args, "--gates", one_test.gates / "t00")
    assert refused.code == 2
    assert "may not triage an alert" in refused.err
    done = run_cli(*args, "--gates", one_test.gates / "t00", "--override-write-policy", "triage by hand")
    assert done.code == 0
    [row] = Store.open(db).decisions()
    assert row.decided.decided_by == "mallory (GitHub Actions)"


def night(run_id: str, day: int, commit: str, **meta: str) -> Night:
    return Night(run_id, f"s-{run_id[:2]}", f"t-{run_id[:2]}", commit, START + timedelta(days=day), meta)


def test_a_gate_groups_by_the_night_commit_and_environment_its_first_failing_run_changed() -> None:
    def gate(series: str, first: Night, before: Night) -> OpenGate:
        return OpenGate(
            series, series, "m", series + "m", "failing", first, before, first, (first.run_id,), 0.2, 3
        )

    a = gate("aa", night("aa2", 2, "c2", image="2"), night("aa1", 1, "c1", image="1", runner="x"))
    b = gate("bb", night("bb2", 2, "c2", image="2", runner="y"), night("bb1", 1, "c1", image="1"))
    c = gate("cc", night("cc2", 2, "c2", image="1"), night("cc1", 1, "c1", image="1"))
    found = group([a, b, c], {}, {})
    assert [[g.series_key for g in x.gates] for x in found] == [["aa", "bb"], ["cc"]]
    assert found[0].cause.describe() == "environment image 1 -> 2 (commit c2) on 2026-11-03"
    assert found[1].cause.describe() == "commit c2 on 2026-11-03"


def test_stats_count_verdicts_precision_and_hours_and_name_a_gate_people_call_noisy() -> None:
    at = START
    rows = [
        Triaged("t", "m", "false-alarm", at, at + timedelta(hours=2), False, 1),
        Triaged("t", "m", "false-alarm", at, at + timedelta(hours=4), False, 2),
        Triaged("t", "m", "regression", at, at + timedelta(hours=6), True, 3),
        Triaged("t", "k", "regression", at, at + timedelta(hours=6), True, 3),
        Triaged("t", "k", "intended", at, at + timedelta(hours=1), False, 4),
    ]
    gates, tests = tallies(rows, [])
    m = next(g for g in gates if g.metric == "m")
    assert (m.alerts, m.triaged, m.median_hours) == (3, 3, 4.0)
    assert m.precision == pytest.approx(1 / 3)
    assert tests[0].triaged == 4  # decision 3 covered two of its gates: one alert of the test
    assert tests[0].precision == pytest.approx(0.5)
    [line] = low_precision(gates)
    assert line.startswith("t m: 2 of its 3 triaged alerts were false alarms (precision 33%)")


def test_the_html_report_has_an_alerts_section_with_what_people_said(
    one_test: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gatecfg.commands.report import report

    db = one_test.db
    [alert] = groups_of(db, capsys)
    ack(db=db, alert=alert["id"], verdict="regression", reason="<b>bug</b>", link=None, test=None)
    report(gates=one_test.gates / "t00", db=db, out=tmp_path / "html", test=None, png=False)
    page = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert "<h2>Alerts</h2><p>1 open alert, one per cause" in page
    assert f"<code>{alert['id']}</code>" in page
    assert "regression by " in page
    assert "&lt;b&gt;bug&lt;/b&gt;" in page
    assert "<h3>What people said</h3>" in page


def test_a_store_at_0008_upgrades_keeping_its_history_and_db_copy_carries_the_decisions(
    one_test: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from alembic import command
    from test_store import migrations_config

    db = one_test.db
    before = baselines(db)
    config = migrations_config()
    engine = sa.create_engine(db)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0008")
        assert "alert_decisions" not in sa.inspect(engine).get_table_names()
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()
    assert baselines(db) == before
    [alert] = groups_of(db, capsys)
    ack(db=db, alert=alert["id"], verdict="false-alarm", reason="noise", link=None, test=None)
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    with Store.open(db) as source, Store.open(target, create=True) as copy:
        counts = source.copy_into(copy, replace=False)
    assert counts["alert_decisions"] == 1
    assert counts["alert_gates"] == 5
    assert counts["alert_prior"] == 5
    with Store.open(target) as copy:
        assert [d.decided.reason for d in copy.decisions()] == ["noise"]
    assert baselines(target) == baselines(db)
    pk = Store.open(target).decisions()[0].decided.pk
    assert undo(db=target, decision=pk, reason=None) == 0
    assert baselines(target) == before


def test_the_summary_a_failed_gate_is_written_with_is_what_its_points_give(one_test: Fleet) -> None:
    """`store/triage.summary` (written with the run, so that `alerts` reads no points) against the
    points of a row written before revision 0009, which `alerts` summarises from them."""
    db = one_test.db
    with Store.open(db) as store:
        written = {g.coordinate: (g.change, g.steps, g.kind) for g in store.alerts().gates}
    engine = sa.create_engine(db)
    try:
        with engine.begin() as conn:
            wiped = conn.execute(
                sa.text("UPDATE run_coordinates SET failed_steps = NULL, error_steps = NULL, change = NULL")
            ).rowcount
    finally:
        engine.dispose()
    assert wiped > 0
    with Store.open(db) as store:
        from_points = {g.coordinate: (g.change, g.steps, g.kind) for g in store.alerts().gates}
    assert written.keys() == from_points.keys()
    assert len(written) == 5
    for key, (change, steps, kind) in written.items():
        assert from_points[key][1:] == (steps, kind) == (3, "failing")
        assert from_points[key][0] == pytest.approx(change, rel=1e-12)


def test_a_nightly_whose_gates_pass_and_fail_stores_the_failed_ones_summary(
    one_test: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's gates go to the store in one bulk insert: the failed gate's summary must be stored
    whether or not the gates before it passed."""
    one_test.nightly(spike={1: "train/kl"})
    engine = sa.create_engine(one_test.db)
    try:
        with engine.connect() as conn:
            summaries = conn.execute(
                sa.text("SELECT failed_steps FROM run_coordinates WHERE gate_trusted = false")
            ).all()
    finally:
        engine.dispose()
    # Test 0 failed its five gates on both nights (the fixture's and this one), test 1 one gate tonight.
    assert sorted(n for (n,) in summaries) == [3] * 11
