"""Stale and conflicting context, from a corpus-versions sidecar.

The sidecar (`versions:` in the config) is JSONL, one document a line; only
`doc_id` is required:

    {"doc_id": "policy-2023", "version_key": "travel-policy",
     "effective_timestamp": "2023-01-01", "superseded_by": "policy-2024"}

A retrieved result is looked up by its `doc_id`, else by its `document`. It is
*stale* when its document has `superseded_by`, or another document with the same
`version_key` has a strictly newer `effective_timestamp` (ISO 8601; the newest is
the winner and supersedes the others; a timestamp without a zone is UTC). Documents
missing from the sidecar are unversioned and never stale. Two or more documents
sharing a `version_key` inside the top k are a *conflict*.

Metrics at cutoff k, all lower is better, scored on every gold query the run
answered (failed and missing queries are left out):

- `stale_rate@k`: stale positions / considered positions (the top k, or fewer when
  fewer results came back), pooled over a slice's queries. Each query's row holds
  its own rate and its `positions@k`; the slice value is the mean weighted by
  positions, which is Σ stale / Σ considered.
- `stale_query_rate@k`: share of queries with a stale document in the top k.
- `conflict_rate@k`: share of queries with a conflict in the top k.

`llm_eval.versions_io` reads the sidecar; this module is the analysis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from llm_eval.gold import GoldSet
from llm_eval.metrics import Metric, parse_metric
from llm_eval.runs import RankedResult, Run


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One line of the sidecar."""

    doc_id: str
    version_key: str | None = None
    effective: datetime | None = None
    """`effective_timestamp`, with a time zone."""
    superseded_by: str | None = None


@dataclass(frozen=True, slots=True)
class Supersession:
    """Why a document is stale, and what replaces it."""

    by: str
    reason: str
    """`superseded_by` (said explicitly) or `newer version` (same version_key, newer)."""


@dataclass(frozen=True, slots=True)
class Versions:
    """The sidecar: documents by id, and the stale ones with what supersedes them."""

    records: Mapping[str, VersionRecord]
    stale: Mapping[str, Supersession]

    def lookup(self, result: RankedResult) -> VersionRecord | None:
        """The result's document: by its doc_id, else by its `document`."""
        record = self.records.get(result.doc_id)
        if record is None and result.document is not None:
            record = self.records.get(result.document)
        return record


def build_versions(records: Iterable[VersionRecord]) -> Versions:
    """Index the records and work out which documents are stale."""
    by_id = {r.doc_id: r for r in records}
    return Versions(by_id, _supersessions(list(by_id.values())))


def _supersessions(records: Sequence[VersionRecord]) -> dict[str, Supersession]:
    newest: dict[str, VersionRecord] = {}
    for record in records:
        if record.version_key is None or record.effective is None:
            continue
        winner = newest.get(record.version_key)
        if winner is None or (winner.effective is not None and record.effective > winner.effective):
            newest[record.version_key] = record
    stale = {}
    for record in records:
        winner = newest.get(record.version_key) if record.version_key is not None else None
        if record.superseded_by is not None:
            stale[record.doc_id] = Supersession(record.superseded_by, "superseded_by")
        elif (
            winner is not None
            and winner.effective is not None
            and record.effective is not None
            and record.effective < winner.effective
        ):
            stale[record.doc_id] = Supersession(winner.doc_id, "newer version")
    return stale


@dataclass(frozen=True, slots=True)
class StaleHit:
    """A stale document among a query's top results."""

    query_id: str
    rank: int
    doc_id: str
    """The retrieved document, as the sidecar names it."""
    superseded_by: str
    reason: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """Versions of one document retrieved together for a query."""

    query_id: str
    version_key: str
    doc_ids: tuple[str, ...]
    """The documents sharing the key, in rank order."""


@dataclass(frozen=True, slots=True)
class TopK:
    """One query's top k, inspected for stale and conflicting documents."""

    positions: int
    """Results considered: k, or fewer when fewer came back."""
    stale: tuple[StaleHit, ...]
    conflicts: tuple[Conflict, ...]


def inspect_top_k(
    query_id: str, results: Sequence[RankedResult], versions: Versions, k: int | None
) -> TopK:
    """Stale positions and conflicts among the first k results (all of them when k is None)."""
    top = results[:k]
    stale: list[StaleHit] = []
    keys: dict[str, dict[str, None]] = {}
    for rank, result in enumerate(top, 1):
        record = versions.lookup(result)
        if record is None:
            continue
        supersession = versions.stale.get(record.doc_id)
        if supersession is not None:
            hit = StaleHit(query_id, rank, record.doc_id, supersession.by, supersession.reason)
            stale.append(hit)
        if record.version_key is not None:
            keys.setdefault(record.version_key, {})[record.doc_id] = None
    conflicts = tuple(
        Conflict(query_id, key, tuple(docs)) for key, docs in keys.items() if len(docs) > 1
    )
    return TopK(len(top), tuple(stale), conflicts)


_VALUES: dict[str, Callable[[TopK], float]] = {
    "stale_rate": lambda top: len(top.stale) / top.positions if top.positions else 0.0,
    "stale_query_rate": lambda top: float(bool(top.stale)),
    "conflict_rate": lambda top: float(bool(top.conflicts)),
}


def context_metrics(metrics: Iterable[str]) -> list[Metric]:
    """The stale and conflict metrics among `metrics`."""
    parsed = (parse_metric(m) for m in metrics)
    return [m for m in parsed if m.kind == "context"]


def context_values(tops: Mapping[int | None, TopK], metrics: Sequence[Metric]) -> dict[str, float]:
    """A query's value of each metric (and the weight of a pooled one), from its top k's."""
    values: dict[str, float] = {}
    for metric in metrics:
        assert metric.k is not None
        top = tops[metric.k]
        values[metric.name] = _VALUES[metric.family.name](top)
        weight = metric.weight_key
        if weight is not None:
            values[weight] = float(top.positions)
    return values


@dataclass(frozen=True, slots=True)
class ContextReport:
    """Stale hits and conflicts over the run, for the report."""

    k: int | None
    """The cutoff they were looked for within: the largest of the metrics' (None: all)."""
    stale_hits: tuple[StaleHit, ...]
    conflicts: tuple[Conflict, ...]


def inspect_run(
    gold: GoldSet, run: Run, versions: Versions, metrics: Iterable[str]
) -> tuple[dict[str, dict[str, float]], ContextReport]:
    """Per answered gold query its context metric values; and the stale hits and conflicts."""
    wanted = context_metrics(metrics)
    cutoffs = {m.k for m in wanted}
    listed_k = max((k for k in cutoffs if k is not None), default=None)
    per_query: dict[str, dict[str, float]] = {}
    hits: list[StaleHit] = []
    conflicts: list[Conflict] = []
    for query in gold.queries:
        answer = run.queries.get(query.query_id)
        if answer is None or answer.error is not None:
            continue
        tops = {
            k: inspect_top_k(query.query_id, answer.results, versions, k)
            for k in {*cutoffs, listed_k}
        }
        if wanted:
            per_query[query.query_id] = context_values(tops, wanted)
        hits += tops[listed_k].stale
        conflicts += tops[listed_k].conflicts
    return per_query, ContextReport(listed_k, tuple(hits), tuple(conflicts))
