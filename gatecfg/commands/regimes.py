"""`gatecfg regimes`: the regimes of a gate's nightly series (level shifts, drifts, changes of spread) and
the commit that opened each."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from gatecfg.analysis.noise import MIN_REGIME
from gatecfg.analysis.regimes import Coincidence, Regime, Regimes, coincidences, find_regimes
from gatecfg.analysis.series import analysable, gate_nights, gate_of, pick_step, step_name, stored_steps
from gatecfg.band import fmt
from gatecfg.errors import EXIT_OK
from gatecfg.keys import series_key
from gatecfg.resolve import load_tree
from gatecfg.store.direct import DirectStore
from gatecfg.terminal import TextReport, stage

SHORT_SHA = 12
STEPS_LISTED = 3  # a metric shifting at more steps than this is summarised in the text table


def regimes(
    *,
    gates: Path,
    db: str,
    test: str,
    metric: str | None,
    step: int | None,
    scan_all: bool,
    labels: Mapping[str, str],
    fmt_: str,
) -> int:
    resolved = load_tree(gates).test(test)
    series = series_key(test, labels)
    chosen = [gate_of(resolved, metric)] if metric is not None else list(resolved.gates)
    found: list[Regimes] = []
    longest = 0  # nightlies of the longest coordinate scanned by --all
    # A SQLite store is read without SQLAlchemy (store/direct.py): a third of this process's CPU.
    with DirectStore.open(db) as store:
        if not scan_all:
            gate = chosen[0]
            with stage("gatecfg regimes", f"scanning {len(chosen)} gate(s)", total=len(chosen)):
                by_step = gate_nights(store, gate, series)
                if not by_step:
                    found.append(find_regimes(gate.metric, step if step is not None else -1, []))
                else:
                    picked = pick_step(gate, by_step, step)
                    found.append(find_regimes(gate.metric, picked, analysable(by_step[picked])))
        else:
            # Every coordinate is one more chance for noise to open a regime: each change is priced for
            # the number scanned, so that `--all` over thousands stays as quiet as one series. That number
            # is counted in a first pass, so that the scan holds one gate's nights at a time, never the
            # test's whole history (a fleet's test can hold tens of millions of values).
            scanned = 0
            with stage("gatecfg regimes", f"counting {len(chosen)} gate(s)", total=len(chosen)) as advance:
                for gate in chosen:
                    scanned += len(stored_steps(store, gate, series))
                    advance(1)
            with stage("gatecfg regimes", f"scanning {scanned} coordinate(s)", total=scanned) as advance:
                for gate in chosen:
                    for s, nights in gate_nights(store, gate, series).items():
                        one = find_regimes(gate.metric, s, analysable(nights), scanned)
                        longest = max(longest, len(one.nights))
                        # The summary needs the regimes, not the nights they were read from.
                        found.append(dataclasses.replace(one, nights=()))
                        advance(1)
    if scan_all:
        print(_all_json(test, labels, found) if fmt_ == "json" else _all_text(test, found, longest), end="")
    else:
        one = found[0]
        print(json.dumps(one.as_json(test), indent=2) if fmt_ == "json" else _one_text(test, one), end="")
    return EXIT_OK


def _sha(commit: str | None) -> str:
    return "-" if commit is None else commit[:SHORT_SHA]


def _shift(abs_: float | None, pct: float | None) -> str:
    if abs_ is None:
        return ""
    return f"{abs_:+.6g}" + ("" if pct is None else f" ({pct:+.1f}%)")


def _change(r: Regime) -> str:
    """What opened the regime, in its own terms: a shift, a slope, a noise ratio."""
    if r.kind == "drift" and r.slope is not None and r.drift_total is not None:
        return f"{r.slope:+.3g}/night, {r.drift_total:+.3g} in all"
    if r.kind == "spread" and r.spread_ratio is not None:
        return f"noise x{r.spread_ratio:.3g}"
    text = _shift(r.shift_abs, r.shift_pct)
    if r.spread_ratio is not None:
        text += f", noise x{r.spread_ratio:.3g}"
    return text


def _likely(r: Regime) -> str:
    """The nights around the start the data cannot tell apart from it."""
    if r.start_index == 0:
        return ""
    before, after = r.start_index - r.start_low, r.start_high - r.start_index
    return "exact" if before == after == 0 else f"-{before}/+{after}"


def _one_text(test: str, found: Regimes) -> str:
    out = TextReport()
    out.line(f"regimes of {found.metric} at step {step_name(found.step)}  ({test})")
    nights = found.nights
    if not nights:
        out.line("no stored nightly values: nothing to analyse yet")
        return out.text()
    detection = found.detection
    out.line(
        f"{len(nights)} nightlies, {nights[0].created_at:%Y-%m-%d} to {nights[-1].created_at:%Y-%m-%d}; "
        f"noise sigma {fmt(detection.sigma)}; {len(found.regimes)} regime(s)"
    )
    if detection.in_logs:
        out.line("read in logs: the noise grows in proportion to the level (figures in the metric's units)")
    if len(nights) < 2 * MIN_REGIME:
        out.line(f"fewer than {2 * MIN_REGIME} nightlies: too few to tell a shift from noise")
    if found.outlier_runs:
        out.line(f"outlier nights set aside while detecting: {', '.join(found.outlier_runs)}")
    rows: list[list[str]] = []
    no_code_change = False
    for number, r in enumerate(found.regimes, start=1):
        opened = _sha(r.first_commit)
        if r.same_commit_as_before:
            opened += " *"
            no_code_change = True
        rows.append(
            [
                str(number),
                r.first_run,
                r.last_run,
                f"{r.start_date:%Y-%m-%d}",
                f"{r.end_date:%Y-%m-%d}",
                opened,
                str(r.n),
                fmt(r.median),
                fmt(r.mean),
                fmt(r.spread),
                r.kind,
                _change(r),
                _likely(r),
            ]
        )
    columns = ("#", "first run", "last run", "from", "to", "opened by", "n", "median", "mean", "spread")
    out.table((*columns, "kind", "change vs previous", "likely start"), rows)
    if no_code_change:
        out.line("* the night before ran the same commit: the shift came without a code change")
    return out.text()


def _all_text(test: str, found: Sequence[Regimes], nights: int) -> str:
    out = TextReport()
    shifted = [r for r in found if len(r.regimes) > 1]
    together = coincidences(found)
    out.line(f"regimes of every gate of {test}")
    if not nights:
        out.line("no stored nightly values: nothing to analyse yet")
        return out.text()
    out.line(
        f"{len(found)} coordinate(s), up to {nights} nightlies each; {len(shifted)} shifted; "
        f"{len(together)} commit(s) opened a regime"
    )
    out.line(
        f"each change priced for the {len(found)} coordinate(s) scanned, so noise alone rarely opens one"
    )
    if not together:
        out.line("no shifts: every coordinate holds one level")
        return out.text()
    rows: list[list[str]] = []
    no_code_change = False
    for c in together:
        commit = _sha(c.commit)
        if c.same_commit_as_before:
            commit += " *"
            no_code_change = True
        rows.append([commit, c.first_run, f"{c.start_date:%Y-%m-%d}", str(len(c.metrics)), _shifts_text(c)])
    columns = ("commit", "first run", "date", "metrics", "shifts")
    out.table(columns, rows, title="shifts by the commit that opened them")
    if no_code_change:
        out.line("* the night before ran the same commit: the shift came without a code change")
    out.line("per coordinate: gatecfg regimes --test T --metric M [--step S]")
    return out.text()


def _shifts_text(c: Coincidence) -> str:
    by_metric: dict[str, list[tuple[int, float | None, str]]] = {}
    for s in c.shifts:
        by_metric.setdefault(s.metric, []).append((s.step, s.regime.shift_pct, s.regime.kind))
    parts: list[str] = []
    for metric, steps in by_metric.items():
        if len(steps) <= STEPS_LISTED:
            parts += [
                f"{metric}@{step_name(step)} {_pct(pct)}" + ("" if kind == "level" else f" ({kind})")
                for step, pct, kind in steps
            ]
            continue
        pcts = [pct for _, pct, _ in steps if pct is not None]
        median = statistics.median(pcts) if pcts else None
        span = f"{step_name(min(s for s, _, _ in steps))}-{step_name(max(s for s, _, _ in steps))}"
        parts.append(f"{metric} at {len(steps)} steps ({span}), median {_pct(median)}")
    return "; ".join(parts)


def _pct(pct: float | None) -> str:
    return "n/a" if pct is None else f"{pct:+.1f}%"


def _all_json(test: str, labels: Mapping[str, str], found: Sequence[Regimes]) -> str:
    document = {
        "test": test,
        "series": dict(labels),
        "coordinates": [
            {
                "metric": r.metric,
                "step": r.step,
                "read_in": r.read_in,
                "regimes": [x.as_json() for x in r.regimes],
            }
            for r in found
        ],
        "coincidences": [c.as_json() for c in coincidences(found)],
        "scanned": len(found),
        "shifted": sum(len(r.regimes) > 1 for r in found),
    }
    return json.dumps(document, indent=2) + "\n"
