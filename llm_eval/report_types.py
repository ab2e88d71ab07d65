"""The report's shape as types: what `build_report` writes and every format reads.

docs/report-json.md is the contract; a test checks these keys against it, and
`llm_eval.report_schema` checks a report read from a file at run time.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Status = Literal["pass", "warn", "fail", "inconclusive"]
Verdict = Literal["pass", "warn", "fail", "inconclusive", "gold_changed", "retriever_failed"]


class Power(TypedDict):
    """The drop a gate's scope catches 4 times in 5, and about how many queries catch
    twice its limit (`power.scope_power`)."""

    detectable_drop: float | None
    queries_needed: int | None
    builds: NotRequired[list[int]]
    """With several builds: the builds a side (baseline, now) the figures count."""
    more_builds: NotRequired[dict[str, Any]]
    """With several builds: `builds` a side and the `detectable_drop` they catch."""


class GateEntry(TypedDict):
    """One gate, in the order of ship-criteria.yaml."""

    name: str
    metric: str
    metric_label: str
    scope: str
    scope_key: str
    severity: str
    status: Status
    reason: str
    blocking: bool
    decision: str | None
    value: float | None
    baseline: float | None
    delta: float | None
    threshold: float | None
    regression_max: float | None
    regression_relative: bool
    lower_is_better: bool
    n: int
    floor_ok: bool | None
    regression_ok: bool | None
    sentence: str | None
    stats: dict[str, Any] | None
    statistics: dict[str, Any]
    slices: list[dict[str, Any]]
    corrected: dict[str, Any] | None
    label_coverage: dict[str, Any] | None
    power_warning: str | None
    more_queries: int | None
    power: Power | None
    drift: NotRequired[dict[str, Any]]


class Report(TypedDict):
    """report.json, schema version 1."""

    schema_version: int
    tool_version: str
    verdict: Verdict
    exit_code: int
    summary: list[str]
    gates: list[GateEntry]
    metrics: list[str]
    metric_labels: dict[str, str]
    slices: list[dict[str, Any]]
    changes: dict[str, Any]
    queries: dict[str, Any]
    matching: dict[str, Any]
    rejections: dict[str, Any]
    context: dict[str, Any] | None
    gold_changes: dict[str, Any] | None
    judge: dict[str, Any] | None
    trend: NotRequired[dict[str, Any] | None]
    retriever_failure: NotRequired[dict[str, Any]]
    """Only when the verdict is `retriever_failed`: the failures summarised."""
    notes: list[str]
    retrieval: dict[str, int]
    provenance: dict[str, Any]
    timings: dict[str, float]
