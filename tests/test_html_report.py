"""`gatecfg report --html`: a static, offline report that a browser renders with one chart per gate."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

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

# Appended to a copy of a page by the test only (the report has no script): once everything loaded, each
# chart records the size the browser laid it out at and whether its image decoded.
PROBE = """<script>
window.addEventListener("load", () => {
  for (const figure of document.querySelectorAll("figure.gate-plot")) {
    const chart = figure.querySelector("svg, img");
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
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probe.as_uri()],
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
            assert "<script" not in text
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
    figures = text.split('<figure class="gate-plot"')[1:]
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
window.addEventListener("load", () => {
  const curve = document.querySelector("figure.gate-plot svg.curve");
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

    curve, nights = loss.split("</svg>")[:2]
    assert '<svg class="curve"' in curve
    for legend in ("band of each step", "reference (usual value)", "latest run", "failing step"):
        assert legend in curve
    assert "train/loss @ 30" in nights  # the per-night chart of the first failing step
    assert "train/loss at step 30 (stored steps 0-49)" in loss
    accuracy = next(f for f in figures if 'data-metric="eval/accuracy"' in f)
    assert '<svg class="curve"' not in accuracy  # one step: no curve over steps


@needs_browser
def test_chromium_draws_the_failing_steps_on_the_curve(moved: Path, tmp_path: Path) -> None:
    from PIL import Image

    probe = moved.with_name("probe-" + moved.name)
    probe.write_text(moved.read_text().replace("</body>", CURVE_PROBE + "</body>"))
    assert BROWSER is not None
    size = "--window-size=1400,1600"
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", size, "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-curve="(\d+),(\d+),(\d+),(\d+)"', dom.stdout)
    assert found is not None
    left, top, width, height = map(int, found.groups())
    shot = tmp_path / "page.png"
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", size, "--hide-scrollbars",
         f"--screenshot={shot}", moved.as_uri()],
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
