"""The committed baseline: aggregates and per-query scores of the accepted state.

Per-query scores are kept so that comparisons can be paired and restricted to the
queries that did not change. `llm_eval.baseline_io` reads and writes the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_eval.json_indented import plain
from llm_eval.service_metrics import ServiceRecord
from llm_eval.slices import ScoreTable

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
    """Per query: latency and whether it failed (for service metrics), as measured by the
    refresh that last wrote the file."""
    judge_repeats: int | None = None
    """How many times the judge was asked each question for the judged values (None:
    no judged metric). A gate comparing means over another number of repeats does not
    cancel the judge's noise on unchanged chunks, so the report says so."""
    builds: tuple[Mapping[str, Mapping[str, float]], ...] = ()
    """Each build's per-query scores when the baseline was measured on more than one
    build of its retriever (`per_query` holds their means); empty for one build."""
    source: str | None = field(default=None, compare=False)
    """The file it was read from (None for one computed in memory)."""

    @property
    def table(self) -> ScoreTable:
        """The per-query measurements, as slices read them."""
        return ScoreTable(self.per_query, self.service, self.builds)

    def to_json(self) -> dict[str, Any]:
        """The JSON document, schema_version first."""
        return plain(self.json_fields())

    def json_fields(self) -> dict[str, Any]:
        """`to_json`'s document with its per-query sections left as the mappings they are
        (columns, views): what `llm_eval.json_indented` writes without a dict per query."""
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
            "query_fingerprints": self.query_fingerprints,
            "first_relevant_rank": self.first_relevant_rank,
            "per_query": self.per_query,
            "service": _ServiceRows(self.service),
            **({} if self.judge_repeats is None else {"judge_repeats": self.judge_repeats}),
            **({"builds": list(self.builds)} if self.builds else {}),
        }


class _ServiceRows(Mapping[str, Mapping[str, Any]]):
    """The service records as the file's rows, `{"latency_ms": …, "error": …}`, each
    made when read."""

    __slots__ = ("_records",)

    def __init__(self, records: Mapping[str, ServiceRecord]) -> None:
        self._records = records

    def __getitem__(self, query_id: str) -> Mapping[str, Any]:
        record = self._records[query_id]
        return {"latency_ms": record.latency_ms, "error": record.error}

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


@dataclass(frozen=True, slots=True)
class Reference:
    """A baseline as committed at an earlier commit, which a drift check measures from."""

    baseline: Baseline
    commit: str
    """The commit that wrote it."""
