"""Whole `gatecfg` processes of one or more checkouts, side by side, beside a plain Python process making the
bare fetch: `gatecfg evaluate` (SQLite) and `gatecfg regimes` on a work folder that `bench.py --workdir W`
seeded (the 8M-value store and its 10,000-run regimes series; `small.db`, the 80k-value one, if kept).

    python benchmarks/processes.py --workdir /tmp/gatecfg-bench --checkout /path/to/main --checkout . \\
        --rounds 10

Samples are interleaved (checkout after checkout, round after round), so that the machine's load falls on
each alike; it prints the median and the best CPU and wall seconds of each, and the ratios of the medians
to the bare process's. CPU seconds are user + system of the child, interpreter start included. Each
checkout's modules are byte-compiled first, as an installed wheel's are (an editable install under
PYTHONDONTWRITEBYTECODE would compile every module in every process: 0.2 s of CPU at this scale).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import bench

from gatecfg.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, required=True, help="a folder bench.py --workdir seeded")
    parser.add_argument(
        "--checkout", type=Path, action="append", required=True, help="a gatecfg checkout (repeat)"
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--window", type=int, default=20)
    args = parser.parse_args()
    work = args.workdir.resolve()
    checkouts = [c.resolve() for c in args.checkout]
    for checkout in checkouts:
        compileall.compile_dir(checkout / "gatecfg", quiet=1)
    gates, record = work / "gates", work / "record.jsonl"
    cases: dict[str, list[str]] = {}
    references: dict[str, list[str]] = {}
    for name, db in (("8M", work / "history.db"), ("80k", work / "small" / "small.db")):
        if not db.exists():
            continue
        url = f"sqlite:///{db}"
        case_gates, case_record = (
            (gates, record) if name == "8M" else (work / "small" / "gates", work / "small" / "record.jsonl")
        )
        cases[f"evaluate {name}"] = [
            "evaluate", "--gates", str(case_gates), "--test", bench.TEST, "--record", str(case_record),
            "--db", url, "--run-id", "bench-processes",
        ]  # fmt: skip
        with Store.open(url) as store:
            hashes = [spec.coordinate for spec in bench._specs(case_gates, bench.TEST)]
            store.baselines(hashes, window=args.window)  # the OS page cache, as the others find it
        sql = bench._driver_sql(url, bench.BARE_FETCH, hashes=", ".join("?" * len(hashes)))
        params = [*hashes, "bench-processes", args.window, -bench.FINITE_MAX, bench.FINITE_MAX]
        references[f"evaluate {name}"] = ["-c", bench.BARE_PROCESS, url, sql, json.dumps(params)]
    cases["regimes 10k runs"] = [
        "regimes", "--gates", str(gates), "--db", f"sqlite:///{work / 'history.db'}",
        "--test", bench.REGIMES_TEST, "--metric", bench.REGIMES_METRIC,
    ]  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds; python {sys.version.split()[0]}")
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for case, argv in cases.items():
            for checkout in checkouts:
                samples.setdefault((case, str(checkout)), []).append(
                    _run(["-m", "gatecfg", *argv], checkout, work)
                )
            if case in references:
                samples.setdefault((case, "bare fetch"), []).append(
                    _run(references[case], checkouts[0], work)
                )
    print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| case | process | CPU s median (best) | wall s median (best) | CPU / bare | wall / bare |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        bare = samples.get((case, "bare fetch"))
        for who in [*map(str, checkouts), "bare fetch"]:
            got = samples.get((case, who))
            if got is None:
                continue
            cpu, wall = statistics.median(c for c, _ in got), statistics.median(w for _, w in got)
            ratios = "| - | -"
            if bare is not None:
                ratios = (
                    f"| {cpu / statistics.median(c for c, _ in bare):.2f}x "
                    f"| {wall / statistics.median(w for _, w in bare):.2f}x"
                )
            print(
                f"| {case} | {who} | {cpu:.3f} ({min(c for c, _ in got):.3f}) "
                f"| {wall:.3f} ({min(w for _, w in got):.3f}) {ratios} |"
            )


def _run(argv: Sequence[str], checkout: Path, cwd: Path) -> tuple[float, float]:
    """CPU and wall seconds of one child process (exit 0 or 1) with `checkout` first on its path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:3]} exited {done.returncode}:\n{done.stderr.decode()[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


if __name__ == "__main__":
    main()
