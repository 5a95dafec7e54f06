"""A catalogue of named bad inputs (gate files, base files, records, command lines): each exits 2 with an
error at the file and line (or the argument) that is wrong, saying what is wrong. No traceback, ever.

The cases live in tests/catalogue/*.txt, one file per kind of input (surfaces.txt: `--date`, `init`'s CI
files, store URLs and the settings file, from the outside, as an attacker would write them):

    ### case-name
    ### expect: gates/t.yaml:4:12: words of the message
    --- gates/t.yaml
    test: ...

A case writes its files (`--- path`; `--- path -> target` makes a symlink; without any `--- path`, the
body replaces the kind's usual file) over a small valid tree, runs the kind's command line (or its own
`--- argv` section, one argument per line, fills applied) from that folder, and expects exit 2 with a
problem line `<location>: error: ...` holding the words. `*` in the location stands for any line or column.
Other directives: `### bytes` (the body's \\xNN escapes are raw bytes) and `### fill: TOKEN UNIT COUNT`
(TOKEN in the body becomes UNIT repeated COUNT times; a JSON-quoted UNIT may hold spaces).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import REPO, run_cli

CATALOGUE = REPO / "tests" / "catalogue"
TEST = "tests/e2e/test_cat_ci.py"
BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {rel_up: 0.5, abs_floor_up: 0.1}
  eval/score:
    steps: last
    constraint: {rel_down: 0.1}
policy:
  window: 20
"""
GATE = f"""\
test: {TEST}
gates:
  train/grad_norm:
  eval/score:
    limits: {{min: 0.5}}
    enforce: true
"""
RECORD = """\
{"_step": 0, "train/grad_norm": 1.0}
{"_step": 1, "train/grad_norm": 1.1}
{"_step": 2, "train/grad_norm": 1.2, "eval/score": 0.8}
"""
LINT = ["lint", "--gates", "gates"]
EVALUATE = [
    "evaluate",
    "--gates",
    "gates",
    "--test",
    TEST,
    "--record",
    "record.jsonl",
    "--db",
    "sqlite:///history.db",
]
# kind: (the file a case's body replaces, the command line a case runs unless it gives its own)
KINDS: dict[str, tuple[str | None, list[str] | None]] = {
    "gate_files": ("gates/t.yaml", LINT),
    "base_files": ("gates/base.yaml", LINT),
    "records": ("record.jsonl", EVALUATE),
    "cli": (None, None),
    "surfaces": (None, None),
}
PROBLEM = re.compile(r"^(?P<location>.*?): error: (?P<text>.*)$")


@dataclass
class Case:
    kind: str
    name: str
    expect: str = ""
    raw_bytes: bool = False
    fills: list[tuple[str, str, int]] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)


def load(kind: str) -> list[Case]:
    default, _ = KINDS[kind]
    cases: list[Case] = []
    section: str | None = None
    for line in (CATALOGUE / f"{kind}.txt").read_text(encoding="utf-8").splitlines():
        directive = line.startswith("### ")
        if directive and ":" not in line and line.strip() != "### bytes":
            cases.append(Case(kind, line[4:].strip()))
            section = None
        elif not cases:
            continue  # the file's opening comment
        elif directive and not _has_body(cases[-1]):
            _directive(cases[-1], line[4:].strip())
        elif line.startswith("--- ") and line[4:].strip():
            target = line[4:].strip()
            path, arrow, link = target.partition(" -> ")
            if arrow:
                cases[-1].links[path] = link
                section = None
            else:
                section = path
                cases[-1].files[section] = []
        else:
            if section is None:
                if default is None:
                    assert not line.strip(), f"{kind}/{cases[-1].name}: text outside a `--- path` section"
                    continue
                section = default
                cases[-1].files[section] = []
            cases[-1].files[section].append(line)
    return cases


def _has_body(case: Case) -> bool:
    return bool(case.files or case.links)


def _directive(case: Case, text: str) -> None:
    name, _, value = text.partition(":")
    if name == "expect":
        case.expect = value.strip()
    elif name == "bytes":
        case.raw_bytes = True
    elif name == "fill":
        token, rest = value.strip().split(" ", 1)
        unit, count = rest.rsplit(" ", 1)
        case.fills.append((token, json.loads(unit) if unit.startswith('"') else unit, int(count)))
    else:
        raise AssertionError(f"{case.kind}/{case.name}: unknown directive `### {text}`")


ALL = [case for kind in KINDS for case in load(kind)]


def _filled(case: Case, text: str) -> str:
    for token, unit, count in case.fills:
        text = text.replace(token, unit * count)
    return text


def _content(case: Case, lines: list[str]) -> bytes:
    text = _filled(case, "\n".join(lines).strip("\n"))
    text += "\n" if text else ""
    if case.raw_bytes:
        return text.encode("utf-8").decode("unicode_escape").encode("latin-1")
    return text.encode("utf-8")


def _build(case: Case, root: Path) -> list[str]:
    """Write the case's tree under `root`; return its command line."""
    files = {"gates/base.yaml": BASE.encode(), "gates/t.yaml": GATE.encode(), "record.jsonl": RECORD.encode()}
    argv = KINDS[case.kind][1]
    for path, lines in case.files.items():
        if path == "argv":
            argv = [_filled(case, line) for line in lines if line]
        else:
            files[path] = _content(case, lines)
    for path in case.links:
        files.pop(path, None)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    for path, target in case.links.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(target)
    assert argv is not None, f"{case.kind}/{case.name} has no `--- argv` section"
    return argv


def _location_pattern(location: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(location).replace(r"\*", r"\d+") + "$")


def test_the_catalogue_holds_at_least_200_named_cases_of_every_kind() -> None:
    names = [f"{case.kind}/{case.name}" for case in ALL]
    assert len(names) == len(set(names)), "case names repeat"
    assert len(ALL) >= 200
    for kind in KINDS:
        assert sum(case.kind == kind for case in ALL) >= 25, kind
    for case in ALL:
        assert case.expect, f"{case.kind}/{case.name} has no `### expect:`"


@pytest.mark.parametrize("case", ALL, ids=[f"{case.kind}/{case.name}" for case in ALL])
def test_a_bad_input_exits_2_with_a_located_message(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _build(case, tmp_path)
    monkeypatch.chdir(tmp_path)  # messages show paths relative to the working directory
    for variable in ("GATECFG_DB_URL", "GATECFG_ENFORCE", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(variable, raising=False)

    result = run_cli(*argv)  # a traceback propagates and fails the test

    output = result.out + result.err
    assert result.code == 2, output
    location, _, words = case.expect.partition(": ")
    wanted = _location_pattern(location)
    problems = [m for m in map(PROBLEM.match, output.splitlines()) if m]
    assert any(wanted.match(m["location"]) and words in m["text"] for m in problems), (
        f"no error at {location} saying {words!r} in:\n{output}"
    )
