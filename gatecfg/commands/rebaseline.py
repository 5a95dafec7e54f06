"""`gatecfg rebaseline`: propose absolute limits from the current regime, and with --write set them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from gatecfg.analysis.limits_edit import LimitsEdit, flow, write_limits
from gatecfg.analysis.rebaseline import (
    Method,
    Proposal,
    Window,
    current_regime,
    newest,
    per_run,
    propose,
    sides,
    since_commit,
    since_date,
)
from gatecfg.analysis.series import Night, gate_nights, gate_of
from gatecfg.band import fmt
from gatecfg.dates import parse_date
from gatecfg.errors import EXIT_OK, InputError, Location
from gatecfg.keys import series_key
from gatecfg.resolve import ResolvedGate, load_tree
from gatecfg.store import Store
from gatecfg.wording import plural

GIT_TIMEOUT_S = 30
SHORT_SHA = 12
COMMENT_SHA = 7  # the gate file's evidence line should fit an editor's width


def rebaseline(
    *,
    gates: Path,
    db: str,
    test: str,
    metric: str | None,
    since: str | None,
    last: int | None,
    method: Method,
    allowance: float,
    write: bool,
    labels: Mapping[str, str],
    fmt_: str,
) -> int:
    resolved = load_tree(gates).test(test)
    series = series_key(test, labels)
    chosen = [gate_of(resolved, metric)] if metric is not None else [g for g in resolved.gates if g.gated]
    proposals: list[Proposal] = []
    notes: list[str] = []
    with Store.open(db) as store:
        for gate in chosen:
            by_step = gate_nights(store, gate, series)
            runs = per_run(by_step)
            if not runs:
                notes.append(f"{gate.metric}: no stored values for this series yet")
                continue
            window = _window(gate, runs, since=since, last=last)
            if not window.run_ids:
                notes.append(f"{gate.metric}: no runs in {window.source}")
                continue
            if window.refusal is not None:
                notes.append(f"{gate.metric}: {window.refusal}")
                continue
            # Without --metric, limits are proposed where the gate has them; a band gate without limits
            # gets its band check only. Naming the metric asks for limits even where it has none.
            wanted = sides(gate) if metric is not None or gate.limits is not None else ()
            proposal = propose(
                gate,
                by_step,
                window,
                method=method,
                allowance=allowance,
                policy=resolved.policy,
                wanted=wanted,
            )
            if proposal is not None:
                proposals.append(proposal)
    edits = [
        LimitsEdit(p.gate.metric, p.new, _evidence(p))
        for p in proposals
        if p.new and dict(p.new) != dict(p.old)
    ]
    if write and edits:
        write_limits(Path(resolved.file), resolved.file, gates, test, edits)
    if fmt_ == "json":
        document = {
            "test": test,
            "file": resolved.file,
            "written": write and bool(edits),
            "gates": [p.as_json() for p in proposals],
            "notes": notes,
        }
        print(json.dumps(document, indent=2))
    else:
        print(
            _text(test, resolved.file, proposals, notes, written=write and bool(edits), write=write), end=""
        )
    return EXIT_OK


def _window(gate: ResolvedGate, runs: Sequence[Night], *, since: str | None, last: int | None) -> Window:
    if last is not None:
        return newest(runs, last)
    if since is None:
        return current_regime(gate.metric, runs)
    found = since_commit(runs, since, None, _contains)
    if found is not None:
        return found
    try:
        start = parse_date(since, Location("--since"))
    except InputError:
        pass
    else:
        return since_date(runs, start, since)
    full = _rev_parse(since)
    found = None if full is None else since_commit(runs, since, full, _contains)
    if found is None:
        what = (
            f"git resolves it to {full[:SHORT_SHA]}, but"
            if full
            else "it is not a date, git does not know it, and"
        )
        raise InputError.at(
            "--since",
            f"`{since}`: {what} no stored run of {gate.metric} ran it or a commit containing it",
            hint="pass a commit a stored run ran (see `gatecfg regimes`), or a date such as 2024-05-01",
        )
    return found


def _rev_parse(rev: str) -> str | None:
    if rev.startswith("-"):
        return None  # never let a value pose as a git option
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def _contains(ancestor: str, commit: str) -> bool:
    try:
        done = subprocess.run(
            ["git", "merge-base", "--is-ancestor", ancestor, commit],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _sha(commit: str | None, length: int = SHORT_SHA) -> str:
    return "-" if commit is None else commit[:length]


def _evidence(p: Proposal) -> str:
    spread = "min/max" if p.method == "minmax" else "p5/p95"
    return (
        f"{datetime.now(UTC):%Y-%m-%d}: {plural(p.n_runs, 'run')} {p.first_run}..{p.last_run} "
        f"({_sha(p.first_commit, COMMENT_SHA)}..{_sha(p.last_commit, COMMENT_SHA)}), "
        f"{spread} {p.low:.4g}/{p.high:.4g} +{p.allowance:.0%}"
    )


def _text(
    test: str, file: str, proposals: Sequence[Proposal], notes: Sequence[str], *, written: bool, write: bool
) -> str:
    lines = [f"rebaseline {test}  ({file})"]
    for p in proposals:
        lines.append("")
        lines.append(f"{p.gate.metric}  ({p.gate.file}:{p.gate.line})")
        lines.append(
            f"  regime  {p.window.source}: {plural(p.n_runs, 'run')} {p.first_run} .. {p.last_run}, "
            f"{p.start_date:%Y-%m-%d} .. {p.end_date:%Y-%m-%d}, commits {_sha(p.first_commit)} .. "
            f"{_sha(p.last_commit)}"
        )
        values = f"  values  min {fmt(p.minimum)}, max {fmt(p.maximum)} over {plural(p.n_values, 'value')}"
        if p.method == "quantile":
            values += f"; p5 {fmt(p.low)}, p95 {fmt(p.high)}"
        lines.append(values)
        if p.new:
            old = flow(p.old) if p.old else "none"
            change = "unchanged" if dict(p.new) == dict(p.old) else f"{old} -> {flow(p.new)}"
            lines.append(
                f"  limits  {change}  ({p.method}, allowance {p.allowance:.0%}); "
                f"would fail {p.would_fail} of {plural(p.n_runs, 'run')} of the regime"
            )
        elif p.old:
            lines.append(f"  limits  {flow(p.old)} (unchanged)")
        long_enough = p.band_long_enough
        if long_enough is not None:
            if long_enough:
                lines.append(
                    f"  band    {plural(p.trusted_runs, 'run')} of the regime in its baseline >= window "
                    f"{p.window_size}: its baseline lies inside the current regime"
                )
            else:
                lines.append(
                    f"  band    only {plural(p.trusted_runs, 'run')} of the regime in its baseline < window "
                    f"{p.window_size}: its baseline still averages up to "
                    f"{plural(p.window_size - p.trusted_runs, 'run')} from before"
                )
            if p.untrusted_runs:
                shown = ", ".join(p.untrusted_runs[:5]) + (" ..." if len(p.untrusted_runs) > 5 else "")
                lines.append(
                    f"          {plural(len(p.untrusted_runs), 'run')} of the regime "
                    f"{'is' if len(p.untrusted_runs) == 1 else 'are'} out of its baseline now, its "
                    f"gate failed them ({shown}); if the shift was intended: gatecfg trust --run-id RUN"
                )
    for note in notes:
        lines.append(f"\n{note}")
    lines.append("")
    if written:
        lines.append(f"wrote {file}: only the limits' numbers and one evidence comment per gate changed")
    elif write:
        lines.append("nothing to write: the limits already match")
    elif any(p.new and dict(p.new) != dict(p.old) for p in proposals):
        lines.append("dry run: add --write to edit the gate file in place")
    return "\n".join(lines) + "\n"
