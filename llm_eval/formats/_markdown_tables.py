"""The report's tables for the Markdown templates: the gates with their tests, the
tiers and the tags worst first (with a gate's per-tag checks), and the hit→miss and
miss→hit drill-down, every value already a string or a number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from llm_eval.formats._markup import Code, Link
from llm_eval.metrics import parse_metric
from llm_eval.stats import format_p
from llm_eval.wording.english import plural
from llm_eval.wording.gates import STATUS_WORDS, ci_range, delta, limits_text, value
from llm_eval.wording.report_lines import deciding_p, unchanged

STATUS_ICON = {
    "pass": "✅",
    "warn": "⚠️",
    "fail": "❌",
    "inconclusive": "❓",
    "gold_changed": "📝",
    "retriever_failed": "🛑",
}


def label(report: Mapping[str, Any], metric: str) -> str:
    return str(report["metric_labels"].get(metric) or metric)


def gate_row(gate: Mapping[str, Any]) -> dict[str, Any]:
    metric = gate["metric"]
    limits = limits_text(
        metric,
        gate["threshold"],
        gate["regression_max"],
        gate.get("regression_relative", False),
        gate.get("drift"),
    )
    # Reports written before `blocking` was recorded: a failed error gate blocked.
    blocks = gate.get("blocking", gate["severity"] == "error" and gate["status"] == "fail")
    blocking = " (blocking)" if blocks else ""
    return {
        "name": gate["name"],
        "label": gate["metric_label"],
        "scope": gate["scope"],
        "baseline": value(metric, gate["baseline"]),
        "value": value(metric, gate["value"]),
        "delta": delta(metric, gate["delta"]),
        "stats": _stats_words(metric, gate.get("stats"), gate.get("decision")),
        "limits": limits or "—",
        "status": f"{STATUS_ICON[gate['status']]} {STATUS_WORDS[gate['status']]}{blocking}",
    }


def _stats_words(metric: str, stats: Mapping[str, Any] | None, decision: str | None) -> str:
    """`90% CI −8.1 to −3.9 pp, p < 0.001` (the test against the limit, with the p-value
    of the side that decided); `—` without it."""
    # Reports written before `confidence` was recorded carried 95% intervals.
    if not stats or stats.get("confidence", 0.95) is None:
        return "—"
    if unchanged(stats):
        return "unchanged"
    level = f"{stats.get('confidence', 0.95) * 100:g}%"
    parts = [f"{level} CI {ci_range(metric, stats.get('ci_low'), stats.get('ci_high'))}"]
    p = deciding_p(decision, stats)
    if p is not None:
        parts.append(format_p(p, stats.get("method")))
    return ", ".join(parts)


_METHOD_WORDS = {
    "exact-unconditional": "an exact test for paired 0/1 scores",
    "betting": "a betting test of a bounded mean",
    # reports written by earlier versions
    "tango-score": "Tango's score test for paired proportions",
    "bootstrap-t": "the paired bootstrap-t test",
    "sign-flip": "the paired sign-flip randomisation test",
    "mcnemar-exact": "McNemar's exact test",
}


def methods(gates: Iterable[Mapping[str, Any]]) -> str:
    """`McNemar's exact test (recall@5), the paired sign-flip randomisation test (MRR)`."""
    used: dict[str, list[str]] = {}
    for gate in gates:
        method = (gate.get("stats") or {}).get("method")
        if method:
            labels = used.setdefault(_METHOD_WORDS.get(method, str(method)), [])
            labels.append(str(gate["metric_label"]))
    return ", ".join(f"{m} ({', '.join(dict.fromkeys(ls))})" for m, ls in used.items())


def loss_of(metric: str, change: float | None) -> float | None:
    """How much worse the metric got (negative: better), whichever way it points."""
    if change is None or math.isnan(change):
        return None
    return change if parse_metric(metric).lower_is_better else -change


def tag_tables(
    report: Mapping[str, Any], metric: str, gating: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The gating metric by tag, and the per-tag checks of every gate that has them."""
    tags = [entry for entry in report["slices"] if entry["kind"] == "tag"]
    if not tags:
        return []
    checked = [gate for gate in report["gates"] if gate.get("slices")]
    tables = [] if any(g["metric"] == metric for g in checked) else [(metric, gating, None)]
    tables += [(gate["metric"], gate, gate) for gate in checked]
    return [_tag_table(report, tags, *table) for table in tables]


def _tag_table(
    report: Mapping[str, Any],
    tags: list[Mapping[str, Any]],
    metric: str,
    limits: Mapping[str, Any] | None,
    checker: Mapping[str, Any] | None,
) -> dict[str, Any]:
    checks = {c["slice"]: c for c in checker["slices"]} if checker else None
    # A tag none of whose queries the metric scores (e.g. only rejection queries for a
    # relevance metric) has nothing to show.
    scored = [e for e in tags if (e["metrics"].get(metric) or {}).get("n", e["n"])]
    rows = worst_first(slice_row(entry, metric, limits, checks) for entry in scored)
    legend = _check_legend(checker) if checker else ""
    return {
        "label": label(report, metric),
        "checker": checker["name"] if checker else None,
        "ranked": any(row["loss"] is not None for row in rows),
        "rows": rows,
        "legend": legend,
    }


