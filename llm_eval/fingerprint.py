"""Content fingerprints: a baseline is only comparable with the inputs it was made from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eval.digest import digest, file_digest
from llm_eval.gold import GoldQuery, GoldSet
from llm_eval.retrievers import retriever_kind

if TYPE_CHECKING:
    from llm_eval.config import EvalConfig
    from llm_eval.pipeline import Inputs


def query_fingerprint(query: GoldQuery) -> str:
    """What makes a gold query the same query: its text, tier, tags and labels."""
    fields: dict[str, Any] = {
        "query": query.query,
        "tier": query.tier,
        "tags": sorted(query.tags),
        "relevant": sorted(query.relevant),
        "is_rejection": query.is_rejection,
    }
    # Labels beyond ids join only when present: id-labelled queries keep their fingerprints.
    if query.gold_references:
        fields["gold_references"] = [
            [r.document, r.page, r.relevance] for r in query.gold_references
        ]
    if query.reference_passages:
        fields["reference_passages"] = list(query.reference_passages)
    if query.matching != "auto":
        fields["matching"] = query.matching
    return digest(fields)


def query_fingerprints(gold: GoldSet) -> dict[str, str]:
    """`{query_id: fingerprint}` over the gold set."""
    return {q.query_id: query_fingerprint(q) for q in gold.queries}


def gold_fingerprint(per_query: Mapping[str, str]) -> str:
    """One fingerprint for the whole gold set (independent of file order)."""
    return digest(sorted(per_query.items()))


@dataclass(frozen=True, slots=True)
class GoldDiff:
    """How the gold set differs from the one a baseline was made with."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @property
    def empty(self) -> bool:
        """True when the gold sets are the same."""
        return not (self.added or self.removed or self.changed)

    def unchanged(self, current: Mapping[str, str]) -> set[str]:
        """Query ids present and identical in both."""
        return set(current) - set(self.added) - set(self.changed)


def diff_gold(baseline: Mapping[str, str], current: Mapping[str, str]) -> GoldDiff:
    """Added, removed and changed query ids, sorted."""
    return GoldDiff(
        added=tuple(sorted(set(current) - set(baseline))),
        removed=tuple(sorted(set(baseline) - set(current))),
        changed=tuple(sorted(q for q in current if q in baseline and baseline[q] != current[q])),
    )


def fingerprints(inputs: Inputs, run_path: Path | None) -> dict[str, str | None]:
    """Fingerprints of what a baseline depends on."""
    config = inputs.config
    retriever = _retriever_fingerprint(config, run_path)
    gates = [
        {
            "name": g.name,
            "metric": g.metric,
            "threshold": g.threshold,
            "regression_max": g.regression_max,
            "severity": g.severity,
            "scope": g.scope.key(),
        }
        for g in inputs.criteria.gates
    ]
    scoring = {
        "relevance_level": config.relevance_level,
        "page_tolerance": config.matching.page_tolerance,
        "f1_threshold": config.matching.f1_threshold,
        "rejection_score_threshold": config.rejection_score_threshold,
    }
    return {
        "gold": gold_fingerprint(query_fingerprints(inputs.gold)),
        "corpus": file_digest(config.corpus) if config.corpus is not None else None,
        "retriever": retriever,
        "criteria": digest(gates),
        "scoring": digest(scoring),
        "versions": file_digest(config.versions) if config.versions is not None else None,
    }


def _retriever_fingerprint(config: EvalConfig, run_path: Path | None) -> str | None:
    """A run file counts by its content (also as `kind: run`); a retriever by its settings."""
    retriever = config.retriever
    if run_path is None and retriever is not None:
        run_path = retriever_kind(retriever.kind).answers_file(retriever.settings)
    if run_path is not None:
        return "run:" + file_digest(run_path)
    if retriever is None:
        return None
    settings = {"kind": retriever.kind, **retriever.settings}
    return digest({"retriever": settings, "top_k": config.top_k})
