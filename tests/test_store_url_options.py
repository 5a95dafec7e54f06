"""A store URL's options, and the settings and environment every command reads before it opens a store:
each bad value one line naming it and exit 2, never a traceback (70), a write it did not ask for, or a
hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import count, run_cli, score_gates, subprocess_env, table

TEST = "t.py"
METRIC = "eval/caf\u00e9"  # not ASCII


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with gates and a record, as the working directory."""
    monkeypatch.chdir(tmp_path)
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\ndefaults: {}\npolicy: {window: 20}\n", encoding="utf-8")
    (gates / "t.yaml").write_text(
        f'test: {TEST}\ngates:\n  "{METRIC}":\n    steps: last\n    constraint: {{rel_up: 0.5}}\n',
        encoding="utf-8",
    )
    (tmp_path / "r.jsonl").write_text(json.dumps({METRIC: [[0, 1.0]]}) + "\n", encoding="utf-8")
    return tmp_path


def _evaluate(*extra: str) -> tuple[int, str, str]:
    result = run_cli("evaluate", "--test", TEST, "--record", "r.jsonl", *extra)
    return result.code, result.out, result.err.strip()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://h.db", "`sqlite://h.db` names a host, which a SQLite store has none of"),
        ("sqlite:///h.db?cached_statements=abc",
         "`?cached_statements=` in `sqlite:///h.db?cached_statements=abc` is not a whole number >= 0"),
        ("sqlite:///h.db?timeout=1&timeout=2", "`?timeout=` is given 2 times in `sqlite:///h.db?timeout=1&"),
        ("sqlite:///h.db?detect_types=x", "`?detect_types=` in `sqlite:///h.db?detect_types=x` is not"),
        ("sqlite:///h.db?check_same_thread=maybe",
         "`?check_same_thread=` in `sqlite:///h.db?check_same_thread=maybe` is not true or false"),
        ("sqlite:///h.db?mode=ro", "`?mode=` is a SQLite URI option, which SQLite applies only to a `file:`"),
        ("sqlite:///h.db?uri=true&mode=ro", "`?uri=true` reads the path as a SQLite URI, which starts with"),
        ("sqlite:///h.db?immutable=1", "`?immutable=` is a SQLite URI option"),
        ("sqlite:///h.db?isolation_level=EXCLUSIVE", "`?isolation_level=` is not taken"),
    ],
    ids=["two-slashes", "cached-statements", "timeout-twice", "detect-types", "flag", "mode-ro",
         "uri-mode-ro", "immutable", "isolation-level"],
)  # fmt: skip
def test_a_bad_store_url_option_is_one_line_and_exit_2_and_writes_nothing(
    project: Path, url: str, message: str
) -> None:
    code, _, err = _evaluate("--db", url, "--write")
    assert code == 2
    assert err.startswith(f"--db: error: {message}")
    assert sorted(p.name for p in project.iterdir()) == ["gates", "r.jsonl"]  # no store, no `h.db?mode=ro`


def test_a_read_only_sqlite_uri_is_honoured_and_a_write_through_it_exits_3(project: Path) -> None:
    assert _evaluate("--db", "sqlite:///h.db", "--write", "--run-id", "first")[0] == 0
    url = "sqlite:///file:h.db?mode=ro&uri=true"
    assert _evaluate("--db", url)[0] == 0  # reads
    code, _, err = _evaluate("--db", url, "--write", "--run-id", "second")
    assert code == 3
    assert "attempt to write a readonly database" in err
    assert count("sqlite:///h.db", "SELECT count(*) FROM runs") == 1


def test_an_option_sqlite_does_not_take_is_one_warning_line_and_dropped(project: Path) -> None:
    code, _, err = _evaluate("--db", "sqlite:///h.db?foo=bar&timeout=5", "--write")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line.lower()]
    assert warnings == [
        "gatecfg: warning: `?foo=` in the store URL is no option SQLite takes; ignored (it takes "
        "cached_statements, check_same_thread, detect_types, timeout, uri)"
    ]
    assert (project / "h.db").is_file()


@pytest.mark.parametrize("blank", [" ", "\t \n"], ids=["space", "whitespace"])
def test_a_blank_store_url_in_the_environment_is_an_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, blank: str
) -> None:
    monkeypatch.setenv("GATECFG_DB_URL", blank)
    code, _, err = _evaluate("--write")
    assert (code, err.splitlines()[0]) == (2, "GATECFG_DB_URL: error: is blank")
    assert sorted(p.name for p in project.iterdir()) == ["gates", "r.jsonl"]


