"""The gate report in words for the Markdown templates (`templates/*.j2`): every
number of `report.json` turned into the strings `markdown.py` renders, with
`wording`'s sentences, the glossary's links, the next steps and the footer; the
tables and the drill-down are `_markdown_tables.py`'s.

A report can come from another job (a `workflow_run` reads it from an artifact a
pull request built), so every value in it is treated as untrusted text: the
templates escape each one they print.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from llm_eval.docs_address import Docs
from llm_eval.errors import InputError
from llm_eval.formats._markdown_tables import (
    STATUS_ICON,
    drilldown,
    gate_row,
    label,
    loss_of,
    methods,
    slice_row,
    tag_tables,
    worst_first,
)
from llm_eval.formats._markup import Code, Link, Links, Parts
from llm_eval.gate import worst_status
from llm_eval.history.series import SPARK_BARS, SPARK_GAP, spark_scale, sparkline
from llm_eval.metrics import Metric, parse_metric
from llm_eval.wording.english import plural
from llm_eval.wording.gates import delta, subject, value
from llm_eval.wording.report_lines import (
    coverage_lines,
    detail_lines,
    failed_share,
    failure_lines,
    headline,
    judge_lines,
    missing_lines,
)

CHANGES_SHOWN = 25
"""Queries listed in each drill-down (hit→miss, miss→hit) when there is room."""
_FINGERPRINT_NAMES = {"gold": "gold set"}
"""How the footer names a fingerprint whose key is not its name."""


def report_view(report: Mapping[str, Any], links: Links) -> dict[str, Any]:
    """What the templates print, every value already a string or a number."""
    gates = report["gates"]
    gating = gates[0] if gates else None
    metric = gating["metric"] if gating else report["metrics"][0]
    tiers = [e for e in report["slices"] if e["kind"] in ("overall", "tier")]
    tier_rows = [slice_row(entry, metric, gating, None) for entry in tiers]
    tables = tag_tables(report, metric, gating)
    # In the order a reader meets them: each metric's name is linked the first time only.
    glossary = _Glossary(report, links.docs)
    lead = [glossary.link(sentence) for sentence in _lead(report)]
    trend = _trend(report.get("trend"), links)
    if trend:
        trend["text"] = glossary.link(trend["text"])
    failed = report["verdict"] == "retriever_failed"
    problems = [_problem(gate) for gate in gates if gate["status"] != "pass"]
    for problem in problems:
        problem["sentence"] = glossary.link(problem["sentence"])
        for item in problem["details"]:
            item["sentence"] = glossary.link(item["sentence"])
    rows = [gate_row(gate) for gate in gates]
    for row in rows:
        row["label"] = glossary.link(row["label"])
    return {
        "icon": STATUS_ICON[report["verdict"]],
        "headline": _title(report),
        "lead": lead,
        "trend": trend,
        "failure": failure_lines(report) if failed else [],
        "next_steps": _next_steps(report),
        "gold_changes": _gold_change_lists(report.get("gold_changes")),
        "problems": problems,
        "gates": rows,
        "has_stats": any(gate.get("stats") for gate in gates),
        "methods": methods(gates),
        "tiers": {
            "label": label(report, metric),
            "rows": tier_rows[:1] + worst_first(tier_rows[1:]),
        },
        "tag_tables": tables,
        "drilldown": []
        if failed
        else drilldown(
            report["changes"], report["provenance"].get("baseline"), _gold_blob(report, links)
        ),
        "everything": Link("report artifact", links.artifact) if links.artifact else None,
        "cutoff": report["changes"]["k"],
        # What the gold set can detect is statistics: it stays in the collapsed section.
        "power_notes": [
            glossary.link(str(g["power_warning"])) for g in gates if g.get("power_warning")
        ],
        "notes": [glossary.link(note) for note in _notes(report)],
        "footer": _footer(report, links),
        "full_changes": CHANGES_SHOWN,
    }


class _Glossary:
    """Links each metric's name, the first time the comment prints it, to its
    definition on the documentation's metrics page, the definition shown on hover:
    a reader who does not know `recall@5` or `MRR` is one click from what it means,
    and the text is not a sea of links. Built-in metrics only: a plugin's is not there."""

    def __init__(self, report: Mapping[str, Any], docs: Docs | None) -> None:
        self._links: dict[str, tuple[str, Link]] = {}
        """Per name as printed: the metric's canonical name, and its link."""
        self._linked: set[str] = set()
        if not docs:
            return
        # The names as this code spells them (`Metric.label`), never a report's text.
        named = [str(m) for m in report.get("metric_labels") or {}]
        for gate in report["gates"]:
            named.append(str(gate["metric"]))
            coverage = gate.get("label_coverage") or {}
            gated = _metric(gate["metric"])
            if coverage.get("metric"):
                named.append(str(coverage["metric"]))
            elif gated is not None and gated.k is not None:
                named.append(f"judged@{gated.k}")  # the notes may name it
        for name in named:
            metric = _metric(name)
            if metric is None or metric.family.source != "built-in":
                continue
            url = docs.page("reference/metrics", metric.family.anchor)
            link = Link(metric.label, url, metric.family.description)
            self._links.setdefault(metric.label, (metric.name, link))
        names = sorted(self._links, key=len, reverse=True)
        self._names = re.compile("(?<![\\w@.])(" + "|".join(map(re.escape, names)) + ")(?![\\w@])")

    def link(self, text: str) -> str | Parts:
        """`text`, the first mention of each metric not yet linked made a link."""
        if not self._links:
            return text
        parts: list[object] = []
        start = 0
        for match in self._names.finditer(text):
            metric, link = self._links[match.group(1)]
            if metric in self._linked:
                continue
            self._linked.add(metric)
            parts += [text[start : match.start()], link]
            start = match.end()
        return Parts([*parts, text[start:]]) if parts else text


