"""`gatecfg alerts`: the open alerts grouped by cause, their triage (`ack`, `undo`) and what people said,
counted (`--stats`). The guide is docs/alerts.md; the grouping is gatecfg/alerts.py, the store's part
gatecfg/store/triage.py."""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Sequence
from typing import Any

from gatecfg.alerts import (
    JSON_VERSION,
    VERDICTS,
    Cause,
    Group,
    OpenGate,
    Tally,
    Verdict,
    group,
    low_precision,
    tallies,
)
from gatecfg.ci import ci_job
from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import markdown_code, markdown_text, markdown_url, terminal
from gatecfg.store import Store
from gatecfg.store.triage import DecisionRow, Snapshot
from gatecfg.terminal import TextReport
from gatecfg.wording import did_you_mean, plural

# Tests a group names in the text and markdown formats; the JSON lists every gate.
SHOWN_TESTS = 12
TRIAGE_HINT = 'gatecfg alerts ack {id} --as intended|environment|false-alarm|regression --reason "..."'
MEANS: dict[Verdict, str] = {
    "intended": "the change was meant: every gate of the alert takes the new level as its baseline",
    "environment": "the environment changed (image, driver, hardware): every gate takes the new level",
    "false-alarm": "noise: the failed values rejoin their baselines, the level is not followed",
    "regression": "a real regression: the gates keep failing until the level returns, then the alert "
    "closes by itself",
}


# The commands.


def alerts(*, db: str, test: str | None, stats: bool, fmt: str) -> int:
    with Store.open(db) as store:
        if test is not None and test not in (tests := store.tests()):
            raise InputError.at(
                "--test",
                terminal(f"no stored run of test {test} in {store.url}"),
                hint=did_you_mean(test, tests, n=3) or "`gatecfg alerts` without --test lists every test's",
            )
        found = store.alerts(test=test)
        counted = tallies(store.triaged(test=test), found.gates) if stats else None
        url = store.url
    groups = group(found.gates, found.history, found.width)
    if fmt == "json":
        print(json.dumps(as_json(groups, found, counted, store=url, test=test), indent=2))
    elif fmt == "markdown":
        print(markdown(groups, found, counted), end="")
    else:
        print(text(groups, found, counted), end="")
    return EXIT_OK


def ack(
    *, db: str, alert: str, verdict: Verdict, reason: str, link: str | None, test: str | None = None
) -> int:
    reason = _checked(reason, "--reason")
    if link is not None and not (
        _checked(link, "--link").startswith(("https://", "http://")) and " " not in link
    ):
        raise InputError.at(
            "--link",
            terminal(f"{link!r} is not a web address"),
            hint="e.g. --link https://github.com/o/r/issues/812",
        )

    def choose(snap: Snapshot) -> tuple[Cause, Sequence[OpenGate]]:
        chosen = _find(group(snap.gates, snap.history, snap.width), alert)
        return chosen.cause, [g for g in chosen.gates if g.decision is None]

    with Store.open(db) as store:
        for row in store.decisions():
            d = row.decided
            if d.alert == alert or (len(alert) >= 4 and d.alert.startswith(alert)):
                raise InputError.at(
                    "alerts ack",
                    terminal(
                        f"alert {d.alert} was triaged as {d.verdict} by {d.decided_by} on "
                        f"{d.decided_at:%Y-%m-%d %H:%M} UTC (decision {d.pk}): nothing changed"
                    ),
                    hint=f"`gatecfg alerts undo {d.pk}` first to decide otherwise",
                )
        pk, cause, gates = store.decide(
            choose, verdict=verdict, reason=reason, link=link, who=identity(), test=test
        )
    tests = {g.test for g in gates}
    print(
        terminal(
            f"decision {pk}: alert {cause.id} ({cause.describe()}) triaged as {verdict} for "
            f"{plural(len(gates), 'gate')} of {plural(len(tests), 'test')}: {MEANS[verdict]}; "
            f"`gatecfg alerts undo {pk}` undoes it"
        )
    )
    return EXIT_OK


