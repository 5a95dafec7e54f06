"""`gatecfg report --html DIR`: the report of every test's gates, with an interactive chart per gate
(static PNG charts with `--png`)."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from gatecfg import __version__, alerts_html
from gatecfg.analysis.false_alarm import Estimate, current_estimates
from gatecfg.analysis.html import GateView, SeriesView, TestView, index_page, page_of_test
from gatecfg.analysis.interactive import RunIndex, curve_chart, nights_chart
from gatecfg.analysis.plots import Chart, Curve, render
from gatecfg.analysis.regimes import Regimes, find_regimes
from gatecfg.analysis.series import Night, analysable, nights_of, step_name
from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.escape import html_text
from gatecfg.following import broken_promise
from gatecfg.gate_files import display_path
from gatecfg.keys import series_key
from gatecfg.resolve import ResolvedGate, ResolvedTest, load_tree
from gatecfg.select import step_ranges
from gatecfg.store import HistoryRow, RunRow, Store
from gatecfg.terminal import stage
from gatecfg.verdicts import STATUS_ORDER

PAGES = "tests"
SLUG = re.compile(r"[^A-Za-z0-9._-]+")
SLUG_CHARS = 60


def report(*, gates: Path, db: str, out: Path, test: str | None, png: bool) -> int:
    tree = load_tree(gates)
    if tree.problems:
        raise InputError(tree.problems)
    tests = [tree.test(test)] if test is not None else [tree.tests[name] for name in sorted(tree.tests)]
    writer = _Writer(out)
    views: list[TestView] = []
    noisy: list[str] = []
    with (
        Store.open(db) as store,
        stage("gatecfg report", f"charting {len(tests)} test(s)", total=len(tests)) as advance,
    ):
        for resolved in tests:
            views.append(_test_view(store, resolved, writer, png=png, noisy=noisy))
            advance(1)
        url = store.url
        alerts = alerts_html.section(store, test=test)
    for view in views:
        writer.write(view.page, page_of_test(view, generated=__version__))
    writer.write("index.html", index_page(views, store=url, generated=__version__, alerts=alerts))
    charts = sum(len(s.gates) for v in views for s in v.series)
    print(f"wrote {display_path(out / 'index.html')}: {len(views)} test(s), {charts} chart(s)")
    for line in noisy:
        print(f"NOISY GATE: {line}")
    return EXIT_OK


class _Writer:
    """Files of the report, each replaced atomically so that a reader never sees half a page."""

    def __init__(self, root: Path) -> None:
        self.root = root
        try:
            (root / PAGES).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError.at(
                Location(display_path(root)), f"cannot create the report folder: {exc.strerror}"
            ) from None

    def write(self, relative: str, content: str | bytes) -> None:
        path = self.root / relative
        data = content.encode("utf-8") if isinstance(content, str) else content
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            # mkstemp makes the file private; a report is meant to be served and read by others.
            os.chmod(tmp, 0o644)
            Path(tmp).replace(path)
        except OSError as exc:
            raise InputError.at(
                Location(display_path(path)), f"cannot write the report: {exc.strerror}"
            ) from None


def _slug(text: str) -> str:
    """A file-name-safe name: the trailing path components that fit in SLUG_CHARS, whole (the last one
    at least, cut from the left if it alone is longer), and a digest of the full text that keeps it unique."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    parts = [SLUG.sub("_", part).strip("_") for part in text.split("/")]
    kept = parts[-1][-SLUG_CHARS:]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(kept) > SLUG_CHARS:
            break
        kept = f"{part}_{kept}" if part else kept
    return f"{kept}-{digest}"


def _test_view(store: Store, test: ResolvedTest, writer: _Writer, *, png: bool, noisy: list[str]) -> TestView:
    slug = _slug(test.test)
    page = f"{PAGES}/{slug}.html"
    runs = list(reversed(store.runs(test=test.test)))
    listed = ((r.run.run_id, r.run.commit, r.run.created_at, r.run.url) for r in runs)
    index = None if png else RunIndex.of(listed)
    by_series: dict[str, list[RunRow]] = {}
    for row in runs:
        by_series.setdefault(row.run.series_key, []).append(row)
    if not by_series:
        by_series[series_key(test.test)] = []
    series_views: list[SeriesView] = []
    for number, (series, rows) in enumerate(sorted(by_series.items())):
        estimates = current_estimates(store, test, series)
        latest = rows[-1] if rows else None
        gates = []
        for gate in test.gates:
            # One gate's history at a time: a long one is 300,000 values a gate.
            history = store.history(test=test.test, metric=gate.metric, series_key=series)
            line = _noisy(gate, history, test)
            if line is not None:
                noisy.append(line)
            gates.append(
                _gate_view(
                    gate,
                    nights_of(history, gate.steps_key),
                    latest,
                    estimates.get(gate.metric),
                    writer,
                    runs=index,
                    anchor=f"s{number}-{_slug(gate.metric)}",
                    image_dir=f"{PAGES}/{slug}",
                    salt=f"{series}|{gate.metric}|{gate.steps_key}",
                    # The page charts every gate of every series: its regime columns are one scan of them.
                    coordinates=len(test.gates) * len(by_series),
                )
            )
        series_views.append(
            SeriesView(
                labels=dict(latest.run.labels) if latest else {},
                runs=len(rows),
                latest_run=latest.run.run_id if latest else None,
                latest_commit=latest.run.commit if latest else None,
                latest_date=latest.run.created_at if latest else None,
                latest_trusted=latest.trusted if latest else None,
                gates=gates,
            )
        )
    return TestView(test=test.test, file=test.file, page=page, series=series_views, runs=index)


