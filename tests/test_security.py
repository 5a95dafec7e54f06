"""The security guarantees docs/security.md states, each covered as a class:

1. an in-place edit changes no gate it does not name, and keeps the file's bytes, link and mode;
2. names are data: every output escapes whatever a string holds, lint refuses control characters;
3. no credential of a URL is ever shown;
4. only the branches and events the policy allows write a baseline;
5. the loader's work is bounded, honest files load;
6. output files are written through links, to devices, and never leave a temporary file;
7. an unexpected exception is exit 70 with one line, the traceback only with --debug;
8. bad input is exit 2 before SQL, on both stores (the named cases live in tests/catalogue/).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rekey_helpers import git, make_repo

from gatecfg import cli
from gatecfg.analysis.limits_edit import LimitsEdit, write_limits
from gatecfg.errors import EXIT_BROKEN_PIPE, EXIT_BUG, InputError, Location, Problem
from gatecfg.escape import (
    github_data,
    github_property,
    invisible_characters,
    markdown_code,
    markdown_text,
    mask_url,
    mathtext_label,
    terminal,
    xml_text,
)
from gatecfg.models import WritePolicy
from gatecfg.resolve import load_tree
from gatecfg.store import Store
from gatecfg.textio import write_text
from gatecfg.write_policy import CiJob, ci_job, write_refusal
from gatecfg.yamlio import MAX_NODES, load_yaml

ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
HOSTILE = st.one_of(
    ANY_TEXT,
    st.sampled_from(
        [
            "x\n::error file=README.md,line=1::forged",
            "a\r::warning::b",
            "m$\\frac{$x",
            "`code` | pipe <img src=x onerror=alert(1)> [l](javascript:x) *b* ~~s~~ &amp;",
            "\x1b[2J\x1b]0;title\x07",
            "\u202egnp.exe",
            "``` \n```",
        ]
    ),
)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- 2. escaping, per output -------------------------------------------------------------------------


@PROPERTY
@given(text=HOSTILE)
def test_terminal_text_holds_no_control_character_and_stays_on_one_line(text: str) -> None:
    shown = terminal(text)
    assert invisible_characters(shown) == []
    assert "\n" not in shown
    assert "\r" not in shown
    kept = terminal(text, lines=True)
    assert invisible_characters(kept.replace("\n", "")) == []
    assert kept.count("\n") == text.count("\n")


@PROPERTY
@given(text=HOSTILE)
def test_github_data_and_properties_round_trip_as_the_runner_unescapes_them(text: str) -> None:
    for escaped in (github_data(text), github_property(text)):
        assert "\n" not in escaped
        assert "\r" not in escaped
        unescaped = escaped.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",")
        assert unescaped.replace("%25", "%") == text
    assert ":" not in github_property(text)
    assert "," not in github_property(text)


@PROPERTY
@given(text=HOSTILE)
def test_a_problem_in_github_format_is_one_workflow_command_whatever_its_text(text: str) -> None:
    line = Problem(Location(text, 3, 1), text, dotted=text, hint=text).github()
    assert "\n" not in line
    assert "\r" not in line
    assert line.startswith("::error file=")
    assert line.count("::") >= 2


@PROPERTY
@given(text=HOSTILE)
def test_a_markdown_code_span_holds_exactly_the_text(text: str) -> None:
    tokens = MarkdownIt("commonmark").parseInline(f"a {markdown_code(text)} b")[0].children or []
    spans = [t for t in tokens if t.type == "code_inline"]
    assert len(spans) == 1
    flat = terminal(text.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    assert spans[0].content.replace("\\|", "|").strip() == flat.strip() or not flat.strip()


@PROPERTY
@given(text=HOSTILE)
def test_markdown_text_renders_as_plain_text_with_no_markup(text: str) -> None:
    tokens = (
        MarkdownIt("commonmark").enable("strikethrough").parseInline(markdown_text(text))[0].children or []
    )
    assert {t.type for t in tokens} <= {"text", "softbreak", "text_special"}


@PROPERTY
@given(text=HOSTILE)
def test_xml_text_always_parses_back(text: str) -> None:
    root = ET.Element("testcase", name=xml_text(text))
    root.text = xml_text(text)
    parsed = ET.fromstring(ET.tostring(root, encoding="unicode"))
    assert parsed.get("name") is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=HOSTILE)
def test_a_plot_title_is_drawn_literally_whatever_it_holds(text: str) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure()
    figure.add_subplot().set_title(mathtext_label(text))
    figure.canvas.draw()  # mathtext would raise on an unbalanced `$...$` it had to parse


def _gates(tmp_path: Path, test: str, metric: str) -> Path:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    gate = {"test": test, "gates": {metric: {"steps": "last", "constraint": None, "enforce": True}}}
    (gates / "t.yaml").write_text(json.dumps(gate), encoding="utf-8")  # JSON is YAML: any string quoted
    return gates


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=ANY_TEXT.filter(lambda s: bool(invisible_characters(s))))
def test_lint_refuses_any_name_with_a_control_character(name: str, tmp_path_factory: Any) -> None:
    gates = _gates(tmp_path_factory.mktemp("lint"), "tests/e2e/t_ci.py", name)
    tree = load_tree(gates)
    assert any("control character" in p.message for p in tree.problems), tree.problems


def _evaluate(tmp_path: Path, *extra: str | Path, db: str | None = None, record: str | None = None) -> Any:
    """`gatecfg evaluate` of one enforced gate `eval/score` of tests/t_ci.py, with `extra` arguments."""
    gates = tmp_path / "gates"
    if not gates.exists():
        _gates(tmp_path, "tests/t_ci.py", "eval/score")
    (tmp_path / "r.jsonl").write_text(record or '{"_step": 0, "eval/score": 0.5}\n')
    store = db or f"sqlite:///{tmp_path / 'h.db'}"
    argv = ["evaluate", "--gates", gates, "--test", "tests/t_ci.py", "--record", tmp_path / "r.jsonl"]
    return run_cli(*argv, "--db", store, *extra)


NAMES = ["`tick`s`", "pipe|name", "<b>bold</b>", "$x$ and $y", "[link](x)", "a*b*c", "100%,done:yes"]


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_every_evaluate_report_keeps_a_printable_name_as_data(tmp_path: Path, name: str) -> None:
    gates = _gates(tmp_path, f"tests/{name}", f"eval/{name}")
    (tmp_path / "r.jsonl").write_text(json.dumps({"_step": 0, f"eval/{name}": 0.5}) + "\n")
    base = ["evaluate", "--gates", gates, "--test", f"tests/{name}", "--record", tmp_path / "r.jsonl"]
    base += ["--db", f"sqlite:///{tmp_path / 'h.db'}", "--run-id", f"run `{name}`", "--commit", name]
    assert (
        run_cli("db", "upgrade", "--db", f"sqlite:///{tmp_path / 'h.db'}").code == 0
    )  # no --write: no store made
    outputs = {fmt: run_cli(*base, "--format", fmt).out for fmt in ("text", "github", "markdown", "junit")}
    assert not [line for line in outputs["text"].splitlines() if line.startswith("::")]
    for line in outputs["github"].splitlines():
        assert line.startswith(("::notice title=gatecfg::", "::warning ", "::error "))
    junit = ET.fromstring(outputs["junit"].split("?>", 1)[1])
    assert {case.get("name") for case in junit.iter("testcase")} == {f"eval/{name}"}
    tokens = MarkdownIt("commonmark").parse(outputs["markdown"])
    heading = next(t for t in tokens if t.type == "inline" and t.content.startswith("gatecfg:"))
    spans = [c.content for c in heading.children or [] if c.type == "code_inline"]
    assert [span.replace("\\|", "|") for span in spans] == [f"tests/{name}"]
    html = MarkdownIt("commonmark").enable("table").render(outputs["markdown"])
    assert "<b>" not in html  # markup in a name is shown, never rendered


# --- 3. secrets in URLs ---------------------------------------------------------------------------------

SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=20)


@PROPERTY
@given(
    secret=SECRET,
    name=st.sampled_from(
        [
            "password",
            "PASSWORD",
            "passwd",
            "pwd",
            "sslpassword",
            "token",
            "access_token",
            "secret",
            "api-key",
            "client_secret",
        ]
    ),
)
def test_no_credential_of_a_url_survives_masking(secret: str, name: str) -> None:
    for form in (
        "postgresql://user:{secret}@db:5432/history?{name}={secret}&sslmode=require",
        "postgresql+psycopg://user@db/history?application_name=ci&{name}={secret}",
        "https://ci.example/runs/1?{name}={secret}#t",
        "postgresql://user:{secret}@[::1/history",  # does not parse
        "postgresql://user:{secret}@db:port/history",
    ):
        url = form.format(secret=secret, name=name)
        # A secret that is also the URL's own text ("postgres" of "postgresql") may show there, no more.
        assert mask_url(url).count(secret) <= form.format(secret="", name=name).count(secret), url


def test_a_store_error_never_shows_the_password_of_the_url(tmp_path: Path) -> None:
    url = "postgresql://ci:hunter22@127.0.0.1:1/history?password=hunter33&connect_timeout=1"
    result = run_cli("history", "--test", "t", "--metric", "m", "--db", url)
    assert result.code == 3
    assert "hunter22" not in result.err + result.out
    assert "hunter33" not in result.err + result.out
    assert "password=***" in result.err


def test_the_ci_link_of_a_run_is_masked_before_it_is_shown_or_stored(tmp_path: Path) -> None:
    url = "https://ci.example/runs/7?token=hunter44&attempt=1"
    result = _evaluate(tmp_path, "--write", "--run-id", "r", "--url", url, "--format", "json")
    masked = "https://ci.example/runs/7?token=***&attempt=1"
    assert json.loads(result.out)["run"]["url"] == masked
    with Store.open(f"sqlite:///{tmp_path / 'h.db'}") as store:
        assert [row.run.url for row in store.runs()] == [masked]


# --- 4. who may write a baseline ------------------------------------------------------------------------

GITHUB_PR = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_REF_NAME": "7/merge",
    "GITHUB_HEAD_REF": "feature",
    "GITHUB_BASE_REF": "main",
}
GITHUB_NIGHTLY = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "schedule", "GITHUB_REF_NAME": "main"}


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({}, False),
        (GITHUB_PR, True),
        ({**GITHUB_PR, "GITHUB_EVENT_NAME": "pull_request_target"}, True),
        (GITHUB_NIGHTLY, True),  # no event payload: the default branch is unknown, so it fails closed
        ({"GITLAB_CI": "true", "CI_MERGE_REQUEST_IID": "3", "CI_COMMIT_REF_NAME": "f"}, True),
        ({"GITLAB_CI": "true", "CI_COMMIT_BRANCH": "dev", "CI_DEFAULT_BRANCH": "main"}, True),
        ({"GITLAB_CI": "true", "CI_COMMIT_BRANCH": "main", "CI_DEFAULT_BRANCH": "main"}, False),
        ({"BUILDKITE": "true", "BUILDKITE_PULL_REQUEST": "12", "BUILDKITE_BRANCH": "f"}, True),
        (
            {
                "BUILDKITE": "true",
                "BUILDKITE_PULL_REQUEST": "false",
                "BUILDKITE_BRANCH": "main",
                "BUILDKITE_PIPELINE_DEFAULT_BRANCH": "main",
            },
            False,
        ),
        ({"JENKINS_URL": "http://j", "CHANGE_ID": "5"}, True),
    ],
    ids=[
        "local",
        "gh-pr",
        "gh-pr-target",
        "gh-nightly-without-a-payload",
        "gl-mr",
        "gl-other-branch",
        "gl-main",
        "bk-pr",
        "bk-main",
        "jenkins-pr",
    ],
)
def test_the_default_policy_lets_only_the_default_branch_and_no_pull_request_write(
    env: dict[str, str], refused: bool
) -> None:
    assert (write_refusal(None, ci_job(env)) is not None) == refused


def test_github_names_its_default_branch_in_the_event_payload(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "trunk"}}))
    env = {**GITHUB_NIGHTLY, "GITHUB_EVENT_PATH": str(event)}
    assert "not the default branch `trunk`" in (write_refusal(None, ci_job(env)) or "")
    assert write_refusal(None, ci_job({**env, "GITHUB_REF_NAME": "trunk"})) is None


def test_policy_write_allows_named_branches_and_events() -> None:
    policy = WritePolicy(branches=("main", "release/*"), events=("schedule", "workflow_dispatch"))
    job = CiJob("GitHub Actions", "schedule", "release/2.1", None, False)
    assert write_refusal(policy, job) is None
    assert "policy.write.events" in (write_refusal(policy, CiJob("G", "push", "main", None, False)) or "")
    assert "policy.write.branches" in (
        write_refusal(policy, CiJob("G", "schedule", "dev", None, False)) or ""
    )


def test_a_pull_request_cannot_write_and_an_override_is_stored_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in GITHUB_PR.items():
        monkeypatch.setenv(key, value)
    refused = _evaluate(tmp_path, "--write", "--run-id", "pr")
    assert refused.code == 2
    assert "may not write a baseline" in refused.err
    assert "pull request" in refused.err
    backfill = _evaluate(tmp_path, "--write", "--run-id", "bf", "--override-write-policy", "march backfill")
    assert backfill.code == 0
    with Store.open(f"sqlite:///{tmp_path / 'h.db'}") as store:
        runs = {row.run.run_id: row.run for row in store.runs()}
    assert set(runs) == {"bf"}
    assert runs["bf"].write_override == "march backfill"


# --- 5. loader bounds -------------------------------------------------------------------------------------


def _chained_merges(lines: int) -> str:
    """Each line merges the one before twice: the expansion doubles per line, the text grows by one."""
    return "a0: &a0 {x: 1, y: 2}\n" + "".join(
        f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}\n" for i in range(1, lines)
    )


def test_a_few_chained_merge_keys_load() -> None:
    assert load_yaml(_chained_merges(8), "t.yaml").data["a7"]["k1"] == 1


@pytest.mark.parametrize("lines", [30, 60, 400], ids=["30-lines", "60-lines", "400-lines"])
def test_chained_merge_keys_are_charged_to_the_expansion_budget(lines: int) -> None:
    with pytest.raises(InputError, match="through aliases and merge keys"):
        load_yaml(_chained_merges(lines), "t.yaml")


def test_a_mapping_that_merges_itself_is_an_error_not_a_recursion_error() -> None:
    with pytest.raises(InputError, match="merges the mapping that contains it"):
        load_yaml("a: &a\n  x: 1\n  <<: *a\n", "t.yaml")


def test_a_long_plain_list_is_no_alias_expansion() -> None:
    text = "steps:\n" + "".join(f"  - {i}\n" for i in range(MAX_NODES + 50_000))
    assert len(load_yaml(text, "t.yaml").data["steps"]) == MAX_NODES + 50_000


def test_a_file_over_the_size_limit_says_what_the_limit_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gatecfg.yamlio.MAX_BYTES", 1_000)
    with pytest.raises(InputError, match=r"gatecfg reads YAML files of at most 0\.001 MB"):
        load_yaml("x: " + "1" * 2_000 + "\n", "t.yaml")


# --- 1. in-place edits -------------------------------------------------------------------------------------

BASE = "version: 1\ndefaults:\n  m:\n    steps: last\n    constraint: null\n"
EDIT = LimitsEdit("a", {"min": 0.25}, "evidence")


def _edit_tree(tmp_path: Path, gate_text: str) -> tuple[Path, Path]:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE)
    path = gates / "t.yaml"
    path.write_bytes(gate_text.encode())
    return gates, path


def _resolved(gates: Path) -> dict[str, Any]:
    test = load_tree(gates).test("t")
    return {g.metric: g.as_json("") | {"file": None, "line": None, "sources": None} for g in test.gates}


SHARED = {
    "alias": "test: t\ngates:\n  c:\n    steps: last\n    constraint: null\n"
    "    limits: &lim {min: 0.1, max: 0.9}\n  a:\n    steps: last\n    constraint: null\n"
    "    limits: *lim\n  b:\n    steps: last\n"
    "    constraint: null\n    limits: *lim\n",
    "merge-block": "test: t\ngates:\n  c: &s {steps: last, constraint: null, limits: {min: 0.1}}\n  a:\n"
    "    <<: *s\n    enforce: true\n  b:\n    <<: *s\n",
    "merge-flow": "test: t\ngates:\n  c: &s {steps: last, constraint: null, limits: {min: 0.1}}\n"
    "  a: {<<: *s, enforce: true}\n  b: {<<: *s}\n",
}


@pytest.mark.parametrize("text", SHARED.values(), ids=SHARED.keys())
def test_editing_shared_limits_gives_the_gate_its_own_and_changes_no_other_gate(
    tmp_path: Path, text: str
) -> None:
    gates, path = _edit_tree(tmp_path, text)
    before = _resolved(gates)
    write_limits(path, "gates/t.yaml", gates, "t", [EDIT])
    after = _resolved(gates)
    assert after["b"] == before["b"]
    assert after["c"] == before["c"]
    assert after["a"]["limits"] == {**(before["a"]["limits"] or {}), "min": 0.25}
    assert {k: v for k, v in after["a"].items() if k != "limits"} == {
        k: v for k, v in before["a"].items() if k != "limits"
    }


def test_limits_that_define_a_shared_anchor_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    text = (
        "test: t\ngates:\n  a:\n    steps: last\n    constraint: null\n    limits: &lim {min: 0.1}\n"
        "  b:\n    steps: last\n    constraint: null\n    limits: *lim\n"
    )
    gates, path = _edit_tree(tmp_path, text)
    with pytest.raises(InputError, match="anchor"):
        write_limits(path, "gates/t.yaml", gates, "t", [EDIT])
    assert path.read_text() == text
    assert sorted(p.name for p in gates.iterdir()) == ["base.yaml", "t.yaml"]


def test_an_edit_keeps_crlf_line_ends_the_link_and_the_mode(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    text = (
        "test: t\r\ngates:\r\n  a:\r\n    steps: last\r\n    constraint: null\r\n    limits: {min: 0.1}\r\n"
    )
    gates, _ = _edit_tree(tmp_path, "")
    (gates / "t.yaml").unlink()
    real.write_bytes(text.encode())
    real.chmod(0o640)
    link = gates / "t.yaml"
    # A link out of the gates root is refused by lint; one inside it is followed.
    inside = gates / "shared"
    inside.mkdir()
    real = real.rename(inside / "real.yaml")
    link.symlink_to(Path("shared") / "real.yaml")
    write_limits(link, "gates/t.yaml", gates, "t", [EDIT])
    assert link.is_symlink()
    data = real.read_bytes()
    assert b"min: 0.25" in data
    assert data.count(b"\r\n") == data.count(b"\n")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


# --- 6. output files ----------------------------------------------------------------------------------------


def test_a_report_is_written_through_a_symlink_and_to_a_device(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    target.chmod(0o604)
    link = tmp_path / "report.json"
    link.symlink_to(target)
    write_text(link, "new", what="report")
    assert link.is_symlink()
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    write_text(Path(os.devnull), "to a device", what="report")
    assert Path(os.devnull).is_char_device()


def test_a_full_disk_leaves_no_temporary_file_and_the_old_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    report.write_text("old")

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    real_fdopen = os.fdopen

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        os.close(fd)
        return contextlib.nullcontext(Full())

    monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(InputError, match="No space left on device"):
        write_text(report, "new", what="report")
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert report.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize("kind", ["folder", "missing-folder"])
def test_a_bad_step_summary_is_a_warning_decided_before_the_run_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    summary = tmp_path if kind == "folder" else tmp_path / "no" / "such" / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = _evaluate(tmp_path, "--write", "--run-id", "r1")
    assert result.code == 0
    assert "warning: GITHUB_STEP_SUMMARY" in result.err
    with Store.open(f"sqlite:///{tmp_path / 'h.db'}") as store:
        assert [row.run.run_id for row in store.runs()] == ["r1"]


def test_an_output_that_is_a_folder_fails_before_anything_is_written(tmp_path: Path) -> None:
    result = _evaluate(tmp_path, "--write", "--output", tmp_path)
    assert result.code == 2
    assert "cannot write the report: is a directory" in result.err
    assert not (tmp_path / "h.db").exists()


# --- 7. the CLI's boundary ----------------------------------------------------------------------------------


def _crash(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[int, str]:
    def boom(args: Any) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("gatecfg.cli_commands.schema.run", boom)  # the command `schema` runs
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue()


def test_an_unexpected_exception_exits_70_with_one_line_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GATECFG_DEBUG", raising=False)
    code, err = _crash(monkeypatch, ["schema", "--check"])
    assert code == EXIT_BUG == 70
    assert "Traceback" not in err
    assert err.splitlines()[0].startswith("gatecfg: error: internal error (a bug in gatecfg")
    assert "ZeroDivisionError: a bug" in err
    assert "--debug" in err


def test_a_reader_that_closes_the_output_early_is_no_bug() -> None:
    """`gatecfg ... | head`: the pipe is closed before gatecfg writes (it is closed here before the process
    has even imported gatecfg), so its first write fails; that ends it quietly with the status a shell shows
    for a program SIGPIPE ended, never 0 and never the bug's 70 with its "please open an issue"."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatecfg", "schema", "--print", "gatefile"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_BROKEN_PIPE == 141
    assert err == b""


