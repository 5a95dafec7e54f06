"""The one reader of the CI environment (gatecfg.ci): per CI system, the branch the write policy judges is
the branch stored with the run (a pull request's own head, never its merge ref nor its target), a tag
named like the default branch never writes, and links are built only from parts that look like links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import CliResult, run_cli

from gatecfg.ci import ci_job
from gatecfg.provenance import provenance
from gatecfg.store import Store
from gatecfg.write_policy import write_refusal

TEST = "tests/t_ci.py"

# A pull request from branch `feat` into `main`, as each CI describes it.
PULL_REQUESTS = {
    "github": {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF": "refs/pull/5/merge",
        "GITHUB_REF_NAME": "5/merge",
        "GITHUB_HEAD_REF": "feat",
        "GITHUB_BASE_REF": "main",
    },
    "gitlab": {
        "GITLAB_CI": "true",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "5",
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feat",
        "CI_COMMIT_REF_NAME": "feat",
    },
    "buildkite": {"BUILDKITE": "true", "BUILDKITE_BRANCH": "feat", "BUILDKITE_PULL_REQUEST": "5"},
    "jenkins": {
        "JENKINS_URL": "https://ci",
        "BRANCH_NAME": "PR-5",
        "CHANGE_ID": "5",
        "CHANGE_BRANCH": "feat",
    },
    "circleci": {"CIRCLECI": "true", "CIRCLE_BRANCH": "feat", "CIRCLE_PULL_REQUEST": "https://x/pull/5"},
    "azure": {
        "TF_BUILD": "True",
        "BUILD_REASON": "PullRequest",
        "BUILD_SOURCEBRANCH": "refs/pull/5/merge",
        "BUILD_SOURCEBRANCHNAME": "merge",
        "SYSTEM_PULLREQUEST_SOURCEBRANCH": "refs/heads/feat",
    },
    "travis": {
        "TRAVIS": "true",
        "TRAVIS_EVENT_TYPE": "pull_request",
        "TRAVIS_BRANCH": "main",
        "TRAVIS_PULL_REQUEST": "5",
        "TRAVIS_PULL_REQUEST_BRANCH": "feat",
    },
    "bitbucket": {"BITBUCKET_BUILD_NUMBER": "9", "BITBUCKET_BRANCH": "feat", "BITBUCKET_PR_ID": "5"},
}

# A push build of the branch `release/2` (no pull request), as each CI describes it.
BRANCH_BUILDS = {
    "github": {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/heads/release/2",
        "GITHUB_REF_NAME": "release/2",
    },
    "gitlab": {"GITLAB_CI": "true", "CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "release/2"},
    "buildkite": {"BUILDKITE": "true", "BUILDKITE_BRANCH": "release/2", "BUILDKITE_PULL_REQUEST": "false"},
    "jenkins": {"JENKINS_URL": "https://ci", "BRANCH_NAME": "release/2"},
    "circleci": {"CIRCLECI": "true", "CIRCLE_BRANCH": "release/2"},
    "azure": {
        "TF_BUILD": "True",
        "BUILD_REASON": "IndividualCI",
        "BUILD_SOURCEBRANCH": "refs/heads/release/2",
        "BUILD_SOURCEBRANCHNAME": "2",
    },
    "travis": {"TRAVIS": "true", "TRAVIS_EVENT_TYPE": "push", "TRAVIS_BRANCH": "release/2"},
    "bitbucket": {"BITBUCKET_BUILD_NUMBER": "9", "BITBUCKET_BRANCH": "release/2"},
}

# A build of a tag named `main`, the default branch's name.
TAG_BUILDS = {
    "github-push": {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/tags/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_REF_TYPE": "tag",
    },
    "github-release": {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "release",
        "GITHUB_REF": "refs/tags/main",
        "GITHUB_REF_NAME": "main",
    },
    "github-dispatch": {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_REF_NAME": "main",
        "GITHUB_REF_TYPE": "tag",
    },
    "gitlab": {"GITLAB_CI": "true", "CI_COMMIT_TAG": "main", "CI_COMMIT_REF_NAME": "main"},
    "buildkite": {"BUILDKITE": "true", "BUILDKITE_TAG": "main", "BUILDKITE_BRANCH": "main"},
    "jenkins": {"JENKINS_URL": "https://ci", "TAG_NAME": "main", "BRANCH_NAME": "main"},
    "circleci": {"CIRCLECI": "true", "CIRCLE_TAG": "main"},
    "azure": {"TF_BUILD": "True", "BUILD_REASON": "Manual", "BUILD_SOURCEBRANCH": "refs/tags/main"},
    "travis": {"TRAVIS": "true", "TRAVIS_EVENT_TYPE": "push", "TRAVIS_TAG": "main", "TRAVIS_BRANCH": "main"},
    "bitbucket": {"BITBUCKET_BUILD_NUMBER": "9", "BITBUCKET_TAG": "main"},
}
# A policy that lets the branch `main` write on every CI, whether or not it names its default branch.
MAIN_WRITES = "policy:\n  write:\n    branches: [main]\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    (tmp_path / "gates").mkdir()
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (tmp_path / "gates" / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    return tmp_path


def _evaluate(
    project: Path, policy: str, env: dict[str, str], mp: pytest.MonkeyPatch, *extra: str
) -> CliResult:
    (project / "gates" / "base.yaml").write_text(f"version: 1\n{policy}")
    for key, value in env.items():
        mp.setenv(key, value)
    argv = ["evaluate", "--gates", "gates", "--test", TEST, "--record", "r.jsonl", "--db", "sqlite:///h.db"]
    return run_cli(*argv, "--write", "--run-id", "r1", *extra)


def _stored_branch() -> str | None:
    with Store.open("sqlite:///h.db") as store:
        [row] = store.runs()
    return row.run.branch


@pytest.mark.parametrize("system", PULL_REQUESTS)
def test_a_pull_requests_stored_branch_is_its_own_the_one_the_policy_judged(
    project: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    env = PULL_REQUESTS[system]
    job = ci_job(env)
    assert (job.pull_request, job.branch, job.tag) == (True, "feat", None)
    assert "for a pull request" in (write_refusal(None, job) or "")
    refused = _evaluate(project, "", env, monkeypatch)
    assert refused.code == 2
    assert "runs this job for a pull request" in refused.err
    result = _evaluate(project, "", env, monkeypatch, "--override-write-policy", "a backfill by hand")
    assert result.code == 0, result.err
    assert _stored_branch() == job.branch == "feat"


@pytest.mark.parametrize("system", BRANCH_BUILDS)
def test_a_branch_builds_stored_branch_is_the_judged_branch(
    project: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    env = BRANCH_BUILDS[system]
    assert ci_job(env).branch == "release/2"
    result = _evaluate(project, "policy:\n  write:\n    branches: ['release/*']\n", env, monkeypatch)
    assert result.code == 0, result.err
    assert _stored_branch() == "release/2"


@pytest.mark.parametrize("system", TAG_BUILDS)
def test_a_tag_named_like_the_default_branch_does_not_write(
    project: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    env = TAG_BUILDS[system]
    job = ci_job(env)
    assert (job.tag, job.branch) == ("main", None)
    result = _evaluate(project, MAIN_WRITES, env, monkeypatch)
    assert result.code == 2, result.err
    assert "builds the tag `main`, not a branch; a tag build never writes" in result.err
    assert not (project / "h.db").exists()


def test_a_github_tag_is_not_the_default_branch_even_when_the_payload_names_it(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}}))
    job = ci_job({**TAG_BUILDS["github-push"], "GITHUB_EVENT_PATH": str(event)})
    assert job.default_branch == "main"
    assert "builds the tag `main`" in (write_refusal(None, job) or "")


def test_an_azure_manual_build_of_a_pull_requests_merge_ref_is_a_pull_request() -> None:
    env = {"TF_BUILD": "True", "BUILD_REASON": "Manual", "BUILD_SOURCEBRANCH": "refs/pull/5/merge"}
    job = ci_job(env)
    assert job.pull_request
    assert "for a pull request" in (write_refusal(None, job) or "")


@pytest.mark.parametrize("system", PULL_REQUESTS)
def test_provenance_reads_the_same_record_as_the_policy(system: str) -> None:
    env = {**PULL_REQUESTS[system], "GITHUB_SHA": "0123abc", "CI_COMMIT_SHA": "0123abc"}
    found = provenance(test=TEST, run_id=None, commit=None, branch=None, url=None, env=env)
    assert found.branch == ci_job(env).branch == "feat"


GITHUB_LINKS = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_EVENT_NAME": "push",
    "GITHUB_REF_NAME": "main",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/train",
    "GITHUB_SHA": "0123abc",
    "GITHUB_RUN_ID": "42",
    "GITHUB_RUN_ATTEMPT": "2",
}


def test_github_links_are_built_from_the_run_and_the_commit() -> None:
    job = ci_job(GITHUB_LINKS)
    assert job.url == "https://github.com/acme/train/actions/runs/42/attempts/2"
    assert job.source == "https://github.com/acme/train/blob/0123abc"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GITHUB_SHA", "0123abc) ![x](https://evil.example/x.png"),
        ("GITHUB_SERVER_URL", "https://github.com/x)[click](https://evil.example"),
        ("GITHUB_REPOSITORY", "acme/train)](https://evil.example"),
        ("GITHUB_REPOSITORY", "acme/train/../../evil"),
        ("GITHUB_SERVER_URL", "javascript:alert(1)//"),
    ],
    ids=["sha", "server", "repository", "repository-path", "scheme"],
)
def test_a_link_part_that_is_not_what_it_names_builds_no_link(name: str, value: str) -> None:
    job = ci_job({**GITHUB_LINKS, name: value})
    assert job.source is None
    if name != "GITHUB_SHA":
        assert job.url is None
