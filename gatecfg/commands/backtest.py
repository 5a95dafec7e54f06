"""`gatecfg backtest`: replay stored nightly history under the gate tree (or a proposed one) and report
failures, false-alarm rates and estimates, the drift of the reference, and the runs that flip verdict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from gatecfg.analysis.backtest import Against, GateReport, Tally, backtest
from gatecfg.analysis.replayer import Shift, describe_policy, replayed_policy, stored_runs
from gatecfg.band import fmt
from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.gate_files import display_path
from gatecfg.gitrev import load_tree_at
from gatecfg.report.labels import series_text
from gatecfg.resolve import GateTree, ResolvedTest, load_tree
from gatecfg.store import Store
from gatecfg.terminal import TextReport, stage
from gatecfg.wording import plural

FLIPS_SHOWN = 10  # per row in the text report; JSON lists them all


def _checked(tree: GateTree) -> GateTree:
    if tree.problems:
        raise InputError(tree.problems)
    return tree


def backtest_command(
    *,
    db: str,
    gates: Path,
    base: str | None,
    test: str | None,
    metric: str | None,
    fmt_name: str,
    inject: Shift | None = None,
    per_step: bool = False,
) -> int:
    """`per_step`: the text report's row per step of an all-steps gate (else a row per gate)."""
    tree = _checked(load_tree(gates))
    before = _checked(load_tree_at(base, gates)) if base is not None else None
    tests = [tree.test(test)] if test is not None else [tree.tests[name] for name in sorted(tree.tests)]
    if metric is not None:
        tests = [t for t in tests if t.gate(metric) is not None]
        if not tests:
            raise InputError.at(
                Location(display_path(gates)),
                f"no gate declares `{metric}`" + (f" for `{test}`" if test else ""),
                hint="`gatecfg resolve` lists the declared gates",
            )
    reports: list[GateReport] = []
    runs_seen = 0
    with (
        Store.open(db) as store,
        stage("gatecfg backtest", f"replaying {plural(len(tests), 'test')}", total=len(tests)) as advance,
    ):
        for resolved in tests:
            runs_seen += _backtest_test(
                store, resolved, before=before, metric=metric, inject=inject, reports=reports
            )
            advance(1)
        url = store.url
    compared = "recorded" if base is None else base
    if fmt_name == "json":
        document = {
            "against": compared,
            # What each test's replay judged by: its nights as nightly `evaluate --write`s of this policy.
            "replayed": {t.test: replayed_policy(t.policy) for t in tests},
            "gates": [r.as_json() for r in reports],
        }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print(_text(reports, tests, runs_seen, url, compared, inject=inject, per_step=per_step), end="")
    return EXIT_OK


def _backtest_test(
    store: Store,
    resolved: ResolvedTest,
    *,
    before: GateTree | None,
    metric: str | None,
    inject: Shift | None,
    reports: list[GateReport],
) -> int:
    """Append the rows of one test's gates to `reports`; return how many stored runs the test has.

    Trust is per gate, so each gate is replayed from its own values alone (`backtest(metric=...)`): memory
    holds one gate's history at a time, never the test's, whatever the number of gates.
    """
    against: Against = "recorded"
    if before is not None:
        against = before.tests.get(resolved.test)
    by_series: dict[tuple[tuple[str, str], ...], list[GateReport]] = {}
    seen: set[str] = set()
    for gate in resolved.gates:
        if metric is not None and gate.metric != metric:
            continue
        # Flips against recorded verdicts read the statuses of the gate reported, and only those.
        runs = stored_runs(
            store, resolved.test, [gate.metric], statuses={gate.metric} if against == "recorded" else ()
        )
        seen.update(run.run_id for run in runs)
        for report in backtest(resolved, runs, against=against, metric=gate.metric, inject=inject):
            by_series.setdefault(tuple(sorted(report.labels.items())), []).append(report)
    # A test's rows read series by series, each series' gates in the order the test declares them.
    for rows in by_series.values():
        reports += rows
    return len(seen)


def _over_promise(report: GateReport) -> str:
    return (
        f"ITS RECORD BREAKS ITS PROMISE: it failed {_rate(report.tally)} of its nightlies, over twice its "
        f"false_alarm {report.promise:.1%}; its noise has heavier tails than the rule prices: set "
        "`min_change` to the smallest change that matters, or look at `gatecfg regimes` for spells"
    )


def _rate(tally: Tally) -> str:
    rate = tally.false_alarm_rate
    return "-" if rate is None else f"{rate:.1%}"


def _detects(report: GateReport) -> str:
    found = report.detection
    if found is None or found.rate is None:
        return "-"
    return f"{found.rate:.1%} ({found.detected}/{found.judged})"


