"""JUnit XML, for the test tabs of GitLab, Jenkins and Azure DevOps.

One test case per gate and one per judged tag slice of a `per_tag` gate, in one
suite. A gate or slice that blocks the merge is a `<failure>`; one that cannot
tell and does not block is `<skipped>`; a warning gate that missed a limit passes
with the sentence in `<system-out>` (it does not block, and CI tabs count every
failure as red). A changed gold set is an `<error>` case of its own: the report
was not compared with the baseline; so is a retriever that failed on more queries
than `max_error_rate` allows (its gates, unmeasured, are skipped). The shape is the
one these tools read (the Jenkins/Ant schema): `testsuites` > `testsuite` > `testcase` > `failure` |
`error` | `skipped`, `system-out`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree as ET

from llm_eval.formats import RenderOptions
from llm_eval.wording.report_lines import headline

SUITE = "llm-eval gate"


def _case(name: str, classname: str, outcome: str, message: str | None) -> ET.Element:
    """A test case whose outcome is `pass`, `failure`, `skipped`, `warning` or `error`."""
    case = ET.Element("testcase", {"name": name, "classname": classname, "time": "0"})
    if outcome in ("failure", "error"):
        ET.SubElement(case, outcome, {"message": message or "", "type": outcome}).text = message
    elif outcome == "skipped":
        ET.SubElement(
            case, "skipped", {"message": f"cannot tell: {message}" if message else "cannot tell"}
        )
    elif outcome == "warning" and message:
        ET.SubElement(case, "system-out").text = f"warning: {message}"
    return case


def _gate_outcome(gate: Mapping[str, Any]) -> str:
    if gate.get("blocking") or (gate["status"] == "fail" and gate["severity"] == "error"):
        return "failure"
    return {"inconclusive": "skipped", "warn": "warning", "fail": "warning"}.get(
        gate["status"], "pass"
    )


def _slice_outcome(gate: Mapping[str, Any], piece: Mapping[str, Any]) -> str:
    if piece["status"] == "fail":
        return "failure" if gate["severity"] == "error" else "warning"
    return {"inconclusive": "skipped", "warn": "warning"}.get(piece["status"], "pass")


def _cases(report: Mapping[str, Any]) -> list[ET.Element]:
    cases = []
    if report["verdict"] == "gold_changed":
        why = (report["summary"] or ["the gold set changed since the baseline"])[0]
        cases.append(_case("gold set unchanged since the baseline", "llm-eval", "error", why))
    if report["verdict"] == "retriever_failed":
        why = (report["summary"] or ["the retriever failed"])[0]
        cases.append(_case("retriever within max_error_rate", "llm-eval", "error", why))
    for gate in report["gates"]:
        title = f"{gate['name']}: {gate['metric_label']} ({gate['scope']})"
        outcome = _gate_outcome(gate)
        reason = gate["sentence"] or gate.get("power_warning")
        cases.append(_case(title, "llm-eval.gates", outcome, reason))
        for piece in gate.get("slices") or []:
            if not piece.get("judged", True):
                continue
            classname = f"llm-eval.gates.{gate['name']}"
            outcome = _slice_outcome(gate, piece)
            cases.append(_case(piece["slice"], classname, outcome, piece["sentence"]))
    return cases


class JUnit:
    """JUnit XML for CI test tabs."""

    name = "junit"
    description = "JUnit XML: a test case per gate and judged tag slice (GitLab, Jenkins)"
    filename = "report.junit.xml"

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """The XML document, UTF-8, with its declaration."""
        cases = _cases(report)
        counts = {
            "tests": str(len(cases)),
            "failures": str(sum(1 for c in cases if c.find("failure") is not None)),
            "errors": str(sum(1 for c in cases if c.find("error") is not None)),
            "skipped": str(sum(1 for c in cases if c.find("skipped") is not None)),
            "time": f"{(report.get('timings') or {}).get('total_s', 0):.3f}",
        }
        root = ET.Element("testsuites", {"name": "llm-eval", **counts})
        generated = (report.get("provenance") or {}).get("generated_at")
        attributes = {"name": SUITE, **counts, **({"timestamp": generated} if generated else {})}
        suite = ET.SubElement(root, "testsuite", attributes)
        properties = ET.SubElement(suite, "properties")
        for key, text in (("verdict", report["verdict"]), ("headline", headline(report))):
            ET.SubElement(properties, "property", {"name": key, "value": text})
        suite.extend(cases)
        ET.indent(root)
        body = ET.tostring(root, encoding="unicode")
        return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


FORMAT = JUnit()
