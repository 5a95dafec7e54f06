"""`gatecfg regimes` on real series with human-annotated change points: the Turing Change Point Dataset.

Each series of `../shared/real/tcpd-dev` (15 univariate series, five annotators each; see that folder's
README) is run the way a user would: written as a CSV export (one run a point, in order), `gatecfg import`
into a fresh SQLite store, then `gatecfg regimes --format json` at its defaults, each a `python -m
gatecfg` process. The regime starts after the first are the predicted change points, scored with the
benchmark's own metrics (van den Burg & Williams 2020, `TCPDBench/analysis/scripts/metrics.py`,
reimplemented here from its definitions): F1 with a margin of 5 points against every annotator's set
(the start point counted as a change point for every method and annotator), and the segmentation
covering, averaged over annotators. Beside them: the published scores of the benchmark's methods at
their default parameters on the same series (`benchmarks/data/tcpd_default_scores.json`, copied from
TCPDBench's result files; `zero` is its no-change baseline).

    python benchmarks/tcpd.py                      # the table, about 20 s
    python benchmarks/tcpd.py --data DIR           # another folder of TCPD series and annotations.json
    python benchmarks/tcpd.py --data DIR --published SCORES  # beside TCPDBench's own score files

A series' missing values (`null`) are nights without a value; a series of several dimensions is one
gate a dimension, its change points those of any of them.

The issue's targets: F1 and covering each at least the best default method's mean, and on every series
at most 1.5 times the annotators' mean number of changes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = Path(__file__).resolve().parent / "data" / "tcpd_default_scores.json"
DATA = ROOT.parent / "shared" / "real" / "tcpd-dev"
TEST = "tests/tcpd_ci.py"
METRIC = "value"
MARGIN = 5


# --- the benchmark's metrics ---------------------------------------------------------------------------


def true_positives(truth: Iterable[int], predicted: Iterable[int], margin: int = MARGIN) -> set[int]:
    """The true change points matched by a prediction within `margin`, each prediction used once (the
    closest free one)."""
    free = set(predicted)
    found: set[int] = set()
    for tau in truth:
        close = sorted((abs(tau - x), x) for x in free if abs(tau - x) <= margin)
        if close:
            found.add(tau)
            free.remove(close[0][1])
    return found


def f_measure(
    annotations: Mapping[str, Sequence[int]], predicted: Iterable[int], margin: int = MARGIN
) -> tuple[float, float, float]:
    """F1, precision and recall: precision against the union of the annotators' sets, recall the mean of
    each annotator's, the start point 0 added to every set."""
    sets = [{0, *points} for points in annotations.values()]
    predictions = {0, *predicted}
    union = set().union(*sets)
    precision = len(true_positives(union, predictions, margin)) / len(predictions)
    recall = sum(len(true_positives(s, predictions, margin)) / len(s) for s in sets) / len(sets)
    return 2 * precision * recall / (precision + recall), precision, recall


def partition(points: Iterable[int], n: int) -> list[set[int]]:
    """The segments of 0..n-1 that the change points open (a point at 0 opens nothing new)."""
    bounds = [*sorted({0, *(p for p in points if 0 < p < n)}), n]
    return [set(range(a, b)) for a, b in itertools.pairwise(bounds)]


def cover_single(predicted: Sequence[set[int]], truth: Sequence[set[int]]) -> float:
    """Covering of the segmentation `truth` by `predicted` (Arbelaez et al. 2010, eq. 8): each true segment
    weighted by its length times its best Jaccard overlap with a predicted one."""
    total = sum(map(len, truth))
    best = (max(len(r & p) / len(r | p) for p in predicted) for r in truth)
    return sum(len(r) * b for r, b in zip(truth, best, strict=True)) / total


def covering(annotations: Mapping[str, Sequence[int]], predicted: Iterable[int], n: int) -> float:
    ours = partition(predicted, n)
    covers = [cover_single(ours, partition(points, n)) for points in annotations.values()]
    return sum(covers) / len(covers)


