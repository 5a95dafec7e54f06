"""`gatecfg report --html`: a static, offline report that a browser renders with one chart per gate."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import run_cli
from test_import import EVAL, MERGES, REWARD, TEST, Scenario, import_scenario, sha, write_scenario
from test_regimes import _nights

from gatecfg.analysis.plots import Chart, render
from gatecfg.analysis.regimes import find_regimes

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((found for name in BROWSERS if (found := shutil.which(name))), None)
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no Chromium on PATH (Debian: apt-get install chromium); render test skipped"
)

# Appended to a copy of a page by the test only: once everything loaded, each chart records the size the
# browser laid it out at and whether its image decoded (an interactive chart is a canvas, drawn when it
# comes near the window: each is scrolled to and waited for).
PROBE = """<script>
window.addEventListener("load", async () => {
  for (const figure of document.querySelectorAll("figure.gate-plot")) {
    figure.scrollIntoView();
    for (let i = 0; i < 50 && figure.querySelector(".gate-chart:not([data-ready])"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const chart = figure.querySelector(".gate-chart canvas, img");
    const box = chart ? chart.getBoundingClientRect() : { width: 0, height: 0 };
    const decoded = !chart || chart.tagName !== "IMG" || (chart.complete && chart.naturalWidth > 0);
    figure.setAttribute("data-rendered", `${Math.round(box.width)}x${Math.round(box.height)}`);
    figure.setAttribute("data-decoded", String(decoded));
  }
});
</script>"""
RENDERED = re.compile(r'<figure class="gate-plot"[^>]*data-rendered="(\d+)x(\d+)" data-decoded="(\w+)"')


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, str]:
    root = tmp_path_factory.mktemp("report")
    found = write_scenario(root)
    db = f"sqlite:///{root / 'h.db'}"
    import_scenario(found, db)
    return found, db


def _report(found: Scenario, db: str, out: Path, *args: str) -> Path:
    result = run_cli("report", "--html", out, "--test", TEST, "--gates", found.gates, "--db", db, *args)
    assert result.code == 0, result.err
    assert "1 test(s), 2 chart(s)" in result.out
    return out


def _page(out: Path) -> Path:
    pages = sorted((out / "tests").glob("*.html"))
    assert len(pages) == 1
    return pages[0]


def _render(page: Path) -> str:
    probe = page.with_name("probe-" + page.name)  # beside the page, so relative image paths still resolve
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    assert BROWSER is not None
    done = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@needs_browser
@pytest.mark.parametrize("png", [False, True], ids=["inline-svg", "png"])
def test_chromium_renders_one_chart_per_gate(
    history: tuple[Scenario, str], tmp_path: Path, png: bool
) -> None:
    found, db = history
    out = _report(found, db, tmp_path / "site", *(["--png"] if png else []))
    dom = _render(_page(out))
    charts = RENDERED.findall(dom)
    assert len(charts) == 2  # one per gate of the gate file
    for width, height, decoded in charts:
        assert int(width) > 300
        assert int(height) > 100
        assert decoded == "true"
    metrics = re.findall(r'<figure class="gate-plot"[^>]*data-metric="([^"]+)"', dom)
    assert metrics == [EVAL, REWARD]


def test_the_report_loads_nothing_from_the_network(history: tuple[Scenario, str], tmp_path: Path) -> None:
    found, db = history
    for png in (False, True):
        out = _report(found, db, tmp_path / f"site-{png}", *(["--png"] if png else []))
        for page in [out / "index.html", _page(out)]:
            text = page.read_text()
            if png or page.name == "index.html":
                assert "<script" not in text
            else:  # the charts' scripts are inline: one file that works offline
                assert text.count("<script>") == 2
                assert not re.search(r"<script[^>]*\ssrc=", text)
                assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|importScripts)\b", text)
            assert "<link" not in text
            assert "@import" not in text
            for target in re.findall(r'(?:src|href)="([^"]*)"', text):
                assert not re.match(r"(?i)(https?:)?//", target), target
                if not target.startswith("#"):
                    assert (page.parent / target.split("#")[0]).exists(), target


def test_charts_mark_values_out_of_the_baseline_failures_limits_and_the_commits_that_opened_regimes(
    history: tuple[Scenario, str], tmp_path: Path
) -> None:
    found, db = history
    text = _page(_report(found, db, tmp_path / "site")).read_text()
    figures = [f.split("</figure>")[0] for f in text.split('<figure class="gate-plot"')[1:]]
    eval_chart = next(f for f in figures if f'data-metric="{EVAL}"' in f)
    assert "untrusted by hand" in eval_chart  # the crashed night, exported untrusted
    assert "out of the baseline (failed)" in eval_chart  # nights its gate kept out of its baseline
    assert "failed the gate" in eval_chart  # regime 3 sits below limits.min 0.50
    assert "limits.min 0.5" in eval_chart
    for merge in MERGES:
        assert sha(merge)[:7] in eval_chart
    reward_chart = next(f for f in figures if f'data-metric="{REWARD}"' in f)
    assert sha(MERGES[2])[:7] not in reward_chart  # the cache salt moved eval only


def test_the_index_lists_tests_and_gates_with_the_latest_status(
    history: tuple[Scenario, str], tmp_path: Path
) -> None:
    found, db = history
    out = _report(found, db, tmp_path / "site")
    index = (out / "index.html").read_text()
    page = _page(out).relative_to(out).as_posix()
    assert f'<a href="{page}">{TEST}</a>' in index
    assert f'<a href="{page}#s0-' in index
    assert index.count('<span class="status pass">pass</span>') >= 2
    assert f"latest <code>{found.run_id(348)}</code>" in index
    assert f"{sha(MERGES[3])[:12]} (2024-09-27)" in index  # the current regime's opening commit
    assert "false alarm" in index


def test_a_gate_without_history_still_gets_its_figure(tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    (gates / "t.yaml").write_text("test: t\ngates:\n  m:\n    steps: last\n    constraint: null\n")
    out = tmp_path / "site"
    db = f"sqlite:///{tmp_path / 'h.db'}"
    assert run_cli("db", "upgrade", "--db", db).code == 0  # an empty store: report never creates one
    result = run_cli("report", "--html", out, "--gates", gates, "--db", db)
    assert result.code == 0, result.err
    text = _page(out).read_text()
    assert text.count('<figure class="gate-plot"') == 1
    assert "m: no stored values yet" in text
    assert "no stored runs" in (out / "index.html").read_text()


def test_the_same_history_gives_the_same_report_byte_for_byte(
    history: tuple[Scenario, str], tmp_path: Path
) -> None:
    found, db = history
    first = _page(_report(found, db, tmp_path / "a")).read_bytes()
    second = _page(_report(found, db, tmp_path / "b")).read_bytes()
    assert first == second


def test_an_unknown_test_exits_2(history: tuple[Scenario, str], tmp_path: Path) -> None:
    found, db = history
    result = run_cli("report", "--html", tmp_path / "s", "--test", "nope", "--gates", found.gates, "--db", db)
    assert result.code == 2
    assert "no gate file declares `test: nope`" in result.err


@pytest.mark.parametrize("command", ["regimes", "rebaseline", "import", "report"])
def test_help_text_shows_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from gatecfg.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    shown = capsys.readouterr().out
    assert f"example:\n  gatecfg {command} " in shown


def test_a_drift_is_drawn_as_a_slope_and_labelled_with_its_kind() -> None:
    rng = np.random.default_rng(41)
    values = list(0.3 + 0.01 * (np.r_[np.zeros(80), np.arange(1, 201) * 10 / 200] + rng.normal(0, 1, 280)))
    nights = _nights(values, [f"c{i:03d}" for i in range(280)])
    found = find_regimes("m", -1, nights)
    assert [r.kind for r in found.regimes] == ["level", "drift"]
    svg = render(Chart("m", "salt", nights, found, {}), "svg").decode("utf-8")
    assert "drift (slope)" in svg  # the legend of the line drawn along the drift
    assert f" {found.regimes[1].first_commit} drift" in svg  # the label of the boundary that opened it
    flat = render(Chart("m", "salt", nights[:80], find_regimes("m", -1, nights[:80]), {}), "svg")
    assert b"drift (slope)" not in flat


# --------------------------------------------------------------------------- curves over steps (issue 26)

CURVE_PROBE = """<script>
window.addEventListener("load", async () => {
  while (!document.querySelector("figure.gate-plot .gate-chart.curve canvas")) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const curve = document.querySelector("figure.gate-plot .gate-chart.curve canvas");
  const box = curve.getBoundingClientRect();
  const edges = [box.left, box.top, box.width, box.height].map(Math.round);
  document.body.setAttribute("data-curve", edges.join(","));
});
</script>"""
FAIL_RGB = (0xC0, 0x39, 0x2B)  # plots.COLORS["fail"]


@pytest.fixture
def moved(tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The three gates of tests/test_verdict_wording.py, 12 clean nightlies and a latest nightly whose loss
    moved up 20% on steps 30-49, all written; the report's test page."""
    from test_verdict_wording import nightlies

    monkeypatch.chdir(tmp_path)
    gates = nightlies(tmp_path, db, nights=13, moved_last=True)
    result = run_cli("report", "--html", tmp_path / "site", "--gates", gates, "--db", db)
    assert result.code == 0, result.err
    return _page(tmp_path / "site")


def test_an_all_steps_gate_shows_the_latest_curve_on_each_steps_band_beside_a_chosen_step(
    moved: Path,
) -> None:
    text = moved.read_text()
    figures = text.split('<figure class="gate-plot"')[1:]
    loss = next(f for f in figures if 'data-metric="train/loss"' in f)

    curve, nights = loss.split('<div class="chart-box">')[1:3]
    assert 'class="gate-chart curve"' in curve
    legends = ("normal noise: reference ± 2 spreads", "reference (usual value)", "latest run", "failing step")
    for legend in legends:
        assert legend in curve
    assert "train/loss @ 30" in nights  # the per-night chart of the first failing step
    assert "train/loss at step 30 (stored steps 0-49)" in loss
    accuracy = next(f for f in figures if 'data-metric="eval/accuracy"' in f)
    assert "gate-chart curve" not in accuracy  # one step: no curve over steps


@needs_browser
def test_chromium_draws_the_failing_steps_on_the_curve(moved: Path, tmp_path: Path) -> None:
    from PIL import Image

    probe = moved.with_name("probe-" + moved.name)
    probe.write_text(moved.read_text().replace("</body>", CURVE_PROBE + "</body>"))
    assert BROWSER is not None
    size = "--window-size=1400,1600"
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", size, "--virtual-time-budget=10000",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-curve="(\d+),(\d+),(\d+),(\d+)"', dom.stdout)
    assert found is not None
    left, top, width, height = map(int, found.groups())
    shot = tmp_path / "page.png"
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", size, "--hide-scrollbars",
         "--virtual-time-budget=10000", f"--screenshot={shot}", moved.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert width > 300
    assert height > 100
    image = Image.open(shot).convert("RGB").crop((left, top, left + width, top + height))
    # The failing steps are the right part of the plot (steps 30-49 of 0-49): red marks there, none on
    # the left, where no step moved.
    plot = image.crop((0, 0, int(width * 0.78), height))  # the legend sits on the right

    def red(region: Image.Image) -> int:
        pixels = np.asarray(region, dtype=np.int16).reshape(-1, 3)
        return int((np.abs(pixels - np.array(FAIL_RGB)) < 40).all(axis=1).sum())

    half = plot.width // 2
    assert red(plot.crop((half, 0, plot.width, height))) > 200
    assert red(plot.crop((0, 0, int(plot.width * 0.45), height))) == 0


def test_a_nights_date_labels_never_repeat() -> None:
    values = [0.5 + 0.01 * i for i in range(30)]
    nights = _nights(values, [f"c{i:03d}" for i in range(30)])
    # Thirty nights in one day, a minute apart: dates alone would repeat.
    same_day = [
        dataclasses.replace(n, created_at=datetime(2026, 12, 1, 2, i, tzinfo=UTC))
        for i, n in enumerate(nights)
    ]

    svg = render(Chart("m", "salt", same_day, None, {}), "svg").decode("utf-8")

    labels = re.findall(r">(2026-12-01[^<]*)<", svg)
    assert len(labels) >= 5
    assert len(set(labels)) == len(labels)
    assert all(" 02:" in label for label in labels)


# --------------------------------------------------------------------------- charts to explore (issue 38)

EXPLORED = "tests/e2e/explored.py"
GRAD, SCORE = "train/grad_norm", "eval/score"
NIGHTS, GRAD_STEPS, MOVED_STEPS = 25, 40, range(20, 30)
LONE_HI = 40.0  # where a grad_norm step near 2 fails alone: far beyond where its nights sit


def _url(night: int) -> str | None:
    if night == 3:
        return None  # a run written without a CI URL
    if night == 4:
        return "javascript:alert(1)"  # a stored URL that is no web address never becomes a link
    return f"https://ci.example.com/runs/{1000 + night}"


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A budget gate near 2 over 40 steps (spread 0.08, failing alone beyond 40) and a band gate with a
    limit, 25 nights written straight to a store, the latest +25% on steps 20-29 and failed; the page."""
    from gatecfg.keys import series_key
    from gatecfg.store import CoordinateSpec, PointColumns, RunInfo, Store

    root = tmp_path_factory.mktemp("explored")
    gates = root / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    (gates / "t.yaml").write_text(
        f"test: {EXPLORED}\ngates:\n  {GRAD}:\n    steps: all\n    constraint: {{budget: both}}\n"
        f"  {SCORE}:\n    steps: last\n    constraint: {{rel_down: 0.1}}\n    limits: {{min: 0.5}}\n"
    )
    series = series_key(EXPLORED)
    grad = CoordinateSpec("c0ffee000001", series, EXPLORED, GRAD, '"all"', '{"budget":"both"}')
    score = CoordinateSpec("c0ffee000002", series, EXPLORED, SCORE, '"last"', '{"rel_down":0.1}')
    rng = np.random.default_rng(38)
    db = f"sqlite:///{root / 'h.db'}"
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    with Store.open(db, check_schema=False) as store:
        store.upgrade()
        for night in range(NIGHTS):
            values = 2.0 * np.exp(rng.normal(0, 0.04, GRAD_STEPS))
            latest = night == NIGHTS - 1
            if latest:
                values[list(MOVED_STEPS)] *= 1.25
            judged = night >= 2
            statuses = ["fail" if latest and s in MOVED_STEPS else "pass" if judged else "cold"
                        for s in range(GRAD_STEPS)]  # fmt: skip
            grads = PointColumns(
                list(range(GRAD_STEPS)), [float(v) for v in values], statuses,  # type: ignore[arg-type]
                [2.0 if judged else None] * GRAD_STEPS, [0.8 if judged else None] * GRAD_STEPS,
                [LONE_HI if judged else None] * GRAD_STEPS, [0.08 if judged else None] * GRAD_STEPS,
                gate_trusted=not latest,
            )  # fmt: skip
            value = 0.62 + float(rng.normal(0, 0.01))
            scores = PointColumns(
                [-1], [value], ["pass" if judged else "cold"], [0.62 if judged else None],
                [0.558 if judged else None], [None], [None], gate_trusted=True,
            )  # fmt: skip
            run = RunInfo(
                f"nightly-{night:02d}", EXPLORED, series, {}, f"{night:02d}" + "cafe" * 9 + "00", "main",
                str(1000 + night), "1", _url(night), start + timedelta(days=night), not latest, "test",
            )  # fmt: skip
            assert store.write_run(run, {grad: grads, score: scores})
    result = run_cli("report", "--html", root / "site", "--gates", gates, "--db", db)
    assert result.code == 0, result.err
    return _page(root / "site")


def _specs(page: Path, metric: str) -> dict[str, dict[str, Any]]:
    """The charts of a gate's figure by kind ("steps": the latest run over its steps; "nights")."""
    figure = page.read_text().split(f'data-metric="{metric}"')[1].split("</figure>")[0]
    found = re.findall(r'data-kind="(\w+)"><script type="application/json">(.*?)</script>', figure)
    return {kind: json.loads(text) for kind, text in found}


def test_a_budget_gate_is_drawn_on_its_normal_noise_with_the_lone_step_edges_apart(explored: Path) -> None:
    for kind, spec in _specs(explored, GRAD).items():
        low, high = spec["y"]
        # The view is what the values and their normal noise need (2 +- 25%), never the edge at 40.
        assert 1.2 < low < 1.9, kind
        assert 2.5 < high < 3.5, kind
        judged = [i for i, ref in enumerate(spec["ref"]) if ref is not None]
        assert judged
        for i in judged:
            assert spec["band"][0][i] == pytest.approx(2.0 - 2 * 0.08)
            assert spec["band"][1][i] == pytest.approx(2.0 + 2 * 0.08)
        assert [max(e for e in side if e is not None) for side in spec["lone"]] == [0.8, LONE_HI]
    text = explored.read_text()
    assert "fails alone beyond (one step): off the chart" in text  # said in the key, not drawn as band


def test_a_band_gate_is_drawn_on_its_own_band_and_a_cold_or_tracked_value_on_none() -> None:
    from test_regimes import _nights

    from gatecfg.analysis.interactive import RunIndex, nights_chart

    nights = [
        dataclasses.replace(n, ref=None if i < 2 else 0.62, lo=None if i < 2 else 0.558)
        for i, n in enumerate(_nights([0.62, 0.61, 0.63, 0.6, 0.5]))
    ]
    runs = RunIndex.of((n.run_id, n.commit, n.created_at, None) for n in nights)
    spec = json.loads(
        re.findall(
            r'<script type="application/json">(.*?)</script>',
            nights_chart(Chart("m", "s", nights, None, {"min": 0.5}), runs),
        )[0]
    )
    low, high = spec["y"]
    assert spec["band"][0] == [None, None, 0.558, 0.558, 0.558]
    assert spec["band"][1] == [None, None, high, high, high]  # the open side runs to the chart's edge
    assert spec["lone"] == []
    assert low < 0.5  # the limit is in view


def test_no_band_dips_below_zero_for_a_metric_that_never_went_below_it() -> None:
    from gatecfg.analysis import bands

    # A KL near 0.05 whose spread is as large: ref - 2 sd is -0.05, and its lone low edge -0.3.
    drawn = bands.drawn(0.05, -0.3, 1.5, 0.05, floor=bands.floor_of([0.02, 0.07, 0.0]))
    assert (drawn.lo, drawn.hi) == (0.0, pytest.approx(0.15))
    assert drawn.lone_lo is None  # an edge a positive metric cannot reach is not drawn
    assert drawn.lone_hi == 1.5
    assert bands.view([0.0, 0.02, 0.15], floor=0.0)[0] == 0.0
    signed = bands.drawn(0.05, -0.3, 1.5, 0.05, floor=bands.floor_of([0.02, -0.01]))
    assert signed.lo == pytest.approx(-0.05)  # a metric that went below zero keeps its band there


# Driven by the test only: hover the latest night of a chart, click it, then zoom, pan and reset; each
# result lands in an attribute of <body> that --dump-dom prints. uPlot applies a new scale in a microtask:
# each move is read after a tick.
EXPLORE_PROBE = """<script>
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
window.addEventListener("load", async () => {
  const opened = [];
  window.open = (...args) => { opened.push(args.join(" ")); return null; };
  const result = {};
  const figure = document.querySelector('figure[data-metric="METRIC"]');
  const host = figure.querySelector('.gate-chart[data-kind="nights"]');
  host.scrollIntoView();  // a chart is drawn when it comes near the window
  while (!host.gatecfgChart) await tick();
  const u = host.gatecfgChart;
  const box = u.over.getBoundingClientRect();
  const at = (i) => [box.left + u.valToPos(u.data[0][i], "x"), box.top + box.height / 2];
  const fire = (target, type, [x, y], extra = {}) =>
    target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true, ...extra }));
  const hover = (i) => {
    fire(u.over, "mouseenter", at(i));
    fire(u.over, "mousemove", at(i), { movementX: 1 });
    return host.querySelector(".tip");
  };
  const click = (i) => ["mousedown", "mouseup", "click"].forEach((type) => fire(u.over, type, at(i)));
  for (const i of [NIGHT, 3, 4]) {
    const tip = hover(i);
    click(i);
    result[`tip${i}`] = tip.hidden ? "" : [...tip.children].map((row) => row.textContent).join(" | ");
    result[`opened${i}`] = opened.splice(0).join(",");
  }
  const full = [u.scales.x.min, u.scales.x.max];
  fire(u.over, "mousedown", at(5));
  fire(u.over, "mousemove", at(15), { movementX: 1 });
  fire(document, "mouseup", at(15));
  await tick();
  const zoomed = [u.scales.x.min, u.scales.x.max];
  const [from, to] = [at(8), at(6)];  // positions in the zoomed view
  fire(u.over, "mousedown", from, { shiftKey: true });
  fire(document, "mousemove", to, { shiftKey: true });
  fire(document, "mouseup", to);
  await tick();
  const panned = [u.scales.x.min, u.scales.x.max];
  const [wx, wy] = at(10);
  const wheel = { deltaY: -100, ctrlKey: true, clientX: wx, clientY: wy, bubbles: true, cancelable: true };
  u.over.dispatchEvent(new WheelEvent("wheel", wheel));
  await tick();
  const wheeled = [u.scales.x.min, u.scales.x.max];
  fire(u.over, "dblclick", at(10));
  await tick();
  const reset = [u.scales.x.min, u.scales.x.max];
  Object.assign(result, { full, zoomed, panned, wheeled, reset });
  let smallest = 1000;
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (own && el.offsetParent !== null) smallest = Math.min(smallest, size);
  }
  result.smallest = smallest;
  document.body.setAttribute("data-result", JSON.stringify(result));
});
</script>"""


def _explore(page: Path, metric: str, night: int) -> dict[str, Any]:
    probe = page.with_name("explore-" + page.name)
    script = EXPLORE_PROBE.replace("METRIC", metric).replace("NIGHT", str(night))
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    assert BROWSER is not None
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1600",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-result="([^"]*)"', done.stdout)
    assert found is not None, done.stdout[-2000:]
    import html

    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


@needs_browser
def test_hovering_a_night_shows_its_run_and_why_it_is_out_of_the_baseline_and_a_click_opens_its_ci_run(
    explored: Path,
) -> None:
    result = _explore(explored, GRAD, NIGHTS - 1)
    latest = result[f"tip{NIGHTS - 1}"]
    for shown in (
        f"run nightly-{NIGHTS - 1}",
        f"commit {NIGHTS - 1}cafe",
        f"date 2026-11-{NIGHTS:02d} 02:00 UTC",
        "vs 2.000 ± 0.080",
        "status fail",
        "baseline OUT (failed)",
        "fails alone 0.800 to 40.000",
        "click: open the CI run",
    ):
        assert shown in latest, (shown, latest)
    assert result[f"opened{NIGHTS - 1}"] == f"https://ci.example.com/runs/{1000 + NIGHTS - 1} _blank noopener"
    assert "baseline in" in result["tip3"]
    assert result["opened3"] == ""  # no CI URL stored for that run
    assert "click" not in result["tip4"]
    assert result["opened4"] == ""  # `javascript:` is no link


@needs_browser
def test_a_long_history_zooms_pans_and_resets_and_no_text_is_smaller_than_12_px(explored: Path) -> None:
    result = _explore(explored, SCORE, NIGHTS - 1)
    moves = ("full", "zoomed", "panned", "wheeled", "reset")
    full, zoomed, panned, wheeled, reset = (result[k] for k in moves)
    assert full == [-0.5, NIGHTS - 0.5]
    assert 4 < zoomed[0] < 6  # dragged over nights 5 to 15
    assert 14 < zoomed[1] < 16
    span = zoomed[1] - zoomed[0]
    assert panned[1] - panned[0] == pytest.approx(span)  # a pan keeps the span ...
    assert panned[0] == pytest.approx(zoomed[0] + 2, abs=0.2)  # ... and moved by the two nights dragged
    assert wheeled[1] - wheeled[0] < span  # ctrl+wheel up zooms in
    assert reset == full
    assert result["smallest"] >= 12
    assert "status pass" in result[f"tip{NIGHTS - 1}"]
    assert "band 0.558 to inf" in result[f"tip{NIGHTS - 1}"]
