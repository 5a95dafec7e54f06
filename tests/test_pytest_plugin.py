"""The pytest plugin, end to end with `pytester`: a project with two e2e tests, one regressed, fails exactly
the regressed one with its reason, serially and under pytest-xdist."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from helpers import REPO, run_cli, score_gates
from test_write_policy import CIRCLE_FEATURE

import gatecfg
from gatecfg.store import Store

pytest_plugins = ["pytester"]

BASE = """\
version: 1
defaults:
  train/loss:
    steps: all
    constraint: {rel_up: 0.1, abs_floor_up: 0.05}
  eval/score:
    steps: last
    constraint: {rel_down: 0.05}
policy:
  window: 20
  min_history: 3
"""
GOOD = "tests/e2e/test_good_ci.py"
REGRESSED = "tests/e2e/test_regressed_ci.py"
# Each e2e test logs a loss per step with the fixture and loads its eval score from a JSON Lines file.
E2E_TEST = """\
import json

def test_train(gate_metrics, tmp_path):
    for step, loss in enumerate({losses}):
        gate_metrics.log_row({{"train/loss": loss}}, step=step)
    record = tmp_path / "eval.jsonl"
    record.write_text(json.dumps({{"_step": 9, "eval/score": {score}}}))
    gate_metrics.load(record)
"""
NIGHTLY_LOSSES = [[3.0, 2.0, 1.50], [3.02, 2.01, 1.52], [2.98, 1.99, 1.49], [3.01, 2.0, 1.51]]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """Gate files, four trusted nightlies of both tests in history, and the two tests: the regressed one's
    loss doubled at step 2 (enforced); the good one's eval score dropped (a shadow gate)."""
    gates = pytester.path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE)
    (gates / "good.yaml").write_text(
        f"test: {GOOD}\ngates:\n  train/loss:\n    enforce: true\n  eval/score:\n"
    )
    (gates / "regressed.yaml").write_text(f"test: {REGRESSED}\ngates:\n  train/loss:\n    enforce: true\n")
    db = str(pytester.path / "history.db")
    for night, losses in enumerate(NIGHTLY_LOSSES):
        for test in (GOOD, REGRESSED):
            points = {"train/loss": list(enumerate(losses)), "eval/score": [(9, 0.8)]}
            report = gatecfg.evaluate(test, points, gates=gates, db=db, write=True, run_id=f"{night}:{test}")
            assert report.run.trusted
    pytester.makeini("[pytest]\ngatecfg_db = history.db\n")
    pytester.makepyfile(
        **{
            GOOD.removesuffix(".py"): E2E_TEST.format(losses=[3.0, 2.01, 1.5], score=0.6),
            REGRESSED.removesuffix(".py"): E2E_TEST.format(losses=[3.0, 2.0, 3.1], score=0.8),
        }
    )
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_fails_exactly_the_regressed_test_with_its_reason(
    project: pytest.Pytester, workers: list[str]
) -> None:
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-rf", *workers
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= FAILURES =*",
            "*_ test_train _*",
            f"gatecfg: enforced gate failed ({REGRESSED}); 1 of 1 gate failed; noise alone: not known here "
            "(band gates; `gatecfg backtest` estimates theirs)",
            "  train/loss (gates/regressed.yaml:3): 1 of 3 steps failing (step 2); worst: step 2 3.1 vs "
            "mean 1.505 of 4 nights: +106.0%, beyond the band's edge 1.6555 by 1.4445",
            "*= gatecfg =*",
            "shadow gates failed (reported, not fatal):",
            f"  {GOOD}: eval/score (gates/good.yaml:5): 1 of 1 step failing (step last); worst: step last "
            "0.6 vs mean 0.8 of 4 nights: -25.0%, below the band's edge 0.76 by 0.16",
            "*= short test summary info =*",
            f"FAILED {REGRESSED}::test_train - Failed: gatecfg: enforced*",
        ]
    )
    assert f"FAILED {GOOD}" not in result.stdout.str()


