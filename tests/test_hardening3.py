"""Hardening, round three (issue 28): a catalogue of the classes the third red team found, each broader
than its example, and property tests where the input space is large.

Sections: 1. the write policy on every CI and on events it cannot decide; 2. override reasons;
3. YAML versions and tags; 4. lint's inputs and its cost; 5. `--db` spellings; 6. rebaseline through merge
keys; 7. `import` CSV; 8. a read-only SQLite store; 9. the bounded readers; 10. record formats;
11. API and plugin inputs; 12. metric name spellings.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import CliResult, count, run_cli
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import gatecfg
from gatecfg.errors import InputError
from gatecfg.models import WritePolicy
from gatecfg.write_policy import PULL_REQUEST_EVENTS, check_override, ci_job, write_refusal


def _table(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> pytest.MarkDecorator:
    """Parametrize over a table whose rows start with their id."""
    return pytest.mark.parametrize(names, [row[1:] for row in rows], ids=[row[0] for row in rows])


# --- 1. the write policy ------------------------------------------------------------------------------------

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


@_table(("env", "payload", "policy", "words"), POLICY_CASES)
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


def _gates(root: Path, policy: str) -> Path:
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(
        "version: 1\ndefaults:\n  eval/score:\n    steps: last\n    constraint: {rel_down: 0.1}\n"
        f"policy:\n  window: 5\n{policy}"
    )
    (gates / "t.yaml").write_text("test: tests/t_ci.py\ngates:\n  eval/score:\n")
    (root / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    return gates


CIRCLE_FEATURE = {"CI": "true", "CIRCLECI": "true", "CIRCLE_BRANCH": "feat", "CIRCLE_BUILD_NUM": "7"}


def test_evaluate_write_on_a_circleci_feature_branch_exits_2_and_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = _gates(tmp_path, "  write: {branches: [main]}\n")
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
    gates = _gates(tmp_path, "")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(InputError, match="cannot tell the CI system"):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"),
                         write=True)  # fmt: skip
    assert not (tmp_path / "h.db").exists()


pytest_plugins = ["pytester"]


def test_the_pytest_plugin_refuses_a_write_on_a_circleci_feature_branch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gates(pytester.path, "  write: {branches: [main]}\n")
    (pytester.path / "gates" / "t.yaml").write_text("test: tests/test_x_ci.py\ngates:\n  eval/score:\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_x_ci.py").write_text(
        "def test_x(gate_metrics):\n    gate_metrics.log('eval/score', 0, 0.5)\n"
    )
    for key, value in CIRCLE_FEATURE.items():
        monkeypatch.setenv(key, value)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--gatecfg-gates", "gates", "--gatecfg-write", "--gatecfg-db", "h.db",
        "tests",
    )  # fmt: skip
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*may not write a baseline: the branch is `feat`*"])
    assert not (pytester.path / "h.db").exists()


# --- 2. override reasons --------------------------------------------------------------------------------


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


@pytest.mark.parametrize("reason", ["", "  ", "a\x00b"], ids=["empty", "blank", "nul"])
def test_the_api_refuses_a_blank_or_unprintable_override_and_writes_nothing(
    tmp_path: Path, reason: str
) -> None:
    gates = _gates(tmp_path, "")
    with pytest.raises(InputError, match="write_override"):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"),
                         write=True, write_override=reason)  # fmt: skip
    assert not (tmp_path / "h.db").exists()


def test_the_cli_refuses_control_characters_in_an_override(tmp_path: Path) -> None:
    gates = _gates(tmp_path, "")
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    result = run_cli(*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}", "--write", "--override-write-policy",
                     "ok\r::error::forged")  # fmt: skip
    assert result.code == 2
    assert "control character U+000D" in result.err
    assert not (tmp_path / "h.db").exists()


# --- 3. YAML versions and tags ----------------------------------------------------------------------------

YAML_CASES = [
    ("yaml-1.1", "%YAML 1.1\n---\ntest: tests/t_ci.py\n", "1:7", "`%YAML 1.1` is not a YAML version"),
    ("yaml-1.0", "%YAML 1.0\n---\ntest: tests/t_ci.py\n", "1:7", "`%YAML 1.0` is not a YAML version"),
    ("yaml-1.1-later", "# c\n%YAML 1.1\n---\ntest: tests/t_ci.py\n", "2:7", "`%YAML 1.1`"),
    ("null-with-text", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!null xyz\n", "4:14",
     "`!!null xyz` is not a valid null in YAML 1.2"),
    ("bool-yes", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!bool yes\n", "4:14",
     "`!!bool yes` is not a valid bool"),
    ("bool-on", "test: tests/t_ci.py\ngates:\n  eval/score:\n    enforce: !!bool On\n", "4:14",
     "`!!bool On`"),
    ("int-sexagesimal", "test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: [!!int 1:30]\n", "4:13",
     "`!!int 1:30` is not a valid int"),
    ("float-word", "test: tests/t_ci.py\ngates:\n  eval/score:\n    limits: {min: !!float abc}\n", "4:19",
     "`!!float abc` is not a valid float"),
    ("null-tag-on-key-value", "test: !!null tests/t_ci.py\n", "1:7", "`!!null tests/t_ci.py`"),
]  # fmt: skip


@_table(("text", "where", "words"), YAML_CASES)
def test_a_yaml_version_or_tag_gatecfg_would_misread_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str, words: str
) -> None:
    _gates(tmp_path, "")
    (tmp_path / "gates" / "t.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert f"gates/t.yaml:{where}: error: " in result.out
    assert words in result.out


TAGGED = ["null", "bool", "int", "float"]


@settings(max_examples=400, deadline=None)
@given(
    tag=st.sampled_from(TAGGED),
    text=st.one_of(
        st.sampled_from(["~", "null", "Null", "", "true", "yes", "on", "0", "07", "0x1f", "0o17", "1_000",
                         "1:30", "1e3", ".inf", "-.Inf", ".nan", "3.5", "+12", "abc", "y", "NULL", "False"]),
        st.from_regex(r"[-+]?[0-9a-fA-Fx._:eo]{1,8}", fullmatch=True),
    ),
)  # fmt: skip
def test_an_explicit_scalar_tag_means_what_the_untagged_text_means_or_is_an_error(
    tag: str, text: str
) -> None:
    from gatecfg.yamlio import load_yaml

    try:
        plain = load_yaml(f"v: {text}\n", "t.yaml").data["v"]
    except InputError:
        assume(False)  # not a plain scalar at all (`:`)
    try:
        tagged = load_yaml(f"v: !!{tag} {text}\n", "t.yaml").data["v"]
    except InputError as exc:
        error = str(exc)
    else:
        if tag == "float" and type(plain) is int:
            plain = float(plain)
        assert type(tagged) is type(plain)
        assert tagged == plain or (math.isnan(tagged) and math.isnan(plain))
        return
    assert error.startswith("t.yaml:1:4: error: v: ")


# --- 4. lint's cost and its inputs -----------------------------------------------------------------------


def _steps_file(root: Path, n: int, *, flow: bool) -> None:
    steps = "[" + ", ".join(map(str, range(n))) + "]" if flow else "".join(f"\n      - {i}" for i in range(n))
    (root / "gates" / "t.yaml").write_text(
        f"test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: {steps}\n    constraint: {{rel_down: 0.1}}\n"
    )


def _lint_seconds(root: Path) -> float:
    import time

    start = time.process_time()
    result = run_cli("lint", "--gates", root / "gates")
    assert result.code == 0, result.out
    return time.process_time() - start


@pytest.mark.parametrize("flow", [False, True], ids=["block-list", "flow-list"])
def test_a_long_steps_list_lints_in_time_linear_in_its_length(tmp_path: Path, flow: bool) -> None:
    _gates(tmp_path, "")
    _steps_file(tmp_path, 20_000, flow=flow)
    small = _lint_seconds(tmp_path)
    _steps_file(tmp_path, 160_000, flow=flow)  # over 2 MB as a block list
    large = _lint_seconds(tmp_path)
    # Eight times the steps: linear work costs about eight times as much, a quadratic path 64 times.
    assert large < max(24 * small, 2.0)
    assert large < 30


def test_a_step_listed_twice_in_a_long_list_is_named_at_its_line(tmp_path: Path) -> None:
    _gates(tmp_path, "")
    _steps_file(tmp_path, 1000, flow=False)
    path = tmp_path / "gates" / "t.yaml"
    path.write_text(path.read_text().replace("      - 999\n", "      - 999\n      - 7\n"))
    result = run_cli("lint", "--gates", tmp_path / "gates")
    assert result.code == 2
    assert "t.yaml:1005:9: error: gates.eval/score.steps[1000]: step 7 is listed twice" in result.out


def _special(kind: str, path: Path, outside: Path) -> None:
    import socket

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "device-link":
        path.symlink_to("/dev/zero")
    elif kind == "fifo-link":
        os.mkfifo(outside / "f.yaml")
        path.symlink_to(outside / "f.yaml")
    elif kind == "folder-link-out":
        (outside / "more").mkdir()
        (outside / "more" / "x.yaml").write_text("test: tests/x_ci.py\ngates:\n  eval/score:\n")
        path.symlink_to(outside / "more")


LINT_SPECIAL = [
    ("fifo", "gates/odd.yaml", "is a named pipe (FIFO), not a YAML file"),
    ("socket", "gates/odd.yaml", "is a socket, not a YAML file"),
    ("device-link", "gates/odd.yaml", "is a link to /dev/zero, outside the gates root"),
    ("fifo-link", "gates/odd.yaml", "outside the gates root"),
    ("folder-link-out", "gates/more", "is a link to the folder"),
]


@pytest.mark.parametrize(("kind", "where", "words"), LINT_SPECIAL, ids=[c[0] for c in LINT_SPECIAL])
def test_lint_refuses_what_is_no_gate_file_it_may_read_rather_than_skip_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, where: str, words: str
) -> None:
    _gates(tmp_path, "")
    outside = tmp_path / "outside"
    outside.mkdir()
    _special(kind, tmp_path / where, outside)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert f"{where}: error: " in result.out or f"{where}:1:1: error: " in result.out
    assert words in result.out


def test_lint_of_a_fifo_given_by_name_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gates(tmp_path, "")
    os.mkfifo(tmp_path / "gates" / "odd.yaml")
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "gates/odd.yaml")
    assert result.code == 2
    assert "gates/odd.yaml: error: is a named pipe (FIFO), not a YAML file" in result.out


# --- 5. `--db` spellings ---------------------------------------------------------------------------------

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


@_table(("dsn", "url"), DSNS)
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
    gates = _gates(tmp_path, "")
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
    gates = _gates(tmp_path, "")
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    result = run_cli(*argv, "--db", dsn)
    assert result.code == 2
    assert "--db: error: the value starts like a PostgreSQL keyword DSN" in result.err
    assert "ter2" not in result.err
    assert "unterminated" not in result.err


# --- 6. rebaseline through merge keys --------------------------------------------------------------------

MERGED_LIMITS = [
    ("block-merge-in-limits", "  o:\n    limits: &l {min: 0.1}\n  m:\n    limits:\n      <<: *l\n"
     "      max: 5\n", {"min": 0.4}, "t.yaml:6:5", "take `min` through a `<<` merge key"),
    ("block-merge-edit-own-side", "  o:\n    limits: &l {min: 0.1}\n  m:\n    limits:\n      <<: *l\n"
     "      max: 5\n", {"max": 6.0}, "t.yaml:6:5", "take `min` through a `<<` merge key"),
    ("flow-merge-in-limits", "  o:\n    limits: &l {min: 0.1, max: 2}\n  m:\n    limits: {<<: *l}\n",
     {"min": 0.4, "max": 3.0}, "t.yaml:6:5", "take `min`, `max` through a `<<` merge key"),
    ("merge-list-in-limits", "  o:\n    limits: &a {min: 0.1}\n  p:\n    limits: &b {max: 2}\n  m:\n"
     "    limits: {<<: [*a, *b]}\n", {"min": 0.4}, "t.yaml:8:5", "through a `<<` merge key"),
    ("anchored-number", "  o:\n    limits: {min: &n 0.1}\n  m:\n    limits: {min: *n}\n", {"min": 0.4},
     "t.yaml:4:19", "cannot edit the value here in place"),
]  # fmt: skip


@_table(("gates", "new", "where", "words"), MERGED_LIMITS)
def test_limits_that_come_through_a_merge_key_are_an_input_error_at_their_line(
    gates: str, new: dict[str, float], where: str, words: str
) -> None:
    from gatecfg.analysis.limits_edit import LimitsEdit, apply_edit

    text = f"test: t\ngates:\n{gates}"
    with pytest.raises(InputError) as caught:
        apply_edit(text, "t.yaml", LimitsEdit("m", new, "e"))
    assert str(caught.value).startswith(f"{where}: error: ")
    assert words in str(caught.value)


def test_rebaseline_write_of_merged_limits_exits_2_and_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = _gates(tmp_path, "  min_history: 1\n")
    (gates / "t.yaml").write_text(
        "test: tests/t_ci.py\ngates:\n  eval/other:\n    steps: last\n    constraint: {rel_down: 0.5}\n"
        "    limits: &l {min: 0.1}\n  eval/score:\n    limits:\n      <<: *l\n      max: 5\n"
    )
    before = (gates / "t.yaml").read_text()
    db = f"sqlite:///{tmp_path / 'h.db'}"
    for night in range(6):
        points = {"eval/score": [(0, 0.4 + night / 20)], "eval/other": [(0, 0.5)]}
        gatecfg.evaluate("tests/t_ci.py", points, gates=gates, db=db, write=True, run_id=f"n{night}")
    result = run_cli("rebaseline", "--test", "tests/t_ci.py", "--metric", "eval/score", "--gates", gates,
                     "--db", db, "--write")  # fmt: skip
    assert result.code == 2
    assert "t.yaml:8:5: error: gates.eval/score.limits: these limits take `min` through a `<<` merge key" in (
        result.err
    )
    assert (gates / "t.yaml").read_text() == before


# --- 7. `import` CSV ---------------------------------------------------------------------------------------

BAD_HEADERS = [
    ("negative", "eval/score@-1", "`-1` is not a step"),
    ("23-digits", "eval/score@12345678901234567890123", "beyond the largest step"),
    ("past-max-step", "eval/score@2147483648", "beyond the largest step"),
    ("word", "eval/score@last", "`last` is not a step"),
    ("float", "eval/score@1.5", "`1.5` is not a step"),
    ("exponent", "eval/score@1e3", "`1e3` is not a step"),
    ("non-ascii-digits", "eval/score@\u0663", "is not a step"),
    ("empty-step", "eval/score@", "no step follows `@`"),
    ("no-metric", "@5", "names no metric"),
]


def _import(tmp_path: Path, csv_text: str | bytes) -> CliResult:
    gates = _gates(tmp_path, "")
    path = tmp_path / "export.csv"
    if isinstance(csv_text, bytes):
        path.write_bytes(csv_text)
    else:
        path.write_text(csv_text)
    db = f"sqlite:///{tmp_path / 'i.db'}"
    return run_cli("import", path, "--test", "tests/t_ci.py", "--gates", gates, "--db", db)


@_table(("column", "words"), BAD_HEADERS)
def test_a_bad_metric_at_step_header_is_an_error_at_its_cell(tmp_path: Path, column: str, words: str) -> None:
    result = _import(tmp_path, f"run_id,date,commit,{column}\nr1,2024-01-01,c1,0.5\n")
    assert result.code == 2
    assert f"export.csv:1:20: error: column `{column}`: " in result.err
    assert words in result.err
    assert not (tmp_path / "i.db").exists()


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"run_id,date,commit,eval/score\nr1,2024-01-01,c\x001,0.5\n", "export.csv:2:16"),
        (b"run_id,date,commit,eval/score\nr\x00,2024-01-01,c1,0.5\n", "export.csv:2:2"),
        (b'run_id,date,commit,eval/score\n"r1",2024-01-01,c1,"0.5\x00"\n', "export.csv:2:24"),
        (b"run_id,date,commit,eval/\x00score\nr1,2024-01-01,c1,0.5\n", "export.csv:1:25"),
    ],
    ids=["commit", "run-id", "quoted-value", "header"],
)
def test_a_nul_byte_anywhere_in_an_export_is_an_error_at_its_column(
    tmp_path: Path, data: bytes, where: str
) -> None:
    result = _import(tmp_path, data)
    assert result.code == 2
    assert f"{where}: error: a NUL byte" in result.err
    assert not (tmp_path / "i.db").exists()


# --- 8. a read-only SQLite store --------------------------------------------------------------------------


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder this process cannot write: a read-only tmpfs mount as root (root writes through any mode
    bits), its mode bits otherwise. The store is copied in first by `put`."""
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "none", str(folder)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("root cannot mount a tmpfs here to make a read-only folder")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def _make_read_only(folder: Path) -> None:
    import subprocess

    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        folder.chmod(0o555)


