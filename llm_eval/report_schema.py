"""The schema of `report.json` (docs/report-json.md), checked before anything renders it.

`llm-eval comment` may run in another job than the gate, on a file anyone could
have edited: a report with no gates, an infinite age or a string where a number
belongs is an input error naming the file and the key, not a crash in a renderer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.schema import (
    Check,
    boolean,
    list_of,
    map_of,
    number,
    one_of,
    optional,
    record,
    text,
    whole,
)

STATUSES = ("pass", "warn", "fail", "inconclusive")
DECISIONS = ("pass", "fail", "inconclusive")
VERDICTS = ("pass", "warn", "inconclusive", "fail", "gold_changed", "retriever_failed")

_count = whole(0)
_maybe_number = optional(number)
_maybe_text = optional(text)

_STATS = record(
    {
        "n": _count,
        "unchanged": optional(boolean),
        "ci_low": _maybe_number,
        "ci_high": _maybe_number,
        "confidence": optional(number),
        "p_value": _maybe_number,
        "method": _maybe_text,
        "significant": optional(boolean),
        "alpha": _maybe_number,
        "builds": optional(
            record(
                {
                    "before": whole(1),
                    "after": whole(1),
                    "sd": number,
                    "values": list_of(number),
                }
            )
        ),
    }
)
_GATE_SLICE = record(
    {
        "slice": text,
        "n": _count,
        "value": _maybe_number,
        "baseline": _maybe_number,
        "delta": _maybe_number,
        "status": one_of(*STATUSES),
        "judged": boolean,
        "unchanged": optional(boolean),
        "p_value": _maybe_number,
        "p_adjusted": _maybe_number,
        "ci_low": _maybe_number,
        "ci_high": _maybe_number,
        "sentence": _maybe_text,
    },
    frozenset({"slice", "status"}),
)
_CORRECTED = record(
    {
        "metric": text,
        "value": number,
        "ci_low": number,
        "ci_high": number,
        "judge": number,
        "labelled": whole(1),
        "unlabelled": _count,
        "confidence": number,
    },
    frozenset({"metric", "value", "ci_low", "ci_high", "judge", "labelled", "confidence"}),
)
_CALIBRATION = record(
    {
        "chunks": _count,
        "agreement": number,
        "kappa": _maybe_number,
        "precision": _maybe_number,
        "recall": _maybe_number,
    },
    frozenset({"chunks", "agreement", "kappa", "precision", "recall"}),
)
_ANSWERS = record(
    {"answers": _count, "unreadable": _count, "unreadable_share": _maybe_number},
    frozenset({"answers", "unreadable_share"}),
)
_JUDGE = record(
    {
        "corrected": list_of(_CORRECTED),
        "uncorrected": list_of(text),
        "model": text,
        "calibration": optional(_CALIBRATION),
        "calls": _count,
        "cached": _count,
        "failed": _count,
        "prompt_tokens": _count,
        "completion_tokens": _count,
        "cost": number,
        "unscored_count": _count,
        "answers": map_of(_ANSWERS),
        "embeddings": record({"pooled": _count}),
        "repeats": whole(1),
        "spread": map_of(number),
        "flips_count": _count,
    },
    # what the comment's judge lines read; a report written by llm-eval has them all
    frozenset({"model", "calibration", "calls", "cached", "failed", "prompt_tokens"})
    | frozenset({"completion_tokens", "cost", "unscored_count", "repeats", "spread"})
    | frozenset({"flips_count"}),
)
_DRIFT = record(
    {
        "label": text,
        "commit": text,
        "drift_max": number,
        "status": one_of(*STATUSES),
        "decision": one_of(*DECISIONS),
        "blocking": boolean,
        "value": _maybe_number,
        "reference": _maybe_number,
        "delta": _maybe_number,
        "n": _count,
        "stats": optional(_STATS),
        "sentence": _maybe_text,
    },
    frozenset({"label", "status", "decision", "blocking"}),
)
_GATE = record(
    {
        "name": text,
        "metric": text,
        "metric_label": text,
        "scope": text,
        "severity": one_of("error", "warning"),
        "status": one_of(*STATUSES),
        "blocking": boolean,
        "decision": optional(one_of(*DECISIONS)),
        "value": _maybe_number,
        "baseline": _maybe_number,
        "delta": _maybe_number,
        "threshold": _maybe_number,
        "regression_max": _maybe_number,
        "n": optional(_count),
        "floor_ok": optional(boolean),
        "regression_ok": optional(boolean),
        "sentence": _maybe_text,
        "power_warning": _maybe_text,
        "more_queries": optional(_count),
        "statistics": optional(record({"on_inconclusive": one_of("fail", "warn")})),
        "stats": optional(_STATS),
        "power": optional(
            record(
                {
                    "detectable_drop": _maybe_number,
                    "queries_needed": optional(_count),
                    "builds": optional(list_of(whole(1))),
                    "more_builds": optional(
                        record({"builds": whole(1), "detectable_drop": _maybe_number})
                    ),
                }
            )
        ),
        "slices": list_of(_GATE_SLICE),
        "corrected": optional(_CORRECTED),
        "label_coverage": optional(
            record(
                {
                    "metric": text,
                    "value": number,
                    "baseline": _maybe_number,
                    "delta": _maybe_number,
                    "fell": boolean,
                    "sentence": text,
                },
                frozenset({"metric", "value", "fell", "sentence"}),
            )
        ),
        "drift": _DRIFT,
    },
    frozenset(
        {"name", "metric", "metric_label", "scope", "severity", "status", "value", "baseline"}
        | {"delta", "threshold", "regression_max", "sentence"}
    ),
)
_SLICE = record(
    {
        "slice": text,
        "kind": text,
        "name": text,
        "n": _count,
        "n_baseline": optional(_count),
        "metrics": map_of(
            record(
                {
                    "value": _maybe_number,
                    "baseline": _maybe_number,
                    "delta": _maybe_number,
                    "n": optional(_count),
                }
            )
        ),
    },
    frozenset({"slice", "kind", "name", "n", "metrics"}),
)
_CHANGE = record(
    {
        "query_id": text,
        "query": text,
        "tier": text,
        "tags": list_of(text),
        "rank_before": optional(_count),
        "rank_after": optional(_count),
        "relevant": list_of(text),
        "file": _maybe_text,
        "line": optional(whole(1)),
    },
    frozenset({"query_id", "query", "tags", "rank_before", "rank_after"}),
)
_CHANGES = record(
    {
        "k": optional(whole(1)),
        "hit_to_miss_count": _count,
        "miss_to_hit_count": _count,
        "hit_to_miss": list_of(_CHANGE),
        "miss_to_hit": list_of(_CHANGE),
    },
    frozenset({"hit_to_miss_count", "miss_to_hit_count", "hit_to_miss", "miss_to_hit"}),
)
_FINGERPRINTS = map_of(_maybe_text)
_PROVENANCE = record(
    {
        "head_commit": _maybe_text,
        "repo_folder": _maybe_text,
        "generated_at": _maybe_text,
        "fingerprints": _FINGERPRINTS,
        "fingerprints_match": optional(map_of(optional(boolean))),
        "baseline": optional(
            record(
                {
                    "path": _maybe_text,
                    "created_at": _maybe_text,
                    "age_days": _maybe_number,
                    "git_commit": _maybe_text,
                    "tool_version": _maybe_text,
                    "fingerprints": _FINGERPRINTS,
                }
            )
        ),
    }
)
_GOLD_CHANGES = record(
    {
        "added": list_of(text),
        "removed": list_of(text),
        "changed": list_of(text),
        "compared_on": optional(_count),
        "accepted": boolean,
        "locations": map_of(record({"file": text, "line": whole(1)})),
        "accept_commands": list_of(text),
    }
)
_RERANK_FAILED = record(
    {
        "pairs": _count,
        "queries": list_of(text),
        "by_kind": map_of(_count),
        "causes": list_of(record({"pairs": _count, "cause": text}, frozenset({"pairs", "cause"}))),
    },
    frozenset({"pairs", "queries", "by_kind", "causes"}),
)
_QUERIES = record(
    {
        "gold": _count,
        "evaluated": _count,
        "compared": optional(_count),
        "missing_from_run": list_of(text),
        "rejection": _count,
        "not_in_gold": _count,
        "rerank_failed": optional(_RERANK_FAILED),
    }
)
_TREND = record(
    {
        "gate": text,
        "metric": text,
        "label": text,
        "span": number,
        "points": list_of(
            record(
                {"commit": _maybe_text, "date": _maybe_text, "value": _maybe_number},
                frozenset({"value"}),
            )
        ),
        "value": _maybe_number,
        "shallow": boolean,
    },
    frozenset({"metric", "label", "points", "value"}),
)
_RETRIEVER_FAILURE = record(
    {
        "message": text,
        "where": _maybe_text,
        "failed": _count,
        "queries": _count,
        "share": number,
        "max_error_rate": number,
        "by_reason": map_of(_count),
        "causes": list_of(record({"cause": text, "count": whole(1)})),
        "other_causes": _count,
    },
    frozenset({"message", "failed", "queries", "share", "max_error_rate", "by_reason", "causes"}),
)
REPORT: Check = record(
    {
        "schema_version": one_of(1),
        "tool_version": text,
        "verdict": one_of(*VERDICTS),
        "exit_code": one_of(0, 1, 3, 4),
        "summary": list_of(text),
        "gates": list_of(_GATE, non_empty=True),
        "metrics": list_of(text, non_empty=True),
        "metric_labels": map_of(text),
        "slices": list_of(_SLICE),
        "changes": _CHANGES,
        "queries": _QUERIES,
        "gold_changes": optional(_GOLD_CHANGES),
        "judge": optional(_JUDGE),
        "trend": optional(_TREND),
        "retriever_failure": optional(_RETRIEVER_FAILURE),
        "notes": list_of(text),
        "provenance": _PROVENANCE,
        "timings": map_of(_maybe_number),
    },
    frozenset(
        {"schema_version", "tool_version", "verdict", "exit_code", "summary", "gates"}
        | {"metrics", "metric_labels", "slices", "changes", "queries", "notes", "provenance"}
    ),
)
"""The checks of the keys the renderings read; other keys may be added freely."""


def validate_report(report: Any, path: str | Path) -> Mapping[str, Any]:
    """The report, when it fits the schema; else an InputError naming the file and key.

    Numbers that cannot be computed are null in a report, so a NaN or an infinity
    anywhere in it is refused too.
    """

    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, key=key)

    REPORT(report, "", fail)
    bad = _first_non_finite(report)
    if bad is not None:
        raise fail(bad, "expected a finite number or null, got NaN or an infinity")
    return report


def _first_non_finite(value: Any) -> str | None:
    """The key path of the first NaN or infinity in a parsed JSON value (no recursion:
    a report may nest as deep as the JSON reader allows)."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        key, item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return key
        if isinstance(item, dict):
            children = [(f"{key}.{k}" if key else k, v) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(f"{key}[{i}]", v) for i, v in enumerate(item)]
        else:
            continue
        pending.extend(reversed(children))
    return None
