"""`report.json`: the single source for every rendering of a gate run.

`build_report` is a pure function over the pipeline's records. The output formats
(`llm_eval.formats`: terminal text, JSON, Markdown, JUnit XML) read only the report
dict, so a report can be rendered by a different job than the one that computed it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from llm_eval.against_baseline import Comparison, RankChange, describe_diff, rank_changes
from llm_eval.baseline import Baseline
from llm_eval.criteria import Statistics
from llm_eval.errors import ExitCode
from llm_eval.failures import CAUSES_SHOWN, FailureSummary
from llm_eval.fingerprint import GoldDiff
from llm_eval.gate import GateResult, blocks, unmeasured, verdict
from llm_eval.gate_entries import corrected_entry, gate_entry, number
from llm_eval.gold import GoldQuery
from llm_eval.history.series import History, trend_entry
from llm_eval.inputs import Inputs
from llm_eval.judged.arithmetic import JudgeSummary
from llm_eval.judged.correction import correct
from llm_eval.metrics import parse_metric
from llm_eval.report_types import Report, Verdict
from llm_eval.score_columns import Column
from llm_eval.scoring import Measurement
from llm_eval.slices import ScoreTable, breakdown, slice_values
from llm_eval.wording.builds import builds_notes
from llm_eval.wording.english import plural
from llm_eval.wording.gates import gold_change_sentence, subject

SCHEMA_VERSION = 1
CHANGES_LISTED = 200
"""At most this many hit→miss and miss→hit queries are listed (the counts are exact)."""
DETAILS_LISTED = 200
"""At most this many ambiguous matches, unrejected queries, stale hits and conflicts."""


def _slices(
    queries: Sequence[GoldQuery],
    now: ScoreTable,
    before: ScoreTable | None,
    metrics: Sequence[str],
) -> list[dict[str, Any]]:
    current = slice_values(queries, now, metrics)
    previous = breakdown(queries, before, metrics) if before is not None else {}
    rows = []
    for name, piece in current.items():
        if piece.n == 0 and name != "overall":
            continue  # no scored query (e.g. rejection queries only): nothing to average
        kind, _, label = name.partition(":")
        base_row = previous.get(name, {})
        cells = {}
        for metric in metrics:
            mean = piece.metrics[metric]
            now_value = number(mean.value)
            base_value = number(float(base_row[metric])) if metric in base_row else None
            change = (
                now_value - base_value if now_value is not None and base_value is not None else None
            )
            cells[metric] = {
                "value": now_value,
                "baseline": base_value,
                "delta": change,
                "n": mean.n,
            }
        rows.append(
            {
                "slice": name,
                "kind": kind,
                "name": label or "all queries",
                "n": piece.n,
                "n_baseline": base_row.get("n"),
                "metrics": cells,
            }
        )
    return rows


def _restricted(table: ScoreTable, only: frozenset[str] | None) -> ScoreTable:
    """The table limited to the compared queries (all of them when `only` is None)."""
    if only is None:
        return table
    return ScoreTable(
        {q: v for q, v in table.per_query.items() if q in only},
        {q: v for q, v in table.service.items() if q in only},
    )


def _change_entry(change: RankChange, query: GoldQuery) -> dict[str, Any]:
    return {
        "query_id": query.query_id,
        "query": query.query,
        "tier": query.tier,
        "tags": list(query.tags),
        "rank_before": change.rank_before,
        "rank_after": change.rank_after,
        "relevant": [doc for doc, _ in query.relevant],
        "file": query.path,
        "line": query.line,
    }


def _matching(inputs: Inputs, measurement: Measurement) -> dict[str, Any]:
    """Which matcher credited each query's results, and the ambiguous page matches."""
    by_matcher = _by_matcher(measurement.matched_by, measurement.credited)
    by_id = inputs.gold.by_id() if measurement.ambiguous else {}
    return {
        "page_tolerance": inputs.config.matching.page_tolerance,
        "f1_threshold": inputs.config.matching.f1_threshold,
        "by_matcher": by_matcher,
        "matched_by": dict(measurement.matched_by.items()),  # a column's, read in blocks
        "ambiguous_count": len(measurement.ambiguous),
        "ambiguous": [
            {
                "query_id": a.query_id,
                "rank": a.rank,
                "document": a.document,
                "page": a.page,
                "references": [_reference(by_id[a.query_id], i) for i in a.references],
                "credited": a.credited,
            }
            for a in measurement.ambiguous[:DETAILS_LISTED]
        ],
    }


