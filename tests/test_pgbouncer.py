"""Evaluate through PgBouncer in transaction mode, the way a fleet of CI runners shares one PostgreSQL
server: every transaction may run on another server connection, so nothing may outlive one (psycopg's
server-side prepared statements would: gatecfg turns them off)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import REPO, subprocess_env

from gatecfg.store import Store
from gatecfg.store.engine import create_engine, parse_url

pytestmark = pytest.mark.postgres

TEST = "tests/e2e/pooled_ci.py"
METRIC = "train/grad_norm"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def pooled_url(postgresql_url: str) -> Iterator[str]:
    """`postgresql_url` through a PgBouncer of its own in transaction mode, one server connection shared
    by every client."""
    binary = shutil.which("pgbouncer") or next(
        (str(p) for p in (Path("/usr/sbin/pgbouncer"), Path("/usr/bin/pgbouncer")) if p.exists()), None
    )
    if binary is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer): transaction pooling not tested")
    server = sa.make_url(postgresql_url)
    port = _free_port()
    # PgBouncer refuses to run as root and drops to `nobody`, who must read its files: not under tmp_path.
    folder = Path(tempfile.mkdtemp(prefix="gatecfg-pgbouncer-"))
    folder.chmod(0o755)
    (folder / "users.txt").write_text(f'"{server.username}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.host} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 50\n"
    )
    for path in folder.iterdir():
        path.chmod(0o644)
    user = ["-u", "nobody"] if os.getuid() == 0 else []
    log = (folder / "pgbouncer.log").open("wb")  # opened here: `nobody` may not create files
    bouncer = subprocess.Popen([binary, *user, str(folder / "pgbouncer.ini")], stdout=log, stderr=log)
    try:
        pooled = server.set(port=port).render_as_string(hide_password=False)
        _wait_for(pooled, bouncer, folder / "pgbouncer.log")
        yield pooled
    finally:
        bouncer.terminate()
        bouncer.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for(url: str, bouncer: subprocess.Popen[bytes], log: Path) -> None:
    engine = create_engine(parse_url(url))
    try:
        for _ in range(50):
            if bouncer.poll() is not None:
                pytest.fail(f"pgbouncer exited {bouncer.returncode}: {log.read_text()}")
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql("SELECT 1")
                return
            except sa.exc.OperationalError:
                time.sleep(0.1)
        pytest.fail("pgbouncer did not accept connections within 5 s")
    finally:
        engine.dispose()


def _gates(root: Path) -> Path:
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        f"version: 1\ndefaults:\n  {METRIC}:\n    steps: all\n"
        "    constraint: {rel_up: 0.5, abs_floor_up: 0.1}\npolicy:\n  window: 20\n"
    )
    (gates / "pooled.yaml").write_text(f"test: {TEST}\ngates:\n  {METRIC}:\n")
    return gates


def _evaluate(root: Path, gates: Path, url: str, run_id: str, value: float) -> subprocess.Popen[str]:
    record = root / f"{run_id}.jsonl"
    record.write_text("".join(json.dumps({"_step": s, METRIC: value}) + "\n" for s in range(50)))
    argv = ["--test", TEST, "--record", str(record), "--gates", str(gates), "--db", url]
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gatecfg",
            "evaluate",
            *argv,
            "--write",
            "--run-id",
            run_id,
            "--format",
            "json",
        ],
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_nightlies_evaluate_and_write_through_a_transaction_pooler(
    pooled_url: str, postgresql_url: str, tmp_path: Path
) -> None:
    with Store.open(postgresql_url, check_schema=False) as store:
        store.upgrade()  # DDL straight to the server, as an operator would run `gatecfg db upgrade`
    gates = _gates(tmp_path)
    # Three at a time on one server connection: each process's transactions interleave with the others'.
    for wave in range(3):
        running = [_evaluate(tmp_path, gates, pooled_url, f"n{wave}-{i}", 1.0) for i in range(3)]
        for process in running:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert json.loads(out)["run"]["written"] is True
    # A tenth nightly that regressed meets the nine before it as its baseline, read through the pooler.
    regressed = _evaluate(tmp_path, gates, pooled_url, "n9", 5.0)
    out, err = regressed.communicate(timeout=120)
    report = json.loads(out)
    assert {v["status"] for v in report["verdicts"]} == {"fail"}, err
    assert {v["n"] for v in report["verdicts"]} == {9}
    with Store.open(postgresql_url) as store:
        assert len(store.runs(test=TEST)) == 10


def test_imports_one_after_another_share_the_pooled_server_connection(
    pooled_url: str, postgresql_url: str, tmp_path: Path
) -> None:
    # An import runs its statements many times over: with server-side prepared statements, the second
    # import's client would prepare a name the first left on the one server connection.
    with Store.open(postgresql_url, check_schema=False) as store:
        store.upgrade()
    gates = _gates(tmp_path)
    for batch in range(2):
        export = tmp_path / f"export-{batch}.jsonl"
        export.write_text(
            "".join(
                json.dumps(
                    {
                        "run_id": f"b{batch}-{n}",
                        "date": f"2024-0{batch + 1}-{n + 1:02d}",
                        "metrics": {METRIC: [[0, 1.0]]},
                    }
                )
                + "\n"
                for n in range(12)
            )
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "gatecfg",
                "import",
                "--test",
                TEST,
                "--gates",
                str(gates),
                "--db",
                pooled_url,
                str(export),
            ],
            cwd=REPO,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
    with Store.open(postgresql_url) as store:
        assert len(store.runs(test=TEST)) == 24


def test_postgresql_connections_prepare_no_server_side_statements(postgresql_url: str) -> None:
    engine = create_engine(parse_url(postgresql_url))
    try:
        with engine.connect() as conn:
            assert conn.connection.driver_connection.prepare_threshold is None  # type: ignore[union-attr]
    finally:
        engine.dispose()
