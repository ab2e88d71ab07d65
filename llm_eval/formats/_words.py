"""Sentences about a whole report that more than one format prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_eval.metrics import parse_metric
from llm_eval.output import plural


def headline(report: Mapping[str, Any]) -> str:
    """One line: the verdict and why, counting gates by severity and status."""
    gates = report["gates"]

    def count(severity: str, *statuses: str) -> int:
        return sum(1 for g in gates if g["severity"] == severity and g["status"] in statuses)

    blocked = [
        plural(count("error", "fail"), "blocking gate", "blocking gates") + " failed",
        plural(
            sum(1 for g in gates if g.get("blocking") and g["status"] == "inconclusive"),
            "blocking gate",
            "blocking gates",
        )
        + " cannot tell",
    ]
    reported = [
        plural(
            sum(1 for g in gates if not g.get("blocking") and g["status"] == "inconclusive"),
            "gate",
            "gates",
        )
        + " cannot tell (not blocking)",
        plural(count("warning", "warn"), "warning gate", "warning gates") + " not met",
    ]
    blocked = [part for part in blocked if not part.startswith("0 ")]
    reported = [part for part in reported if not part.startswith("0 ")]
    if report["verdict"] == "gold_changed":
        return "GOLD SET CHANGED: not compared with the baseline (see below)"
    if report["exit_code"] == 1 or report["verdict"] == "fail":
        return "FAIL: " + ", ".join(blocked + reported)
    if reported:
        return "PASS with warnings: " + ", ".join(reported)
    if len(gates) == 1:
        return "PASS: the gate passes"
    return f"PASS: all {len(gates)} gates pass"


def missing_lines(report: Mapping[str, Any]) -> list[str]:
    """A line when gold queries are missing from the run (they are scored 0)."""
    missing = report["queries"]["missing_from_run"]
    if not missing:
        return []
    return [
        f"{plural(len(missing), 'gold query is', 'gold queries are')} missing from the run "
        "and scored 0."
    ]


def detail_lines(report: Mapping[str, Any]) -> list[str]:
    """A line each for ambiguous page matches, confident answers to rejection queries and
    stale or conflicting context, when there are any."""
    lines = []
    ambiguous = (report.get("matching") or {}).get("ambiguous_count", 0)
    if ambiguous:
        lines.append(
            f"{plural(ambiguous, 'result is', 'results are')} within the page tolerance of two "
            "or more gold references (listed in report.json)."
        )
    rejections = report.get("rejections")
    if (
        rejections
        and rejections["not_rejected_count"]
        and any(parse_metric(m).kind == "rejection" for m in report["metrics"])
    ):
        lines.append(
            f"{rejections['not_rejected_count']} of "
            f"{plural(rejections['queries'], 'rejection query', 'rejection queries')} got "
            "confident results."
        )
    context = report.get("context")
    if context and (context["stale_hits_count"] or context["conflicts_count"]):
        within = f"the top {context['k']}" if context["k"] is not None else "the results"
        stale = plural(context["stale_hits_count"], "stale document", "stale documents")
        conflicts = plural(context["conflicts_count"], "conflict", "conflicts")
        lines.append(f"In {within}: {stale} and {conflicts} (listed in report.json).")
    return lines
