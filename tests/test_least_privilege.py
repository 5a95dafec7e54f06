"""Least privilege and bound parameters.

* The PostgreSQL roles of docs/security.md, created from the SQL block on that page in a fresh database:
  the CI role runs `evaluate --write`, `history`, `trust` and `untrust`, and can neither create, change
  nor delete anything else; the prune role can also prune.
* Metric names, series labels, run ids and commits full of quotes, semicolons and non-ASCII letters
  round-trip intact through `evaluate --write` and `history` on both stores.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import REPO, run_cli

from gatecfg.store import Store

TEST = "tests/e2e/test_roles_ci.py"
GATES = f"""\
test: {TEST}
gates:
  train/grad_norm:
    steps: all
    constraint: {{rel_up: 0.5, abs_floor_up: 0.1}}
  eval/score:
    steps: last
    constraint: {{rel_down: 0.1}}
"""
RECORD = '{"_step": 0, "train/grad_norm": 1.0}\n{"_step": 1, "train/grad_norm": 1.1, "eval/score": 0.8}\n'
# The placeholders in docs/security.md's SQL, and the password it shows.
DOC_NAMES = ("gatecfg_ci", "gatecfg_prune", "gatecfg_reader", "gatecfg_history")


def documented_grants() -> str:
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 1, "docs/security.md should hold exactly one ```sql block"
    return blocks[0]


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


@pytest.fixture
def roles(postgresql_url: str) -> Iterator[tuple[str, str, str]]:
    """The documented roles in a fresh database at head: (CI role's URL, prune role's, reader's)."""
    with Store.open(postgresql_url, check_schema=False) as store:
        store.upgrade()
    suffix = uuid.uuid4().hex[:10]
    url = sa.make_url(postgresql_url)
    names = {
        "gatecfg_ci": f"gatecfg_ci_{suffix}",
        "gatecfg_prune": f"gatecfg_prune_{suffix}",
        "gatecfg_reader": f"gatecfg_reader_{suffix}",
    }
    sql = documented_grants()
    for placeholder, name in [*names.items(), ("gatecfg_history", url.database or "")]:
        sql = re.sub(rf"\b{placeholder}\b", name, sql)
    owner = sa.create_engine(postgresql_url, isolation_level="AUTOCOMMIT")
    try:
        with owner.connect() as conn:
            for statement in _statements(sql):
                conn.exec_driver_sql(statement)
        yield tuple(  # type: ignore[misc]
            url.set(username=names[role], password="change-me").render_as_string(hide_password=False)
            for role in ("gatecfg_ci", "gatecfg_prune", "gatecfg_reader")
        )
    finally:
        # Roles belong to the whole server: leave none behind.
        with owner.connect() as conn:
            for name in names.values():
                conn.exec_driver_sql(f'DROP OWNED BY "{name}"')
            for name in reversed(names.values()):
                conn.exec_driver_sql(f'DROP ROLE "{name}"')
        owner.dispose()


def _tree(tmp_path: Path, gates: str = GATES, record: str = RECORD) -> tuple[Path, Path]:
    (tmp_path / "gates").mkdir(exist_ok=True)
    (tmp_path / "gates" / "t.yaml").write_text(gates, encoding="utf-8")
    (tmp_path / "record.jsonl").write_text(record, encoding="utf-8")
    return tmp_path / "gates", tmp_path / "record.jsonl"


def _evaluate(gates: Path, record: Path, db: str, run_id: str, *extra: str) -> tuple[int, str, Any]:
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", db,
                     "--write", "--run-id", run_id, "--format", "json", *extra)  # fmt: skip
    return result.code, result.err, json.loads(result.out) if result.out else None


