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

import pytest
from helpers import CliResult, count, run_cli
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import gatecfg
from gatecfg.errors import InputError
from gatecfg.models import WritePolicy
from gatecfg.write_policy import PULL_REQUEST_EVENTS, check_override, ci_job, write_refusal

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


@pytest.mark.parametrize(
    ("env", "payload", "policy", "words"),
    [case[1:] for case in POLICY_CASES],
    ids=[case[0] for case in POLICY_CASES],
)
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
    with pytest.raises(InputError, match="--override-write-policy"):
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


@pytest.mark.parametrize(
    ("text", "where", "words"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES]
)
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


@pytest.mark.parametrize(("dsn", "url"), [c[1:] for c in DSNS], ids=[c[0] for c in DSNS])
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


@pytest.mark.parametrize(
    ("gates", "new", "where", "words"), [c[1:] for c in MERGED_LIMITS], ids=[c[0] for c in MERGED_LIMITS]
)
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


@pytest.mark.parametrize(("column", "words"), [c[1:] for c in BAD_HEADERS], ids=[c[0] for c in BAD_HEADERS])
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