def _drift(tally: Tally) -> str:
    drift = tally.drift
    if drift.first is None or drift.last is None:
        return "-"
    pct = drift.pct
    return f"{fmt(drift.first)} -> {fmt(drift.last)}" + ("" if pct is None else f" ({pct:+.1f}%)")


def _text(
    reports: Sequence[GateReport],
    tests: Sequence[ResolvedTest],
    runs: int,
    url: str,
    compared: str,
    *,
    inject: Shift | None,
    per_step: bool,
) -> str:
    out = TextReport()
    against = (
        "the verdicts recorded when each run was evaluated"
        if compared == "recorded"
        else f"the gates at {compared}"
    )
    out.line(f"gatecfg backtest: {plural(runs, 'stored run')} of {plural(len(tests), 'test')} from {url}")
    out.line(f"flips are measured against {against}")
    for replayed in sorted({describe_policy(t.policy) for t in tests}):
        out.line(f"each run replayed as its nightly `evaluate --write` would have judged it: {replayed}")
    if inject is not None:
        out.line(
            f"detects: each night judged again with {inject.text} injected (never stored), against the same "
            "baseline; the share that fails"
        )
    reports, hidden = _hidden(reports, per_step=per_step)
    by_test: dict[tuple[str, str], list[GateReport]] = {}
    for r in reports:
        labels = series_text(r.labels) or "none"
        by_test.setdefault((r.test, labels), []).append(r)
    for (name, labels), rows in by_test.items():
        resolved = next(t for t in tests if t.test == name)
        policy = resolved.policy
        other = rows[0].other[0]
        out.line(
            f"{name}  (labels {labels}; window {policy.window}, baseline {policy.baseline}, "
            f"reference {policy.reference})"
        )
        for r in rows:
            out.line("  " + _gate_line(r, other, inject), indent=4)
        for r in rows:
            if (r.test, r.coordinate) in hidden:
                count = hidden[(r.test, r.coordinate)]
                out.line(
                    f"  {r.metric}: {count} step{'s' * (count != 1)} failed or flipped on some night "
                    "(--steps lists them, --format json too)",
                    indent=4,
                )
            if not r.flips:
                continue
            step = "" if r.step is None else f" step {'last' if r.step == -1 else r.step}"
            flips = len(r.flips)
            out.line(f"  {r.metric}{step}: {plural(flips, 'run')} {'flips' if flips == 1 else 'flip'}")
            for flip in r.flips[:FLIPS_SHOWN]:
                commit = flip.commit or "-"
                out.line(f"    {flip.run_id}  commit {commit}  {flip.before} -> {flip.after}")
            if len(r.flips) > FLIPS_SHOWN:
                out.line(f"    ... {len(r.flips) - FLIPS_SHOWN} more (--format json lists all)")
    if not reports:
        out.line("no stored runs hold the values of these gates: nothing to replay")
    return out.text()


def _hidden(
    reports: Sequence[GateReport], *, per_step: bool
) -> tuple[Sequence[GateReport], dict[tuple[str, str], int]]:
    """The rows shown, and how many step rows are only counted per gate. A gate over all its steps has a
    row of its own (step None); without `per_step` its steps' rows are only counted: one 10,000-step gate
    would otherwise print thousands of them."""
    whole = {(r.test, r.coordinate) for r in reports if r.step is None}
    hidden: dict[tuple[str, str], int] = {}
    if per_step:
        return reports, hidden
    for r in reports:
        if r.step is not None and (r.test, r.coordinate) in whole:
            hidden[(r.test, r.coordinate)] = hidden.get((r.test, r.coordinate), 0) + 1
    return [r for r in reports if r.step is None or (r.test, r.coordinate) not in whole], hidden


def _gate_line(r: GateReport, other: str, inject: Shift | None) -> str:
    """A gate's (or step's) figures on one line, wrapped at words: eleven figures a row make no table
    that fits a CI log's 80 columns without folding words."""
    alt = r.other[1]
    where = "all steps" if r.step is None else f"step {'last' if r.step == -1 else r.step}"
    parts = [
        f"{r.metric}, {where}: {r.tally.replayed} replayed, {r.tally.judged} judged, "
        f"{r.tally.failures} failed ({_rate(r.tally)})",
        *([] if inject is None else [f"detects {inject.text}: {_detects(r)}"]),
        f"estimate {'-' if r.estimate is None else r.estimate.describe()}",
        f"ref {_drift(r.tally)}",
        f"with baseline {other}: {alt.failures} failed ({_rate(alt)}), ref {_drift(alt)}",
        *([_over_promise(r)] if r.over_promise else []),
        f"{len(r.flips)} flip{'s' * (len(r.flips) != 1)}",
    ]
    return "; ".join(parts)
