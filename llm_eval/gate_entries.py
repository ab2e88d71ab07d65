"""Each gate as `report.json` stores it: its value, limits and verdict, the paired
test that decided it (interval, p-values, the builds compared), its drift check, its
per-tag checks, its power figures and its label coverage, each with its sentence.
Pure: `GateResult` records in, JSON-ready dicts out.
"""

from __future__ import annotations

import math
from typing import Any

from llm_eval.gate import GateResult, SliceResult, delta_interval
from llm_eval.gate import Power as ScopePower
from llm_eval.judged.correction import Corrected
from llm_eval.metrics import parse_metric
from llm_eval.report_types import GateEntry, Power
from llm_eval.stats import MarginTest
from llm_eval.wording.gates import (
    coverage_sentence,
    drift_sentence,
    more_queries,
    power_sentence,
    sentence,
    slice_sentence,
)


def number(x: float | None) -> float | None:
    """A value as the report stores it: NaN (no value) as None."""
    return None if x is None or math.isnan(x) else x


def gate_entry(result: GateResult) -> GateEntry:
    """One gate as the report stores it (`drift` only when the gate sets `drift_max`)."""
    entry = _gate_entry(result)
    if result.drift is not None:
        entry["drift"] = _drift_entry(result)
    return entry


def _gate_entry(result: GateResult) -> GateEntry:
    gate = result.gate
    return {
        "name": gate.name,
        "metric": gate.metric,
        "metric_label": parse_metric(gate.metric).label,
        "scope": gate.scope.label(),
        "scope_key": gate.scope.key(),
        "severity": gate.severity,
        "status": result.status,
        "reason": result.reason,
        "blocking": result.blocking,
        "decision": result.decision,
        "value": number(result.value),
        "baseline": number(result.baseline),
        "delta": number(result.delta),
        "threshold": gate.threshold,
        "regression_max": gate.regression_max,
        "regression_relative": gate.regression_relative,
        "lower_is_better": parse_metric(gate.metric).lower_is_better,
        "n": result.n,
        "floor_ok": result.floor_ok,
        "regression_ok": result.regression_ok,
        "sentence": sentence(result),
        "stats": _stats_entry(result),
        "statistics": {
            "alpha": gate.statistics.alpha,
            "significance": gate.statistics.significance,
            "resamples": gate.statistics.resamples,
            "seed": gate.statistics.seed,
            "min_n": gate.statistics.min_n,
            "on_inconclusive": result.on_inconclusive,
        },
        "slices": [_slice_entry(result, s) for s in result.slices],
        "corrected": corrected_entry(result.corrected),
        "label_coverage": _coverage_entry(result),
        "power_warning": power_sentence(result),
        "more_queries": more_queries(result),
        "power": None if result.power is None else _power_entry(result.power),
    }


def _coverage_entry(result: GateResult) -> dict[str, Any] | None:
    """judged@k beside a gate whose value moved, and whether it fell; none where the
    labels judge no document not relevant (`coverage_notes` says so once)."""
    coverage = result.coverage
    if coverage is None or not coverage.readable:
        return None
    before = coverage.baseline
    return {
        "metric": coverage.metric,
        "value": coverage.value,
        "baseline": before,
        "delta": None if before is None else coverage.value - before,
        "fell": coverage.fell,
        "sentence": coverage_sentence(result),
    }


def corrected_entry(corrected: Corrected | None) -> dict[str, Any] | None:
    """A judged value corrected by the human labels (`llm_eval.judged.correction`)."""
    if corrected is None:
        return None
    return {
        "metric": corrected.metric,
        "value": corrected.corrected.mean,
        "ci_low": corrected.corrected.low,
        "ci_high": corrected.corrected.high,
        "judge": corrected.raw.mean,
        "judge_ci_low": corrected.raw.low,
        "judge_ci_high": corrected.raw.high,
        "labelled": corrected.labelled,
        "unlabelled": corrected.unlabelled,
        "confidence": 1.0 - 2.0 * corrected.alpha,
        "method": "prediction-powered",
    }