def test_docs_show_the_output_of_a_real_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest cuts the short summary to the terminal's width, except on CI (it reads `CI`/`BUILD_NUMBER`):
    # an 80-column terminal off CI, as the docs show, wherever this suite runs.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    text = (REPO / "docs" / "pytest.md").read_text(encoding="utf-8")
    [shown] = re.findall(r"```text\n(.*?)```", text, re.DOTALL)
    result = project.runpytest_subprocess("--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-rf")
    lines = shown.rstrip("\n").split("\n")
    # The timing differs from run to run, and so does the width of the `=` rule that centres it on the final
    # line ("in 9.50s" against "in 16.22s" on a loaded machine); blank lines are not matched by fnmatch_lines.
    expected = [re.sub(r"^=+ (.*) in [\d.]+s =+$", r"*\1 in *s *", line) for line in lines if line]
    result.stdout.fnmatch_lines(expected, consecutive=False)


def test_nothing_is_written_unless_asked(project: pytest.Pytester) -> None:
    def stored_runs() -> int:
        history = run_cli("history", "--test", GOOD, "--metric", "train/loss", "--step", "0",
                          "--db", project.path / "history.db", "--format", "json")  # fmt: skip
        return len(json.loads(history.out))

    project.runpytest_subprocess("--gatecfg-gates", "gates", "-p", "no:cacheprovider")
    assert stored_runs() == 4
    project.runpytest_subprocess("--gatecfg-gates", "gates", "--gatecfg-write", "-p", "no:cacheprovider")
    assert stored_runs() == 5


def test_junit_has_a_property_per_gate(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "--junitxml", "junit.xml", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=1)
    cases = {case.get("classname"): case for case in ET.parse(project.path / "junit.xml").iter("testcase")}
    properties = {
        name: {
            p.get("name"): p.get("value")
            for p in case.iter("property")
            if p.get("name", "").startswith("gatecfg:")
        }
        for name, case in cases.items()
    }
    assert properties == {
        "tests.e2e.test_good_ci": {
            "gatecfg:train/loss": "pass (enforced)",
            "gatecfg:eval/score": "fail (shadow)",
        },
        "tests.e2e.test_regressed_ci": {"gatecfg:train/loss": "fail (enforced)"},
    }


def test_off_unless_asked_for(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [f"2 test(s) logged gate_metrics but were not gated: pass --gatecfg-gates DIR*: {GOOD}, {REGRESSED}"]
    )


def test_ini_option_turns_gating_on(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ngatecfg_gates = gates\ngatecfg_db = history.db\n")
    project.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1, failed=1)


def test_rekey_warning_in_the_summary(project: pytest.Pytester) -> None:
    base = project.path / "gates" / "base.yaml"
    base.write_text(base.read_text().replace("rel_up: 0.1,", "rel_up: 0.2,"))
    result = project.runpytest_subprocess("--gatecfg-gates", "gates", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)  # cold: the new key has no history, so nothing can fail
    result.stdout.fnmatch_lines(["RE-KEY:", f"  {GOOD}: train/loss re-keyed (constraint.rel_up: 0.1 -> 0.2*"])


def test_a_test_without_a_gate_file_fails_with_the_cli_message(project: pytest.Pytester) -> None:
    project.makepyfile(
        **{"tests/e2e/test_new_ci": "def test_new(gate_metrics):\n    gate_metrics.log('train/loss', 0, 1)\n"}
    )
    result = project.runpytest_subprocess("--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["gatecfg: gates: error: no gate file declares `test: tests/e2e/test_new_ci.py`; did you mean *"]
    )  # fmt: skip