def undo(*, db: str, decision: int, reason: str | None) -> int:
    if reason is not None:
        reason = _checked(reason, "--reason")
    with Store.open(db) as store:
        if not store.undo_decision(decision, who=identity(), reason=reason):
            listed = store.decisions(everything=True)
            mine = next((d for d in listed if d.decided.pk == decision), None)
            active = [d for d in listed if d.undone_at is None]
            why = (
                f"alert decision {decision} was undone already ({mine.undone_at:%Y-%m-%d %H:%M} UTC)"
                if mine is not None and mine.undone_at is not None
                else f"no alert decision {decision}"
            )
            raise InputError.at(
                "alerts undo",
                terminal(f"{why}: nothing undone ({store.url})"),
                hint="active decisions: " + ", ".join(f"{d.decided.pk} ({d.decided.verdict})" for d in active)
                if active
                else "no decision is active; `gatecfg alerts decisions --undone` lists all",
            )
    print(terminal(f"decision {decision} undone: every value it moved holds what it held before it"))
    return EXIT_OK


def decisions(*, db: str, everything: bool, fmt: str) -> int:
    with Store.open(db) as store:
        rows = store.decisions(everything=everything)
    if fmt == "json":
        print(json.dumps({"version": JSON_VERSION, "decisions": [_decision_json(r) for r in rows]}, indent=2))
        return EXIT_OK
    if not rows:
        print(
            "no alert decisions" if everything else "no active alert decisions (`--undone`: undone ones too)"
        )
    for r in rows:
        print(terminal(describe(r)))
    return EXIT_OK


def identity() -> str:
    """Who triages: the CI's actor and system where it names one, else git's user, else the login."""
    job = ci_job()
    if job.system is not None:
        return f"{job.actor or 'unknown actor'} ({job.system}{f' run {job.run_id}' if job.run_id else ''})"
    found = []
    for key in ("user.name", "user.email"):
        try:
            done = subprocess.run(
                ["git", "config", key], capture_output=True, text=True, check=False, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            break
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip())
    if found:
        return (f"{found[0]} <{found[1]}>" if len(found) == 2 else found[0]) + " (git)"
    return f"{getpass.getuser()} (login)"


def _checked(value: str, flag: str) -> str:
    from gatecfg.models import name_problem

    if not value.strip():
        raise InputError.at(flag, "is blank", hint="say why in a sentence: the audit table keeps it")
    problem = name_problem(value)
    if problem is not None:
        raise InputError.at(flag, f"the text {problem}", hint="one printable line")
    return value.strip()


def _find(groups: Sequence[Group], alert: str) -> Group:
    exact = [g for g in groups if g.id == alert]
    found = exact or [g for g in groups if len(alert) >= 4 and g.id.startswith(alert)]
    if len(found) == 1:
        return found[0]
    ids = [g.id for g in groups]
    if found:
        hint = "it starts " + ", ".join(g.id for g in found) + ": give more of it"
    else:
        hint = did_you_mean(alert, ids, n=3) or (
            "open alerts: " + ", ".join(ids[:10]) if ids else "no alert is open; `gatecfg alerts` lists them"
        )
    raise InputError.at("alerts ack", terminal(f"no open alert {alert}: nothing changed"), hint=hint)


# Formats.


def summary(g: Group) -> str:
    size = g.size()
    moved = "" if size is None else f" {100.0 * size:+.1f}%"
    return (
        f"{g.cause.describe()}: {plural(len(g.tests), 'test')}, {plural(len(g.gates), 'gate')}, "
        f"{g.direction()}{moved}"
    )


def _per_test(g: Group) -> list[tuple[str, str]]:
    by_test: dict[str, list[OpenGate]] = {}
    for gate in g.gates:
        by_test.setdefault(gate.test, []).append(gate)
    lines = []
    for test, gates in by_test.items():
        metrics = ", ".join(
            sorted({f"{x.metric}{'' if x.kind == 'failing' else f' ({x.kind})'}" for x in gates})
        )
        nights = max(len(x.runs) for x in gates)
        lines.append(
            (
                test,
                f"{metrics} · since run {gates[0].first.run_id} ({plural(nights, 'nightly', 'nightlies')})",
            )
        )
    return lines


