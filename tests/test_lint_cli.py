"""`gatecfg lint` as users run it: on the repo, in pre-commit with changed files, and in CI formats."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import ruamel.yaml
from helpers import REPO, lines_run, run_cli, score_gates

import gatecfg
from gatecfg.models import _steps

BASE = "version: 1\ndefaults:\n  train/grad_norm: {steps: all, constraint: {rel_up: 0.5}}\n"
GOOD = "test: tests/{name}.py\ngates:\n  train/grad_norm:\n"
GITHUB_LINE = re.compile(
    r"^::error file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),title=gatecfg::(?P<body>.+)$"
)


def write(files: dict[str, str]) -> None:
    for name, text in files.items():
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def broken_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gates root, relative to the working directory, with one error of each stage in three files."""
    monkeypatch.chdir(tmp_path)
    write(
        {
            "gates/base.yaml": BASE,
            "gates/ok.yaml": GOOD.format(name="ok"),
            "gates/a/syntax.yaml": "test: tests/syntax.py\ngates: {train/grad_norm: {steps: all}\n",
            "gates/b/schema.yaml": "test: tests/schema.py\ngates:\n  train/grad_norm:\n    enforce: yes\n",
            "gates/c/inherit.yaml": "test: tests/inherit.py\ngates:\n  eval/score:\n",
        }
    )


ERROR_FILES = ["gates/a/syntax.yaml", "gates/b/schema.yaml", "gates/c/inherit.yaml"]


def _error_files(out: str) -> list[str]:
    return [line.split(":", 1)[0] for line in out.splitlines() if ": error: " in line]


# -- the repository -------------------------------------------------------------------------------------


def test_lint_of_the_example_gates_folder_exits_0_and_prints_no_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("lint", "gates/")
    assert (result.code, result.out) == (0, "")
    assert re.fullmatch(r"gatecfg lint: \d+ files checked, 0 errors\n", result.err)


def test_lint_without_paths_checks_the_default_gates_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("lint")
    files = sorted(p for p in (REPO / "gates").rglob("*.yaml"))
    assert result.code == 0
    assert f"{len(files)} files checked" in result.err


def test_lint_of_a_missing_gates_folder_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint")
    assert result.code == 2
    assert result.out.startswith("gates: error: the gates folder does not exist")


# -- every error of every file in one run ---------------------------------------------------------------


@pytest.mark.usefixtures("broken_tree")
def test_one_run_reports_every_error_of_every_file_sorted_by_path() -> None:
    result = run_cli("lint")
    assert result.code == 2
    assert _error_files(result.out) == ERROR_FILES
    assert result.err.strip() == "gatecfg lint: 5 files checked, 3 errors"


@pytest.mark.usefixtures("broken_tree")
def test_every_error_line_has_the_path_line_col_dotted_message_shape() -> None:
    result = run_cli("lint")
    shape = re.compile(
        r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): error: (?:(?P<dotted>\S+): )?(?P<msg>.+)$"
    )
    lines = result.out.splitlines()
    assert lines
    for line in lines:
        assert shape.match(line) or line.startswith("  hint: "), line


@pytest.mark.usefixtures("broken_tree")
def test_several_errors_in_one_file_are_all_reported() -> None:
    write(
        {"gates/b/schema.yaml": "test: ''\ngates:\n  train/grad_norm:\n    enforce: yes\n    steps: alll\n"}
    )
    result = run_cli("lint", "gates/b/schema.yaml")
    assert [line.split(": error: ")[1] for line in result.out.splitlines() if ": error: " in line] == [
        "test: must not be empty",
        "gates.train/grad_norm.enforce: must be true or false, got the string 'yes'",
        "gates.train/grad_norm.steps: must be `all`, `last` or a list of steps, got 'alll'",
    ]


# -- formats --------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("broken_tree")
def test_github_format_emits_one_error_annotation_per_problem() -> None:
    result = run_cli("lint", "--format", "github")
    assert result.code == 2
    matches = [GITHUB_LINE.match(line) for line in result.out.splitlines()]
    assert all(matches), result.out
    found = [(m["file"], int(m["line"]), int(m["col"])) for m in matches if m]
    assert found == [
        ("gates/a/syntax.yaml", 2, 8),
        ("gates/b/schema.yaml", 4, 14),
        ("gates/c/inherit.yaml", 3, 3),
    ]