def test_a_store_on_a_read_only_folder_serves_a_plain_evaluate(
    tmp_path: Path, read_only_folder: Path
) -> None:
    import shutil

    gates = _gates(tmp_path, "  min_history: 1\n")
    db = tmp_path / "h.db"
    for night, score in enumerate([0.5, 0.52, 0.48]):
        gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, score)]}, gates=gates, db=str(db), write=True,
                         run_id=f"n{night}")  # fmt: skip
    shutil.copy(db, read_only_folder / "h.db")
    _make_read_only(read_only_folder)
    (tmp_path / "bad.jsonl").write_text('{"_step": 0, "eval/score": 0.1}\n')
    stored = f"sqlite:///{read_only_folder / 'h.db'}"
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--db", stored, "--format", "json"]
    good = run_cli(*argv, "--record", tmp_path / "r.jsonl")
    assert good.code == 0, good.err
    [verdict] = json.loads(good.out)["verdicts"]
    assert (verdict["status"], verdict["n"]) == ("pass", 3)  # judged against the stored nights, not cold
    bad = run_cli(*argv, "--record", tmp_path / "bad.jsonl")
    assert json.loads(bad.out)["verdicts"][0]["status"] == "fail"
    written = run_cli(*argv, "--record", tmp_path / "r.jsonl", "--write")
    assert written.code == 3  # a write still needs a writable store, and says so
    assert sorted(p.name for p in read_only_folder.iterdir()) == ["h.db"]


