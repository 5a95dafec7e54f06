"""How light gatecfg is where it runs first: the wheel's installed size, the pre-commit hook's first run,
and `gatecfg lint` / `gatecfg --help` as whole processes beside `python -c pass`.

    python benchmarks/startup.py [--runs 5] [--no-hook]

1. builds the wheel of this checkout (`pip wheel --no-deps`) and installs it with no extras into a fresh
   venv under a temporary folder (dependencies from the pip cache / index as configured): the installed
   size is that venv's site-packages, minus an empty venv's;
2. times `gatecfg --help` and `gatecfg lint gates/` (this repository's gates) in that venv, best of N, and
   `python -c pass` with the same interpreter;
3. times the hook's first run: `pre-commit try-repo <this checkout> gatecfg-lint --all-files` in a scratch
   git repository holding a copy of gates/ (try-repo installs the hook environment afresh every call).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(cmd: Sequence[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def best_of(cmd: Sequence[str | Path], runs: int, cwd: Path) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(c) for c in cmd], cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def site_packages(env: Path) -> Path:
    [found] = env.glob("lib/python*/site-packages")
    return found


def install_wheel(work: Path) -> tuple[Path, int]:
    """A fresh venv with the wheel (no extras) installed, and the bytes the install added."""
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", work / "dist", REPO])
    [wheel] = (work / "dist").glob("gatecfg-*.whl")
    env = work / "venv"
    venv.create(env, with_pip=True)
    empty = tree_size(site_packages(env))
    run([env / "bin" / "python", "-m", "pip", "install", "--quiet", wheel])
    return env, tree_size(site_packages(env)) - empty


def hook_first_run(work: Path) -> float:
    scratch = work / "scratch"
    shutil.copytree(REPO / "gates", scratch / "gates")
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    run([*git, "init", "-q", "-b", "main"], cwd=scratch)
    run([*git, "add", "-A"], cwd=scratch)
    run([*git, "commit", "-q", "-m", "gates"], cwd=scratch)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT")}
    start = time.perf_counter()
    run(
        [sys.executable, "-m", "pre_commit", "try-repo", REPO, "gatecfg-lint", "--all-files"],
        cwd=scratch,
        env=env,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="best of N process timings (default 5)")
    parser.add_argument("--no-hook", action="store_true", help="skip the pre-commit first-run timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatecfg-startup-") as tmp:
        work = Path(tmp)
        env, installed = install_wheel(work)
        python, gatecfg = env / "bin" / "python", env / "bin" / "gatecfg"
        print(
            f"wheel installed with no extras into a fresh venv: {installed / 1e6:.1f} MB (target <= 150 MB)"
        )
        rows = [
            ("python -c pass", [python, "-c", "pass"], None),
            ("gatecfg --help", [gatecfg, "--help"], 0.3),
            ("gatecfg lint gates/", [gatecfg, "lint", "gates/"], 0.35),
        ]
        print(f"\nwhole processes, best of {args.runs} (this repository's gates/, the fresh venv):")
        for name, cmd, target in rows:
            seconds = best_of(cmd, args.runs, REPO)
            goal = f"(target <= {target} s)" if target else ""
            print(f"  {name:<22} {seconds:6.3f} s  {goal}")
        if not args.no_hook:
            seconds = hook_first_run(work)
            print(
                f"\npre-commit hook first run (try-repo, fresh hook environment): {seconds:.1f} s "
                "(target <= 20 s)"
            )


if __name__ == "__main__":
    main()
