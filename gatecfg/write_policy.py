"""Who may write a baseline: `policy.write` against what the CI environment says about this job.

A run written with `evaluate --write` forms the baselines that later runs are judged against, so a job
that anyone can trigger with their own code (a pull request) must not write one: six such writes moved a
baseline far enough for a real regression to pass. By default a write is allowed from the CI's default
branch on any event but a pull request; outside CI (no variable says otherwise) it is allowed.
`--override-write-policy REASON` writes anyway (a backfill, a rerun by hand) and stores the reason with
the run.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gatecfg.models import WritePolicy

# Events on which the code that runs is the contributor's, not the repository's.
PULL_REQUEST_EVENTS = frozenset(
    {"pull_request", "pull_request_target", "merge_request_event", "pull_request_review"}
)


@dataclass(frozen=True)
class CiJob:
    """What the CI environment tells about this job; None where it says nothing."""

    system: str | None
    event: str | None
    branch: str | None
    default_branch: str | None
    pull_request: bool


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _github_default_branch(env: Mapping[str, str]) -> str | None:
    """GitHub puts the default branch in the event payload only (`repository.default_branch`)."""
    path = _get(env, "GITHUB_EVENT_PATH")
    if path is None:
        return None
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    repository = payload.get("repository") if isinstance(payload, dict) else None
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return branch if isinstance(branch, str) and branch else None


def ci_job(env: Mapping[str, str] | None = None) -> CiJob:
    """GitHub Actions, GitLab CI, Buildkite and Jenkins, by their documented variables."""
    env = os.environ if env is None else env
    if _get(env, "GITHUB_ACTIONS") or _get(env, "GITHUB_EVENT_NAME"):
        event = _get(env, "GITHUB_EVENT_NAME")
        # On a pull request GITHUB_REF_NAME is `<number>/merge`; the branch that would be written is the
        # PR's head, which GITHUB_HEAD_REF names.
        return CiJob(
            "GitHub Actions",
            event,
            _get(env, "GITHUB_HEAD_REF") or _get(env, "GITHUB_REF_NAME"),
            _github_default_branch(env),
            event in PULL_REQUEST_EVENTS or _get(env, "GITHUB_BASE_REF") is not None,
        )
    if _get(env, "GITLAB_CI"):
        return CiJob(
            "GitLab CI",
            _get(env, "CI_PIPELINE_SOURCE"),
            _get(env, "CI_COMMIT_BRANCH") or _get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"),
            _get(env, "CI_DEFAULT_BRANCH"),
            _get(env, "CI_MERGE_REQUEST_IID") is not None,
        )
    if _get(env, "BUILDKITE"):
        pull = _get(env, "BUILDKITE_PULL_REQUEST")
        return CiJob(
            "Buildkite",
            _get(env, "BUILDKITE_SOURCE"),
            _get(env, "BUILDKITE_BRANCH"),
            _get(env, "BUILDKITE_PIPELINE_DEFAULT_BRANCH"),
            pull not in (None, "false"),
        )
    if _get(env, "JENKINS_URL"):
        return CiJob("Jenkins", None, _get(env, "BRANCH_NAME"), None, _get(env, "CHANGE_ID") is not None)
    return CiJob(None, None, None, None, False)


def write_refusal(policy: WritePolicy | None, job: CiJob) -> str | None:
    """Why this job may not write a baseline under `policy`, or None when it may."""
    if job.system is None:
        return None  # not in CI: a person at a terminal, writing to a store they chose
    events = policy.events if policy is not None else None
    if events is None and job.pull_request:
        return f"{job.system} runs this job for a pull request (event `{job.event or 'pull_request'}`)"
    if events is not None and (job.event is None or job.event not in events):
        allowed = ", ".join(f"`{e}`" for e in events)
        return f"the CI event is `{job.event or 'unknown'}`; policy.write.events allows {allowed}"
    branches = policy.branches if policy is not None else None
    if branches is None:
        if job.default_branch is not None and job.branch != job.default_branch:
            return f"the branch is `{job.branch or 'unknown'}`, not the default branch `{job.default_branch}`"
        return None
    if job.branch is None or not any(fnmatch.fnmatchcase(job.branch, pattern) for pattern in branches):
        allowed = ", ".join(f"`{b}`" for b in branches)
        return f"the branch is `{job.branch or 'unknown'}`; policy.write.branches allows {allowed}"
    return None
