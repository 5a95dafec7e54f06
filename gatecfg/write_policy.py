"""Who may write a baseline: `policy.write` against what the CI environment says about this job.

A run written with `evaluate --write` forms the baselines that later runs are judged against, so a job
that anyone can trigger with their own code (a pull request) must not write one: six such writes moved a
baseline far enough for a real regression to pass. The policy fails closed: a write is allowed only when
the environment establishes that the job may write. By default that is a job on the CI's default branch
for an event that is not a pull request's; with `policy.write` the branches and events it names. A job
of a CI gatecfg does not know, a default branch the CI does not name, or an event whose payload cannot
say whether a pull request started it is refused, naming what could not be told. Outside CI (no variable
says it is one) a write is allowed: a person at a terminal writes to a store they chose.
`--override-write-policy REASON` writes anyway (a backfill, a rerun by hand) and stores the reason with
the run.

`check_write` is the one check in front of everything that changes a store's history: `evaluate --write`
and the pytest plugin's write, `import`, `trust` / `untrust`, `shifts --undo`, `carry` (and its undo),
`prune --yes` and `db copy`. A command that is not about one test is held to every test's policy.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gatecfg.errors import InputError
from gatecfg.models import WritePolicy, name_problem
from gatecfg.records.values import shorten
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
# `::error::`, `::set-output name=x::`, `::add-mask::`: what GitHub (and Azure's `##vso[`) run from a log.
_WORKFLOW_COMMAND = re.compile(r"::[A-Za-z][\w-]*(?:\s[^:]*)?::|##vso\[", re.IGNORECASE)
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


@dataclass(frozen=True)
class CiJob:
    """What the CI environment tells about this job; None where it says nothing. `undecided` names what
    it could not tell (an unknown CI, an unreadable event payload) and makes the policy refuse."""

    system: str | None
    event: str | None
    branch: str | None
    default_branch: str | None
    pull_request: bool
    undecided: str | None = None
    # Why the default branch is unknown, when the CI could have named it (an unreadable event payload).
    no_default: str | None = None


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


def _github(env: Mapping[str, str]) -> CiJob:
    event = _get(env, "GITHUB_EVENT_NAME")
    payload, unreadable = _github_payload(env)
    # On a pull request GITHUB_REF_NAME is `<number>/merge`; the branch that would be written is the PR's
    # head, which GITHUB_HEAD_REF names.
    branch = _get(env, "GITHUB_HEAD_REF") or _get(env, "GITHUB_REF_NAME")
    pull = event in PULL_REQUEST_EVENTS or _get(env, "GITHUB_BASE_REF") is not None
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
    return CiJob("GitHub Actions", event, branch, default, pull, undecided, no_default)


def ci_job(env: Mapping[str, str] | None = None) -> CiJob:
    """The CI systems gatecfg knows, by their documented variables; any other CI by the variables most
    set (`CI=true`), as a job whose branch and trigger are unknown."""
    env = os.environ if env is None else env
    if _get(env, "GITHUB_ACTIONS") or _get(env, "GITHUB_EVENT_NAME"):
        return _github(env)
    if _get(env, "GITLAB_CI"):
        return CiJob(
            "GitLab CI",
            _get(env, "CI_PIPELINE_SOURCE"),
            _get(env, "CI_COMMIT_BRANCH") or _get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"),
            _get(env, "CI_DEFAULT_BRANCH"),
            _get(env, "CI_MERGE_REQUEST_IID") is not None
            or _get(env, "CI_EXTERNAL_PULL_REQUEST_IID") is not None,
        )
    if _get(env, "BUILDKITE"):
        return CiJob(
            "Buildkite",
            _get(env, "BUILDKITE_SOURCE"),
            _get(env, "BUILDKITE_BRANCH"),
            _get(env, "BUILDKITE_PIPELINE_DEFAULT_BRANCH"),
            _get(env, "BUILDKITE_PULL_REQUEST") not in (None, "false"),
        )
    if _get(env, "JENKINS_URL"):
        return CiJob("Jenkins", None, _get(env, "BRANCH_NAME"), None, _get(env, "CHANGE_ID") is not None)
    if _get(env, "CIRCLECI"):
        circle_pull = _get(env, "CIRCLE_PULL_REQUEST") or _get(env, "CIRCLE_PR_NUMBER")
        return CiJob("CircleCI", None, _get(env, "CIRCLE_BRANCH"), None, circle_pull is not None)
    if _get(env, "TF_BUILD"):
        reason = _get(env, "BUILD_REASON")
        branch = _get(env, "BUILD_SOURCEBRANCH")
        return CiJob(
            "Azure Pipelines",
            reason,
            branch.removeprefix("refs/heads/") if branch else None,
            None,
            reason == "PullRequest" or _get(env, "SYSTEM_PULLREQUEST_PULLREQUESTID") is not None,
        )
    if _get(env, "TRAVIS"):
        # On a pull request TRAVIS_BRANCH is the branch it targets; the PR's own is the one written.
        travis_pull = _get(env, "TRAVIS_PULL_REQUEST") not in (None, "false")
        event = _get(env, "TRAVIS_EVENT_TYPE")
        return CiJob(
            "Travis CI",
            event,
            _get(env, "TRAVIS_PULL_REQUEST_BRANCH") if travis_pull else _get(env, "TRAVIS_BRANCH"),
            None,
            travis_pull or event == "pull_request",
        )
    if _get(env, "BITBUCKET_BUILD_NUMBER") or _get(env, "BITBUCKET_PIPELINE_UUID"):
        bitbucket_pull = _get(env, "BITBUCKET_PR_ID") is not None
        return CiJob("Bitbucket Pipelines", None, _get(env, "BITBUCKET_BRANCH"), None, bitbucket_pull)
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


def write_refusal(policy: WritePolicy | None, job: CiJob) -> str | None:
    """Why this job may not write a baseline under `policy`, or None when it may. Each check runs
    whatever the others found: nothing the job could not tell lets it write."""
    if job.system is None:
        return None  # not in CI: a person at a terminal, writing to a store they chose
    if job.undecided is not None:
        return f"gatecfg cannot tell {job.undecided}"
    events = policy.events if policy is not None else None
    if job.pull_request and not (
        events is not None and job.event in events and job.event in PULL_REQUEST_EVENTS
    ):
        # Only a policy that names a pull request's own event lets one write; an `issue_comment` or a
        # `workflow_run` started by a pull request never does.
        return f"{job.system} runs this job for a pull request (event `{job.event or 'pull_request'}`)"
    if events is not None and (job.event is None or job.event not in events):
        allowed = ", ".join(f"`{e}`" for e in events)
        return f"the CI event is `{job.event or 'unknown'}`; policy.write.events allows {allowed}"
    branches = policy.branches if policy is not None else None
    if branches is None:
        if job.default_branch is None:
            why = f" ({job.no_default})" if job.no_default else ""
            return (
                f"gatecfg cannot tell the default branch on {job.system}{why}, so it cannot tell whether "
                f"`{job.branch or 'this branch'}` may write; name the branches in policy.write.branches"
            )
        if job.branch != job.default_branch:
            return f"the branch is `{job.branch or 'unknown'}`, not the default branch `{job.default_branch}`"
        return None
    if job.branch is None or not any(fnmatch.fnmatchcase(job.branch, pattern) for pattern in branches):
        allowed = ", ".join(f"`{b}`" for b in branches)
        return f"the branch is `{job.branch or 'unknown'}`; policy.write.branches allows {allowed}"
    return None


class WriteRefusedError(InputError):
    """The write policy refuses this job's write (exit 2): an entry point that can judge without writing
    (the pytest plugin) catches this one, and only this one."""


def policies(gates: Path, test: str | None = None) -> list[WritePolicy | None]:
    """The `policy.write` of `test` under the gates root, or of every test there when `test` is None;
    `[None]` (the default policy) where the tree cannot tell: no gates, invalid gates, an unknown test."""
    from gatecfg.resolve import load_tree  # here: the policy of a job outside CI needs no gate tree

    tree = load_tree(gates)
    if tree.problems:
        return [None]
    if test is not None:
        found = tree.tests.get(test)
        return [found.policy.write if found is not None else None]
    return [resolved.policy.write for resolved in tree.tests.values()] or [None]


def check_write(
    found: Sequence[WritePolicy | None] | Callable[[], Sequence[WritePolicy | None]],
    override: str | None,
    *,
    where: str,
    action: str,
    env: Mapping[str, str] | None = None,
) -> None:
    """Raise `WriteRefusedError` (exit 2, before anything is written) unless this CI job may change the
    history under each of the write policies `found` (a callable is asked only in CI), or `override`
    (the checked `--override-write-policy` reason) says why it is done anyway."""
    job = ci_job(env)
    if override is not None or job.system is None:
        return
    for policy in found() if callable(found) else found:
        refusal = write_refusal(policy, job)
        if refusal is not None:
            raise WriteRefusedError.at(
                where,
                f"this job may not {action}: {refusal}",
                hint="a pull request's job must not change the history its baselines come from; "
                "nightlies on the default branch may. Allow more with `policy.write` in base.yaml, or "
                "pass --override-write-policy REASON (the API's write_override) for a backfill or a "
                "repair by hand",
            )


def check_override(
    reason: object, *, write: bool, where: str = "--override-write-policy", needs: str = "--write"
) -> str | None:
    """The reason of `--override-write-policy` (the API's `write_override`: each entry point names its own
    `where` and the `needs` that writes) as stored, or an error (exit 2): not text, blank, a control
    character anywhere (a newline before `::error::` forges a log line however it is stripped), a
    workflow command, too long, or given without a write."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        shown = shorten(repr(reason))
        raise InputError.at(
            where, f"{shown} is {type(reason).__name__}, not a string", hint="pass the reason"
        )
    if not reason.strip():
        raise InputError.at(where, "is blank: give the reason the write is allowed anyway")
    if not write:
        raise InputError.at(where, f"only means something with {needs}")
    problem = name_problem(reason)
    if problem is None and _WORKFLOW_COMMAND.search(reason):
        problem = "is a CI workflow command (`::name::`), which a log would run, not show"
    if problem is not None:
        raise InputError.at(
            where,
            f"the reason {problem}",
            hint="one printable line, e.g. 'backfill of March from the cluster logs'",
        )
    return reason.strip()