@pytest.mark.usefixtures("broken_tree")
def test_github_format_keeps_the_hint_in_the_annotation_body_escaped() -> None:
    result = run_cli("lint", "--format", "github", "gates/b/schema.yaml")
    [line] = result.out.splitlines()
    assert "%0Ahint: write `true` or `false` without quotes" in line
    assert "\n" not in line


@pytest.mark.usefixtures("broken_tree")
def test_json_format_parses_to_one_object_per_problem() -> None:
    result = run_cli("lint", "--format", "json")
    assert result.code == 2
    problems = json.loads(result.out)
    assert [p["path"] for p in problems] == ERROR_FILES
    schema_error = problems[1]
    assert schema_error == {
        "path": "gates/b/schema.yaml",
        "line": 4,
        "col": 14,
        "severity": "error",
        "dotted": "gates.train/grad_norm.enforce",
        "message": "must be true or false, got the string 'yes'",
        "hint": "write `true` or `false` without quotes (YAML 1.2 reads yes/no/on/off as strings)",
    }


@pytest.mark.usefixtures("broken_tree")
def test_report_writes_another_format_beside_the_printed_one() -> None:
    result = run_cli(
        "lint", "--format", "github", "--report", "json=out/problems.json", "--report", "text=p.txt"
    )
    assert result.code == 2
    assert [GITHUB_LINE.match(line) is not None for line in result.out.splitlines()] == [True] * 3
    assert [p["path"] for p in json.loads(Path("out/problems.json").read_text())] == ERROR_FILES
    assert Path("p.txt").read_text().startswith("gates/a/syntax.yaml:2:8: error:")


@pytest.mark.usefixtures("broken_tree")
def test_a_report_over_a_gate_file_is_refused_before_anything_is_written() -> None:
    result = run_cli("lint", "--report", "json=gates/ok.yaml")
    assert result.code == 2
    assert result.err.startswith("--report: error: `gates/ok.yaml` is a gate file being read")
    assert Path("gates/ok.yaml").read_text() == GOOD.format(name="ok")


@pytest.mark.usefixtures("broken_tree")
def test_a_report_of_an_unknown_format_names_the_formats() -> None:
    result = run_cli("lint", "--report", "junit=x.xml")
    assert result.code == 2
    assert "--report: error: `junit=x.xml` is not FORMAT=FILE" in result.err
    assert "hint: formats: text, github, json" in result.err


def test_json_format_of_a_clean_tree_is_an_empty_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run_cli("lint", "--format", "json")
    assert result.code == 0
    assert json.loads(result.out) == []


# -- pre-commit: the changed files ---------------------------------------------------------------------


@pytest.mark.usefixtures("broken_tree")
def test_changed_files_only_report_their_own_errors() -> None:
    result = run_cli("lint", "gates/ok.yaml", "gates/b/schema.yaml")
    assert result.code == 2
    assert _error_files(result.out) == ["gates/b/schema.yaml"]


@pytest.mark.usefixtures("broken_tree")
def test_a_clean_changed_file_passes_even_if_other_files_are_broken() -> None:
    result = run_cli("lint", "gates/ok.yaml")
    assert (result.code, result.out) == (0, "")


@pytest.mark.usefixtures("broken_tree")
def test_a_changed_file_is_resolved_against_the_base_files_of_the_gates_root() -> None:
    write({"gates/deep/er/one_liner.yaml": GOOD.format(name="deep")})
    assert run_cli("lint", "gates/deep/er/one_liner.yaml").code == 0


@pytest.mark.usefixtures("broken_tree")
def test_a_broken_base_file_is_reported_with_every_changed_file_it_breaks() -> None:
    write({"gates/base.yaml": "version: 2\n" + BASE.removeprefix("version: 1\n")})
    result = run_cli("lint", "gates/ok.yaml")
    assert result.code == 2
    assert _error_files(result.out) == ["gates/base.yaml", "gates/ok.yaml"]


@pytest.mark.usefixtures("broken_tree")
def test_a_changed_base_file_reports_the_gate_files_it_breaks() -> None:
    write({"gates/base.yaml": "version: 1\n"})
    result = run_cli("lint", "gates/base.yaml")
    assert result.code == 2
    assert "gates/ok.yaml" in _error_files(result.out)


# -- paths outside --gates ------------------------------------------------------------------------------


