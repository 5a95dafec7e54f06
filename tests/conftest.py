"""Shared fixtures: history stores on SQLite and, when GATECFG_TEST_PG_URL is set, on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from rekey_helpers import make_repo

from gatecfg import terminal
from gatecfg.store import Store

PG_URL_VARIABLE = "GATECFG_TEST_PG_URL"
# What tells gatecfg it runs in CI, and on which event and branch (gatecfg.write_policy.ci_job).
CI_VARIABLES = (
    "GITHUB_ACTIONS",
    "GITHUB_EVENT_NAME",
    "GITHUB_BASE_REF",
    "GITLAB_CI",
    "BUILDKITE",
    "JENKINS_URL",
    "CIRCLECI",
    "TF_BUILD",
    "TRAVIS",
    "BITBUCKET_BUILD_NUMBER",
    "BITBUCKET_PIPELINE_UUID",
    # Any CI sets one of these (gatecfg.write_policy refuses a write from a CI it does not know).
    "CI",
    "CONTINUOUS_INTEGRATION",
    "BUILD_NUMBER",
    "TEAMCITY_VERSION",
    "DRONE",
    "APPVEYOR",
)


@pytest.fixture(autouse=True, scope="session")
def _not_in_ci() -> Iterator[None]:
    """Tests run as on a developer's machine, also when CI runs them for a pull request (whose event
    would make the write policy refuse every command that writes); write-policy tests set what they need.
    For the whole session, so that module-scoped fixtures (a history imported once) see it too."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in CI_VARIABLES:
            patch.delenv(variable, raising=False)
        yield


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from each test alone, not from the environment of whoever runs the suite."""
    for variable in ("GATECFG_GATES", "GATECFG_SERIES"):
        monkeypatch.delenv(variable, raising=False)


REPORT_WIDTH = 200


@pytest.fixture(autouse=True)
def report_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text reports fit the terminal; in-process tests read them at one width, whatever terminal runs
    them (tests/test_terminal.py checks the width itself)."""
    monkeypatch.setattr(terminal, "width", lambda: REPORT_WIDTH)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store: a SQLite file under tmp_path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    url: str = request.getfixturevalue("postgresql_url")
    return url


@pytest.fixture
def postgresql_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the server GATECFG_TEST_PG_URL names, dropped afterwards."""
    server_url = os.environ.get(PG_URL_VARIABLE)
    if not server_url:
        pytest.skip(f"{PG_URL_VARIABLE} is not set: PostgreSQL store tests skipped")
    name = f"gatecfg_test_{uuid.uuid4().hex[:16]}"
    # CREATE/DROP DATABASE cannot run in a transaction; the name is generated, never user input.
    server = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with server.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        server.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An opened store at the newest schema revision."""
    with Store.open(store_url, check_schema=False) as opened:
        opened.upgrade()
        yield opened


@pytest.fixture
def db(store: Store, store_url: str) -> str:
    """A store URL at the current schema, for the CLI (PostgreSQL is never migrated implicitly)."""
    return store_url


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding a copy of the project's gates/, as the working directory (CI runs gatecfg
    from the top of the checkout), with no store URL leaking in from the environment."""
    root = make_repo(tmp_path / "repo")
    monkeypatch.chdir(root)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    return root
