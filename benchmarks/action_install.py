"""The GitHub Action's install step as three `uses:` of the action in one job see it.

    python benchmarks/action_install.py [--rev REV] [--extras postgres] [--uses 3]

Takes the first step's script out of `action.yml` (this checkout's, or `git show REV:action.yml`), then runs
it `--uses` times in a row the way a runner runs the steps of one job: one RUNNER_TEMP for all of them, and
each later run's PATH holding what the earlier ones appended to GITHUB_PATH. The action path is this
checkout; pip resolves dependencies from the index and cache as configured. Prints each run's seconds and
the total. `--rev ed8fd32` measures the step as it was before the install-once change.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parent.parent


def install_script(rev: str | None) -> str:
    text = (
        (REPO / "action.yml").read_text(encoding="utf-8")
        if rev is None
        else subprocess.run(
            ["git", "show", f"{rev}:action.yml"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
    )
    step = YAML(typ="safe").load(text)["runs"]["steps"][0]
    return str(step["run"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", help="git revision whose action.yml to measure (default: this checkout's)")
    parser.add_argument("--extras", default="postgres")
    parser.add_argument("--uses", type=int, default=3)
    args = parser.parse_args()
    script = install_script(args.rev)
    with tempfile.TemporaryDirectory() as runner:
        path_file = Path(runner) / "github_path"
        path_file.write_text("")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env |= {
            "RUNNER_TEMP": runner,
            "GITHUB_PATH": str(path_file),
            "GATECFG_ACTION_PATH": str(REPO),
            "GATECFG_EXTRAS": args.extras,
        }
        total = 0.0
        for use in range(1, args.uses + 1):
            added = os.pathsep.join(path_file.read_text().split())
            step_env = {**env, "PATH": os.pathsep.join(p for p in (added, env["PATH"]) if p)}
            start = time.perf_counter()
            done = subprocess.run(
                ["bash", "-e", "-c", script], env=step_env, capture_output=True, text=True, check=False
            )
            seconds = time.perf_counter() - start
            total += seconds
            said = (done.stdout.splitlines() or ["(nothing)"])[0]
            print(f"use {use}: {seconds:5.1f} s  exit {done.returncode}  {said}")
            if done.returncode:
                print(done.stderr)
        print(f"total: {total:.1f} s for {args.uses} uses")


if __name__ == "__main__":
    main()