@pytest.mark.usefixtures("broken_tree")
def test_a_folder_outside_gates_is_linted_as_its_own_root() -> None:
    write(
        {
            "elsewhere/base.yaml": "version: 1\ndefaults:\n  eval/score: {steps: last, constraint: null}\n",
            "elsewhere/x.yaml": "test: tests/x.py\ngates:\n  eval/score:\n",
            "elsewhere/bad.yaml": "test: tests/bad.py\ngates:\n  train/grad_norm:\n",
        }
    )
    result = run_cli("lint", "elsewhere")
    assert result.code == 2
    # its own base file, not gates/base.yaml: eval/score resolves, train/grad_norm does not
    assert _error_files(result.out) == ["elsewhere/bad.yaml"]
    assert "(searched: elsewhere/base.yaml)" in result.out


@pytest.mark.usefixtures("broken_tree")
def test_a_file_outside_gates_is_resolved_against_its_own_folder() -> None:
    write(
        {
            "elsewhere/base.yaml": "version: 1\ndefaults:\n  eval/score: {steps: last, constraint: null}\n",
            "elsewhere/x.yaml": "test: tests/x.py\ngates:\n  eval/score:\n",
        }
    )
    result = run_cli("lint", "elsewhere/x.yaml")
    assert (result.code, result.out) == (0, "")


@pytest.mark.usefixtures("broken_tree")
def test_paths_inside_and_outside_gates_in_one_run_are_all_checked() -> None:
    write({"elsewhere/y.yaml": "test: tests/y.py\ngates:\n  m: {steps: nope, constraint: null}\n"})
    result = run_cli("lint", "gates/c/inherit.yaml", "elsewhere/y.yaml")
    assert result.code == 2
    assert sorted(_error_files(result.out)) == ["elsewhere/y.yaml", "gates/c/inherit.yaml"]


# -- paths as pre-commit passes them --------------------------------------------------------------------


@pytest.mark.usefixtures("broken_tree")
@pytest.mark.parametrize(
    "path", ["gates/megatron/does_not_exist.yaml", "does_not_exist.yaml", "no/such/folder"], ids=str
)
def test_a_path_that_does_not_exist_is_an_error_and_nothing_else_is_linted(path: str) -> None:
    result = run_cli("lint", path)
    assert result.code == 2
    assert result.out.splitlines() == [f"{path}: error: no such file or folder"]
    assert result.err == "gatecfg lint: 0 files checked, 1 error\n"


@pytest.mark.usefixtures("broken_tree")
def test_a_given_file_that_is_not_yaml_is_an_error() -> None:
    write({"gates/notes.txt": "hello\n"})
    result = run_cli("lint", "gates/ok.yaml", "gates/notes.txt")
    assert result.code == 2
    assert result.out.splitlines()[0] == "gates/notes.txt: error: is not a YAML file (.yaml or .yml)"


@pytest.mark.usefixtures("broken_tree")
def test_a_yaml_file_that_is_not_a_gate_file_is_one_clear_error() -> None:
    write({"gates/compose.yml": "services:\n  web:\n    image: nginx\n"})
    result = run_cli("lint", "gates/compose.yml")
    assert result.code == 2
    assert result.out.splitlines()[0] == (
        "gates/compose.yml:1:1: error: not a gatecfg gate file: it has neither `test:` nor `gates:` "
        "(its keys: `services`)"
    )
    assert result.err == "gatecfg lint: 2 files checked, 1 error\n"  # and gates/base.yaml


CI_TREE = {
    "ci/gates/base.yaml": BASE,
    "ci/gates/megatron/one_liner.yaml": GOOD.format(name="one"),
    "ci/gates/megatron/bad.yaml": "test: tests/bad.py\ngates:\n  eval/score:\n",
    "ci/gates/nested/base.yaml": "version: 1\nextends: ../base.yaml\n",
    "ci/gates/nested/deep/x.yaml": GOOD.format(name="x"),
}


@pytest.fixture
def ci_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose gates live under ci/gates/ (not the default gates/), with the cwd at its top."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # the top of the repository: the search for a gates root stops here
    write(CI_TREE)
    return tmp_path


@pytest.mark.usefixtures("ci_tree")
@pytest.mark.parametrize(
    ("path", "checked"),
    [("ci/gates/megatron/one_liner.yaml", 3), ("ci/gates/nested/deep/x.yaml", 3)],
    ids=["direct", "extends"],
)
def test_a_file_outside_the_default_gates_finds_its_base_file_by_walking_up(path: str, checked: int) -> None:
    result = run_cli("lint", path)
    assert (result.code, result.out) == (0, ""), result.out
    # the file and every base file of its tree
    assert result.err == f"gatecfg lint: {checked} files checked, 0 errors\n"


