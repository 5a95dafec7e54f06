"""Where a run came from: flags, then the CI environment (GitHub Actions, GitLab, Buildkite, Jenkins)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from gatecfg.errors import InputError
from gatecfg.escape import mask_url
from gatecfg.models import name_problem
from gatecfg.records import shorten


@dataclass(frozen=True)
class Provenance:
    run_id: str
    commit: str | None
    branch: str | None
    ci_run_id: str | None
    ci_run_attempt: str | None
    url: str | None
    # The repository's files at this commit on the CI's web UI (`https://github.com/o/r/blob/<sha>`):
    # reports link each gate to its file and line there.
    source: str | None = None


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _ci_url(env: Mapping[str, str]) -> str | None:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if server and repo and run:
        attempt = env.get("GITHUB_RUN_ATTEMPT")
        return f"{server}/{repo}/actions/runs/{run}" + (f"/attempts/{attempt}" if attempt else "")
    return _first(env, "CI_PIPELINE_URL", "BUILDKITE_BUILD_URL", "BUILD_URL")


def _source_url(env: Mapping[str, str]) -> str | None:
    server, repo, sha = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_SHA")
    return f"{server}/{repo}/blob/{sha}" if server and repo and sha else None


def provenance(
    *,
    test: str,
    run_id: str | None,
    commit: str | None,
    branch: str | None,
    url: str | None,
    env: Mapping[str, str] | None = None,
) -> Provenance:
    """Flags win over the environment. The default run id names one evaluation of one test:
    `<ci run id>.<attempt>:<test>` in CI, so a CI job that gates several tests stores each once."""
    env = os.environ if env is None else env
    ci_run_id = _first(env, "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "BUILD_ID")
    attempt = _first(env, "GITHUB_RUN_ATTEMPT", "BUILDKITE_RETRY_COUNT")
    for flag, given in (("--run-id", run_id), ("--commit", commit), ("--branch", branch), ("--url", url)):
        check_name(given, flag)
    if run_id is None:
        if ci_run_id is not None:
            run_id = f"{ci_run_id}.{attempt or '1'}:{test}"
        else:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            run_id = f"local-{stamp}-{uuid.uuid4().hex[:8]}:{test}"
    found = Provenance(
        run_id=run_id,
        commit=commit or _first(env, "GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "GIT_COMMIT"),
        branch=branch
        or _first(env, "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME", "BUILDKITE_BRANCH", "BRANCH_NAME"),
        ci_run_id=ci_run_id,
        ci_run_attempt=attempt,
        # A link to the CI run is shown in reports and kept in the store: never with a credential in it.
        url=_masked(url or _ci_url(env)),
        source=_masked(_source_url(env)),
    )
    # What the environment gave is checked too, before it reaches the store (exit 2, not a store fault).
    for name, value in vars(found).items():
        check_name(value, "the run's " + name.replace("_", " "))
    return found


def _masked(url: str | None) -> str | None:
    return None if url is None else mask_url(url)


def check_name(value: str | None, where: str) -> None:
    """Refuse (exit 2) an identifier the reports or the store cannot take: empty, a control character,
    too long (`models.name_problem`)."""
    if value is None:
        return
    problem = "is empty" if not value.strip() else name_problem(value)
    if problem is not None:
        raise InputError.at(where, f"{shorten(value)!r} {problem}", hint="give a short printable identifier")
