"""The examples in docs/ are real: every YAML block validates, and the documented precedence is the code's."""

from __future__ import annotations

import re

import pytest
from helpers import REPO

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