# --- 9. the bounded readers --------------------------------------------------------------------------------


def _evaluate_record(tmp_path: Path, record: str | Path) -> CliResult:
    gates = tmp_path / "gates"
    if not gates.exists():
        _gates(tmp_path, "")
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", record]
    return run_cli(*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}", "--write")


def _special_record(kind: str, path: Path) -> str:
    import socket

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "fifo-with-a-writer":
        os.mkfifo(path)
        # A writer that holds the pipe open and never closes it: a reader that blocked would hang here.
        os.open(path, os.O_RDWR | os.O_NONBLOCK)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "dev-zero":
        return "/dev/zero"
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse-2gib":
        with open(path, "wb") as handle:
            handle.truncate(2 * 1024**3)
    return str(path)


SPECIAL_RECORDS = [
    ("fifo", "is a named pipe (FIFO), not a record file"),
    ("fifo-with-a-writer", "is a named pipe (FIFO), not a record file"),
    ("socket", "is a socket, not a record file"),
    ("dev-zero", "is a device, not a record file"),
    ("link-to-dev-zero", "is a device, not a record file"),
    ("sparse-2gib", "the record file is 2,147.5 MB; gatecfg reads a record file of at most 256.0 MB"),
]


@pytest.mark.parametrize(("kind", "words"), SPECIAL_RECORDS, ids=[c[0] for c in SPECIAL_RECORDS])
@pytest.mark.parametrize(
    "suffix", [".jsonl", ".csv", ".json", "tfevents.1"], ids=["jsonl", "csv", "json", "tb"]
)
def test_a_record_that_is_no_regular_file_or_too_large_is_refused_before_it_is_read(
    tmp_path: Path, kind: str, words: str, suffix: str
) -> None:
    record = _special_record(kind, tmp_path / f"events.out{suffix}")
    result = _evaluate_record(tmp_path, record)
    assert result.code == 2
    assert f"{record}: error: {words}" in result.err
    assert not (tmp_path / "h.db").exists()