def test_a_label_repeated_in_gatecfg_series_is_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATECFG_SERIES", "hw=a,hw=b")
    code, _, err = _evaluate("--db", "sqlite:///h.db")
    assert (code, err.splitlines()[0]) == (2, "GATECFG_SERIES: error: label `hw` is given twice")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (".gatecfg.toml", b'db = "caf\xe9.db"\n', ".gatecfg.toml:1:10: error: not valid UTF-8 (byte 0xe9)"),
        ("pyproject.toml", b"[tool.gatecfg]\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n",
         "pyproject.toml: error: is not valid TOML: arrays or tables nested too deeply"),
        (".gatecfg.toml", b"# padding\n" * 500_000,
         ".gatecfg.toml: error: the settings file is 5.0 MB; gatecfg reads a settings file of at most "
         "4.0 MB"),
    ],
    ids=["latin-1", "nested-5000-deep", "too-large"],
)  # fmt: skip
def test_a_bad_settings_file_is_one_line_and_exit_2(
    project: Path, name: str, content: bytes, message: str
) -> None:
    (project / name).write_bytes(content)
    code, _, err = _evaluate()
    assert code == 2
    assert err.splitlines()[0].replace(str(project) + os.sep, "") == message


def _child(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gatecfg", "evaluate", "--test", TEST, "--record", "r.jsonl", "--db",
         "sqlite:///h.db", "--write", "--format", "markdown"],
        cwd=project, env={**subprocess_env(), **env}, capture_output=True, text=True, timeout=120,
        encoding="ascii", errors="replace", check=False,
    )  # fmt: skip


def test_an_ascii_only_output_stream_prints_a_non_ascii_metric_escaped(project: Path) -> None:
    done = _child(project, {"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "eval/caf\\xe9" in done.stdout


def test_a_step_summary_that_is_a_fifo_nobody_reads_does_not_hold_the_job(project: Path) -> None:
    os.mkfifo(project / "summary")
    done = _child(project, {"GITHUB_STEP_SUMMARY": str(project / "summary")})  # timeout: a hang fails
    assert done.returncode == 0, done.stderr
    assert "GITHUB_STEP_SUMMARY=" in done.stderr
    assert "cannot append the markdown summary" in done.stderr


DSNS = [
    ("keywords", "host=127.0.0.1 port=1 user=u password=hunter2 dbname=d",
     "postgresql+psycopg://u:hunter2@127.0.0.1:1/d"),
    ("quoted-password", "dbname=d host=h password='hun ter2' user=u",
     "postgresql+psycopg://u:hun%20ter2@h/d"),
    ("options-kept", "host=h dbname=d sslmode=require connect_timeout=3",
     "postgresql+psycopg://h/d?connect_timeout=3&sslmode=require"),
    ("spaces-around-equals", "  host = h  dbname = d", "postgresql+psycopg://h/d"),
    ("hostaddr", "hostaddr=10.0.0.1 dbname=d", "postgresql+psycopg://10.0.0.1/d"),
]  # fmt: skip


@table(("dsn", "url"), DSNS)
def test_a_libpq_keyword_dsn_is_the_postgresql_database_it_names(dsn: str, url: str) -> None:
    from gatecfg.settings import db_url

    assert db_url(dsn) == url
    assert db_url("history.db") == "sqlite:///history.db"  # a bare path is still a SQLite file


@pytest.mark.parametrize(
    "dsn",
    ["host=127.0.0.1 port=1 user=u password=hunter2 dbname=d", "password=hunter2 host=127.0.0.1 port=1"],
    ids=["password-last", "password-first"],
)
def test_a_dsn_given_to_evaluate_reaches_postgresql_and_never_prints_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dsn: str
) -> None:
    gates = score_gates(tmp_path, "")
    monkeypatch.chdir(tmp_path)
    result = run_cli(
        "evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", "r.jsonl", "--db", dsn
    )
    assert result.code == 3
    assert "cannot connect to the history store" in result.err
    assert "hunter2" not in result.err + result.out
    assert "sqlite" not in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gates", "r.jsonl"]  # no SQLite file was made


@pytest.mark.parametrize(
    "dsn",
    ["host=h password=hun ter2 dbname=d", "host=h password='unterminated dbname=d", "host=h dbname"],
    ids=["unquoted-space", "unterminated-quote", "no-value"],
)
def test_a_dsn_that_does_not_parse_is_an_input_error_that_shows_no_part_of_it(
    tmp_path: Path, dsn: str
) -> None:
    gates = score_gates(tmp_path, "")
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    result = run_cli(*argv, "--db", dsn)
    assert result.code == 2
    assert "--db: error: the value starts like a PostgreSQL keyword DSN" in result.err
    assert "ter2" not in result.err
    assert "unterminated" not in result.err
