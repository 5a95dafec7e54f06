"""The docs build into a site with MkDocs (mkdocs.yml), strictly: a link to a missing page or anchor fails
the build, here and in .ci/run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    "link",
    ["[gone](no-such-page.md)", "[gone](evaluate.md#no-such-heading)"],
    ids=["page", "anchor"],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, link: str) -> None:
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    with (tmp_path / "docs" / "configuration.md").open("a", encoding="utf-8") as page:
        page.write(f"\nSee {link}.\n")
    done = build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such" in done.stderr
