"""Where a run came from: flags, then the CI environment (GitHub Actions, GitLab, Buildkite, Jenkins,
CircleCI, Azure Pipelines, Travis CI, Bitbucket Pipelines: the systems `write_policy` knows)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    # What the run carries beyond its identity: what the CI tells of its runner, then `--meta` (which wins).
    meta: Mapping[str, str] = field(default_factory=dict)


# What each CI tells of the machine a job runs on, by its documented variables: (meta key, variables whose
# values joined by a space are its value). GitHub's hosted runners name their image in ImageOS/ImageVersion.
CI_META: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runner", ("RUNNER_NAME",)),
    ("runner.os", ("RUNNER_OS",)),
    ("runner.arch", ("RUNNER_ARCH",)),
    ("runner.image", ("ImageOS", "ImageVersion")),
    ("runner", ("CI_RUNNER_DESCRIPTION",)),  # GitLab
    ("runner.arch", ("CI_RUNNER_EXECUTABLE_ARCH",)),
    ("image", ("CI_JOB_IMAGE",)),
    ("runner", ("BUILDKITE_AGENT_NAME",)),
    ("runner", ("NODE_NAME",)),  # Jenkins
)


def ci_meta(env: Mapping[str, str]) -> dict[str, str]:
    """What the CI's variables tell of the runner (the first CI that names each key wins)."""
    found: dict[str, str] = {}
    for key, names in CI_META:
        parts = [value for name in names if (value := env.get(name, "").strip())]
        if parts and key not in found:
            found[key] = " ".join(parts)
    return found


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
    return _first(
        env, "CI_PIPELINE_URL", "BUILDKITE_BUILD_URL", "BUILD_URL", "CIRCLE_BUILD_URL", "TRAVIS_BUILD_WEB_URL"
    )


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
    meta: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Provenance:
    """Flags win over the environment. The default run id names one evaluation of one test:
    `<ci run id>.<attempt>:<test>` in CI, so a CI job that gates several tests stores each once."""
    env = os.environ if env is None else env
    ci_run_id = _first(
        env,
        "GITHUB_RUN_ID",
        "CI_PIPELINE_ID",
        "BUILDKITE_BUILD_ID",
        "BUILD_ID",
        "CIRCLE_WORKFLOW_ID",
        "BUILD_BUILDID",
        "TRAVIS_BUILD_ID",
        "BITBUCKET_BUILD_NUMBER",
    )
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
        commit=commit
        or _first(
            env,
            "GITHUB_SHA",
            "CI_COMMIT_SHA",
            "BUILDKITE_COMMIT",
            "GIT_COMMIT",
            "CIRCLE_SHA1",
            "BUILD_SOURCEVERSION",
            "TRAVIS_COMMIT",
            "BITBUCKET_COMMIT",
        ),
        branch=branch
        or _first(
            env,
            "GITHUB_REF_NAME",
            "CI_COMMIT_REF_NAME",
            "BUILDKITE_BRANCH",
            "BRANCH_NAME",
            "CIRCLE_BRANCH",
            "BUILD_SOURCEBRANCHNAME",
            "TRAVIS_BRANCH",
            "BITBUCKET_BRANCH",
        ),
        ci_run_id=ci_run_id,
        ci_run_attempt=attempt,
        # A link to the CI run is shown in reports and kept in the store: never with a credential in it.
        url=_masked(url or _ci_url(env)),
        source=_masked(_source_url(env)),
        meta={**ci_meta(env), **(meta or {})},
    )
    for key, value in found.meta.items():
        check_label(key, value, key_at="the run's meta key", value_at=f"the run's meta {shorten(key)}")
    # What the environment gave is checked too, before it reaches the store (exit 2, not a store fault).
    for name, value in vars(found).items():
        if name != "meta":
            check_name(value, "the run's " + name.replace("_", " "))
    return found


def _masked(url: str | None) -> str | None:
    return None if url is None else mask_url(url)


def check_name(value: str | None, where: str) -> None:
    """Refuse (exit 2) an identifier the reports or the store cannot take: empty, a control character,
    too long (`models.name_problem`)."""
    if value is None:
        return
    if not isinstance(value, str):
        # The API's arguments are typed str, but nothing stops a caller passing `commit=5`.
        raise InputError.at(
            where, f"{shorten(repr(value))} is {type(value).__name__}, not a string", hint="pass it as text"
        )
    problem = "is empty" if not value.strip() else name_problem(value)
    if problem is not None:
        raise InputError.at(where, f"{shorten(value)!r} {problem}", hint="give a short printable identifier")


def check_label(key: object, value: object, *, key_at: str, value_at: str) -> None:
    """One label of a series or of a run's meta, however it was given (`--series KEY=VALUE`, the settings,
    the API's `series` and `meta`): a printable name, and a printable text value, which may be empty."""
    check_name(_text(key, key_at), key_at)
    text = _text(value, value_at)
    if text:  # an empty value is a value too
        check_name(text, value_at)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        shown = shorten(repr(value))
        raise InputError.at(where, f"{shown} is {type(value).__name__}, not a string", hint="pass it as text")
    return value


def key_values(
    values: Sequence[str] | None,
    *,
    flag: str,
    example: str,
    once: str,
    reserved: dict[str, str] | None = None,
) -> dict[str, str]:
    """`KEY=VALUE` arguments of a repeatable flag as a dict, each key and value a printable name."""
    found: dict[str, str] = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError.at(flag, f"`{item}` is not KEY=VALUE", hint=f"e.g. {flag} {example}")
        if key in (reserved or {}):
            raise InputError.at(flag, (reserved or {})[key])
        key, value = key.strip(), value.strip()
        if key in found:
            raise InputError.at(
                flag, f"`{key}` is given twice (`{key}={found[key]}` and `{key}={value}`)", hint=once
            )
        check_label(key, value, key_at=flag, value_at=flag)
        found[key] = value
    return found