@pytest.mark.parametrize("how", ["flag-before", "flag-after", "environment"])
def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.delenv("GATECFG_DEBUG", raising=False)
    argv = {"flag-before": ["--debug", "schema", "--check"], "flag-after": ["schema", "--check", "--debug"]}
    if how == "environment":
        monkeypatch.setenv("GATECFG_DEBUG", "1")
    code, err = _crash(monkeypatch, argv.get(how, ["schema", "--check"]))
    assert code == 70
    assert "Traceback (most recent call last)" in err
    assert "ZeroDivisionError" in err


# --- 8. validated before SQL, on both stores --------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "extra", "words"),
    [
        ('{"_step": 2147483648, "eval/score": 0.5}\n', [], "beyond the largest step"),
        ('{"_step": 0, "eval/score": 0.5}\n', ["--run-id", "r" * 10_000], "names are at most 512 bytes"),
        ('{"_step": 0, "eval/score": 0.5}\n', ["--commit", "c" * 10_000], "names are at most 512 bytes"),
        ('{"_step": 0, "eval/score": 0.5}\n', ["--series", "hw=" + "h" * 10_000], "names are at most 512"),
        ('{"_step": 0, "eval/score": 0.5}\n', ["--run-id", "a\x00b"], "control character U+0000"),
    ],
    ids=["step-2^31", "run-id-10kb", "commit-10kb", "series-10kb", "nul-run-id"],
)
def test_input_the_store_cannot_hold_is_exit_2_on_every_store(
    tmp_path: Path, store_url: str, record: str, extra: list[str], words: str
) -> None:
    result = _evaluate(tmp_path, "--write", *extra, db=store_url, record=record)
    assert result.code == 2, result.err
    assert words in result.err


