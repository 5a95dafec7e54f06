"""`gatecfg regimes --all` on pure noise: how many of 10,000 coordinates it flags, and how long it takes.

Builds a SQLite store of `--nights` nightlies (default 20) of one test whose `--gates` gates (default 100)
are each stored at `--steps` steps (default 100): 10,000 coordinates of independent Gaussian noise, no
change anywhere (fixed seed). The store is filled through `gatecfg import` of a JSON Lines export, then
`gatecfg regimes --all --format json` runs as a user would run it, in its own process, and the script
prints the number of coordinates with more than one regime and the command's wall-clock seconds.

    python benchmarks/regimes_noise.py                  # 20 nightlies x 10,000 coordinates
    python benchmarks/regimes_noise.py --gates 400      # 40,000 coordinates

The issue's target: at most 10 flagged (0.1%) in at most 15 s. The script prints the command's CPU
seconds beside its wall clock: on a shared machine the second depends on who else is running.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from tcpd import gatecfg_cli  # benchmarks/ heads sys.path when a script in it runs

TEST = "tests/noise_ci.py"


def build(work: Path, *, nights: int, gates: int, steps: int, seed: int) -> tuple[Path, str]:
    """A gates folder and a store of pure noise: `gates` gates at `steps` steps over `nights` runs."""
    folder = work / "gates"
    folder.mkdir()
    (folder / "base.yaml").write_text("version: 1\n")
    names = [f"metric/{g:04d}" for g in range(gates)]
    (folder / "t.yaml").write_text(
        f"test: {TEST}\ngates:\n"
        + "".join(f"  {name}:\n    steps: all\n    constraint: null\n" for name in names)
    )
    rng = np.random.default_rng(seed)
    values = 0.3 + 0.01 * rng.normal(0, 1, (nights, gates, steps))
    start = datetime(2024, 1, 1, 2, 30, tzinfo=UTC)
    export = work / "noise.jsonl"
    with export.open("w") as out:
        for night in range(nights):
            metrics = {
                name: [[step, float(values[night, g, step])] for step in range(steps)]
                for g, name in enumerate(names)
            }
            line = {
                "run_id": f"nightly-{night + 1:03d}",
                "date": (start + timedelta(days=night)).isoformat(),
                "commit": f"{night:040x}",
                "metrics": metrics,
            }
            out.write(json.dumps(line) + "\n")
    db = f"sqlite:///{work / 'h.db'}"
    gatecfg_cli("import", "--test", TEST, export, "--gates", folder, "--db", db)
    return folder, db


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=20)
    parser.add_argument("--gates", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        gates, db = build(
            Path(scratch), nights=args.nights, gates=args.gates, steps=args.steps, seed=args.seed
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        out = gatecfg_cli(
            "regimes", "--test", TEST, "--all", "--gates", gates, "--db", db, "--format", "json"
        )
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    document = json.loads(out)
    coordinates = document["coordinates"]
    flagged = sum(len(c["regimes"]) > 1 for c in coordinates)
    print(
        f"pure noise, {args.nights} nightlies x {len(coordinates)} coordinates: {flagged} flagged "
        f"({flagged / max(1, len(coordinates)):.3%}), gatecfg regimes --all in {seconds:.1f} s "
        f"({cpu:.1f} s of CPU; the wall clock of a shared machine runs longer under load, see `uptime`)"
    )


if __name__ == "__main__":
    main()