def _metric(name: str) -> Metric | None:
    """The metric a report names, None when this installation does not know it."""
    try:
        return parse_metric(str(name))
    except InputError:
        return None


def _trend(trend: Mapping[str, Any] | None, links: Links) -> dict[str, Any] | None:
    """The gated metric over the recent baselines and this run, as a sparkline at the
    text's size (in a code span it shrinks to 85%) with what its bottom and top stand
    for, with the dashboard's link when configured."""
    if not trend:
        return None
    metric, points = trend["metric"], trend["points"]
    values = [p["value"] for p in points] + [trend["value"]]
    known = [v for v in values if v is not None]
    first = value(metric, known[0]) if known else "n/a"
    gaps = sum(1 for p in points if p["value"] is None)
    text = (
        f"Trend of {trend['label']} over the last "
        f"{plural(len(points), 'committed baseline', 'committed baselines')} and this run:"
    )
    notes = [_scale_words(metric, spark_scale(values, trend.get("span") or 0.0))]
    if gaps:
        notes.append(f"{SPARK_GAP} marks {plural(gaps, 'gap', 'gaps')}: llm-eval history lists why")
    if trend.get("shallow"):
        notes.append("older baselines are not in this shallow clone")
    return {
        "text": text,
        "spark": sparkline(values, trend.get("span") or 0.0),
        "ends": f"{first} → {value(metric, trend['value'])}",
        "notes": f" ({'; '.join(filter(None, notes))})" if any(notes) else "",
        "dashboard": Link("dashboard", links.dashboard) if links.dashboard else None,
    }


def _scale_words(metric: str, scale: tuple[float, float] | None) -> str:
    """What the sparkline's heights stand for: `scale ▁ 33.1% to █ 41.1%` (the scale is
    at least the gate's limit wide, so a small wobble stays low); `all at 41.1%`."""
    if scale is None:
        return ""
    low, high = scale
    if high <= low:
        return f"all at {value(metric, low)}"
    return f"scale {SPARK_BARS[0]} {value(metric, low)} to {SPARK_BARS[-1]} {value(metric, high)}"


def _title(report: Mapping[str, Any]) -> str:
    """The verdict in a few words: `headline`, as the terminal prints it."""
    return headline(report)


def _lead(report: Mapping[str, Any]) -> list[str]:
    """The reason in plain words: a sentence per gate that is not passing, or the gated
    numbers when all pass."""
    if report["verdict"] == "retriever_failed":
        return [
            f"{STATUS_ICON['fail']} The check is red: the retriever failed "
            f"{failed_share(report)}, so no gate was measured. What failed, and why:"
        ]
    changes = report.get("gold_changes")
    if report["verdict"] == "gold_changed" and changes:
        counts = [
            plural(len(changes.get(kind) or []), f"question {kind}", f"questions {kind}")
            for kind in ("added", "removed", "changed")
            if changes.get(kind)
        ]
        return [
            f"{STATUS_ICON['fail']} The check is red: the gold set differs from the "
            f"baseline's ({', '.join(counts)}), so the gate cannot compare it honestly. "
            "Accept the change with one of the commands below; the gates in the details are "
            "on the unchanged questions, for information only."
        ]
    gates = report["gates"]
    if not gates:
        return [f"{STATUS_ICON['pass']} All gates pass."]
    failing = [g for g in gates if g["status"] != "pass"]
    return [_plain(g) for g in (failing or gates)]


