"""The committed baseline: aggregates and per-query scores of the accepted state.

Per-query scores are kept so that comparisons can be paired and restricted to the
queries that did not change. Written atomically (temp file + rename).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.service import ServiceRecord
from llm_eval.slices import ScoreTable
from llm_eval.textio import write_atomic

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Baseline:
    """The scores a change is compared with."""

    created_at: str
    git_commit: str | None
    tool_version: str
    fingerprints: Mapping[str, str | None]
    """`gold`, `corpus`, `retriever`, `criteria`."""
    query_fingerprints: Mapping[str, str]
    relevance_level: int
    gating_k: int
    metrics: tuple[str, ...]
    per_query: Mapping[str, Mapping[str, float]]
    """`{query_id: {metric: value}}` over the queries with a relevant document."""
    first_relevant_rank: Mapping[str, int]
    """`{query_id: rank}` (0 when no relevant document was retrieved)."""
    aggregates: Mapping[str, Mapping[str, float | int]]
    """`{"overall"|"tier:A"|"tag:x": {"n": n, metric: mean}}`."""
    service: Mapping[str, ServiceRecord] = field(default_factory=dict)
    """Per query: latency and whether it failed (for service metrics)."""

    @property
    def table(self) -> ScoreTable:
        """The per-query measurements, as slices read them."""
        return ScoreTable(self.per_query, self.service)

    def to_json(self) -> dict[str, Any]:
        """The JSON document, schema_version first."""
        return {
            "schema_version": SCHEMA_VERSION,
            "created_at": self.created_at,
            "git_commit": self.git_commit,
            "tool_version": self.tool_version,
            "fingerprints": dict(self.fingerprints),
            "relevance_level": self.relevance_level,
            "gating_k": self.gating_k,
            "metrics": list(self.metrics),
            "aggregates": {k: dict(v) for k, v in self.aggregates.items()},
            "query_fingerprints": dict(self.query_fingerprints),
            "first_relevant_rank": dict(self.first_relevant_rank),
            "per_query": {q: dict(v) for q, v in self.per_query.items()},
            "service": {
                q: {"latency_ms": r.latency_ms, "error": r.error} for q, r in self.service.items()
            },
        }


def save_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write the baseline atomically."""
    write_atomic(path, json.dumps(baseline.to_json(), indent=1, sort_keys=False) + "\n")


def load_baseline(path: str | Path) -> Baseline | None:
    """Read a baseline; None when the file does not exist; InputError when it is corrupt."""
    file = Path(path)
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError("corrupt baseline: not UTF-8 text", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"corrupt baseline: invalid JSON: {exc.msg}", path=path, line=exc.lineno
        ) from None
    return _parse(data, str(path))


_REQUIRED = {
    "schema_version": int,
    "created_at": str,
    "tool_version": str,
    "fingerprints": dict,
    "relevance_level": int,
    "gating_k": int,
    "metrics": list,
    "aggregates": dict,
    "query_fingerprints": dict,
    "first_relevant_rank": dict,
    "per_query": dict,
}


def _parse(data: Any, path: str) -> Baseline:
    def fail(key: str, reason: str) -> InputError:
        return InputError(f"corrupt baseline: {reason}", path=path, key=key)

    if not isinstance(data, dict):
        raise InputError("corrupt baseline: expected a JSON object", path=path)
    version = data.get("schema_version")
    if isinstance(version, int) and version != SCHEMA_VERSION:
        raise fail(
            "schema_version",
            f"version {version} is not supported (expected {SCHEMA_VERSION}); "
            "run `llm-eval baseline refresh`",
        )
    for key, kind in _REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise fail(key, f"missing or not a {kind.__name__}")
    for qid, row in data["per_query"].items():
        if not isinstance(row, dict) or not all(_is_number(v) for v in row.values()):
            raise fail(f"per_query.{qid}", "expected {metric: number}")
    return Baseline(
        created_at=data["created_at"],
        git_commit=data.get("git_commit"),
        tool_version=data["tool_version"],
        fingerprints=data["fingerprints"],
        query_fingerprints=data["query_fingerprints"],
        relevance_level=data["relevance_level"],
        gating_k=data["gating_k"],
        metrics=tuple(data["metrics"]),
        per_query=data["per_query"],
        first_relevant_rank=data["first_relevant_rank"],
        aggregates=data["aggregates"],
        service=_service(data.get("service", {}), fail),
    )


def _service(data: Any, fail: Any) -> dict[str, ServiceRecord]:
    if not isinstance(data, dict):
        raise fail("service", "expected {query_id: {latency_ms, error}}")
    records = {}
    for qid, row in data.items():
        latency = row.get("latency_ms") if isinstance(row, dict) else None
        if (
            not isinstance(row, dict)
            or not (latency is None or _is_number(latency))
            or not isinstance(row.get("error", False), bool)
        ):
            raise fail(f"service.{qid}", "expected {latency_ms: number or null, error: bool}")
        records[qid] = ServiceRecord(latency, row.get("error", False))
    return records


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