def test_a_fifo_in_a_log_folder_is_refused_not_skipped(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "events.out.tfevents.1")
    result = _evaluate_record(tmp_path, logs)
    assert result.code == 2
    assert "events.out.tfevents.1: error: is a named pipe (FIFO)" in result.err


def _event_file(folder: Path, tensors: list[object], tail: bytes = b"") -> Path:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    folder.mkdir()
    writer = EventFileWriter(str(folder))
    scalars = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    for step, value in enumerate(tensors):
        tensor = tensor_util.make_tensor_proto(value)
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="eval/score", metadata=scalars, tensor=tensor)]
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()
    [path] = folder.iterdir()
    with open(path, "ab") as handle:
        handle.write(tail)
    return path


def _record_header(length: int) -> bytes:
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", length)
    return header + struct.pack("<I", masked_crc32c(header))


@pytest.mark.parametrize(
    ("length", "words"),
    [(2**62, "is truncated"), (2**64 - 1, "is truncated"), (10**9, "is truncated"), (5, "is truncated")],
    ids=["2^62", "2^64-1", "1e9", "short"],
)
def test_a_tensorboard_record_length_past_the_end_of_the_file_is_a_truncated_record(
    tmp_path: Path, length: int, words: str
) -> None:
    pytest.importorskip("tensorboard")
    path = _event_file(tmp_path / "tb", [0.5], _record_header(length) + b"ab")
    result = _evaluate_record(tmp_path, tmp_path / "tb")
    assert result.code == 2
    assert f"{path}:3: error: event record 3 {words}" in result.err


