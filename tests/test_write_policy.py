"""The write policy (gatecfg.write_policy): which CI jobs may write a baseline, on every CI system and on
the events it cannot decide, through the CLI, the API and `demo`; and the reason an override gives."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import count, run_cli, score_gates, table
from hypothesis import given, settings
from hypothesis import strategies as st

import gatecfg
from gatecfg.errors import InputError
from gatecfg.models import WritePolicy
from gatecfg.write_policy import PULL_REQUEST_EVENTS, check_override, ci_job, write_refusal

MAIN_ONLY = WritePolicy(branches=("main",))


def _payload(tmp_path: Path, payload: object) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return str(path)


GH = {"GITHUB_ACTIONS": "true", "CI": "true"}


REPO_MAIN = {"repository": {"default_branch": "main"}}


# (id, environment, event payload or None, policy, the words of the refusal or None when the write is allowed)
POLICY_CASES: list[tuple[str, dict[str, str], object, WritePolicy | None, str | None]] = [
    ("local", {}, None, None, None),
    ("local-with-policy", {}, None, MAIN_ONLY, None),
    ("ci-false-is-local", {"CI": "false"}, None, MAIN_ONLY, None),
    ("unknown-ci", {"CI": "true"}, None, None, "cannot tell the CI system (CI=true"),
    ("unknown-ci-with-policy", {"CI": "1"}, None, MAIN_ONLY, "cannot tell the CI system (CI=1"),
    ("teamcity", {"TEAMCITY_VERSION": "2024.1"}, None, MAIN_ONLY, "cannot tell the CI system"),
    ("circleci-feature", {"CI": "true", "CIRCLECI": "true", "CIRCLE_BRANCH": "feat"}, None, MAIN_ONLY,
     "the branch is `feat`; policy.write.branches allows `main`"),
    ("circleci-main", {"CIRCLECI": "true", "CIRCLE_BRANCH": "main"}, None, MAIN_ONLY, None),
    ("circleci-main-no-policy", {"CIRCLECI": "true", "CIRCLE_BRANCH": "main"}, None, None,
     "cannot tell the default branch on CircleCI"),
    ("circleci-pr", {"CIRCLECI": "true", "CIRCLE_BRANCH": "main", "CIRCLE_PULL_REQUEST": "https://x/pull/3"},
     None, MAIN_ONLY, "CircleCI runs this job for a pull request"),
    ("azure-feature", {"TF_BUILD": "True", "BUILD_SOURCEBRANCH": "refs/heads/feat"}, None, MAIN_ONLY,
     "the branch is `feat`"),
    ("azure-main", {"TF_BUILD": "True", "BUILD_SOURCEBRANCH": "refs/heads/main"}, None, MAIN_ONLY, None),
    ("azure-pr", {"TF_BUILD": "True", "BUILD_REASON": "PullRequest", "BUILD_SOURCEBRANCH": "refs/heads/main"},
     None, MAIN_ONLY, "Azure Pipelines runs this job for a pull request"),
    ("travis-feature", {"TRAVIS": "true", "CI": "true", "TRAVIS_BRANCH": "feat"}, None, MAIN_ONLY,
     "the branch is `feat`"),
    ("travis-pr-into-main", {"TRAVIS": "true", "TRAVIS_BRANCH": "main", "TRAVIS_PULL_REQUEST": "12",
     "TRAVIS_PULL_REQUEST_BRANCH": "feat"}, None, MAIN_ONLY, "Travis CI runs this job for a pull request"),
    ("bitbucket-feature", {"CI": "true", "BITBUCKET_BUILD_NUMBER": "4", "BITBUCKET_BRANCH": "feat"}, None,
     MAIN_ONLY, "the branch is `feat`"),
    ("bitbucket-pr", {"BITBUCKET_BUILD_NUMBER": "4", "BITBUCKET_BRANCH": "main", "BITBUCKET_PR_ID": "9"},
     None, MAIN_ONLY, "Bitbucket Pipelines runs this job for a pull request"),
    ("jenkins-main-no-policy", {"JENKINS_URL": "http://j", "BRANCH_NAME": "main"}, None, None,
     "cannot tell the default branch on Jenkins"),
    ("jenkins-main", {"JENKINS_URL": "http://j", "BRANCH_NAME": "main"}, None, MAIN_ONLY, None),
    ("gitlab-no-default-branch", {"GITLAB_CI": "true", "CI_COMMIT_BRANCH": "feat"}, None, None,
     "cannot tell the default branch on GitLab CI"),
    ("gitlab-external-pr", {"GITLAB_CI": "true", "CI_COMMIT_BRANCH": "main", "CI_DEFAULT_BRANCH": "main",
     "CI_EXTERNAL_PULL_REQUEST_IID": "4"}, None, None, "GitLab CI runs this job for a pull request"),
    ("gh-push-main", {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}, REPO_MAIN, None, None),
    ("gh-push-feature", {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "feat"}, REPO_MAIN, None,
     "not the default branch `main`"),
    ("gh-payload-is-a-folder", {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "feat",
     "GITHUB_EVENT_PATH": "."}, None, None, "cannot tell the default branch on GitHub Actions (the event"),
    ("gh-payload-is-not-json", {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}, "not json",
     None, "cannot tell the default branch on GitHub Actions"),
    ("gh-payload-without-repository", {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}, {},
     None, "the event payload names none"),
    ("gh-workflow-run-from-a-pr", {**GH, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_REF_NAME": "main"},
     {**REPO_MAIN, "workflow_run": {"event": "pull_request", "pull_requests": []}}, None,
     "runs this job for a pull request (event `workflow_run`)"),
    ("gh-workflow-run-from-a-pr-target", {**GH, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_REF_NAME":
     "main"}, {**REPO_MAIN, "workflow_run": {"event": "pull_request_target"}}, MAIN_ONLY, "pull request"),
    ("gh-workflow-run-from-a-push", {**GH, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_REF_NAME": "main"},
     {**REPO_MAIN, "workflow_run": {"event": "push", "pull_requests": []}}, None, None),
    ("gh-workflow-run-unnamed-event", {**GH, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_REF_NAME":
     "main"}, {**REPO_MAIN, "workflow_run": {}}, MAIN_ONLY, "cannot tell which event started the workflow"),
    ("gh-workflow-run-no-payload", {**GH, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_REF_NAME": "main"},
     None, MAIN_ONLY, "cannot tell whether a pull request started this `workflow_run` event"),
    ("gh-issue-comment-on-a-pr", {**GH, "GITHUB_EVENT_NAME": "issue_comment", "GITHUB_REF_NAME": "main"},
     {**REPO_MAIN, "issue": {"number": 3, "pull_request": {"url": "u"}}}, None, "pull request"),
    ("gh-issue-comment-on-a-pr-allowed-event", {**GH, "GITHUB_EVENT_NAME": "issue_comment",
     "GITHUB_REF_NAME": "main"}, {**REPO_MAIN, "issue": {"pull_request": {}}},
     WritePolicy(events=("issue_comment",)), "pull request"),
    ("gh-issue-comment-on-an-issue", {**GH, "GITHUB_EVENT_NAME": "issue_comment", "GITHUB_REF_NAME":
     "main"}, {**REPO_MAIN, "issue": {"number": 3}}, None, None),
    ("gh-check-run-of-a-pr", {**GH, "GITHUB_EVENT_NAME": "check_run", "GITHUB_REF_NAME": "main"},
     {**REPO_MAIN, "check_run": {"pull_requests": [{"number": 1}]}}, None, "pull request"),
    ("gh-review-comment", {**GH, "GITHUB_EVENT_NAME": "pull_request_review_comment", "GITHUB_REF_NAME":
     "main"}, REPO_MAIN, MAIN_ONLY, "pull request"),
    ("gh-pr-opted-in-by-events", {**GH, "GITHUB_EVENT_NAME": "pull_request", "GITHUB_HEAD_REF": "main"},
     REPO_MAIN, WritePolicy(events=("pull_request",)), None),
]  # fmt: skip


@table(("env", "payload", "policy", "words"), POLICY_CASES)
def test_the_write_policy_writes_only_where_the_job_is_established(
    tmp_path: Path, env: dict[str, str], payload: object, policy: WritePolicy | None, words: str | None
) -> None:
    env = dict(env)
    if isinstance(payload, str):
        (tmp_path / "event.json").write_text(payload)
        env["GITHUB_EVENT_PATH"] = str(tmp_path / "event.json")
    elif payload is not None:
        env["GITHUB_EVENT_PATH"] = _payload(tmp_path, payload)
    refusal = write_refusal(policy, ci_job(env))
    if words is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert words in refusal


def test_a_fifo_as_the_event_payload_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "event.json"
    os.mkfifo(fifo)
    env = {**GH, "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main", "GITHUB_EVENT_PATH": str(fifo)}
    assert "named pipe" in (write_refusal(None, ci_job(env)) or "")


# Each system's variables that say "a pull request", and those that name a branch.
PR_MARKERS = {
    "GITHUB_ACTIONS": [("GITHUB_EVENT_NAME", sorted(PULL_REQUEST_EVENTS)), ("GITHUB_BASE_REF", ["main"])],
    "GITLAB_CI": [("CI_MERGE_REQUEST_IID", ["1"]), ("CI_EXTERNAL_PULL_REQUEST_IID", ["2"])],
    "BUILDKITE": [("BUILDKITE_PULL_REQUEST", ["12"])],
    "JENKINS_URL": [("CHANGE_ID", ["5"])],
    "CIRCLECI": [("CIRCLE_PULL_REQUEST", ["https://x/pull/1"]), ("CIRCLE_PR_NUMBER", ["1"])],
    "TF_BUILD": [("BUILD_REASON", ["PullRequest"]), ("SYSTEM_PULLREQUEST_PULLREQUESTID", ["8"])],
    "TRAVIS": [("TRAVIS_PULL_REQUEST", ["3"]), ("TRAVIS_EVENT_TYPE", ["pull_request"])],
    "BITBUCKET_BUILD_NUMBER": [("BITBUCKET_PR_ID", ["9"])],
}


BRANCHES = ["GITHUB_REF_NAME", "GITHUB_HEAD_REF", "CI_COMMIT_BRANCH", "CI_DEFAULT_BRANCH", "BUILDKITE_BRANCH",
            "BUILDKITE_PIPELINE_DEFAULT_BRANCH", "BRANCH_NAME", "CIRCLE_BRANCH", "BUILD_SOURCEBRANCH",
            "TRAVIS_BRANCH", "TRAVIS_PULL_REQUEST_BRANCH", "BITBUCKET_BRANCH"]  # fmt: skip


@st.composite
def pull_request_jobs(draw: st.DrawFn) -> dict[str, str]:
    """A job of a known CI that its variables say runs for a pull request, with any branch variables."""
    system = draw(st.sampled_from(sorted(PR_MARKERS)))
    name, values = draw(st.sampled_from(PR_MARKERS[system]))
    env = {system: "true", name: draw(st.sampled_from(values))}
    for branch in draw(st.lists(st.sampled_from(BRANCHES), unique=True)):
        env[branch] = draw(st.sampled_from(["main", "refs/heads/main", "feat", "release/1"]))
    env.pop("GITHUB_EVENT_PATH", None)
    return env


POLICIES = st.sampled_from(
    [None, MAIN_ONLY, WritePolicy(branches=("*",)), WritePolicy(events=("push", "schedule", "issue_comment"))]
)


@settings(max_examples=300, deadline=None)
@given(env=pull_request_jobs(), policy=POLICIES)
def test_no_pull_request_job_of_any_ci_writes_under_any_policy_that_does_not_name_its_event(
    env: dict[str, str], policy: WritePolicy | None
) -> None:
    refusal = write_refusal(policy, ci_job(env))
    assert refusal is not None


@settings(max_examples=200, deadline=None)
@given(
    generic=st.sampled_from(["CI", "CONTINUOUS_INTEGRATION", "BUILD_NUMBER", "TEAMCITY_VERSION", "DRONE"]),
    value=st.sampled_from(["true", "1", "yes", "True"]),
    branches=st.dictionaries(st.sampled_from(BRANCHES[6:]), st.sampled_from(["main", "feat"])),
    policy=POLICIES,
)
def test_a_ci_gatecfg_does_not_know_never_writes(
    generic: str, value: str, branches: dict[str, str], policy: WritePolicy | None
) -> None:
    env = {generic: value, **{k: v for k, v in branches.items() if k not in ("BRANCH_NAME",)}}
    refusal = write_refusal(policy, ci_job(env))
    assert refusal is not None
    assert "cannot tell the CI system" in refusal


CIRCLE_FEATURE = {"CI": "true", "CIRCLECI": "true", "CIRCLE_BRANCH": "feat", "CIRCLE_BUILD_NUM": "7"}


def test_evaluate_write_on_a_circleci_feature_branch_exits_2_and_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = score_gates(tmp_path, "  write: {branches: [main]}\n")
    for key, value in CIRCLE_FEATURE.items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "h.db"
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    result = run_cli(*argv, "--db", f"sqlite:///{db}", "--write")
    assert result.code == 2
    assert "--write: error: this job may not write a baseline: the branch is `feat`" in result.err
    assert "--override-write-policy" in result.err
    assert not db.exists()
    forced = run_cli(*argv, "--db", f"sqlite:///{db}", "--write", "--override-write-policy", "backfill")
    assert forced.code == 0
    assert count(f"sqlite:///{db}", "SELECT count(*) FROM runs WHERE write_override = 'backfill'") == 1


def test_the_api_refuses_a_write_from_an_unknown_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = score_gates(tmp_path, "")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(InputError, match="cannot tell the CI system"):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"),
                         write=True)  # fmt: skip
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("", "give the reason"),
        ("   ", "give the reason"),
        ("\t\n", "give the reason"),
        ("backfill\x1b[2J", "control character U+001B"),
        ("line one\nline two", "control character U+000A"),
        ("bidi \u202e", "control character U+202E"),
        ("x" * 600, "bytes"),
    ],
    ids=["empty", "blank", "whitespace", "escape", "newline", "bidi", "too-long"],
)
def test_an_override_reason_is_one_printable_line(reason: str, words: str) -> None:
    with pytest.raises(InputError, match=re.escape(words)):
        check_override(reason, write=True)


def test_an_override_reason_is_stored_stripped_and_needs_a_write() -> None:
    assert check_override("  march backfill ", write=True) == "march backfill"
    with pytest.raises(InputError, match="only means something with --write"):
        check_override("x", write=False)


def test_the_cli_refuses_control_characters_in_an_override(tmp_path: Path) -> None:
    gates = score_gates(tmp_path, "")
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    result = run_cli(*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}", "--write", "--override-write-policy",
                     "ok\r::error::forged")  # fmt: skip
    assert result.code == 2
    assert "control character U+000D" in result.err
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize(
    "env",
    [{"CI": "true"}, {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request"}, CIRCLE_FEATURE],
    ids=["unknown-ci", "github-pr", "circleci-feature"],
)
def test_the_demo_seeds_its_own_scratch_store_in_any_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = run_cli("demo")
    assert result.code == 0, result.err
    assert "may not write a baseline" not in result.err
