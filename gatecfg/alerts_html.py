"""The alerts section of `gatecfg report --html` (docs/alerts.md): the open alerts by cause, and what
people said about the gates' alerts, counted. Every text from the store is escaped."""

from __future__ import annotations

from collections.abc import Sequence

from gatecfg.alerts import VERDICTS, Group, Tally, group, low_precision, tallies
from gatecfg.escape import html_text
from gatecfg.store.store import Store
from gatecfg.wording import plural


def section(store: Store, *, test: str | None = None) -> str:
    """The section's HTML, read from `store` (of one test, or of the whole store)."""
    found = store.alerts(test=test)
    gates, _ = tallies(store.triaged(test=test), found.gates)
    return render(group(found.gates, found.history, found.width), gates)


def render(groups: Sequence[Group], gates: Sequence[Tally]) -> str:
    e = html_text
    parts = [f"<h2>Alerts</h2><p>{e(plural(len(groups), 'open alert'))}, one per cause, largest first.</p>"]
    if groups:
        parts.append(
            "<table><tr><th>alert</th><th>cause</th><th>tests</th><th>gates</th><th>direction</th>"
            "<th>evidence</th><th>triage</th></tr>"
        )
        for g in groups:
            d = g.decision
            triage = "untriaged" if d is None else f"{d.verdict} by {d.decided_by}: {d.reason}"
            parts.append(
                f"<tr><td><code>{e(g.id)}</code></td><td>{e(g.cause.describe())}</td>"
                f"<td class=num>{len(g.tests)}</td><td class=num>{len(g.gates)}</td>"
                f"<td>{e(g.direction())}</td><td>{e(g.evidence)}</td><td>{e(triage)}</td></tr>"
            )
        parts.append("</table>")
    triaged = [t for t in gates if t.triaged]
    if triaged:
        heads = "".join(f"<th>{v}</th>" for v in VERDICTS)
        parts.append(
            f"<h3>What people said</h3><table><tr><th>test</th><th>metric</th><th>alerts</th>{heads}"
            "<th>precision</th><th>hours to decision</th></tr>"
        )
        for t in triaged:
            cells = "".join(f"<td class=num>{t.verdicts.get(v, 0)}</td>" for v in VERDICTS)
            precision = "-" if t.precision is None else f"{t.precision:.0%}"
            hours = "-" if t.median_hours is None else f"{t.median_hours:.1f}"
            parts.append(
                f"<tr><td>{e(t.test)}</td><td>{e(t.metric or '')}</td><td class=num>{t.alerts}</td>{cells}"
                f"<td class=num>{precision}</td><td class=num>{hours}</td></tr>"
            )
        parts.append("</table>")
        parts += [f'<p class="noise">{e(line)}</p>' for line in low_precision(gates)]
    return "\n".join(parts)
