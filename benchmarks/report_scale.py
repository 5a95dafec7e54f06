"""Times `gatecfg report --html` on a long history and how big and how fast its page is in Chromium.

    python benchmarks/report_scale.py [--gates 40] [--steps 1000] [--nights 300] [--folder DIR] [--page-only]

Seeds a SQLite store of GATES budget gates x STEPS steps x NIGHTS nights (12 million values at the
defaults; a few minutes, kept in --folder for the next run), writes the report of its one test, and
prints the report's wall time and peak memory, the test page's size, and the time Chromium takes from
navigation to the first screen's charts drawn (headless, median of 3).
`--page-only` skips the store: the same test page built from the same nights in memory, for its size
and render time alone. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gatecfg.keys import series_key
from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store

TEST = "tests/e2e/report_scale.py"
BATCH = 10  # nights per transaction: bounded memory while seeding
# At the load event the charts in the window are drawn (charts.js draws them before it returns; the
# others follow, one per task).
PROBE = """<script>
window.addEventListener("load", () => {
  const drawn = document.querySelectorAll(".gate-chart[data-ready]").length;
  document.body.setAttribute("data-timing", JSON.stringify({ drawn, first: performance.now() }));
});
</script>"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gates", type=int, default=40)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=300)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/gatecfg-report-scale"))
    parser.add_argument("--page-only", action="store_true")
    args = parser.parse_args()
    folder: Path = args.folder / f"{args.gates}x{args.steps}x{args.nights}"
    if args.page_only:
        folder.mkdir(parents=True, exist_ok=True)
        page = folder / "page.html"
        began = time.perf_counter()
        page.write_text(synthetic_page(args.gates, args.steps, args.nights))
        print(f"page built in {time.perf_counter() - began:.1f} s: {page.stat().st_size / 1e6:.2f} MB")
        print(f"chromium: the first screen's charts drawn at {render_ms(page):.0f} ms (median of 3)")
        return
    db = f"sqlite:///{folder / 'history.db'}"
    if not (folder / "seeded").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        began = time.perf_counter()
        seed(db, folder / "gates", args.gates, args.steps, args.nights)
        (folder / "seeded").touch()
        print(
            f"seeded {args.gates * args.steps * args.nights:,} values in {time.perf_counter() - began:.0f} s"
        )
    site = folder / "site"
    shutil.rmtree(site, ignore_errors=True)
    command = [sys.executable, "-m", "gatecfg", "report", "--html", str(site),
               "--gates", str(folder / "gates"), "--db", db]  # fmt: skip
    began = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    [page] = (site / "tests").glob("*.html")
    print(f"report: {wall:.1f} s wall, peak RSS {peak:.0f} MB; test page {page.stat().st_size / 1e6:.2f} MB")
    print(f"chromium: the first screen's charts drawn at {render_ms(page):.0f} ms (median of 3)")


def seed_gates(gates: Path, n_gates: int) -> None:
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    declared = "".join(
        f"  train/metric_{g}:\n    steps: all\n    constraint: {{budget: both}}\n" for g in range(n_gates)
    )
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n{declared}")


def seed(db: str, gates: Path, n_gates: int, steps: int, nights: int) -> None:
    seed_gates(gates, n_gates)
    rng = random.Random(0)
    series = series_key(TEST)
    specs = [
        CoordinateSpec(f"{g:012x}", series, TEST, f"train/metric_{g}", '"all"', '{"budget":"both"}')
        for g in range(n_gates)
    ]
    start = datetime(2025, 1, 1, 2, 0, tzinfo=UTC)
    with Store.open(db, create=True) as store:
        for first in range(0, nights, BATCH):
            batch = []
            for n in range(first, min(first + BATCH, nights)):
                failed = n % 37 == 36  # now and then a night its gates failed
                run = RunInfo(
                    f"nightly-{n:04d}", TEST, series, {}, f"{n:040x}", "main", str(n), "1",
                    f"https://ci.example.com/runs/{n}", start + timedelta(days=n), not failed, "bench",
                )  # fmt: skip
                points = {
                    spec: PointColumns(
                        list(range(steps)),
                        [2.0 * (1.25 if failed else 1.0) + rng.gauss(0, 0.08) for _ in range(steps)],
                        ["fail" if failed else "pass"] * steps,
                        [2.0] * steps,
                        [0.8] * steps,
                        [40.0] * steps,
                        [0.08] * steps,
                        gate_trusted=not failed,
                    )
                    for spec in specs
                }
                batch.append((run, points))
            store.write_runs(batch)


def synthetic_page(n_gates: int, steps: int, nights: int) -> str:
    """The test page of `seed`'s history, built from nights in memory rather than read from a store."""
    from gatecfg.analysis.html import GateView, SeriesView, TestView, page_of_test
    from gatecfg.analysis.interactive import RunIndex, curve_chart, nights_chart
    from gatecfg.analysis.plots import Chart, Curve
    from gatecfg.analysis.series import Night
    from gatecfg.resolve import load_tree

    rng = random.Random(0)
    start = datetime(2025, 1, 1, 2, 0, tzinfo=UTC)
    dates = [start + timedelta(days=n) for n in range(nights)]
    runs = RunIndex.of((f"nightly-{n:04d}", f"{n:040x}", dates[n], f"https://ci.example.com/runs/{n}")
                       for n in range(nights))  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        gates = Path(scratch) / "gates"
        seed_gates(gates, n_gates)
        test = load_tree(gates).test(TEST)
    views = []
    for gate in test.gates:
        history = [
            Night(f"nightly-{n:04d}", f"{n:040x}", dates[n], 2.0 + rng.gauss(0, 0.08), True, False, "pass",
                  2.0, 0.8, 40.0, 0.08)
            for n in range(nights)
        ]  # fmt: skip
        curve = Curve(f"{gate.metric}: the latest run over its steps", gate.metric, list(range(steps)),
                      [2.0 + rng.gauss(0, 0.08) for _ in range(steps)], [2.0] * steps, [0.8] * steps,
                      [40.0] * steps, [0.08] * steps, ["pass"] * steps)  # fmt: skip
        chart = Chart(f"{gate.metric} @ {steps - 1}", gate.metric, history, None, {})
        markup = curve_chart(curve, runs.position[history[-1].run_id]) + nights_chart(chart, runs)
        views.append(GateView(gate, gate.metric, str(steps - 1), f"0-{steps - 1}", "pass", 2.0, None, 1, None,
                              markup))  # fmt: skip
    last = nights - 1
    series = SeriesView({}, nights, f"nightly-{last:04d}", f"{last:040x}", dates[last], True, views)
    return page_of_test(TestView(TEST, "gates/t.yaml", "tests/t.html", [series], runs), generated="bench")


def render_ms(page: Path) -> float:
    probe = page.with_name("timing-" + page.name)
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    browser = next(b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b))
    times = []
    for _ in range(3):
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000", "--dump-dom",
         probe.as_uri()],
            capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
        found = re.search(r'data-timing="([^"]*)"', done.stdout)
        assert found is not None, done.stderr[-2000:]
        timing = json.loads(found.group(1).replace("&quot;", '"'))
        times.append(timing["first"])
        print(f"  {timing['drawn']} charts drawn at the load event, {timing['first']:.0f} ms")
    return statistics.median(times)


if __name__ == "__main__":
    main()
