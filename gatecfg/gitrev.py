"""Gate trees at a git revision: read with git itself (`git archive`), never by checking anything out.

`load_tree_at(rev, gates)` materialises the gates folder as it was at `rev` into a temporary folder,
resolves it with `load_tree`, and relabels every path as `REV:path/in/repo` (git's own spelling for a
file at a revision), so messages and sources name the revision rather than a temporary folder.
It works on a shallow CI clone as long as `rev` itself was fetched, and says what to fetch when not.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

from gatecfg.errors import InputError
from gatecfg.resolve import GateTree, ResolvedGate, ResolvedTest, load_tree


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError.at(
            "git", "git is not installed", hint="install git to compare with a revision"
        ) from None


def _repo_top(start: Path) -> Path:
    done = _git(["rev-parse", "--show-toplevel"], start)
    if done.returncode != 0:
        raise InputError.at(
            str(start),
            "not inside a git repository, so there is no revision to compare with",
            hint="run from a clone of the repository that holds the gates folder",
        )
    return Path(done.stdout.decode().strip()).resolve()


def _existing_parent(path: Path) -> Path:
    # The gates folder may be gone from the working tree (a PR that moves it); git still needs a cwd.
    path = path.resolve()
    while not path.is_dir():
        path = path.parent
    return path


def materialise(rev: str, gates: Path, into: Path) -> Path:
    """Write the gates folder as it was at `rev` below `into`; returns where it is (may not exist)."""
    top = _repo_top(_existing_parent(gates))
    relative = gates.resolve().relative_to(top).as_posix()
    if _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top).returncode != 0:
        raise InputError.at(
            "--base",
            f"git does not know the revision `{rev}`",
            hint=f"fetch it first, e.g. `git fetch --depth=1 origin {rev}` on a shallow CI clone",
        )
    target = into / relative
    listed = _git(["ls-tree", "-d", "--name-only", rev, "--", relative], top)
    if relative != "." and not listed.stdout.strip():
        return target  # the folder did not exist at rev: load_tree reports that plainly
    archive = _git(["archive", "--format=tar", rev, "--", relative], top)
    if archive.returncode != 0:
        raise InputError.at(
            "--base", f"`git archive {rev} -- {relative}` failed: {archive.stderr.decode().strip()}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # The "data" filter refuses links and paths that would escape the folder.
        tar.extractall(into, filter="data")
    return target


def load_tree_at(rev: str, gates: Path) -> GateTree:
    """The gate tree under `gates` as it was at `rev`, every path shown as `REV:path`."""
    with tempfile.TemporaryDirectory(prefix="gatecfg-rev-") as tmp:
        into = Path(tmp).resolve()
        root = materialise(rev, gates, into)
        tree = load_tree(root)
        return _relabel(tree, str(into) + os.sep, f"{rev}:", gates)


def _relabel(tree: GateTree, old: str, new: str, root: Path) -> GateTree:
    def fix(text: str) -> str:
        return new + text[len(old) :] if text.startswith(old) else text

    def gate(g: ResolvedGate) -> ResolvedGate:
        return dataclasses.replace(g, file=fix(g.file), sources={k: fix(v) for k, v in g.sources.items()})

    def test(t: ResolvedTest) -> ResolvedTest:
        policy = dataclasses.replace(t.policy, sources={k: fix(v) for k, v in t.policy.sources.items()})
        return dataclasses.replace(
            t,
            file=fix(t.file),
            gates=tuple(gate(g) for g in t.gates),
            policy=policy,
            bases=tuple(fix(b) for b in t.bases),
        )

    relabelled = GateTree(root)
    relabelled.tests = {name: test(t) for name, t in tree.tests.items()}
    relabelled.files = [fix(f) for f in tree.files]
    relabelled.problems = [
        dataclasses.replace(p, location=dataclasses.replace(p.location, path=fix(p.location.path)))
        for p in tree.problems
    ]
    return relabelled
