"""The package's import graph runs one way: no cycle among gatecfg modules at run time, and the layers
below the entry points never import one (STYLE.md, "Entry points are thin"); no module grows past 800 lines;
each option is spelled in one module, so that a reader can name the one file that defines it.

The graph is read with `ast` from every module's source, so an import inside a function counts (it runs
at run time); one under `if TYPE_CHECKING:` does not (it never runs). The package root's lazy exports
(`importlib.import_module` in `gatecfg/__init__.py`, which is the public API) are not import statements
and are not walked."""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO

from gatecfg.cli import build_parser

PACKAGE = REPO / "gatecfg"

# The entry points: each turns its own input into a request for the layers below, and renders the result.
# The command line is `cli` (the root parser and the error boundary), `cli_args` (the shared options),
# `cli_commands` (each command's arguments) and `commands` (each command's body).
ENTRY_POINTS = (
    "gatecfg.cli",
    "gatecfg.cli_args",
    "gatecfg.cli_commands",
    "gatecfg.commands",
    "gatecfg.pytest_plugin",
    "gatecfg.__main__",
)
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path
    for path in sorted(PACKAGE.rglob("*.py"))
    if "migrations" not in path.relative_to(PACKAGE).parts and "data" not in path.relative_to(PACKAGE).parts
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level, in functions and classes, in try blocks;
    not the body of an `if TYPE_CHECKING:` (its `else` does run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:
                yield from _run_time_imports(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _run_time_imports(node)


def _target(name: str) -> str | None:
    """The gatecfg module an imported dotted name loads, None for another package's."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """The gatecfg modules `module` imports at run time. `from X import Y` counts X.Y when Y is a module
    (a submodule), else X."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names
            ]
        for name in names:
            if name.split(".")[0] == "gatecfg" and (target := _target(name)) and target != module:
                found.add(target)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def _is_entry_point(module: str) -> bool:
    return any(module == e or module.startswith((f"{e}.", f"{e}_")) for e in ENTRY_POINTS)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan's algorithm), sorted: every
    module of a component reaches every other through imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_import_cycle_among_gatecfg_modules() -> None:
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle_through_three_modules_and_not_a_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_walk_counts_imports_inside_functions_and_skips_type_checking_ones() -> None:
    # `gatecfg.evaluate` imports the core when called; `gatecfg.api` names RunReport for types only.
    assert "gatecfg.evaluation" in GRAPH["gatecfg.api"]
    assert "gatecfg.report" not in GRAPH["gatecfg.api"]
    # `from gatecfg.records import formats` is the submodule, inside a function.
    assert "gatecfg.records.formats" in GRAPH["gatecfg.records"]


def test_no_layer_below_the_entry_points_imports_one() -> None:
    upward = {
        module: sorted(target for target in targets if _is_entry_point(target))
        for module, targets in GRAPH.items()
        if not _is_entry_point(module)
    }
    assert {module: targets for module, targets in upward.items() if targets} == {}


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_no_module_is_over_800_lines(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(REPO)} has {lines} lines: split it along a seam"


@pytest.mark.parametrize(
    ("module", "entry_point"),
    [
        ("gatecfg.cli", True),
        ("gatecfg.cli_args", True),
        ("gatecfg.cli_commands", True),
        ("gatecfg.cli_commands.lint", True),
        ("gatecfg.commands.lint", True),
        ("gatecfg.pytest_plugin", True),
        ("gatecfg.linting", False),
        ("gatecfg.evaluation", False),
        ("gatecfg.api", False),
    ],
    ids=str,
)
def test_the_entry_points_are_the_cli_the_commands_and_the_plugin(module: str, entry_point: bool) -> None:
    assert module in MODULES
    assert _is_entry_point(module) is entry_point


def options_defined(tree: ast.AST) -> set[str]:
    """The option strings (`--xyz`) a module's source defines: the literal arguments of its
    `add_argument` and `addoption` calls (argparse's, pytest's)."""
    return {
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("add_argument", "addoption")
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
    }


DEFINED_IN: dict[str, set[str]] = defaultdict(set)
for _module, _path in MODULES.items():
    for _option in options_defined(ast.parse(_path.read_text(encoding="utf-8"))):
        DEFINED_IN[_option].add(_module)

# The spellings that name a different option in each module that defines them, and why.
SAME_SPELLING_OTHER_OPTION = {
    "--all": (
        {"gatecfg.cli_commands.regimes", "gatecfg.cli_commands.shifts"},
        "regimes: every gate of the test instead of one --metric; shifts: the undone shifts too",
    ),
    "--undo": (
        {"gatecfg.cli_commands.carry", "gatecfg.cli_commands.shifts"},
        "shifts --undo N takes a shift's number; carry's is a flag over the carries its options select",
    ),
    "--check": (
        {"gatecfg.cli_commands.schema", "gatecfg.store.statements"},
        "statements' is the SQL generator's own command line (python -m gatecfg.store.statements)",
    ),
}


def test_each_option_is_defined_in_one_module() -> None:
    """An option more than one command takes is spelled once, in `cli_args` (the command adds its own
    help); any other in the one command module that takes it."""
    twice = {option: modules for option, modules in DEFINED_IN.items() if len(modules) > 1}
    assert twice == {option: modules for option, (modules, _why) in SAME_SPELLING_OTHER_OPTION.items()}


def _parser_options(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        yield from (flag for flag in action.option_strings if flag.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parser_options(child)


def test_the_scan_finds_every_option_of_the_command_line() -> None:
    """Every option `gatecfg` takes is a literal the scan above sees (none built from a variable, which
    it would miss), and the shared ones are found in `cli_args` alone."""
    options = set(_parser_options(build_parser())) - {"--help"}
    assert options - set(DEFINED_IN) == set()
    assert {"--gates", "--db", "--series", "--test", "--format", "--debug"} <= options
    for shared in ("--gates", "--db", "--test", "--format", "--debug"):
        assert DEFINED_IN[shared] == {"gatecfg.cli_args"}