def _gate_view(
    gate: ResolvedGate,
    by_step: dict[int, list[Night]],
    latest: RunRow | None,
    estimate: Estimate | None,
    writer: _Writer,
    *,
    runs: RunIndex | None,
    anchor: str,
    image_dir: str,
    salt: str,
    coordinates: int,
) -> GateView:
    """The gate's view; its charts interactive against `runs`, or PNG files beside the page without."""
    latest_id = latest.run.run_id if latest else None
    # The latest run at each step of a gate over many steps: its curve is charted on each step's band.
    tonight = {step: n for step, ns in sorted(by_step.items()) for n in ns if n.run_id == latest_id}
    failing = [step for step, n in tonight.items() if n.status in ("fail", "error")]
    # The nights of one step beside it: the latest run's first failing step, else the last stored step
    # (the end of training shows most).
    step = failing[0] if failing else max(by_step) if by_step else None
    nights = by_step.get(step, []) if step is not None else []
    found = find_regimes(gate.metric, step, analysable(nights), coordinates) if step is not None else None
    statuses = [n.status for ns in by_step.values() for n in ns if n.run_id == latest_id]
    status = min(statuses, key=STATUS_ORDER.__getitem__) if statuses else "none"
    value = next((n.value for n in reversed(nights) if n.run_id == latest_id), None)
    title = f"{gate.metric} @ {step_name(step)}" if step is not None else gate.metric
    chart = Chart(
        title=title,
        salt=salt,
        nights=nights,
        regimes=found,
        limits={} if gate.limits is None else gate.limits.literal(),
    )
    if runs is None:
        name = f"{image_dir}/{_slug(anchor)}.png"
        writer.write(name, render(chart, "png"))
        src = name.split("/", 1)[1]  # the page sits in PAGES/, beside the image folder
        markup = f'<img src="{html_text(src)}" alt="{html_text(title)}" width="900" height="340">'
    else:
        markup = nights_chart(chart, runs)
    if len(tonight) > 1:
        assert latest_id is not None  # the latest run holds `tonight`'s values
        markup = (
            _curve(gate, tonight, latest_id, writer, runs=runs, anchor=anchor, image_dir=image_dir, salt=salt)
            + markup
        )
    return GateView(
        gate=gate,
        anchor=anchor,
        step_shown=step_name(step) if step is not None else None,
        steps_stored=step_ranges(by_step),
        status=status,
        value=value,
        estimate=estimate,
        regimes=len(found.regimes) if found else 0,
        last_shift=_last_shift(found),
        chart=markup,
    )


def _curve(
    gate: ResolvedGate,
    tonight: dict[int, Night],
    latest_id: str,
    writer: _Writer,
    *,
    runs: RunIndex | None,
    anchor: str,
    image_dir: str,
    salt: str,
) -> str:
    """The latest run's curve over its steps: interactive against `runs`, else a PNG file beside the page."""
    curve = Curve(
        title=f"{gate.metric}: the latest run over its steps",
        salt=f"{salt}|curve",
        steps=list(tonight),
        values=[n.value for n in tonight.values()],
        refs=[n.ref for n in tonight.values()],
        los=[n.lo for n in tonight.values()],
        his=[n.hi for n in tonight.values()],
        sds=[n.sd for n in tonight.values()],
        statuses=[n.status for n in tonight.values()],
    )
    if runs is not None:
        return curve_chart(curve, runs.position[latest_id])
    name = f"{image_dir}/{_slug(anchor)}-steps.png"
    writer.write(name, render(curve, "png"))
    alt = html_text(curve.title)
    src = html_text(name.split("/", 1)[1])
    return f'<img class="curve" src="{src}" alt="{alt}" width="900" height="340">'


def _last_shift(found: Regimes | None) -> str | None:
    """Where the current regime started (its commit, date and kind), if not at the first night."""
    current = found.regimes[-1] if found and found.regimes else None
    return (
        f"{(current.first_commit or current.first_run)[:12]} ({current.start_date:%Y-%m-%d}"
        + ("" if current.kind == "level" else f", {current.kind}")
        + ")"
        if current is not None and current.start_index > 0
        else None
    )


def _noisy(gate: ResolvedGate, rows: list[HistoryRow], test: ResolvedTest) -> str | None:
    """The NOISY GATE line `evaluate` gives a failing budget gate, from the gate's newest stored nightlies
    (as many as evaluate reads: the window and the shift and stale horizons, tonight's included there);
    nights untrusted by hand are known-bad and not counted."""
    policy = test.policy
    depth = 1 + policy.window + max(policy.accept_shift_after or 0, policy.stale_after)
    failed: dict[str, bool] = {}
    for night in sorted(
        (n for found in nights_of(rows, gate.steps_key).values() for n in found),
        key=lambda n: n.created_at,
        reverse=True,
    ):
        if night.untrusted_by_hand:
            continue
        if night.run_id in failed or len(failed) < depth:
            failed[night.run_id] = failed.get(night.run_id, False) or night.status == "fail"
    return broken_promise(gate, sum(failed.values()), len(failed))