def test_the_gates_root_is_found_whatever_the_working_directory(
    ci_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = ci_tree / "ci" / "gates" / "megatron"
    monkeypatch.chdir(elsewhere)
    assert run_cli("lint", "one_liner.yaml").code == 0
    monkeypatch.chdir(ci_tree.parent)
    assert run_cli("lint", str(ci_tree / "ci/gates/nested/deep/x.yaml")).code == 0


@pytest.mark.usefixtures("ci_tree")
def test_each_error_is_reported_once_however_the_paths_overlap() -> None:
    # A base file that extends nothing starts a gates root of its own, inside the outer one: two trees
    # that both hold standalone/bad.yaml.
    write(
        {"ci/gates/standalone/base.yaml": BASE, "ci/gates/standalone/bad.yaml": "test: t\ngates: {m: {}}\n"}
    )
    result = run_cli(
        "lint",
        "ci/gates/base.yaml",
        "ci/gates/megatron/bad.yaml",
        "ci/gates/megatron",
        "ci/gates/megatron/",
        "ci/gates/standalone/bad.yaml",
    )
    assert result.code == 2
    assert _error_files(result.out) == ["ci/gates/megatron/bad.yaml", "ci/gates/standalone/bad.yaml"]
    assert (
        "eval/score` is a one-liner but no base file has defaults for it (searched: ci/gates/base.yaml)"
        in (result.out)
    )
    assert result.err == "gatecfg lint: 7 files checked, 2 errors\n"


@pytest.mark.usefixtures("ci_tree")
def test_gates_option_names_the_root_explicitly() -> None:
    result = run_cli("lint", "--gates", "ci/gates", "ci/gates/nested/deep/x.yaml")
    assert (result.code, result.out) == (0, "")


def _steps_file(root: Path, n: int, *, flow: bool) -> None:
    steps = "[" + ", ".join(map(str, range(n))) + "]" if flow else "".join(f"\n      - {i}" for i in range(n))
    (root / "gates" / "t.yaml").write_text(
        f"test: tests/t_ci.py\ngates:\n  eval/score:\n    steps: {steps}\n    constraint: {{rel_down: 0.1}}\n"
    )


def _lint_lines(root: Path) -> int:
    """The Python lines gatecfg and ruamel.yaml run to lint the tree under `root`: a count of work that
    does not depend on how loaded the machine is."""
    with lines_run(gatecfg, ruamel.yaml) as counted:
        result = run_cli("lint", "--gates", root / "gates")
    assert result.code == 0, result.out
    return counted[0]


@pytest.mark.parametrize("flow", [False, True], ids=["block-list", "flow-list"])
def test_a_long_steps_list_lints_in_work_linear_in_its_length(tmp_path: Path, flow: bool) -> None:
    score_gates(tmp_path, "")
    _steps_file(tmp_path, 2_000, flow=flow)
    small = _lint_lines(tmp_path)
    _steps_file(tmp_path, 16_000, flow=flow)
    large = _lint_lines(tmp_path)
    # Eight times the steps: linear work runs about eight times the lines (7.9 today), a quadratic path
    # 64 times.
    assert large < 12 * small


def test_each_step_of_a_long_list_is_checked_against_those_before_it_without_comparing_them() -> None:
    # The duplicate check compares a step with every one before it when it keeps them in a list (a list's
    # `in` runs in C, so no line count sees it): a 150,000-step list took minutes. Counted here through
    # the steps' own `__eq__`.
    compared = [0]

    class CountedStep(int):
        def __eq__(self, other: object) -> bool:
            compared[0] += 1
            return int(self) == other

        __hash__ = int.__hash__

    steps = _steps([CountedStep(step) for step in range(20_000)])
    assert compared[0] < 20_000  # a list's `in` would make 2e8 comparisons
    assert steps == tuple(range(20_000))


def test_a_step_listed_twice_in_a_long_list_is_named_at_its_line(tmp_path: Path) -> None:
    score_gates(tmp_path, "")
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
    score_gates(tmp_path, "")
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
    score_gates(tmp_path, "")
    os.mkfifo(tmp_path / "gates" / "odd.yaml")
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "gates/odd.yaml")
    assert result.code == 2
    assert "gates/odd.yaml: error: is a named pipe (FIFO), not a YAML file" in result.out
