"""The one reader of the CI environment: a `CiJob` per job, filled once by its CI system's reader, which
the write policy (may this job write?) and provenance (what is stored with the run) both use, so that the
branch stored with a run is the branch the policy judged.

Each known system has one reader, by its documented variables: GitHub Actions, GitLab CI, Buildkite,
Jenkins, CircleCI, Azure Pipelines, Travis CI, Bitbucket Pipelines (docs/security.md lists them). A tag
build is no branch's (a tag named `main` is not the branch `main`); a pull request's branch is its own
head, never the merge ref nor the branch it targets. Links built from the environment
(the CI run, the repository at the commit) are built only from parts that look like what they are.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gatecfg.errors import InputError
from gatecfg.textio import read_bytes

# Events on which the code that runs is the contributor's, not the repository's: GitHub's, GitLab's
# `merge_request_event`, Travis's `pull_request`.
PULL_REQUEST_EVENTS = frozenset(
    {
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
        "merge_request_event",
        "external_pull_request_event",
    }
)
# GitHub events whose payload alone says whether a pull request started them (and which branch ran).
_PAYLOAD_EVENTS = frozenset({"workflow_run", "issue_comment", "check_run", "check_suite"})
# A GitHub event payload is a few KB; a larger file is not one.
MAX_EVENT_BYTES = 16 * 1024 * 1024
# Variables most CI systems set, that say "this is CI" without saying which; `CI=false` says it is not.
_GENERIC_CI = ("CI", "CONTINUOUS_INTEGRATION", "BUILD_NUMBER", "TEAMCITY_VERSION", "DRONE", "APPVEYOR")
_FALSE = frozenset({"", "0", "false", "no", "off"})
KNOWN_SYSTEMS = (
    "GitHub Actions",
    "GitLab CI",
    "Buildkite",
    "Jenkins",
    "CircleCI",
    "Azure Pipelines",
    "Travis CI",
    "Bitbucket Pipelines",
)
# What a link is built from: a web origin, an `owner/name` repository, a hexadecimal commit. Anything
# else (a `)`, a space, a second link) builds no link: it would inject markup into the markdown report.
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
_RUN = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class CiJob:
    """What the CI environment tells about this job; None where it says nothing. `undecided` names what
    it could not tell (an unknown CI, an unreadable event payload) and makes the policy refuse."""

    system: str | None
    event: str | None
    branch: str | None  # the branch the job runs for (a pull request's head); None for a tag build
    default_branch: str | None
    pull_request: bool
    undecided: str | None = None
    # Why the default branch is unknown, when the CI could have named it (an unreadable event payload).
    no_default: str | None = None
    tag: str | None = None  # a tag build's tag
    commit: str | None = None
    run_id: str | None = None
    run_attempt: str | None = None
    url: str | None = None  # the CI run's page
    source: str | None = None  # the repository's files at this commit (`https://github.com/o/r/blob/<sha>`)
    actor: str | None = None  # who started the job, where the CI names them (who triaged an alert)


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _set(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() not in _FALSE


def _github_payload(env: Mapping[str, str]) -> tuple[dict[str, object] | None, str | None]:
    """The event payload at GITHUB_EVENT_PATH, or None and why it could not be read."""
    path = _get(env, "GITHUB_EVENT_PATH")
    if path is None:
        return None, "GITHUB_EVENT_PATH is not set"
    try:
        raw = read_bytes(Path(path), path, what="event payload", limit=MAX_EVENT_BYTES, hint="")
        payload = json.loads(raw)
    except (InputError, ValueError, RecursionError) as exc:
        reason = exc.problems[0].message if isinstance(exc, InputError) else "not JSON"
        return None, f"the event payload at GITHUB_EVENT_PATH ({path}) cannot be read: {reason}"
    if not isinstance(payload, dict):
        return None, f"the event payload at GITHUB_EVENT_PATH ({path}) is not a JSON object"
    return payload, None


def _field(payload: Mapping[str, object] | None, *keys: str) -> object:
    value: object = payload
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _ref(ref: str | None) -> tuple[str | None, str | None, bool]:
    """(branch, tag, pull request) of a git ref: `refs/heads/x`, `refs/tags/x`, `refs/pull/5/merge`
    (GitLab's `refs/merge-requests/5/head`); a bare name is a branch's."""
    if ref is None:
        return None, None, False
    if ref.startswith("refs/tags/"):
        return None, ref.removeprefix("refs/tags/") or None, False
    if ref.startswith(("refs/pull/", "refs/merge-requests/")):
        return None, None, True
    return ref.removeprefix("refs/heads/") or None, None, False


def _github(env: Mapping[str, str]) -> CiJob:
    event = _get(env, "GITHUB_EVENT_NAME")
    payload, unreadable = _github_payload(env)
    ref_branch, tag, pull_ref = _ref(_get(env, "GITHUB_REF"))
    if _get(env, "GITHUB_REF_TYPE") == "tag":
        ref_branch, tag = None, tag or _get(env, "GITHUB_REF_NAME")
    elif _get(env, "GITHUB_REF") is None and tag is None:
        ref_branch = _get(env, "GITHUB_REF_NAME")
    # On a pull request GITHUB_REF_NAME is `<number>/merge`; the branch that would be written is the PR's
    # head, which GITHUB_HEAD_REF names.
    branch = _get(env, "GITHUB_HEAD_REF") or (None if pull_ref else ref_branch)
    pull = event in PULL_REQUEST_EVENTS or _get(env, "GITHUB_BASE_REF") is not None or pull_ref
    undecided = None
    if payload is not None:
        # A comment on a pull request is an `issue_comment` whose issue has a `pull_request`; a workflow
        # that a pull request's workflow triggered runs on the default branch with the PR's artifacts.
        run = _field(payload, "workflow_run")
        pull = pull or any(
            (
                "pull_request" in payload,
                _field(payload, "issue", "pull_request") is not None,
                isinstance(run, dict) and run.get("event") in PULL_REQUEST_EVENTS,
                isinstance(run, dict) and bool(run.get("pull_requests")),
                bool(_field(payload, event or "", "pull_requests")),  # check_run, check_suite
            )
        )
        if event == "workflow_run" and _text(_field(payload, "workflow_run", "event")) is None:
            undecided = "which event started the workflow: the workflow_run payload does not name it"
    elif event in _PAYLOAD_EVENTS and not pull:
        undecided = f"whether a pull request started this `{event}` event: {unreadable}"
    default = _text(_field(payload, "repository", "default_branch"))
    no_default = None if default is not None else unreadable or "the event payload names none"
    commit, run_id, attempt = (
        _get(env, "GITHUB_SHA"),
        _get(env, "GITHUB_RUN_ID"),
        _get(env, "GITHUB_RUN_ATTEMPT"),
    )
    server, repository = _get(env, "GITHUB_SERVER_URL"), _get(env, "GITHUB_REPOSITORY")
    site = None
    if _full(_ORIGIN, server) and _full(_REPOSITORY, repository):
        site = f"{server}/{repository}"
    url = None
    if site is not None and _full(_RUN, run_id):
        url = f"{site}/actions/runs/{run_id}" + (f"/attempts/{attempt}" if _full(_RUN, attempt) else "")
    source = f"{site}/blob/{commit}" if site is not None and _full(_SHA, commit) else None
    return CiJob(
        "GitHub Actions",
        event,
        branch,
        default,
        pull,
        undecided,
        no_default,
        tag=tag,
        commit=commit,
        run_id=run_id,
        run_attempt=attempt,
        url=url,
        source=source,
        actor=_get(env, "GITHUB_TRIGGERING_ACTOR") or _get(env, "GITHUB_ACTOR"),
    )


def _full(pattern: re.Pattern[str], value: str | None) -> bool:
    return value is not None and pattern.fullmatch(value) is not None


def _gitlab(env: Mapping[str, str]) -> CiJob:
    tag = _get(env, "CI_COMMIT_TAG")
    return CiJob(
        "GitLab CI",
        _get(env, "CI_PIPELINE_SOURCE"),
        None if tag else _get(env, "CI_COMMIT_BRANCH") or _get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"),
        _get(env, "CI_DEFAULT_BRANCH"),
        _get(env, "CI_MERGE_REQUEST_IID") is not None
        or _get(env, "CI_EXTERNAL_PULL_REQUEST_IID") is not None,
        tag=tag,
        commit=_get(env, "CI_COMMIT_SHA"),
        run_id=_get(env, "CI_PIPELINE_ID"),
        url=_get(env, "CI_PIPELINE_URL"),
        actor=_get(env, "GITLAB_USER_LOGIN"),
    )


def _buildkite(env: Mapping[str, str]) -> CiJob:
    # A tag build's BUILDKITE_BRANCH is the tag's name.
    tag = _get(env, "BUILDKITE_TAG")
    return CiJob(
        "Buildkite",
        _get(env, "BUILDKITE_SOURCE"),
        None if tag else _get(env, "BUILDKITE_BRANCH"),
        _get(env, "BUILDKITE_PIPELINE_DEFAULT_BRANCH"),
        _get(env, "BUILDKITE_PULL_REQUEST") not in (None, "false"),
        tag=tag,
        commit=_get(env, "BUILDKITE_COMMIT"),
        run_id=_get(env, "BUILDKITE_BUILD_ID"),
        run_attempt=_get(env, "BUILDKITE_RETRY_COUNT"),
        url=_get(env, "BUILDKITE_BUILD_URL"),
        actor=_get(env, "BUILDKITE_BUILD_CREATOR_EMAIL") or _get(env, "BUILDKITE_BUILD_CREATOR"),
    )


def _jenkins(env: Mapping[str, str]) -> CiJob:
    # A multibranch pipeline's tag build names the tag in TAG_NAME (and BRANCH_NAME); a pull request's
    # BRANCH_NAME is `PR-5`, its own branch CHANGE_BRANCH.
    tag = _get(env, "TAG_NAME")
    pull = _get(env, "CHANGE_ID") is not None
    branch = None if tag else (_get(env, "CHANGE_BRANCH") if pull else None) or _get(env, "BRANCH_NAME")
    return CiJob(
        "Jenkins",
        None,
        branch,
        None,
        pull,
        tag=tag,
        commit=_get(env, "GIT_COMMIT"),
        run_id=_get(env, "BUILD_ID"),
        url=_get(env, "BUILD_URL"),
    )


def _circleci(env: Mapping[str, str]) -> CiJob:
    tag = _get(env, "CIRCLE_TAG")
    pull = (_get(env, "CIRCLE_PULL_REQUEST") or _get(env, "CIRCLE_PR_NUMBER")) is not None
    return CiJob(
        "CircleCI",
        None,
        None if tag else _get(env, "CIRCLE_BRANCH"),
        None,
        pull,
        tag=tag,
        commit=_get(env, "CIRCLE_SHA1"),
        run_id=_get(env, "CIRCLE_WORKFLOW_ID"),
        url=_get(env, "CIRCLE_BUILD_URL"),
        actor=_get(env, "CIRCLE_USERNAME"),
    )


def _azure(env: Mapping[str, str]) -> CiJob:
    # BUILD_SOURCEBRANCH is a ref: a manual build of `refs/pull/5/merge` is a pull request's code.
    reason = _get(env, "BUILD_REASON")
    branch, tag, pull_ref = _ref(_get(env, "BUILD_SOURCEBRANCH"))
    pull = reason == "PullRequest" or _get(env, "SYSTEM_PULLREQUEST_PULLREQUESTID") is not None or pull_ref
    if pull:
        branch = _ref(_get(env, "SYSTEM_PULLREQUEST_SOURCEBRANCH"))[0]
    return CiJob(
        "Azure Pipelines",
        reason,
        branch,
        None,
        pull,
        tag=tag,
        commit=_get(env, "BUILD_SOURCEVERSION"),
        run_id=_get(env, "BUILD_BUILDID"),
        actor=_get(env, "BUILD_REQUESTEDFOREMAIL") or _get(env, "BUILD_REQUESTEDFOR"),
    )


def _travis(env: Mapping[str, str]) -> CiJob:
    # On a pull request TRAVIS_BRANCH is the branch it targets, on a tag build the tag.
    tag = _get(env, "TRAVIS_TAG")
    pull = _get(env, "TRAVIS_PULL_REQUEST") not in (None, "false")
    event = _get(env, "TRAVIS_EVENT_TYPE")
    branch = _get(env, "TRAVIS_PULL_REQUEST_BRANCH") if pull else None if tag else _get(env, "TRAVIS_BRANCH")
    return CiJob(
        "Travis CI",
        event,
        branch,
        None,
        pull or event == "pull_request",
        tag=tag,
        commit=_get(env, "TRAVIS_COMMIT"),
        run_id=_get(env, "TRAVIS_BUILD_ID"),
        url=_get(env, "TRAVIS_BUILD_WEB_URL"),
    )


def _bitbucket(env: Mapping[str, str]) -> CiJob:
    tag = _get(env, "BITBUCKET_TAG")
    return CiJob(
        "Bitbucket Pipelines",
        None,
        None if tag else _get(env, "BITBUCKET_BRANCH"),
        None,
        _get(env, "BITBUCKET_PR_ID") is not None,
        tag=tag,
        commit=_get(env, "BITBUCKET_COMMIT"),
        run_id=_get(env, "BITBUCKET_BUILD_NUMBER"),
        actor=_get(env, "BITBUCKET_STEP_TRIGGERER_UUID"),
    )


# Each system's reader, by the variables that say it is the one running (any of them set), in this order.
_SYSTEMS: tuple[tuple[tuple[str, ...], Callable[[Mapping[str, str]], CiJob]], ...] = (
    (("GITHUB_ACTIONS", "GITHUB_EVENT_NAME"), _github),
    (("GITLAB_CI",), _gitlab),
    (("BUILDKITE",), _buildkite),
    (("JENKINS_URL",), _jenkins),
    (("CIRCLECI",), _circleci),
    (("TF_BUILD",), _azure),
    (("TRAVIS",), _travis),
    (("BITBUCKET_BUILD_NUMBER", "BITBUCKET_PIPELINE_UUID"), _bitbucket),
)


def ci_job(env: Mapping[str, str] | None = None) -> CiJob:
    """The CI systems gatecfg knows, by their documented variables; any other CI by the variables most
    set (`CI=true`), as a job whose branch and trigger are unknown; outside CI a job of no system."""
    env = os.environ if env is None else env
    for names, reader in _SYSTEMS:
        if any(_get(env, name) for name in names):
            return reader(env)
    generic = [name for name in _GENERIC_CI if _set(env, name)]
    if generic:
        return CiJob(
            "an unknown CI",
            None,
            None,
            None,
            False,
            f"the CI system ({generic[0]}={env[generic[0]].strip()} is set, but none of the variables "
            f"of {', '.join(KNOWN_SYSTEMS)}): not its branch, nor whether a pull request started the job",
        )
    return CiJob(None, None, None, None, False)
