"""The examples in docs/ are real: every YAML block validates, and the documented precedence is the code's;
the docs the hook definitions link exist, and the README says what the tests need of PostgreSQL."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, subprocess_env

from gatecfg import resolve
from gatecfg.models import BaseFile, GateFile
from gatecfg.parse import parse_doc
from gatecfg.yamlio import load_yaml

DOCS = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


def yaml_blocks() -> list[tuple[str, str]]:
    return [
        (f"{path.name}#{i}", block)
        for path in DOCS
        for i, block in enumerate(BLOCK.findall(path.read_text(encoding="utf-8")))
    ]


@pytest.mark.parametrize(("where", "text"), yaml_blocks(), ids=[w for w, _ in yaml_blocks()])
def test_documented_yaml_validates(where: str, text: str) -> None:
    doc = load_yaml(text, where)
    model = BaseFile if "version" in doc.data else GateFile
    parse_doc(doc, model)


ITEM = re.compile(r"^\s*\d\. (.*?)(?=^\s*\d\. |\n\n|\Z)", re.MULTILINE | re.DOTALL)


def numbered(text: str) -> list[str]:
    return [" ".join(item.split()) for item in ITEM.findall(text)]


def test_precedence_list_in_docs_matches_the_code() -> None:
    doc = (REPO / "docs" / "gate-language.md").read_text(encoding="utf-8")
    section = doc.split("## Inheritance precedence", 1)[1]
    code = resolve.__doc__ or ""
    assert numbered(section)[:5] == numbered(code)[:5]
    assert len(numbered(code)) >= 5


def block_after(doc: str, heading: str, fence: str, holding: str = "") -> str:
    """The first ```FENCE block after `heading` in docs/DOC (holding `holding`, when given)."""
    text = (REPO / "docs" / doc).read_text(encoding="utf-8").split(heading, 1)[1]
    return next(b for b in re.findall(rf"```{fence}\n(.*?)```", text, re.DOTALL) if holding in b)


def test_the_records_sample_of_evaluate_md_is_a_valid_record() -> None:
    from helpers import parse_record_text

    record = parse_record_text(block_after("evaluate.md", "## Records", "json"), "sample.jsonl")
    reward, norm = record.column("rollout/raw_reward"), record.column("train/grad_norm")
    assert reward is not None
    assert norm is not None
    assert (list(reward.steps), list(norm.steps)) == ([0, 1, 2, 3], [3])


CHECK_JSONSCHEMA = """\
#!{python}
# check-jsonschema's command line, as docs/install.md calls it: --schemafile S FILE...
import json, sys
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML
schema_file, files = sys.argv[2], sys.argv[3:]
validator = Draft202012Validator(json.load(open(schema_file)))
with open({log!r}, "a") as log:
    for name in files:
        errors = list(validator.iter_errors(YAML(typ="safe").load(open(name))))
        log.write(f"{{schema_file}} {{name}} {{len(errors)}}\\n")
        if errors:
            sys.exit(1)
"""


def test_the_schema_example_of_install_md_checks_every_file_with_its_schema(tmp_path: Path) -> None:
    script = block_after("install.md", "check-jsonschema", "sh", holding="check-jsonschema")
    shutil.copytree(REPO / "gates", tmp_path / "gates")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "checked.txt"
    fake = tools / "check-jsonschema"
    fake.write_text(CHECK_JSONSCHEMA.format(python=sys.executable, log=str(log)), encoding="utf-8")
    fake.chmod(0o755)
    env = {**subprocess_env(), "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    gatecfg_bin = Path(sys.executable).with_name("gatecfg")
    if gatecfg_bin.exists():
        env["PATH"] = f"{gatecfg_bin.parent}{os.pathsep}{env['PATH']}"
    command = ["bash", "-e", "-c", script]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = {
        line.split()[1]: (Path(line.split()[0]).name, line.split()[2])
        for line in log.read_text().splitlines()
    }
    every = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / "gates").rglob("*.yaml")}
    assert set(checked) == every
    for name, (schema, errors) in checked.items():
        base = Path(name).name == "base.yaml" or name.endswith(".base.yaml")
        assert (schema, errors) == ("base.schema.json" if base else "gatefile.schema.json", "0"), name


SHIPPED = [
    *sorted((REPO / "gatecfg").rglob("*.py")),
    *DOCS,
    REPO / "action.yml",
    REPO / ".pre-commit-hooks.yaml",
    REPO / "pyproject.toml",
]
DOC_PATH = re.compile(r"\bdocs/[\w./-]+\.md\b")
MD_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_nothing_shipped_refers_to_a_file_that_does_not_ship() -> None:
    """The SPEC and the issues stay with the project's own history; a reader of the package or the docs
    must be able to open every file a docstring, a comment or a doc names."""
    missing = []
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO).as_posix()
        if re.search(r"\bSPEC(\.md| §)", text):
            missing.append(f"{where}: cites the SPEC, which does not ship")
        missing += [f"{where}: {ref}" for ref in DOC_PATH.findall(text) if not (REPO / ref).exists()]
        if path.suffix == ".md":
            missing += [
                f"{where}: ({ref})"
                for ref in MD_LINK.findall(text)
                if "://" not in ref and not (path.parent / ref).exists()
            ]
    assert missing == []


def test_the_module_map_of_index_md_lists_each_module_once_and_only_real_ones() -> None:
    listed = re.findall(r"^\| `(gatecfg/[^`]*)` \|", (REPO / "docs" / "index.md").read_text(), re.MULTILINE)
    assert len(listed) == len(set(listed))
    assert [name for name in listed if not (REPO / name).exists()] == []


def test_every_docs_link_in_the_hook_definitions_exists() -> None:
    text = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    linked = re.findall(r"docs/[\w./-]+\.md", text)
    assert linked
    for path in linked:
        assert (REPO / path).is_file(), path


def test_the_readme_says_the_test_database_role_must_create_databases() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.search(r"GATECFG_TEST_PG_URL[^\n]*\n?[^\n]*(CREATEDB|create databases)", readme)
