"""`gatecfg regimes`' detection on real histories nobody here wrote: how many regimes it reads, of which kind.

* django-asv (`../shared/real/django-asv`): 85 nightly CI timing series (a benchmark on one runner
  environment, its seconds in date order), each read as one coordinate, as `gatecfg regimes --metric`
  reads a gate, and all together as `--all` does (each change priced for the 85 scanned).
* Megatron-LM golden values (`../shared/real/megatron-goldens`): each golden file's curves at each step
  across its 7-9 versions, a coordinate a (file, metric, step), all scanned together as `--all` does.
  The versions are bumps people made because the values moved, so a regime here is no phantom: the
  figure says how many of those coordinates the detection calls shifted.

No annotations exist for these, so the figures describe, they do not score: compare a change's before
and after (`PYTHONPATH=<a checkout of the commit before> python benchmarks/regimes_real.py`). TCPD's
annotated series are scored by `benchmarks/tcpd.py`.

    python benchmarks/regimes_real.py
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from real_baselines import SERIES, curve_of, load_goldens, load_series  # benchmarks/ heads sys.path

from gatecfg.analysis.readings import detect

GOLDENS = SERIES.parent.parent / "megatron-goldens"


def _read(series: Sequence[np.ndarray], coordinates: int) -> tuple[int, collections.Counter[str], float]:
    """Shifted series, the kinds of their changes, and the CPU seconds the detection took."""
    kinds: collections.Counter[str] = collections.Counter()
    shifted = 0
    started = time.process_time()
    for values in series:
        found = detect(values, coordinates)
        shifted += len(found.segments) > 1
        kinds.update(s.kind for s in found.segments[1:])
    return shifted, kinds, time.process_time() - started


def _line(name: str, series: Sequence[np.ndarray], coordinates: int) -> str:
    shifted, kinds, seconds = _read(series, coordinates)
    changes = sum(kinds.values())
    by_kind = ", ".join(f"{kind} {kinds[kind]}" for kind in ("level", "drift", "spread"))
    return (
        f"| {name} | {len(series)} | {shifted} | {changes / max(1, len(series)):.2f} | {by_kind} |"
        f" {seconds:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--asv", type=Path, default=SERIES)
    parser.add_argument("--goldens", type=Path, default=GOLDENS)
    args = parser.parse_args()
    asv = [s.values for s in load_series(args.asv)]
    goldens: list[np.ndarray] = []
    for history in load_goldens(args.goldens).values():
        metrics = sorted({m for version in history for m in version["metrics"]})
        for metric in metrics:
            curves = [curve_of(version, metric) for version in history]
            for step in sorted(set().union(*curves)):
                values = [c[step] for c in curves if step in c]
                if len(values) >= 2:
                    goldens.append(np.array(values))
    print("| series | scanned | shifted | changes a series | kinds | CPU s |")
    print("|---|---|---|---|---|---|")
    print(_line("django-asv, one at a time", asv, 1))
    print(_line("django-asv, all together", asv, len(asv)))
    print(_line("Megatron goldens across versions, all together", goldens, len(goldens)))


if __name__ == "__main__":
    main()
