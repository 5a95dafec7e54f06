"""JUnit XML: one testcase per gate, every step inside it, so CI test UIs show what failed.

Enforced failures are <failure>/<error>; shadow failures and cold gates do not fail the job, so
they are not red: a shadow failure is reported in <system-out>, a fully cold gate is <skipped>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from gatecfg.escape import xml_text
from gatecfg.report.labels import Noise, step_label, step_reason
from gatecfg.wording import plural

if TYPE_CHECKING:
    from gatecfg.report import RunReport


def render_junit(report: RunReport) -> str:
    suites = ET.Element("testsuites", name="gatecfg")
    suite = ET.SubElement(suites, "testsuite", name=report.test)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="gatecfg.run_id", value=report.run.run_id)
    ET.SubElement(props, "property", name="gatecfg.exit_code", value=str(report.exit_code))
    ET.SubElement(props, "property", name="gatecfg.noise", value=Noise.of(report.results).line())
    for note in report.notes:
        ET.SubElement(props, "property", name="gatecfg.notice", value=note)
    for warning in report.warnings:
        ET.SubElement(props, "property", name="gatecfg.rekey", value=warning.message)
    tests = failures = errors = skipped = 0
    for result in report.results:
        tests += 1
        gate, metric, group = result.gate, result.gate.metric, list(result)
        case = ET.SubElement(suite, "testcase", name=metric, classname=report.test, file=gate.file)
        case.set("line", str(gate.line))
        lines = [
            f"step {step_label(v)}: {v.status}{' (tolerated)' if v.tolerated else ''}: {step_reason(v)}"
            for v in group
        ]
        bad = [v for v in group if v.status in ("fail", "error") and not v.tolerated]
        tolerated = sum(v.tolerated for v in group)
        status = result.status
        if any(v.fails_job for v in bad):
            failing = [v for v in bad if v.fails_job]
            kind = "error" if all(v.status == "error" for v in failing) else "failure"
            failures += kind == "failure"
            errors += kind == "error"
            # The gate's own why: which statistic fired and which steps moved (a first failing step's reason
            # alone may describe a step that is only part of the story).
            changed = "" if report.changes is None else f"; changed {report.changes.line()}"
            node = ET.SubElement(case, kind, message=f"{metric}: {result.why or failing[0].reason}{changed}")
            node.text = "\n".join(lines)
        elif result.missing and result.fails_job:
            # Steps the run never logged: no step verdict fails, the gate does (a crashed run).
            failures += 1
            node = ET.SubElement(case, "failure", message=f"missing steps: {result.missing_text()}")
            node.text = "\n".join(lines)
        elif status == "cold" and all(v.status == "cold" for v in group):
            skipped += 1
            ET.SubElement(case, "skipped", message=group[0].reason)
        out = ET.SubElement(case, "system-out")
        prefix = (
            f"SHADOW: {plural(len(bad), 'step')} failing (not enforced)\n"
            if bad and not any(v.fails_job for v in bad)
            else ""
        )
        if tolerated:
            steps = plural(tolerated, "failing step")
            prefix += f"TOLERATED: {steps} within `tolerate: {group[0].gate.tolerate}`\n"
        out.text = prefix + "\n".join(lines)
    if report.exit_code and not any(r.fails_job for r in report.results):
        # The run failed with no gate failing: history was required and there is none (the notice says
        # so). A red job needs a red testcase, or a test UI shows nothing to look at.
        tests += 1
        failures += 1
        case = ET.SubElement(suite, "testcase", name="stored history", classname=report.test)
        ET.SubElement(case, "failure", message="; ".join(report.notes) or f"exit {report.exit_code}")
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    _legal(suites)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _legal(element: ET.Element) -> None:
    """Every text and attribute through `xml_text`: ElementTree escapes markup, but writes a control
    character from a name or reason as it is, which no XML parser then reads."""
    for node in element.iter():
        node.text = None if node.text is None else xml_text(node.text)
        for name, value in node.attrib.items():
            node.set(name, xml_text(value))