# --- gatecfg through its CLI ---------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECFG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def gatecfg_cli(*args: str | Path) -> str:
    """`python -m gatecfg ARGS` from this checkout, as a user runs it: its stdout (exit on a failure)."""
    done = subprocess.run(
        [sys.executable, "-m", "gatecfg", *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"gatecfg {' '.join(map(str, args))} exited {done.returncode}: {done.stderr}")
    return done.stdout


def regime_starts(columns: Sequence[Sequence[float | None]], work: Path) -> list[int]:
    """The change points `gatecfg regimes` reports at its defaults, one run a point and a gate a
    dimension of the series (`value`, then `value_2`, ...). A missing value (`null` in the dataset) is a
    night without that metric; a point missing in every dimension is a night without a run. The runs
    keep the points' indices in their names, so a regime's first run names its point however many
    nights are missing. A multivariate series' change points are those of any of its dimensions, as a
    reader of `gatecfg regimes` on each of its metrics would see them."""
    metrics = [METRIC, *(f"{METRIC}_{k}" for k in range(2, len(columns) + 1))]
    gates = work / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    (gates / "t.yaml").write_text(
        f"test: {TEST}\ngates:\n"
        + "".join(f"  {m}:\n    steps: last\n    constraint: null\n" for m in metrics)
    )
    start = datetime(2000, 1, 1, 2, 30, tzinfo=UTC)
    rows = [",".join(["run_id", "date", "commit", *metrics])]
    for i, point in enumerate(zip(*columns, strict=True)):
        if all(v is None for v in point):
            continue
        cells = ["" if v is None else repr(v) for v in point]
        rows.append(",".join([f"p{i:05d}", (start + timedelta(days=i)).isoformat(), f"{i:040x}", *cells]))
    export = work / "series.csv"
    export.write_text("\n".join(rows) + "\n")
    db = f"sqlite:///{work / 'h.db'}"
    gatecfg_cli("import", "--test", TEST, export, "--gates", gates, "--db", db)
    found: set[int] = set()
    for metric in metrics:
        out = gatecfg_cli(
            "regimes", "--test", TEST, "--metric", metric, "--gates", gates, "--db", db, "--format", "json"
        )
        found.update(int(r["first_run"][1:]) for r in json.loads(out)["regimes"][1:])
    return sorted(found)


def _series(path: Path) -> list[list[float | None]]:
    """Every dimension of a TCPD series (`series[k].raw`), `None` where the dataset has no value."""
    document: dict[str, Any] = json.loads(path.read_text())
    return [[None if v is None else float(v) for v in dim["raw"]] for dim in document["series"]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=DATA, help="a folder of TCPD NAME.json and annotations.json"
    )
    parser.add_argument(
        "--published",
        type=Path,
        default=None,
        help="a folder with TCPDBench's analysis/output/scores/default_f1_scores.json and "
        "default_cover_scores.json, to compare series that benchmarks/data does not hold",
    )
    args = parser.parse_args()
    annotations: dict[str, dict[str, list[int]]] = json.loads((args.data / "annotations.json").read_text())
    published: dict[str, Any] = json.loads(PUBLISHED.read_text())
    if args.published is not None:
        for metric in ("f1", "cover"):
            scores = json.loads((args.published / f"default_{metric}_scores.json").read_text())
            published[metric] = {**published[metric], **scores}
    rows: list[tuple[str, float, float, int, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in sorted(annotations):
            columns = _series(args.data / f"{name}.json")
            work = Path(scratch) / name
            work.mkdir()
            found = regime_starts(columns, work)
            people = annotations[name]
            f1 = f_measure(people, found)[0]
            cover = covering(people, found, len(columns[0]))
            mean_people = sum(len(p) for p in people.values()) / len(people)
            rows.append((name, f1, cover, len(found), mean_people))
    names = [r[0] for r in rows]
    methods = sorted({m for s in names if s in published["f1"] for m in published["f1"][s]})
    scored = [s for s in names if s in published["f1"]]

    def mean(metric: str, method: str) -> float | None:
        vals = [published[metric][s][method] for s in scored]
        return None if not scored or any(v is None for v in vals) else sum(vals) / len(vals)

    best = {
        metric: max(
            ((mean(metric, m), m) for m in methods if m != "zero" and mean(metric, m) is not None),
            default=None,
        )
        for metric in ("f1", "cover")
    }
    print(f"# gatecfg regimes on {len(rows)} TCPD series (F1 margin {MARGIN}, covering), CLI defaults\n")
    head = "| series | n | F1 | cover | changes | annotators' mean | ratio |"
    if best["f1"] and best["cover"]:
        head += f" {best['f1'][1]} F1 | {best['cover'][1]} cover |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    over = []
    for name, f1, cover, changes, people in rows:
        ratio = changes / people if people else (0.0 if changes == 0 else float("inf"))
        limit = 1.5 * people
        if changes > limit and changes > 0:
            over.append(name)
        size = len(_series(args.data / f"{name}.json")[0])
        line = f"| {name} | {size} | {f1:.3f} | {cover:.3f} | {changes} | {people:.1f} | {ratio:.2f} |"
        if best["f1"] and best["cover"] and name in published["f1"]:
            theirs = published["f1"][name][best["f1"][1]], published["cover"][name][best["cover"][1]]
            line += f" {theirs[0]:.3f} | {theirs[1]:.3f} |"
        print(line)
    k = len(rows)
    mean_f1 = sum(r[1] for r in rows) / k
    mean_cover = sum(r[2] for r in rows) / k
    mean_changes = sum(r[3] for r in rows) / k
    mean_people = sum(r[4] for r in rows) / k
    means = f"**{mean_f1:.3f}** | **{mean_cover:.3f}** | {mean_changes:.1f} | {mean_people:.1f}"
    print(f"| **mean** | | {means} | |")
    if scored:
        print(f"\npublished default methods, mean over the {len(scored)} series scored (best first):\n")
        print("| method | F1 | cover |")
        print("|---|---|---|")
        order = sorted(methods, key=lambda m: -(mean("f1", m) or -1.0))
        for m in order:
            f, c = mean("f1", m), mean("cover", m)
            print(f"| {m} | {'n/a' if f is None else f'{f:.3f}'} | {'n/a' if c is None else f'{c:.3f}'} |")
    verdict = []
    if best["f1"]:
        verdict.append(f"F1 {mean_f1:.3f} vs best default {best['f1'][1]} {best['f1'][0]:.3f}")
    if best["cover"]:
        verdict.append(f"covering {mean_cover:.3f} vs best default {best['cover'][1]} {best['cover'][0]:.3f}")
    verdict.append(f"changes a series {mean_changes:.2f} vs 1.5x the annotators' {1.5 * mean_people:.2f}")
    verdict.append(f"series over 1.5x the annotators' changes: {', '.join(over) or 'none'}")
    print("\n" + "; ".join(verdict))


if __name__ == "__main__":
    main()