def _drift_entry(result: GateResult) -> dict[str, Any]:
    """The drift check against the gate's reference baseline."""
    drift, gate = result.drift, result.gate
    assert drift is not None and gate.drift is not None
    return {
        "since": gate.drift.since,
        "label": drift.label,
        "commit": drift.commit,
        "drift_max": gate.drift.limit,
        "status": drift.status,
        "decision": drift.decision,
        "blocking": drift.blocking,
        "on_inconclusive": drift.on_inconclusive,
        "value": number(drift.value),
        "reference": number(drift.reference),
        "delta": number(drift.delta),
        "n": drift.n,
        "stats": _margin_entry(result, drift.margin),
        "sentence": drift_sentence(result),
    }


def _stats_entry(result: GateResult) -> dict[str, Any] | None:
    """The paired test of the change against the limit, which decided the gate."""
    return _margin_entry(result, result.margin)


def _margin_entry(result: GateResult, margin: MarginTest | None) -> dict[str, Any] | None:
    """A paired test against a limit, as the report stores it; with no query changed
    (`unchanged`), no interval and no p-value: there is no change to bound."""
    if margin is None:
        return None
    unchanged = margin.changed == 0
    low, high = (None, None) if unchanged else delta_interval(result.gate.metric, margin)
    low_open, high_open = _open_ends(result.gate.metric, margin)
    # Raw 0/1 values: for a lower-is-better metric the bad value is 1.
    flipped = parse_metric(result.gate.metric).lower_is_better
    return {
        "n": margin.n,
        "unchanged": unchanged,
        "ci_low": low,
        "ci_high": high,
        "ci_low_open": None if unchanged else low_open,
        "ci_high_open": None if unchanged else high_open,
        "confidence": margin.confidence,
        "changed": margin.changed,
        "p_value": None if unchanged else margin.p_beyond,
        "p_within": None if unchanged else margin.p_within,
        "method": margin.method,
        "alpha": result.gate.statistics.alpha,
        "hit_to_miss": margin.went_better if flipped else margin.went_worse,
        "miss_to_hit": margin.went_worse if flipped else margin.went_better,
        **_builds_entry(margin),
    }


def _power_entry(power: ScopePower) -> Power:
    """The power figures; with several builds, the builds they count and the drop more
    builds would catch."""
    entry: Power = {
        "detectable_drop": power.detectable_drop,
        "queries_needed": power.queries_needed,
    }
    if power.builds is not None and power.more_builds is not None:
        more, drop = power.more_builds
        entry["builds"] = list(power.builds)
        entry["more_builds"] = {"builds": more, "detectable_drop": drop}
    return entry


def _builds_entry(margin: MarginTest) -> dict[str, Any]:
    """`{"builds": {...}}` when either side was measured on several builds, else nothing."""
    if margin.builds == (1, 1):
        return {}
    before, after = margin.builds
    values = list(margin.build_values)
    return {"builds": {"before": before, "after": after, "sd": margin.build_sd, "values": values}}


def _open_ends(metric: str, margin: MarginTest) -> tuple[bool, bool]:
    """Which ends of the `value - baseline` interval the data could not bound."""
    if parse_metric(metric).lower_is_better:
        return margin.low_open, margin.high_open
    return margin.high_open, margin.low_open


def _slice_entry(result: GateResult, piece: SliceResult) -> dict[str, Any]:
    margin = piece.margin
    shown = None if margin is None or margin.changed == 0 else margin  # unchanged: none
    low, high = (None, None) if shown is None else delta_interval(result.gate.metric, shown)
    open_ends = (None, None) if shown is None else _open_ends(result.gate.metric, shown)
    return {
        "slice": f"tag:{piece.tag}",
        "n": piece.n,
        "value": number(piece.value),
        "baseline": number(piece.baseline),
        "delta": number(piece.delta),
        "status": piece.status,
        "reason": piece.reason,
        "judged": piece.judged,
        "unchanged": piece.reason == "unchanged",
        "p_value": shown.p_beyond if shown is not None else None,
        "p_adjusted": piece.p_adjusted if shown is not None else None,
        "p_adjustment": "holm",
        "method": margin.method if margin is not None else None,
        "ci_low": low,
        "ci_high": high,
        "ci_low_open": open_ends[0],
        "ci_high_open": open_ends[1],
        "confidence": margin.confidence if margin is not None else None,
        "level": piece.level,
        "sentence": slice_sentence(result, piece),
    }