@pytest.mark.parametrize(
    ("value", "kind"),
    [("abc", "string"), (b"\x00\x01", "string"), (1 + 2j, "complex"), (True, "boolean")],
    ids=["str", "bytes", "complex", "bool"],
)
def test_a_tensorboard_scalar_that_is_no_number_is_an_error_at_its_record(
    tmp_path: Path, value: object, kind: str
) -> None:
    pytest.importorskip("tensorboard")
    path = _event_file(tmp_path / "tb", [value])
    result = _evaluate_record(tmp_path, tmp_path / "tb")
    assert result.code == 2
    assert f"{path}:2: error: eval/score: the scalar is a {kind} tensor, not a number" in result.err


# --- 10. record formats: duplicates, CSV limits, detection --------------------------------------------------

FORMAT_CASES = [
    ("wandb-json-duplicate", "w.json", '[{"_step": 0, "eval/score": 9.0, "eval/score": 1.0}]',
     "w.json:1: error: eval/score: key \"eval/score\" appears twice in one row"),
    ("wandb-json-duplicate-later-row", "w.json",
     '[\n  {"_step": 0, "eval/score": 0.5},\n  {"_step": 1,\n   "eval/score": 9.0, "eval/score": 1.0}\n]',
     "w.json:4: error: eval/score: key \"eval/score\" appears twice"),
    ("wandb-json-duplicate-step", "w.json", '[{"_step": 0, "_step": 1, "eval/score": 0.5}]',
     "w.json:1: error: _step: key \"_step\" appears twice in one row"),
    ("wandb-csv-duplicate-column", "w.csv", "_step,eval/score,eval/score\n0,9.0,1.0\n",
     "w.csv:1: error: eval/score: column `eval/score` appears twice in the header (columns 2 and 3)"),
    ("wandb-csv-duplicate-step-column", "w.csv", "_step,_step,eval/score\n0,1,0.5\n",
     "w.csv:1: error: _step: column `_step` appears twice"),
    ("wandb-csv-huge-field", "w.csv", "_step,eval/score,note\n0,0.5," + "a" * 200_000 + "\n",
     "w.csv:2: error: malformed CSV: field larger than field limit (131072)"),
    ("wandb-csv-nul", "w.csv", "_step,eval/score\n0,0.\x005\n",
     'w.csv:2: error: eval/score: step 0 (the last logged step) is "0.\\u00005", not a number'),
    ("jsonl-duplicate", "r.jsonl", '{"_step": 0, "eval/score": 9.0, "eval/score": 1.0}\n',
     'r.jsonl:1: error: key "eval/score" appears twice in one JSON object'),
]  # fmt: skip


