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
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gatecfg.errors import InputError
from gatecfg.gate_files import display_path
from gatecfg.rekey import TreeDiff, diff_trees
from gatecfg.resolve import GateTree, ResolvedGate, ResolvedTest, load_tree


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError.at(
            "git", "git is not installed", hint="install git to compare with a revision"
        ) from None


def repo_top(gates: Path) -> Path:
    """The top folder of the git repository that holds `gates` (which may be gone from the working tree)."""
    return _repo_top(_existing_parent(gates))


def commit_of(rev: str, gates: Path) -> str:
    """The full hash of the commit `rev` names, in the repository that holds `gates`."""
    return _commit(rev, repo_top(gates))


def head_commit(gates: Path) -> str | None:
    """The commit checked out in the repository that holds `gates`: what a run made outside CI (which
    names its commit) was made on. None outside a repository, before its first commit, or without git."""
    try:
        return commit_of("HEAD", gates)
    except InputError:
        return None


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
    top = repo_top(gates)
    relative = gates.resolve().relative_to(top).as_posix()
    # The hash, not the name, goes on to git: a name cannot then be read as an option.
    commit = _commit(rev, top)
    target = into / relative
    listed = _git(["ls-tree", "-d", "--name-only", commit, "--", relative], top)
    if relative != "." and not listed.stdout.strip():
        return target  # the folder did not exist at rev: load_tree reports that plainly
    archive = _git(["archive", "--format=tar", commit, "--", relative], top)
    if archive.returncode != 0:
        raise InputError.at(
            "--base", f"`git archive {rev} -- {relative}` failed: {archive.stderr.decode().strip()}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        try:
            # The "data" filter refuses links and paths that would escape the folder.
            tar.extractall(into, filter="data")
        except tarfile.FilterError as exc:
            member = exc.tarinfo.name if exc.tarinfo is not None else relative
            raise InputError.at(
                f"{member} (at {rev})",
                f"cannot read the gates folder at {rev}: {exc}",
                hint="a gate or base file that links out of the gates folder is refused; "
                "compare with a revision without the link",
            ) from None
    return target


def _commit(rev: str, top: Path) -> str:
    if not rev or rev.startswith("-"):
        raise InputError.at("--base", f"`{rev}` is not a git revision", hint="e.g. --base origin/main")
    done = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top)
    if done.returncode == 0:
        return done.stdout.decode().strip()
    shallow = _git(["rev-parse", "--is-shallow-repository"], top).stdout.decode().strip() == "true"
    why = " (this clone is shallow: it holds only the commits it fetched)" if shallow else ""
    hint = _fetch_hint(rev, top, shallow=shallow)
    raise InputError.at("--base", f"git does not know the revision `{rev}`{why}", hint=hint)


def _fetch_hint(rev: str, top: Path, *, shallow: bool) -> str:
    """What to fetch so that `rev` exists, in the spelling git needs for each kind of name."""
    remotes = _git(["remote"], top).stdout.decode().split()
    remote = "origin" if "origin" in remotes or not remotes else remotes[0]
    named_remote, _, branch = rev.partition("/")
    if branch and named_remote not in remotes:
        # `origin/main` without a remote `origin`: fetching `origin/main` from another remote would make a
        # ref `origin/origin/main`. Say which remotes there are and spell the fetch for one of them.
        if not remotes:
            return (
                f"this clone has no git remote: `git remote add {named_remote} URL`, then "
                f"`git fetch --depth=1 {named_remote} {branch}` and pass `--base {rev}`"
            )
        return (
            f"`{named_remote}` is not a remote of this clone (remotes: {', '.join(remotes)}): "
            f"`git fetch --depth=1 {remote} {branch}`, then pass `--base {remote}/{branch}`"
        )
    if branch:
        refspecs = _git(["config", "--get-all", f"remote.{named_remote}.fetch"], top).stdout.decode().split()
        if f"refs/heads/*:refs/remotes/{named_remote}/*" in (spec.lstrip("+") for spec in refspecs):
            # The remote's refspec covers every branch, so fetching one updates its remote-tracking ref.
            return f"fetch it first: `git fetch --depth=1 {named_remote} {branch}`"
        # A single-branch clone's refspec does not: name where the fetched branch goes.
        tracking = f"refs/remotes/{named_remote}/{branch}"
        return f"fetch it first: `git fetch --depth=1 {named_remote} {branch}:{tracking}`"
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", rev):
        return f"fetch the commit first: `git fetch --depth=1 {remote} {rev}`"
    if re.search(r"[~^@{]", rev):
        if not shallow:
            return "check the revision: `git log --oneline` lists the commits this clone has"
        return (
            "fetch more history first: `git fetch --deepen=50` (or `git fetch --unshallow`), "
            "or name the base by branch, e.g. --base origin/main"
        )
    return f"fetch it first: `git fetch --depth=1 {remote} {rev}`, then pass `--base {remote}/{rev}`"


def load_tree_at(rev: str, gates: Path) -> GateTree:
    """The gate tree under `gates` as it was at `rev`, every path shown as `REV:path`."""
    with tempfile.TemporaryDirectory(prefix="gatecfg-rev-") as tmp:
        into = Path(tmp).resolve()
        root = materialise(rev, gates, into)
        if not root.exists():
            # The gates folder did not exist at `rev` (the pull request that adds it): no gates then,
            # every gate of the working tree is new. Not a problem of the base to report.
            return GateTree(gates)
        tree = load_tree(root)
        # Paths are shown relative to the working directory when below it, which the temporary folder
        # is when TMPDIR lies inside the checkout or the command runs from an ancestor such as /tmp.
        shown = {str(into) + os.sep, display_path(into) + os.sep}
        return _relabel(tree, tuple(shown), f"{rev}:", gates)


@dataclass(frozen=True)
class Comparison:
    """The working tree's gates against a revision's: the re-keys, and the trees they came from."""

    diff: TreeDiff
    after: GateTree
    before: GateTree  # its problems are why some gates are `uncompared`


def diff_against(rev: str, gates: Path) -> Comparison:
    """The re-keys of the working tree's gates against `rev`.

    Problems in the working tree are an InputError: a broken tree has no keys to compare. Problems at
    `rev` are kept in `before.problems` instead, since the working tree may be their fix; the gates of
    the files that did not resolve there are `uncompared`.
    """
    after = load_tree(gates)
    if after.problems:
        raise InputError(after.problems)
    before = load_tree_at(rev, gates)
    return Comparison(diff_trees(before, after, rev=rev, top=repo_top(gates)), after, before)


def _relabel(tree: GateTree, olds: tuple[str, ...], new: str, root: Path) -> GateTree:
    def fix(text: str) -> str:
        old = next((o for o in olds if text.startswith(o)), None)
        return text if old is None else new + text[len(old) :]

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