def _decision_text(g: Group) -> str:
    if g.decision is None:
        return "untriaged: " + TRIAGE_HINT.format(id=g.id)
    d = g.decision
    when = f"{d.decided_at:%Y-%m-%d %H:%M} UTC"
    return f"triaged {d.verdict} by {d.decided_by} {when} (decision {d.pk}): {d.reason}"


def text(groups: Sequence[Group], snap: Snapshot, counted: tuple[list[Tally], list[Tally]] | None) -> str:
    out = TextReport()
    gates = sum(len(g.gates) for g in groups)
    if not groups:
        out.line(f"no open alerts in the newest runs of {plural(len(snap.history), 'series', 'series')}")
    else:
        tests = len({t for g in groups for t in g.tests})
        out.line(
            f"{plural(len(groups), 'open alert')} ({plural(gates, 'gate')} of {plural(tests, 'test')}), "
            "one per cause, largest first; the newest run of each of "
            f"{plural(len(snap.history), 'series', 'series')}"
        )
    for g in groups:
        out.line("")
        out.line(terminal(f"[{g.id}] {summary(g)}"), indent=4)
        out.line(terminal(f"  evidence: {g.evidence}"), indent=4)
        for test, about in _per_test(g)[:SHOWN_TESTS]:
            out.line(terminal(f"  {test}: {about}"), indent=4)
        if len(g.tests) > SHOWN_TESTS:
            out.line(
                f"  ... and {plural(len(g.tests) - SHOWN_TESTS, 'more test')} "
                "(`--format json` lists every gate)"
            )
        out.line(terminal(f"  {_decision_text(g)}"), indent=4)
    for d, closed, of in snap.closed:
        out.line("")
        out.line(
            terminal(
                f"CLOSED BY ITSELF: alert {d.alert} (decision {d.pk}, regression): the level returned, "
                f"{closed} of its {plural(of, 'gate')} passed again"
            ),
            indent=4,
        )
    if counted is not None:
        _stats_text(out, *counted)
    return out.text()


def _rate(t: Tally) -> list[str]:
    return [
        str(t.alerts),
        str(t.open),
        *(str(t.verdicts.get(v, 0)) for v in VERDICTS),
        "-" if t.precision is None else f"{t.precision:.0%}",
        "-" if t.median_hours is None else f"{t.median_hours:.1f}",
    ]


STATS_COLUMNS = ("alerts", "open", *VERDICTS, "precision", "hours to decision")


def _stats_text(out: TextReport, gates: Sequence[Tally], tests: Sequence[Tally]) -> None:
    out.line("")
    out.line("What people said (active decisions; precision: the share not called a false alarm)")
    out.table(("test", *STATS_COLUMNS), [[terminal(t.test), *_rate(t)] for t in tests])
    out.table(
        ("test", "metric", *STATS_COLUMNS),
        [[terminal(t.test), terminal(t.metric or ""), *_rate(t)] for t in gates],
    )
    for line in low_precision(gates):
        out.line(terminal(f"LOW PRECISION: {line}"), indent=4)


def markdown(groups: Sequence[Group], snap: Snapshot, counted: tuple[list[Tally], list[Tally]] | None) -> str:
    lines = [f"### gatecfg alerts: {plural(len(groups), 'open alert')}", ""]
    for g in groups:
        lines += [f"#### `{g.id}` {markdown_text(summary(g))}", "", markdown_text(g.evidence), ""]
        lines += ["| test | gates |", "|---|---|"]
        lines += [f"| {markdown_code(t)} | {markdown_text(a)} |" for t, a in _per_test(g)[:SHOWN_TESTS]]
        if len(g.tests) > SHOWN_TESTS:
            lines.append(f"| ... | {plural(len(g.tests) - SHOWN_TESTS, 'more test')} |")
        decided = g.decision
        if decided is not None and decided.link:
            lines += ["", f"{markdown_text(_decision_text(g))} ([link]({markdown_url(decided.link)}))", ""]
        else:
            lines += [
                "",
                markdown_text(_decision_text(g)) if decided else markdown_code(TRIAGE_HINT.format(id=g.id)),
                "",
            ]
    for d, closed, of in snap.closed:
        lines += [
            markdown_text(
                f"Closed by itself: alert {d.alert} (decision {d.pk}): {closed} of {of} gates passed again"
            ),
            "",
        ]
    if counted is not None:
        gates, tests = counted
        head = "| test | " + " | ".join(STATS_COLUMNS) + " |"
        lines += ["#### What people said", "", head, "|---" * (len(STATS_COLUMNS) + 1) + "|"]
        lines += [f"| {markdown_code(t.test)} | " + " | ".join(_rate(t)) + " |" for t in tests]
        lines += [""] + [markdown_text(f"Low precision: {line}") for line in low_precision(gates)]
    return "\n".join(lines).rstrip() + "\n"