@_table(("name", "text", "expected"), FORMAT_CASES)
def test_a_record_that_would_lose_a_value_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, expected: str
) -> None:
    _gates(tmp_path, "")
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    result = run_cli(
        "evaluate", "--gates", "gates", "--test", "tests/t_ci.py", "--record", name, "--db", "h.db"
    )
    assert result.code == 2
    assert expected in result.err


@settings(max_examples=100, deadline=None)
@given(
    key=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(
        lambda k: k != "_step"
    ),
    rows=st.integers(0, 3),
)
def test_a_repeated_key_in_any_row_of_a_wandb_export_is_an_error_at_that_row(key: str, rows: int) -> None:
    from gatecfg.records.formats import _line_of

    good = "".join(f'  {{"_step": {i}, {json.dumps(key)}: 1.0}},\n' for i in range(rows))
    text = f'[\n{good}  {{"_step": {rows}, {json.dumps(key)}: 9.0, {json.dumps(key)}: 1.0}}\n]'
    assert _line_of(text, key) == rows + 2


def test_a_jsonl_file_that_mentions_brain_event_is_read_as_json_lines(tmp_path: Path) -> None:
    from gatecfg.records.formats import sniff

    for name, line in {
        "a.jsonl": '{"_step": 0, "note": "brain.Event:2", "eval/score": 0.5}\n',
        "b.jsonl": '{"brain.Event:": 1, "_step": 0, "eval/score": 0.5}\n',
        "c.jsonl": '\n\n{"_step": 0, "x": "........brain.Event:"}\n',
    }.items():
        (tmp_path / name).write_text(line)
        assert sniff(str(tmp_path / name)) == "jsonl", name