def test_a_test_that_fails_by_itself_is_not_judged(project: pytest.Pytester) -> None:
    project.makepyfile(
        **{
            REGRESSED.removesuffix(".py"): "def test_train(gate_metrics):\n"
            "    gate_metrics.log('train/loss', 0, 99.0)\n    assert False, 'the training crashed'\n"
        }
    )
    result = project.runpytest_subprocess("--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-rf")
    result.stdout.fnmatch_lines([f"FAILED {REGRESSED}::test_train - AssertionError: the train*"])
    assert "enforced gate failed" not in result.stdout.str()


def test_a_store_without_the_tests_history_is_a_notice_or_with_require_history_a_failure(
    project: pytest.Pytester,
) -> None:
    assert run_cli("db", "upgrade", "--db", project.path / "empty.db").code == 0
    args = ("--gatecfg-gates", "gates", "--gatecfg-db", "empty.db", "-p", "no:cacheprovider")
    noticed = project.runpytest_subprocess(*args)
    noticed.assert_outcomes(passed=2)
    noticed.stdout.fnmatch_lines(["notices:", f"  {GOOD}: NOTICE: no stored history for series {GOOD}*"])
    with (project.path / "gates" / "base.yaml").open("a", encoding="utf-8") as base:
        base.write("  require_history: true\n")  # under the policy: block that BASE ends with
    required = project.runpytest_subprocess(*args)
    required.assert_outcomes(failed=2)
    required.stdout.fnmatch_lines(["*NOTICE: no stored history for series*failing: history is required*"])