def _by_matcher(
    matched_by: Mapping[str, str], credited: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    """Per matcher (in the order queries first name them), its queries and how many of
    their units were credited: from the arrays when both are columns of the same
    queries, as a million-query gate's are."""
    if (
        isinstance(matched_by, Column)
        and isinstance(credited, Column)
        and matched_by.places is credited.places
    ):
        codes, firsts = np.unique(matched_by.array, return_index=True)
        named: dict[str, dict[str, int]] = {}
        for code in codes[np.argsort(firsts)].tolist():
            chosen = matched_by.array == code
            named[matched_by.read(code)] = {
                "queries": int(np.count_nonzero(chosen)),
                "credited": int(credited.array[chosen].sum()),
            }
        return named
    by_matcher: dict[str, dict[str, int]] = {}
    for query_id, name in matched_by.items():
        counts = by_matcher.setdefault(name, {"queries": 0, "credited": 0})
        counts["queries"] += 1
        counts["credited"] += credited.get(query_id, 0)
    return by_matcher


def _reference(query: GoldQuery, index: int) -> dict[str, Any]:
    reference = query.gold_references[index]
    return {"index": index, "document": reference.document, "page": reference.page}


def _rejections(inputs: Inputs, measurement: Measurement) -> dict[str, Any]:
    """How the rejection queries were handled, and those answered with confidence."""
    outcomes = measurement.rejections
    by_id = inputs.gold.by_id()
    answered = [o for o in outcomes if not o.rejected]
    return {
        "score_threshold": inputs.config.rejection_score_threshold,
        "queries": len(outcomes),
        "rejected": len(outcomes) - len(answered),
        "by_reason": dict(Counter(o.reason for o in outcomes)),
        "not_rejected_count": len(answered),
        "not_rejected": [
            {
                "query_id": o.query_id,
                "query": by_id[o.query_id].query,
                "reason": o.reason,
                "top_score": o.top_score,
                "file": by_id[o.query_id].path,
                "line": by_id[o.query_id].line,
            }
            for o in answered[:DETAILS_LISTED]
        ],
    }


def _context(measurement: Measurement) -> dict[str, Any] | None:
    """Stale hits (with what supersedes them) and conflicts; None without a sidecar."""
    context = measurement.context
    if context is None:
        return None
    return {
        "k": context.k,
        "stale_hits_count": len(context.stale_hits),
        "stale_hits": [
            {
                "query_id": h.query_id,
                "rank": h.rank,
                "doc_id": h.doc_id,
                "superseded_by": h.superseded_by,
                "reason": h.reason,
            }
            for h in context.stale_hits[:DETAILS_LISTED]
        ],
        "conflicts_count": len(context.conflicts),
        "conflicts": [
            {"query_id": c.query_id, "version_key": c.version_key, "doc_ids": list(c.doc_ids)}
            for c in context.conflicts[:DETAILS_LISTED]
        ],
    }


def _corrections(
    summary: JudgeSummary, now: ScoreTable, metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """Each judged metric the human labels give too, over all judged queries, corrected
    at the default alpha of the gates' statistics."""
    entries = []
    for metric in metrics:
        predicted = {q: row[metric] for q, row in now.per_query.items() if metric in row}
        labels = {
            q: summary.labels[q][metric] for q in predicted if metric in summary.labels.get(q, {})
        }
        entry = corrected_entry(correct(metric, predicted, labels, Statistics().alpha))
        if entry is not None:
            entries.append(entry)
    return entries


def _judge(
    summary: JudgeSummary | None, now: ScoreTable, metrics: Sequence[str]
) -> dict[str, Any] | None:
    """The judge's model, calls, tokens, cost and agreement with the gold labels, and
    its values corrected by the labels."""
    if summary is None:
        return None
    calibration = summary.calibration
    judged = [m for m in metrics if parse_metric(m).kind == "judged"]
    corrected = _corrections(summary, now, judged)
    fixed = {c["metric"] for c in corrected}
    return {
        "corrected": corrected,
        "uncorrected": [m for m in judged if m not in fixed],
        "model": summary.model,
        "calls": summary.calls,
        "cached": summary.cached,
        "failed": summary.failed,
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "cost": summary.cost,
        "calibration": None
        if calibration is None
        else {
            "chunks": calibration.n,
            "agreement": calibration.agreement,
            "kappa": calibration.kappa,
            "precision": calibration.precision,
            "recall": calibration.recall,
        },
        "embeddings": {
            "calls": summary.embedding_calls,
            "cached": summary.embedding_cached,
            "tokens": summary.embedding_tokens,
            "pooled": summary.embedding_pooled,
        },
        "answers": {
            name: {"answers": r.answers, "unreadable": r.unreadable, "unreadable_share": r.share}
            for name, r in summary.readability.items()
        },
        "repeats": summary.repeats,
        "spread": dict(summary.spread),
        "flips_count": len(summary.flips),
        "flips": [{"query_id": q, "rank": r} for q, r in summary.flips[:DETAILS_LISTED]],
        "unscored_count": len(summary.unscored),
        "unscored": dict(list(summary.unscored.items())[:DETAILS_LISTED]),
    }


def _unpaired_notes(comparison: Comparison, baseline: Baseline | None) -> list[str]:
    """Gates on ratios pooled over positions get no paired test and no per-tag checks."""
    if baseline is None:
        return []
    pooled = dict.fromkeys(
        r.gate.metric
        for r in comparison.results
        if parse_metric(r.gate.metric).family.pooling == "positions"
    )
    return [
        f"{parse_metric(m).label} pools positions over queries: its gates are checked against the "
        "baseline without a paired test or per-tag checks."
        for m in pooled
    ]


def _age_days(created_at: str, now: datetime) -> float | None:
    try:
        created = datetime.fromisoformat(created_at)
    except ValueError:
        return None
    if created.tzinfo is None or now.tzinfo is None:
        return None
    return round((now - created).total_seconds() / 86400, 1)


def build_report(
    inputs: Inputs,
    measurement: Measurement,
    comparison: Comparison,
    baseline: Baseline | None,
    *,
    baseline_path: str,
    fingerprints: Mapping[str, str | None],
    head_commit: str | None,
    timings: Mapping[str, float],
    tool_version: str,
    now: datetime,
    from_cache: int = 0,
    repo_folder: str | None = None,
    history: History | None = None,
) -> Report:
    """Everything any rendering needs, as a JSON-ready dict. `from_cache` counts the
    answers the retrieval cache gave instead of the retriever; `repo_folder` is where the
    gate ran, relative to the repository root (paths in the report are relative to it);
    `history` holds the recent committed baselines, for the gated metric's trend."""
    status: Verdict = verdict(comparison.results)
    only = comparison.compared_on
    before = None
    if baseline is not None:
        before = _restricted(baseline.table, only)
    now_scores = _restricted(measurement.table, only)
    by_id = inputs.gold.by_id()
    k = inputs.gating_k
    lost, gained = (
        rank_changes(baseline.first_relevant_rank, measurement.first_relevant_rank, k, only)
        if baseline is not None
        else ([], [])
    )
    metrics = list(inputs.metrics)
    gates = [gate_entry(r) for r in comparison.results]
    exit_code = ExitCode.GATE_FAILED if blocks(comparison.results) else ExitCode.PASS
    summary = _summary(gates)
    if not comparison.gold_accepted:  # no trustworthy comparison: say why, first
        assert comparison.gold_diff is not None
        status, exit_code = "gold_changed", ExitCode.BAD_INPUT
        summary = [_gold_change_sentence(comparison.gold_diff), *summary]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool_version": tool_version,
        "verdict": status,
        "exit_code": int(exit_code),
        "summary": summary,
        "gates": gates,
        "metrics": metrics,
        "metric_labels": {m: parse_metric(m).label for m in metrics},
        "slices": _slices(inputs.gold.queries, now_scores, before, metrics),
        "changes": {
            "k": k,
            "hit_to_miss_count": len(lost),
            "miss_to_hit_count": len(gained),
            "hit_to_miss": [_change_entry(c, by_id[c.query_id]) for c in lost[:CHANGES_LISTED]],
            "miss_to_hit": [_change_entry(c, by_id[c.query_id]) for c in gained[:CHANGES_LISTED]],
        },
        "queries": {
            "gold": len(inputs.gold.queries),
            "evaluated": len(measurement.first_relevant_rank),
            "compared": sum(
                1 for q in measurement.first_relevant_rank if only is None or q in only
            ),
            "missing_from_run": list(measurement.missing),
            "failed": dict(measurement.failed),
            "rerank_failed": rerank_failures(measurement.rerank_failed),
            "rejection": len(measurement.rejection),
            "not_in_gold": measurement.not_in_gold,
        },
        "matching": _matching(inputs, measurement),
        "rejections": _rejections(inputs, measurement),
        "context": _context(measurement),
        "gold_changes": _gold_changes(comparison, by_id),
        "judge": _judge(measurement.judge, now_scores, metrics),
        "trend": _trend(comparison.results, history),
        "notes": [
            *_notes(baseline, baseline_path, comparison, fingerprints),
            *_unpaired_notes(comparison, baseline),
            *_cache_notes(from_cache, len(measurement.service)),
            *_repeat_notes(measurement, baseline, metrics),
            *coverage_notes(comparison.results),
            *builds_notes(comparison.results),
        ],
        "retrieval": {"from_cache": from_cache},
        "provenance": {
            **_provenance(baseline, baseline_path, fingerprints, head_commit, now),
            "repo_folder": repo_folder,
        },
        "timings": {name: round(seconds, 3) for name, seconds in timings.items()},
    }


def failed_report(
    inputs: Inputs,
    failure: FailureSummary,
    message: str,
    baseline: Baseline | None,
    *,
    baseline_path: str,
    fingerprints: Mapping[str, str | None],
    head_commit: str | None,
    timings: Mapping[str, float],
    tool_version: str,
    now: datetime,
    repo_folder: str | None = None,
) -> Report:
    """The report of a run refused because the retriever failed on more queries than
    `max_error_rate` allows (`message` is the error line): verdict `retriever_failed`,
    exit code 4, the failures summarised, and every gate unmeasured."""
    metrics = list(inputs.metrics)
    no_changes: list[dict[str, Any]] = []
    return {
        "schema_version": SCHEMA_VERSION,
        "tool_version": tool_version,
        "verdict": "retriever_failed",
        "exit_code": int(ExitCode.EXTERNAL),
        "summary": [message],
        "gates": [gate_entry(unmeasured(gate)) for gate in inputs.criteria.gates],
        "metrics": metrics,
        "metric_labels": {m: parse_metric(m).label for m in metrics},
        "slices": [],
        "changes": {
            "k": inputs.gating_k,
            "hit_to_miss_count": 0,
            "miss_to_hit_count": 0,
            "hit_to_miss": no_changes,
            "miss_to_hit": no_changes,
        },
        "queries": {
            "gold": len(inputs.gold.queries),
            "evaluated": 0,
            "compared": 0,
            "missing_from_run": [],
            "failed": dict(failure.failed),
            "rejection": 0,
            "not_in_gold": 0,
        },
        "matching": {},
        "rejections": {},
        "context": None,
        "gold_changes": None,
        "judge": None,
        "retriever_failure": retriever_failure_entry(failure, message),
        "notes": [],
        "retrieval": {"from_cache": 0},
        "provenance": {
            **_provenance(baseline, baseline_path, fingerprints, head_commit, now),
            "repo_folder": repo_folder,
        },
        "timings": {name: round(seconds, 3) for name, seconds in timings.items()},
    }


def retriever_failure_entry(failure: FailureSummary, message: str) -> dict[str, Any]:
    """The failures as report.json keeps them: counts by reason, the first distinct
    causes (as the error line shows them) and how many more there are."""
    causes = failure.causes
    return {
        "message": message,
        "where": failure.where,
        "failed": len(failure.failed),
        "queries": failure.queries,
        "share": failure.share,
        "max_error_rate": failure.max_error_rate,
        "by_reason": dict(failure.by_kind),
        "causes": [{"cause": cause, "count": n} for cause, n in causes[:CAUSES_SHOWN]],
        "other_causes": max(len(causes) - CAUSES_SHOWN, 0),
    }


def _trend(results: Sequence[GateResult], history: History | None) -> dict[str, Any] | None:
    """The first `error` gate's (else the first gate's) value over the recent committed
    baselines, ending in this run's value; None without a committed baseline."""
    if history is None or not history.entries or not results:
        return None
    result = next((r for r in results if r.gate.severity == "error"), results[0])
    gate = result.gate
    return trend_entry(
        history.entries,
        gate.name,
        gate.metric,
        subject(gate.metric, gate.scope.label()),
        gate.regression_max or 0.0,
        result.value,
        history.shallow,
    )


def _summary(gates: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every sentence about a limit that is missed: gates first, then their slices."""
    lines = []
    for gate in gates:
        if gate["sentence"]:
            lines.append(gate["sentence"])
        lines += [s["sentence"] for s in gate["slices"] if s["status"] in ("fail", "warn")]
    return lines


ACCEPT_GOLD_CHANGE = ("llm-eval baseline refresh", "llm-eval gate --allow-gold-change")
"""The commands that accept a changed gold set: a new baseline, or a comparison on the
queries that did not change."""


def _gold_change_sentence(diff: GoldDiff) -> str:
    return gold_change_sentence(describe_diff(diff), ACCEPT_GOLD_CHANGE)


def _gold_changes(comparison: Comparison, by_id: Mapping[str, GoldQuery]) -> dict[str, Any] | None:
    diff = comparison.gold_diff
    if diff is None or diff.empty:
        return None
    located = [q for q in (*diff.added, *diff.changed) if q in by_id]
    return {
        "added": list(diff.added),
        "removed": list(diff.removed),
        "changed": list(diff.changed),
        "compared_on": len(comparison.compared_on or ()),
        "accepted": comparison.gold_accepted,
        "locations": {q: {"file": by_id[q].path, "line": by_id[q].line} for q in located},
        "accept_commands": list(ACCEPT_GOLD_CHANGE),
    }


def coverage_notes(results: Sequence[GateResult]) -> list[str]:
    """One note when a gate's judged@k cannot be read, its labels judging no document
    not relevant (`LabelCoverage.readable`): said once, not beside each drop."""
    unread = [r.coverage.metric for r in results if r.coverage and not r.coverage.readable]
    if not unread:
        return []
    names = ", ".join(dict.fromkeys(parse_metric(m).label for m in unread))
    return [
        f"The gold labels list only relevant documents (no document is judged not "
        f"relevant), so {names} counts the relevant results and cannot show holes in "
        "the labels: it is not read beside the gates. Add non-relevant judgments (grade "
        "0) to read it."
    ]


def _notes(
    baseline: Baseline | None,
    baseline_path: str,
    comparison: Comparison,
    fingerprints: Mapping[str, str | None],
) -> list[str]:
    if baseline is None:
        return [
            f"No baseline at {baseline_path}: only the absolute floors were checked; "
            "run `llm-eval baseline refresh` to create one."
        ]
    notes = []
    if comparison.gold_diff is not None and not comparison.gold_diff.empty:
        unchanged = plural(
            len(comparison.compared_on or ()), "unchanged query", "unchanged queries"
        )
        notes.append(
            f"The gold set changed since the baseline; compared on the {unchanged}."
            if comparison.gold_accepted
            else f"The gold set changed since the baseline; the gates shown are on the "
            f"{unchanged}, for information only."
        )
    for name in ("corpus", "retriever", "criteria", "scoring", "versions"):
        if baseline.fingerprints.get(name) != fingerprints.get(name):
            verb = "differ" if name in ("criteria", "versions") else "differs"
            notes.append(f"The {name} {verb} from the baseline's.")
    return notes


def _repeat_notes(
    measurement: Measurement, baseline: Baseline | None, metrics: Sequence[str]
) -> list[str]:
    """The judged values and the baseline's must be means over as many repeats: the
    judge's verdicts on a chunk that did not change then come from the same cache
    entries on both sides and cancel; with more repeats on one side they add noise."""
    judge = measurement.judge
    judged = [m for m in metrics if parse_metric(m).kind == "judged"]
    if judge is None or baseline is None or not set(judged) & set(baseline.metrics):
        return []
    before = baseline.judge_repeats or 1
    if before == judge.repeats:
        return []
    return [
        f"The baseline's judged values are means over {plural(before, 'repeat', 'repeats')}, "
        f"these over {judge.repeats}: on chunks that did not change the judge's noise does "
        f"not cancel. Refresh the baseline with --judge-repeat {judge.repeats}."
    ]


RERANK_CAUSES = 3
"""Distinct reasons a reranker failed that the report keeps, the most frequent first."""


def rerank_failures(failed: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    """The pairs a reranker could not score, for report.json: how many, on which queries
    (each kept the first stage's order), by kind (the text before ': ', most first) and
    the first `RERANK_CAUSES` distinct reasons counted; None when every pair was scored."""
    reasons = [reason for query in failed.values() for reason in query]
    if not reasons:
        return None
    kinds = Counter(reason.partition(": ")[0] for reason in reasons)
    causes = Counter(reasons).most_common(RERANK_CAUSES)
    return {
        "pairs": len(reasons),
        "queries": list(failed),
        "by_kind": dict(kinds.most_common()),
        "causes": [{"pairs": n, "cause": cause} for cause, n in causes],
    }


def _cache_notes(from_cache: int, answers: int) -> list[str]:
    if not from_cache:
        return []
    return [
        f"{from_cache} of {plural(answers, 'answer', 'answers')} came from the retrieval cache "
        "of earlier runs, not from the retriever (--no-cache asks it again)."
    ]


def _provenance(
    baseline: Baseline | None,
    baseline_path: str,
    fingerprints: Mapping[str, str | None],
    head_commit: str | None,
    now: datetime,
) -> dict[str, Any]:
    base: dict[str, Any] | None = None
    if baseline is not None:
        base = {
            "path": baseline_path,
            "created_at": baseline.created_at,
            "age_days": _age_days(baseline.created_at, now),
            "git_commit": baseline.git_commit,
            "tool_version": baseline.tool_version,
            "fingerprints": dict(baseline.fingerprints),
        }
    match = (
        {k: baseline.fingerprints.get(k) == v for k, v in fingerprints.items()}
        if baseline is not None
        else None
    )
    return {
        "head_commit": head_commit,
        "generated_at": now.isoformat(timespec="seconds"),
        "fingerprints": dict(fingerprints),
        "fingerprints_match": match,
        "baseline": base,
    }