def test_a_tensorboard_folder_under_a_folder_named_metrics_is_read_as_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from gatecfg.records.formats import sniff

    logs = tmp_path / "metrics" / "runs"
    logs.parent.mkdir()
    _event_file(logs, [0.5])
    assert sniff(str(logs)) == "tensorboard"
    _gates(tmp_path, "")
    assert _evaluate_record(tmp_path, logs).code == 0


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=200), st.integers(0, 64))
def test_no_text_sniffs_as_a_tensorboard_event_file_wherever_it_mentions_brain_event(
    text: str, at: int
) -> None:
    from gatecfg.records.formats import _is_event_file

    data = text.encode("utf-8")
    head = data[:at] + b"brain.Event:2" + data[at:]
    assert not _is_event_file(head)


# --- 11. API and plugin inputs ----------------------------------------------------------------------------

API_CASES = [
    ("int-name", {5: [(0, 0.5)]}, {}, "RecordError", "a metric name is 5 (int), not a string"),
    ("none-name", {None: [(0, 0.5)]}, {}, "RecordError", "a metric name is None (NoneType), not a string"),
    ("bytes-name", {b"eval/score": [(0, 0.5)]}, {}, "RecordError", "(bytes), not a string"),
    ("none-points", {"eval/score": None}, {}, "RecordError", "eval/score: the points are None"),
    ("int-points", {"eval/score": 3}, {}, "RecordError", "the points are 3, not a sequence"),
    ("str-points", {"eval/score": "0.5"}, {}, "RecordError", "the points are '0.5', not a sequence"),
    ("dict-points", {"eval/score": {0: 0.5}}, {}, "RecordError", "not a sequence of (step, value) pairs"),
    ("none-point", {"eval/score": [None]}, {}, "RecordError", "point 1 is None, not a (step, value) pair"),
    ("triple", {"eval/score": [(0, 1, 2)]}, {}, "RecordError", "not a (step, value) pair"),
    ("fractional-step", {"eval/score": [(0.5, 0.5)]}, {}, "RecordError", "step is 0.5, not a whole number"),
    ("np-bool-step", {"eval/score": [("np.bool_", 0.5)]}, {}, "RecordError", "not a whole number"),
    ("np-bool-value", {"eval/score": [(0, "np.bool_")]}, {}, "InputError", "not a number"),
    ("bool-value", {"eval/score": [(0, True)]}, {}, "InputError", "is true, not a number"),
    ("complex-value", {"eval/score": [(0, 1j)]}, {}, "InputError", "not a number"),
    ("commit-int", {"eval/score": [(0, 0.5)]}, {"commit": 5}, "InputError", "--commit: error: 5 is int"),
    ("run-id-int", {"eval/score": [(0, 0.5)]}, {"run_id": 5}, "InputError", "--run-id: error: 5 is int"),
    ("branch-bytes", {"eval/score": [(0, 0.5)]}, {"branch": b"main"}, "InputError", "is bytes, not a string"),
    ("label-int", {"eval/score": [(0, 0.5)]}, {"series": {"gpu": 8}}, "InputError", "8 is int, not a string"),
    ("gates-int", {"eval/score": [(0, 0.5)]}, {"gates": 5}, "InputError", "gates: error: 5 is int"),
    ("db-int", {"eval/score": [(0, 0.5)]}, {"db": 5}, "InputError", "db: error: 5 is int"),
    ("nfd-and-nfc", {"eval/caf\u00e9": [(0, 0.5)], "eval/cafe\u0301": [(0, 0.6)]}, {}, "RecordError",
     "step 0 is logged twice"),
]  # fmt: skip


def _numpy_values(points: dict[object, object]) -> dict[object, object]:
    import numpy as np

    def swap(x: object) -> object:
        return np.bool_(True) if x == "np.bool_" else x

    return {
        name: [tuple(swap(x) for x in pair) if isinstance(pair, tuple) else pair for pair in pts]
        if isinstance(pts, list)
        else pts
        for name, pts in points.items()
    }


@_table(("points", "kwargs", "error", "words"), API_CASES)
def test_every_bad_api_input_is_an_input_error_with_the_clis_message(
    tmp_path: Path, points: dict[object, object], kwargs: dict[str, object], error: str, words: str
) -> None:
    gates = _gates(tmp_path, "")
    call: dict[str, object] = {"gates": gates, "db": str(tmp_path / "h.db"), "write": True, **kwargs}
    with pytest.raises(InputError) as caught:
        gatecfg.evaluate("tests/t_ci.py", _numpy_values(points), **call)  # type: ignore[arg-type]
    assert type(caught.value).__name__ == error
    assert words in str(caught.value)
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize(
    "step",
    ["np.float64(2.0)", "np.float32(2.0)", "np.int64(2)", "np.uint8(2)", "2.0"],
)
def test_a_whole_number_step_of_any_numeric_type_is_a_step(tmp_path: Path, step: str) -> None:
    import numpy as np

    gates = _gates(tmp_path, "")
    (gates / "t.yaml").write_text("test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: [2]\n")
    given = eval(step, {"np": np})  # the parametrized spellings above
    report = gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(given, 0.5)]}, gates=gates,
                              db=str(tmp_path / "h.db"), write=True)  # fmt: skip
    assert report.run.written
    assert [v.step for r in report.results for v in r] == [2]