def test_gatecfg_meta_is_stored_with_each_gated_run(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ngatecfg_db = history.db\ngatecfg_meta =\n    cuda=12.8\n")

    project.runpytest_subprocess(
        "--gatecfg-gates",
        "gates",
        "--gatecfg-write",
        "--gatecfg-meta",
        "image=26.04",
        "-p",
        "no:cacheprovider",
    )

    with Store.open(f"sqlite:///{project.path / 'history.db'}") as store:
        [newest, *_] = store.runs(test=GOOD)
    assert dict(newest.run.meta) == {"cuda": "12.8", "image": "26.04"}


def test_a_malformed_gatecfg_meta_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "--gatecfg-meta", "image", "-p", "no:cacheprovider"
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gatecfg: --gatecfg-meta: error: `image` is not KEY=VALUE*"])


TWO_GATED = """\
def test_first(gate_metrics):
    for step, loss in enumerate([3.0, 2.0, 1.5]):
        gate_metrics.log_row({"train/loss": loss}, step=step)

def test_second(gate_metrics):
    gate_metrics.log_row({"train/loss": 1.5}, step=0)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_second_gated_test_in_one_file_is_an_error_that_says_so(
    project: pytest.Pytester, workers: list[str]
) -> None:
    """Locally and in CI alike (the run id does not matter): the first test of the file is judged and
    stored, the second errors, naming the first; the summary says what was judged and written."""
    project.makepyfile(**{GOOD.removesuffix(".py"): TWO_GATED})
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "--gatecfg-write", "-p", "no:cacheprovider", "-k", "good", *workers
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*gatecfg: test_second is a second gated test in {GOOD}, which test_first gates already*",
            "judged 1 test(s), 2 gate(s): 1 error, 1 pass; wrote 1 run(s) into history (sqlite:///history.db)",
        ]
    )


def test_a_missing_store_is_one_message_in_the_plugins_words(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "--gatecfg-db", "missing.db", "-p", "no:cacheprovider", "-k", "good"
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert out.count("no history store at this URL") == 1
    assert "During handling of the above exception" not in out
    assert "the first nightly `pytest --gatecfg-write`" in out
    assert "--gatecfg-db / the ini's gatecfg_db / GATECFG_DB_URL" in out


def test_a_gate_that_blocks_on_missing_steps_fails_with_its_reason(project: pytest.Pytester) -> None:
    """`policy.missing: fail`: the run lacks steps its baseline holds, no step failed, and the plugin says
    so (it once looked for a failing step to quote and crashed)."""
    with (project.path / "gates" / "base.yaml").open("a", encoding="utf-8") as base:
        base.write("  missing: fail\n")  # under the policy: block that BASE ends with
    project.makepyfile(**{REGRESSED.removesuffix(".py"): TWO_GATED.split("\n\n")[1] + "\n"})
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-k", "regressed"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"gatecfg: enforced gate failed ({REGRESSED})*", "  train/loss (gates/regressed.yaml:3): *"]
    )
    assert "StopIteration" not in result.stdout.str()


@pytest.mark.parametrize("policy", ["fail", "warn"])
def test_the_summary_lists_a_gate_missing_steps_under_its_own_heading(
    project: pytest.Pytester, policy: str
) -> None:
    """A run that lacks steps its baseline holds is status `missing`: the summary says which steps and what
    the policy makes of it, under its own heading, not among the series without history."""
    with (project.path / "gates" / "base.yaml").open("a", encoding="utf-8") as base:
        base.write(f"  missing: {policy}\n")  # under the policy: block that BASE ends with
    project.makepyfile(**{REGRESSED.removesuffix(".py"): TWO_GATED.split("\n\n")[1] + "\n"})
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "-p", "no:cacheprovider", "-k", "regressed"
    )
    fate = "fails the gate" if policy == "fail" else "a warning"
    result.stdout.fnmatch_lines(
        [
            "*= gatecfg =*",
            "steps not logged (status missing):",
            f"  {REGRESSED}: train/loss (gates/regressed.yaml:3): steps 1-2 not logged; the last 4 nightlies "
            f"logged 0-2 ({fate}: policy.missing: {policy})",
        ]
    )
    summary = result.stdout.str().split("= gatecfg =", 1)[1]
    assert "no stored history" not in summary
    assert "MISSING STEPS" not in summary  # said once, under its heading


CIRCLE_PULL_REQUEST = {
    "CI": "true",
    "CIRCLECI": "true",
    "CIRCLE_BRANCH": "feat",
    "CIRCLE_PULL_REQUEST": "https://github.com/acme/train/pull/5",
}
GITHUB_TAG_MAIN = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_EVENT_NAME": "push",
    "GITHUB_REF": "refs/tags/main",
    "GITHUB_REF_NAME": "main",
    "GITHUB_REF_TYPE": "tag",
}


def _stored(project: pytest.Pytester) -> list[str]:
    with Store.open(f"sqlite:///{project.path / 'history.db'}") as store:
        return sorted(row.run.run_id for row in store.runs())


@pytest.mark.parametrize(
    ("env", "reason", "workers"),
    [
        (CIRCLE_PULL_REQUEST, "CircleCI runs this job for a pull request", []),
        (CIRCLE_PULL_REQUEST, "CircleCI runs this job for a pull request", ["-n", "2"]),
        (GITHUB_TAG_MAIN, "GitHub Actions builds the tag `main`, not a branch", []),
    ],
    ids=["circleci-pull-request", "circleci-pull-request-xdist", "github-tag-named-main"],
)
def test_a_refused_write_is_said_once_and_the_runs_are_judged_on_their_verdicts(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    reason: str,
    workers: list[str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = _stored(project)
    result = project.runpytest_subprocess(
        "--gatecfg-gates", "gates", "--gatecfg-write", "-p", "no:cacheprovider", *workers
    )
    # The good test passes, the regressed one fails on its verdict, not on the refusal.
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert out.count("--gatecfg-write refused: this job may not write a baseline: ") == 1
    assert reason in out
    assert "wrote 0 run(s) into history (the write was refused, above)" in out
    assert "enforced gate failed (tests/e2e/test_regressed_ci.py)" in out
    assert _stored(project) == before


def test_the_pytest_plugin_refuses_a_write_on_a_circleci_feature_branch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    score_gates(pytester.path, "  write: {branches: [main]}\n")
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


def test_the_pytest_plugin_turns_a_bad_metric_name_into_the_clis_message(pytester: pytest.Pytester) -> None:
    score_gates(pytester.path, "")
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
