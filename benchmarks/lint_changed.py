"""`gatecfg lint` of the files a commit changed beside the whole tree's lint (issue 41, item 6): a tree of
`--files` gate files (bench.py's: folders of 20, each with a base file extending the root's), linted whole
and for `--changed` of its files, as pre-commit passes them.

    python benchmarks/lint_changed.py --files 10000 --changed 10 --repeat 3

Per case it prints the best of `--repeat` in-process runs (wall and CPU seconds) and the YAML files parsed
(an operation count, steady on a busy machine), and the same as a `gatecfg lint` process. Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import bench

import gatecfg.resolve
from gatecfg.linting import find_problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatecfg-lint-") as temp:
        work = Path(temp)
        root = work / "gates"
        bench._write_tree(root, args.files)
        files = sorted(root.glob("team*/test_model_*.yaml"))
        step = max(1, len(files) // args.changed)
        changed = files[::step][: args.changed]
        cases: dict[str, list[Path]] = {"whole tree": [], f"{len(changed)} changed files": changed}
        print(f"{args.files:,} gate files; best of {args.repeat}")
        print("| case | in process: wall s | CPU s | YAML files parsed | `gatecfg lint` process: wall s |")
        print("|---|---|---|---|---|")
        for case, paths in cases.items():
            parsed = _parses(lambda paths=paths: find_problems(paths, gates=root))
            timing = bench._best(args.repeat, lambda paths=paths: _clean(find_problems(paths, gates=root)))
            argv = ["lint", "--gates", str(root), *map(str, paths)]
            process = bench._wall(["-m", "gatecfg", *argv], work, args.repeat)
            print(f"| {case} | {timing.wall:.3f} | {timing.cpu:.3f} | {parsed:,} | {process.wall:.3f} |")


def _clean(problems: list[object]) -> None:
    if problems:
        raise RuntimeError(f"the generated tree does not lint clean: {problems[:3]}")


def _parses(run: Callable[[], object]) -> int:
    """The YAML files the gate tree's loader parses (distinct) during `run`."""
    seen: set[str] = set()
    original = gatecfg.resolve.read_yaml

    def counted(path: Path, shown: str | None = None) -> gatecfg.resolve.LoadedDoc:
        seen.add(str(path))
        return original(path, shown)

    gatecfg.resolve.read_yaml = counted
    try:
        run()
    finally:
        gatecfg.resolve.read_yaml = original
    return len(seen)


if __name__ == "__main__":
    main()