def test_a_400_digit_integer_is_judged_as_the_cli_judges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = _gates(tmp_path, "")
    db = str(tmp_path / "a.db")
    api = gatecfg.evaluate("tests/t_ci.py", {"eval/score": [(0, 10**400)]}, gates=gates, db=db, write=True)
    (tmp_path / "big.jsonl").write_text('{"_step": 0, "eval/score": ' + "1" + "0" * 400 + "}\n")
    monkeypatch.chdir(tmp_path)
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", "big.jsonl", "--db", "c.db"]
    cli = run_cli(*argv, "--write", "--format", "json")
    assert cli.code == api.exit_code
    [verdict] = json.loads(cli.out)["verdicts"]
    assert [v.status for r in api.results for v in r] == [verdict["status"]]


def test_the_pytest_plugin_turns_a_bad_metric_name_into_the_clis_message(pytester: pytest.Pytester) -> None:
    _gates(pytester.path, "")
    (pytester.path / "gates" / "t.yaml").write_text("test: tests/test_x_ci.py\ngates:\n  eval/score:\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_x_ci.py").write_text(
        "def test_x(gate_metrics):\n    gate_metrics.log(5, 0, 0.5)\n"
    )
    options = ["--gatecfg-gates", "gates", "--gatecfg-db", "h.db"]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *options, "tests")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*gatecfg: <logged metrics>: error: a metric name is 5 (int), not a string*"]
    )
    assert "Traceback" not in result.stdout.str()


# --- 12. metric name spellings ----------------------------------------------------------------------------

NFD = "eval/cafe\u0301"
NFC = "eval/caf\u00e9"
SPEC = "    steps: last\n    constraint: {rel_down: 0.1}\n"


@pytest.mark.parametrize(
    "gate_file",
    [
        f"test: tests/t_ci.py\ngates:\n  {NFD}:\n{SPEC}",
        f"test: tests/t_ci.py\ngates:\n  {NFC}:\n{SPEC}  {NFD}:\n",
        f"test: tests/t_ci.py\ngates:\n  eval/score:\n  {NFD}:\n{SPEC}",
    ],
    ids=["nfd-alone", "nfc-and-nfd", "nfd-beside-another"],
)
def test_a_metric_name_in_decomposed_unicode_is_a_lint_error_naming_its_nfc_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate_file: str
) -> None:
    _gates(tmp_path, "")
    (tmp_path / "gates" / "t.yaml").write_text(gate_file)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert "is spelled in decomposed Unicode" in result.out
    assert f"write it as `{NFC}` (NFC)" in result.out


def test_a_record_that_logs_the_nfd_spelling_feeds_the_nfc_gate(tmp_path: Path) -> None:
    gates = _gates(tmp_path, "")
    (gates / "t.yaml").write_text(
        f"test: tests/t_ci.py\ngates:\n  {NFC}:\n    steps: last\n    constraint: {{rel_down: 0.1}}\n"
    )
    report = gatecfg.evaluate(
        "tests/t_ci.py", {NFD: [(0, 0.5)]}, gates=gates, db=str(tmp_path / "h.db"), write=True
    )
    [result] = report.results
    assert [v.value for v in result] == [0.5]  # not missing


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse-2gib"])
def test_an_import_export_that_is_no_regular_file_is_refused_before_it_is_read(
    tmp_path: Path, kind: str
) -> None:
    gates = _gates(tmp_path, "")
    path = _special_record(kind, tmp_path / "export.csv")
    result = run_cli("import", path, "--test", "tests/t_ci.py", "--gates", gates, "--db", tmp_path / "i.db")
    expected = {
        "fifo": f"{path}: error: is a named pipe (FIFO), not an export file",
        "dev-zero": f"{path}: error: is a device, not an export file",
        # Under the 8 GB an export may hold, but no line of it is a run: the first is refused at 64 MB.
        "sparse-2gib": f"{path}:1: error: the line is longer than 64,000,000 bytes",
    }
    assert result.code == 2
    assert expected[kind] in result.err
    assert not (tmp_path / "i.db").exists()


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