def test_a_base_revision_whose_gates_link_out_of_the_tree_is_an_error_at_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "gates" / "evil.yaml").symlink_to("../../../../etc/passwd")
    git(repo, "add", "gates")
    git(repo, "commit", "-q", "-m", "a link out of the tree")
    (repo / "gates" / "evil.yaml").unlink()  # the working tree is clean; the base revision is not
    monkeypatch.chdir(repo)
    result = run_cli("diff", "--base", "HEAD", "--gates", "gates")
    assert result.code == 2
    assert "gates/evil.yaml (at HEAD): error: cannot read the gates folder at HEAD" in result.err


def test_a_folder_lint_cannot_list_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = _gates(tmp_path, "tests/t_ci.py", "eval/score")
    (gates / "private").mkdir()
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path).name == "private":  # root reads every folder: deny this one as a CI user would be
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = run_cli("lint", "--gates", gates)
    assert result.code == 2
    assert "private: error: cannot list the folder: Permission denied" in result.out


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # Found by the property above: a compatibility ideograph (not NFC) beside a control character was
        # reported as a spelling only, and JSON-style escapes of a character beyond U+FFFF (YAML keeps
        # them as two surrogate halves) crashed pydantic's error rendering with UnicodeEncodeError.
        ("\x1f\uf967", "control character U+001F"),
        ("\x1f\u4e26\U00010000", "control character U+001F"),
        ("a\U0001f600", "holds U+D83D, U+DE00: UTF-16 surrogate halves"),
    ],
    ids=["control-and-not-nfc", "control-and-astral", "astral-escaped"],
)
def test_lint_names_control_characters_and_surrogate_halves_before_anything_else(
    tmp_path: Path, name: str, message: str
) -> None:
    gates = _gates(tmp_path, "tests/e2e/t_ci.py", name)  # json.dumps escapes beyond U+FFFF as pairs

    tree = load_tree(gates)

    assert [p.message for p in tree.problems if message in p.message], tree.problems