def _plain(gate: Mapping[str, Any]) -> str:
    """`recall@5 on tier A fell from 41.1% to 33.1%: 8.1 points, more than the 3.0
    allowed.` One line in plain words for the gate's reason (the record decides)."""
    status, reason = gate["status"], gate.get("reason")
    metric, where = gate["metric"], f"{gate['metric_label']} on {gate['scope']}"
    now, before = value(metric, gate["value"]), value(metric, gate["baseline"])
    allowed = gate.get("regression_max")
    limit_words = (
        "" if allowed is None else _amount(metric, allowed, gate.get("regression_relative"))
    )
    if reason == "no_data" and gate.get("sentence"):
        return f"{STATUS_ICON[status]} {gate['sentence']}."
    drift = gate.get("drift") or {}
    if reason == "drift" and drift.get("sentence"):
        return f"{STATUS_ICON[status]} {drift['sentence']}."
    moved = _moved_words(metric, gate["delta"], before, now)
    unsure = gate.get("decision") == "inconclusive" and allowed is not None
    if unsure and status == "inconclusive" and gate.get("blocking"):
        # what a reviewer must know first: the merge is blocked, and by what
        text = (
            f"Blocks the merge: the questions cannot tell whether {where} dropped by more "
            f"than the {limit_words} allowed"
        )
        return f"{STATUS_ICON[status]} {text}" + (f"; it {moved}." if moved else ".")
    if reason in ("floor", "both") and gate.get("threshold") is not None:
        text = f"{where} is {now}, below the minimum of {value(metric, gate['threshold'])}"
        if moved:
            text += f"; it {moved}"
    elif reason == "unchanged":
        text = f"{where}: no query's score changed ({now})"
    elif moved:
        text = f"{where} {moved}"
    elif gate["baseline"] is None:
        text = f"{where} is {now}"
    else:
        text = f"{where} stayed at {now}"
    if reason in ("regression", "both"):
        text += f", more than the {limit_words} allowed"
    if unsure:
        text += (
            f"; the questions cannot tell yet whether it dropped by more than the {limit_words} "
            "allowed"
        )
    if reason == "slice":
        text += "; some tags dropped beyond the limit"
    warning = " (a warning: it does not block the merge)" if status == "warn" else ""
    return f"{STATUS_ICON[status]} {text}{warning}."


def _moved_words(metric: str, change: float | None, before: str, now: str) -> str:
    """`fell from 41.1% to 33.1%: 8.1 points`, `rose from 0.50 to 0.55`; empty when
    there is no change or no baseline."""
    loss = loss_of(metric, change)
    if loss is None or loss == 0 or change is None:
        return ""
    lower = parse_metric(metric).lower_is_better
    if loss > 0:
        verb = "rose" if lower else "fell"
        return f"{verb} from {before} to {now}: {_amount(metric, change)}"
    return f"{'fell' if lower else 'rose'} from {before} to {now}"


def _amount(metric: str, number: float, relative: bool | None = False) -> str:
    """A size of change in words: `8.1 points`, `0.050`, `20%`."""
    if relative:
        return f"{abs(number) * 100:.0f}%"
    return delta(metric, abs(number)).lstrip("+").replace(" pp", " points")