def _denied(db: str, statement: str) -> str:
    """The driver's error for `statement` run as the role in `db` (which must refuse it)."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn, pytest.raises(sa.exc.ProgrammingError) as refused:
            conn.exec_driver_sql(statement)
        return str(refused.value.orig)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_the_documented_ci_role_evaluates_writes_and_reads_history(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    ci, _, _ = roles
    gates, record = _tree(tmp_path)

    for night in ("night-1", "night-2"):
        code, err, report = _evaluate(gates, record, ci, night)
        assert code == 0, err
        assert report["run"]["written"] is True
    assert report["verdicts"][0]["n"] == 1  # the second night read the first as its baseline

    history = run_cli("history", "--test", TEST, "--metric", "eval/score", "--db", ci, "--format", "json")
    assert history.code == 0, history.err
    assert [row["run_id"] for row in json.loads(history.out)] == ["night-2", "night-1"]
    untrust = run_cli("untrust", "--run-id", "night-1", "--reason", "bad runner", "--db", ci)
    trust = run_cli("trust", "--run-id", "night-1", "--db", ci)
    assert (untrust.code, trust.code) == (0, 0), untrust.err + trust.err


REFUSAL_IDS = [
    "delete-points", "delete-runs", "rewrite-values", "rewrite-verdicts", "schema-revision", "create", "drop",
    "alter", "truncate",
]  # fmt: skip


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("DELETE FROM metric_points", "permission denied for table metric_points"),
        ("DELETE FROM runs", "permission denied for table runs"),
        ("UPDATE metric_points SET value = 0", "permission denied for table metric_points"),
        ("UPDATE runs SET gate_trusted = true", "permission denied for table runs"),
        ("UPDATE alembic_version SET version_num = '0001'", "permission denied for table alembic_version"),
        ("CREATE TABLE smuggled (x int)", "permission denied for schema public"),
        ("DROP TABLE runs", "must be owner of table runs"),
        ("ALTER TABLE runs ADD COLUMN x int", "must be owner of table runs"),
        ("TRUNCATE metric_points", "permission denied for table metric_points"),
    ],
    ids=REFUSAL_IDS,
)
def test_the_documented_ci_role_cannot_change_or_delete_history_or_run_ddl(
    roles: tuple[str, str, str], statement: str, refusal: str
) -> None:
    ci, _, _ = roles
    assert refusal in _denied(ci, statement)


@pytest.mark.postgres
def test_only_the_documented_prune_role_may_prune(roles: tuple[str, str, str], tmp_path: Path) -> None:
    ci, prune, _ = roles
    gates, record = _tree(tmp_path)
    assert _evaluate(gates, record, ci, "night-1")[0] == 0
    # eval/score is no longer declared: its coordinate is orphaned.
    _tree(tmp_path, GATES.split("  eval/score:", maxsplit=1)[0])

    refused = run_cli("prune", "--orphaned", "--yes", "--gates", gates, "--db", ci)
    assert refused.code == 3
    assert "permission denied for table coordinates" in refused.err
    pruned = run_cli("prune", "--orphaned", "--yes", "--gates", gates, "--db", prune)
    assert pruned.code == 0, pruned.err
    assert "(1 value)" in pruned.out
    left = run_cli("history", "--test", TEST, "--metric", "eval/score", "--db", ci, "--format", "json")
    assert left.code == 2  # the coordinate is gone: nothing of eval/score is stored any more
    assert "no stored values of eval/score" in left.err
    assert "must be owner of table runs" in _denied(prune, "DROP TABLE runs")  # and still no DDL


@pytest.mark.postgres
def test_only_the_documented_prune_role_may_delete_old_values(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    ci, prune, _ = roles
    gates, record = _tree(tmp_path)
    (gates / "base.yaml").write_text("version: 1\npolicy:\n  window: 1\n", encoding="utf-8")
    for night in ("night-1", "night-2"):
        assert _evaluate(gates, record, ci, night)[0] == 0

    refused = run_cli("prune", "--keep", "1", "--yes", "--gates", gates, "--db", ci)
    assert refused.code == 3
    assert "permission denied for table metric_points" in refused.err
    pruned = run_cli("prune", "--keep", "1", "--yes", "--gates", gates, "--db", prune)
    assert pruned.code == 0, pruned.err
    assert "deleted 3 value(s) of 1 run(s) at 2 coordinate(s)" in pruned.out


# --- bound parameters ----------------------------------------------------------------------------------

HOSTILE_METRICS = [
    'eval/it\'s "quoted"; DROP TABLE runs; --',
    "train/x' OR '1'='1",
    "rollout/ünïcödé/日本語/😀",
    "perf/back\\slash%_wild*card",
]
HOSTILE_LABELS = {"hardware": "h100'); DELETE FROM metric_points; --", "région": 'Zürich "1"'}
HOSTILE_RUN = "run'; UPDATE runs SET gate_trusted = false; --"


def test_hostile_names_and_labels_round_trip_through_evaluate_and_history(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    body = "".join(
        f"  {json.dumps(metric, ensure_ascii=False)}:\n    steps: all\n    constraint: {{rel_up: 0.5}}\n"
        for metric in HOSTILE_METRICS
    )
    rows = [{"_step": step, **dict.fromkeys(HOSTILE_METRICS, 1.0 + step)} for step in range(2)]
    gates, record = _tree(
        tmp_path, f"test: {TEST}\ngates:\n{body}", "".join(json.dumps(row) + "\n" for row in rows)
    )
    series = [arg for key, value in HOSTILE_LABELS.items() for arg in ("--series", f"{key}={value}")]

    for run_id in (f"{HOSTILE_RUN}-1", f"{HOSTILE_RUN}-2"):
        code, err, report = _evaluate(gates, record, store_url, run_id, "--commit", "c0ffee'--", *series)
        assert code == 0, err
    assert sorted({v["metric"] for v in report["verdicts"]}) == sorted(HOSTILE_METRICS)
    assert all(v["n"] == 1 for v in report["verdicts"])  # each baseline found by its hostile name
    assert report["series"] == HOSTILE_LABELS

    for metric in HOSTILE_METRICS:
        result = run_cli("history", "--test", TEST, "--metric", metric, "--db", store_url, "--format", "json",
                         *series)  # fmt: skip
        assert result.code == 0, result.err
        found = json.loads(result.out)
        assert [(row["run_id"], row["step"]) for row in found] == [
            (f"{HOSTILE_RUN}-2", 0), (f"{HOSTILE_RUN}-2", 1), (f"{HOSTILE_RUN}-1", 0), (f"{HOSTILE_RUN}-1", 1)
        ]  # fmt: skip
        assert {json.dumps(json.loads(row["series_key"])["labels"], sort_keys=True) for row in found} == {
            json.dumps(HOSTILE_LABELS, sort_keys=True)
        }
        assert {row["commit"] for row in found} == {"c0ffee'--"}
    assert {run.run.run_id for run in store.runs(test=TEST)} == {f"{HOSTILE_RUN}-1", f"{HOSTILE_RUN}-2"}


@pytest.mark.postgres
def test_the_documented_reader_role_reads_every_view_and_writes_nothing(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    ci, _, reader = roles
    gates, record = _tree(tmp_path)
    for night in ("night-1", "night-2"):
        code, err, _ = _evaluate(gates, record, ci, night)
        assert code == 0, err
    judged = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", record, "--db", reader)
    assert judged.code == 0, judged.err
    for args in (
        ("history", "--test", TEST, "--metric", "eval/score"),
        ("shifts",),
        ("backtest", "--gates", gates),
        ("regimes", "--test", TEST, "--metric", "eval/score", "--gates", gates),
    ):
        result = run_cli(*args, "--db", reader)
        assert result.code == 0, (args, result.err)
    code, err, _ = _evaluate(gates, record, reader, "night-3")
    assert code == 3
    assert "permission denied" in err