def _gate_json(g: OpenGate) -> dict[str, Any]:
    return {
        "test": g.test,
        "series": g.series_key,
        "metric": g.metric,
        "coordinate": g.coordinate,
        "kind": g.kind,
        "first_run_id": g.first.run_id,
        "first_commit": g.first.commit,
        "first_at": g.first.created_at.isoformat(),
        "before_run_id": None if g.before is None else g.before.run_id,
        "newest_run_id": g.newest.run_id,
        "nightlies": len(g.runs),
        "direction": g.direction,
        "change": g.change,
        "steps": g.steps,
        "shift": g.shift_pk,
    }


def _group_json(g: Group) -> dict[str, Any]:
    d = g.decision
    return {
        "id": g.id,
        "cause": g.cause.as_json(),
        "summary": summary(g),
        "evidence": g.evidence,
        "tests": g.tests,
        "direction": g.direction(),
        "size": g.size(),
        "first_failed_at": g.first_failed_at().isoformat(),
        "decision": None
        if d is None
        else {
            "id": d.pk,
            "verdict": d.verdict,
            "reason": d.reason,
            "link": d.link,
            "by": d.decided_by,
            "at": d.decided_at.isoformat(),
        },
        "gates": [_gate_json(x) for x in g.gates],
    }


def as_json(
    groups: Sequence[Group],
    snap: Snapshot,
    counted: tuple[list[Tally], list[Tally]] | None,
    *,
    store: str,
    test: str | None,
) -> dict[str, Any]:
    """The JSON of `gatecfg alerts --format json` (docs/alerts.md, version JSON_VERSION)."""
    found: dict[str, Any] = {
        "version": JSON_VERSION,
        "store": store,
        "test": test,
        "series": len(snap.history),
        "alerts": [_group_json(g) for g in groups],
        "closed": [{"decision": d.pk, "alert": d.alert, "closed": c, "gates": n} for d, c, n in snap.closed],
    }
    if counted is not None:
        gates, tests = counted
        found["stats"] = {
            "gates": [t.as_json() for t in gates],
            "tests": [t.as_json() for t in tests],
            "low_precision": low_precision(gates),
        }
    return found


def describe(r: DecisionRow) -> str:
    d = r.decided
    state = (
        f"undone {r.undone_at:%Y-%m-%d %H:%M} by {r.undone_by}"
        + (f" ({r.undo_reason})" if r.undo_reason else "")
        if r.undone_at is not None
        else "active"
    )
    closed = f", {r.closed} closed by itself" if d.verdict == "regression" else ""
    link = f" {d.link}" if d.link else ""
    return (
        f"{d.pk}  alert {d.alert}  {d.verdict} by {d.decided_by} {d.decided_at:%Y-%m-%d %H:%M} UTC: "
        f"{d.reason}{link}"
        f" · {plural(r.gates, 'gate')} of {plural(r.tests, 'test')}{closed} · {state}"
    )


def _decision_json(r: DecisionRow) -> dict[str, Any]:
    d = r.decided
    return {
        "id": d.pk,
        "alert": d.alert,
        "verdict": d.verdict,
        "reason": d.reason,
        "link": d.link,
        "by": d.decided_by,
        "at": d.decided_at.isoformat(),
        "cause": dict(r.cause),
        "first_failed_at": r.first_failed_at.isoformat(),
        "gates": r.gates,
        "tests": r.tests,
        "closed": r.closed,
        "undone_at": None if r.undone_at is None else r.undone_at.isoformat(),
        "undone_by": r.undone_by,
        "undo_reason": r.undo_reason,
    }