def slice_row(
    entry: Mapping[str, Any],
    metric: str,
    limits: Mapping[str, Any] | None,
    checks: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """One tier or tag; `checks` are a gate's per-tag checks, else a drop is only flagged."""
    cell = entry["metrics"].get(metric) or {}
    loss = loss_of(metric, cell.get("delta"))
    check = (checks or {}).get(entry["slice"])
    if checks is not None:
        status = _check_status(check)
    else:  # a tier row: the status of the gate that judges exactly this tier, if any
        gated = limits is not None and _scope_slice(limits) == entry["slice"]
        status = STATUS_ICON[limits["status"]] if gated and limits is not None else ""
    return {
        "name": entry["name"],
        "n": cell.get("n", entry["n"]),
        "baseline": value(metric, cell.get("baseline")),
        "value": value(metric, cell.get("value")),
        "delta": delta(metric, cell.get("delta")),
        "status": status,
        "ci": _check_interval(metric, check),
        "p": format_p(check["p_adjusted"], _method(check, limits))
        if check and check.get("p_adjusted") is not None and check["status"] in ("warn", "fail")
        else "",
        "loss": loss,
    }


def _method(check: Mapping[str, Any], gate: Mapping[str, Any] | None) -> str | None:
    """The test behind a tag's check (reports written before slices recorded it: the
    gate's)."""
    return check.get("method") or ((gate or {}).get("stats") or {}).get("method")


def _check_interval(metric: str, check: Mapping[str, Any] | None) -> str:
    """A tag's interval with its level (Holm-adjusted levels differ by tag); `unchanged`
    when no query of the tag moved."""
    if not check:
        return ""
    if check.get("reason") == "unchanged":
        return "unchanged"
    interval = ci_range(metric, check.get("ci_low"), check.get("ci_high"))
    level = check.get("confidence")
    return interval if level is None else f"{interval} ({level * 100:.3g}%)"


def _scope_slice(gate: Mapping[str, Any]) -> str:
    """The slice name of a gate's scope: `overall` or `tier:A` (tags are checked apart)."""
    key = str(gate.get("scope_key") or "all")
    if key == "all":
        return "overall"
    return key.replace("=", ":", 1) if key.startswith("tier=") and ";" not in key else ""


def _check_status(check: Mapping[str, Any] | None) -> str:
    if check is None:
        return ""
    if check.get("judged") is False:
        return "too few"
    return STATUS_ICON[check["status"]]


def worst_first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Largest loss first; rows without a comparison last; ties by name."""
    return sorted(rows, key=lambda r: (r["loss"] is None, -(r["loss"] or 0.0), str(r["name"])))


def _check_legend(gate: Mapping[str, Any]) -> str:
    smallest = (gate.get("statistics") or {}).get("min_n")
    few = f"fewer than {smallest} queries" if smallest else "too few queries"
    return (
        f"Status: the per-tag checks of the gate {gate['name']}: {STATUS_ICON['pass']} within "
        f"the limit or unchanged, {STATUS_ICON['inconclusive']} cannot tell, "
        f"{STATUS_ICON['warn']}/{STATUS_ICON['fail']} beyond it. Each interval is drawn at "
        "the level (in brackets) that corrects for the number of tags checked, and p, "
        f"adjusted the same way, is shown where a tag is beyond the limit; “too few”: {few}, "
        "not judged."
    )


def drilldown(changes: Mapping[str, Any], baseline: Any, blob: str | None) -> list[dict[str, Any]]:
    """The hit→miss and miss→hit lists; empty without a baseline (nothing to compare)."""
    if baseline is None:
        return []
    k = changes["k"]
    lost, gained = changes["hit_to_miss_count"], changes["miss_to_hit_count"]
    return [
        {
            "title": f"🔻 {plural(lost, 'query', 'queries')} lost "
            f"their relevant result from the top {k} (hit → miss)",
            "count": lost,
            "rows": [_change_row(c, blob) for c in changes["hit_to_miss"]],
        },
        {
            "title": f"🔺 {plural(gained, 'query', 'queries')} gained "
            f"a relevant result in the top {k} (miss → hit)",
            "count": gained,
            "rows": [_change_row(c, blob) for c in changes["miss_to_hit"]],
        },
    ]


def rank_words(rank: int) -> str:
    """A rank of the first relevant document; 0 means it was not retrieved at all."""
    return "not retrieved" if rank == 0 else str(rank)


def _change_row(change: Mapping[str, Any], blob: str | None) -> dict[str, Any]:
    """A query that crossed the cutoff; its id links to its line in the gold file."""
    where = None
    if blob and change.get("file") and change.get("line"):
        where = f"{blob}{quote(str(change['file']))}#L{int(change['line'])}"
    return {
        "id": Link(Code(change["query_id"]), where),
        "query": change["query"],
        "tags": ", ".join(map(str, change["tags"])) or "—",
        "ranks": f"{rank_words(change['rank_before'])} → {rank_words(change['rank_after'])}",
        "relevant": [Code(doc) for doc in change["relevant"]],
    }