def _gold_change_lists(changes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Added, removed and changed questions: ids as code spans, with where they are."""
    if not changes:
        return []
    locations = changes.get("locations") or {}
    lists = []
    for kind in ("added", "changed", "removed"):
        ids = changes.get(kind) or []
        if ids:
            rows = []
            for query_id in ids[:CHANGES_SHOWN]:
                place = locations.get(query_id)
                where = f"{place['file']}:{place['line']}" if place else ""
                rows.append({"id": Code(query_id), "where": where})
            lists.append({"title": f"{kind.capitalize()} ({len(ids)})", "ids": rows})
    return lists


def _next_steps(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the reader can do about it, with the commands."""
    verdict = report["verdict"]
    changes = report.get("gold_changes") or {}
    if verdict == "retriever_failed":
        return [
            {
                "text": "Fix the cause (the retriever's settings or its service) and run "
                "the gate again; each failed query's error is in report.json "
                "(queries.failed).",
                "commands": [],
            }
        ]
    if verdict == "gold_changed":
        commands = changes.get("accept_commands") or ["llm-eval baseline refresh"]
        return [
            {
                "text": "If the change is intended, accept it with one of these: a new "
                "baseline to commit, or a gate on the unchanged questions only:",
                "commands": [Code(c) for c in commands],
            }
        ]
    reasons = {g.get("reason") for g in report["gates"]}
    steps: list[dict[str, Any]] = []
    if report["changes"]["hit_to_miss_count"]:
        steps.append(
            {"text": "Look at the questions that lost their relevant result.", "commands": []}
        )
    if reasons & {"regression", "both", "slice"}:
        steps.append(
            {
                "text": "If the drop is intended, refresh the baseline and commit it:",
                "commands": [Code("llm-eval baseline refresh")],
            }
        )
    if reasons & {"floor", "both"}:
        steps.append(
            {
                "text": "The value is below a gate's floor: raise it, or lower the "
                "floor in the ship criteria if it was set too high.",
                "commands": [],
            }
        )
    if "drift" in reasons:
        steps.append(
            {
                "text": "Each change since the reference baseline was allowed, their sum is "
                "not: if the new level is intended, set the gate's since to a newer "
                "reference in the ship criteria.",
                "commands": [],
            }
        )
    if "cannot_tell" in reasons:
        steps.append(
            {
                "text": "The gold set is too small to tell a drop of the allowed size; "
                "see which questions to add:",
                "commands": [Code("llm-eval gold plan")],
            }
        )
    return steps


def _problem(gate: Mapping[str, Any]) -> dict[str, Any]:
    """A gate that is not passing: its sentence, and the tags that missed its limit."""
    # an inconclusive tag is information, never a warning
    missed = [s for s in gate.get("slices") or [] if s["status"] in ("warn", "fail")]
    summary = ""
    if missed:
        names = ", ".join(str(s["slice"]).partition(":")[2] for s in missed)
        summary = (
            f"{subject(gate['metric'], gate['scope'])}: "
            f"{plural(len(missed), 'tag', 'tags')} missed the limit ({names})"
        )
    icon = STATUS_ICON[gate["status"]]
    if not gate["sentence"]:
        return {"icon": icon, "sentence": summary or f"{gate['name']} did not pass", "details": []}
    worst = worst_status(s["status"] for s in missed)
    details = [{"icon": STATUS_ICON[worst], "sentence": summary}] if summary else []
    return {"icon": icon, "sentence": gate["sentence"], "details": details}


def _gold_blob(report: Mapping[str, Any], links: Links) -> str | None:
    """The link prefix of gold files: the repository's blob URL at the head commit, and
    the folder the gate ran in (gold paths in the report are relative to it)."""
    if links.blob is None:
        return None
    return links.blob + quote(str(report["provenance"].get("repo_folder") or ""))


def _notes(report: Mapping[str, Any]) -> list[str]:
    notes = [*judge_lines(report), *coverage_lines(report), *missing_lines(report)]
    failed = report["queries"].get("failed") or {}
    if failed and report["verdict"] != "retriever_failed":
        notes.append(
            f"The retriever failed on {plural(len(failed), 'gold query', 'gold queries')}: "
            "not scored, counted in error_rate."
        )
    reranked = report["queries"].get("rerank_failed")
    if reranked:
        notes.append(rerank_failure_line(reranked))
    return notes + detail_lines(report) + list(report["notes"])


def rerank_failure_line(failed: Mapping[str, Any]) -> str:
    """The reranker's failed pairs, counted by kind, with the first reason."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in failed["by_kind"].items())
    queries = len(failed["queries"])
    first = failed["causes"][0]["cause"] if failed["causes"] else ""
    return (
        f"The reranker could not score {plural(failed['pairs'], 'pair', 'pairs')} ({kinds}) "
        f"on {plural(queries, 'gold query', 'gold queries')}, which kept the first stage's "
        f"order" + (f"; the first reason: {first}" if first else "") + "."
    )


def _footer(report: Mapping[str, Any], links: Links) -> list[Any]:
    """Provenance, one short sentence each."""
    provenance = report["provenance"]
    baseline = provenance.get("baseline")
    sentences: list[Any] = ["No baseline"]
    if baseline is not None:
        sentences = [
            f"Baseline: commit {_short(baseline.get('git_commit'))}, "
            f"{_age_words(baseline.get('age_days'))} ({baseline.get('path')})"
        ]
    fingerprints = _fingerprint_words(provenance.get("fingerprints_match"))
    if fingerprints:
        sentences.append(f"Fingerprints: {fingerprints}")
    head = links.head_sha or provenance.get("head_commit")
    sentences.append(f"This PR: commit {_short(head)}")
    sentences.append(f"llm-eval {report['tool_version']}")
    return sentences + ([Link("workflow run", links.run)] if links.run else [])


def _short(commit: str | None) -> str:
    return str(commit)[:7] if commit else "unknown"


def _age_words(days: float | None) -> str:
    if days is None:
        return "of unknown age"
    if days < 1:
        return "less than a day old"
    return f"{plural(round(days), 'day', 'days')} old"


def _fingerprint_words(match: Mapping[str, bool] | None) -> str:
    if not match:
        return ""
    if not all(match.values()):
        return ""  # what differs is said once, in the notes above
    names = [_FINGERPRINT_NAMES.get(name, name) for name in match]
    return f"the {_joined(names)} match the baseline's"


def _joined(words: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1]]))
