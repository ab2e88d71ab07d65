"""How many questions each gated scope needs, and where to write them (pure).

Each gate's regression check can only catch drops its questions can see. With the
gate's own power model (`stats.detectable_drop`: a share D of queries losing their
whole score, one-sided test at the gate's alpha, caught 4 times in 5, before any
churn between runs widens it), a scope of n questions catches a drop of
`detectable_drop(n)`. The plan asks every gated scope (the gate's own, and each tag
slice of a `per_tag` gate) to catch `catch` times the gate's limit, and at least
`min_n` questions so it can be judged at all; `llm-eval gold stats` uses the same
model at twice the limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_eval.coverage import Coverage
from llm_eval.criteria import Criteria, Gate, Scope
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.slices import members
from llm_eval.stats import detectable_drop, queries_to_catch


@dataclass(frozen=True, slots=True)
class Need:
    """One gated scope: what it can catch now, and the questions it lacks."""

    gate: Gate
    scope: Scope
    n: int
    """Questions in the scope that the gate's metric scores."""
    drop: float
    """The drop caught 4 times in 5 now (NaN: the gate has no absolute limit)."""
    target: float
    """The drop it should catch: `catch` × the gate's limit."""
    needed: int
    """Questions the scope needs in all (0: the gate sets no absolute limit)."""
    areas: tuple[str, ...]
    """Corpus areas to write them for, most useful first."""

    @property
    def more(self) -> int:
        """Questions to add."""
        return max(0, self.needed - self.n)


def _scored(query: GoldQuery, metric: str) -> bool:
    """Whether a metric scores this question: relevance metrics the labelled ones,
    rejection metrics the rejection ones, the others every one."""
    kind = parse_metric(metric).kind
    if kind in ("relevance", "ranking", "judged"):
        return not query.is_rejection
    if kind == "rejection":
        return query.is_rejection
    return True


def gated_scopes(gate: Gate, queries: Sequence[GoldQuery]) -> list[Scope]:
    """The gate's own scope, then one per tag when it checks tags."""
    scopes = [gate.scope]
    if gate.per_tag:
        inside = [q for q in queries if q.query_id in set(members(queries, gate.scope))]
        tags = gate.per_tag_tags or tuple(sorted({t for q in inside for t in q.tags}))
        scopes += [Scope(gate.scope.tier, (tag,)) for tag in tags]
    return scopes


def plan(
    criteria: Criteria,
    queries: Sequence[GoldQuery],
    found: Coverage,
    catch: float = 2.0,
    regions: int = 5,
) -> list[Need]:
    """Every gated scope's need, the largest first."""
    by_id = {q.query_id: q for q in queries}
    tag_areas = {t.tag: t.areas for t in found.tags}
    open_areas = tuple(a.name for a in found.areas if a.uncovered > 0)
    needs = []
    for gate in criteria.gates:
        for scope in gated_scopes(gate, queries):
            ids = [q for q in members(queries, scope) if _scored(by_id[q], gate.metric)]
            if not ids and scope != gate.scope:
                continue  # a tag whose questions the metric does not score (rejection ones)
            needs.append(_need(gate, scope, len(ids), catch, tag_areas, open_areas, regions))
    needs.sort(key=lambda need: (-need.more, need.gate.name, need.scope.label()))
    return needs


def _need(
    gate: Gate,
    scope: Scope,
    n: int,
    catch: float,
    tag_areas: Mapping[str, Sequence[str]],
    open_areas: Sequence[str],
    regions: int,
) -> Need:
    limit = gate.regression_max
    alpha, min_n = gate.statistics.alpha, gate.statistics.min_n
    if scope.tags:
        # A tag's questions are about its own areas, the ones most of its labels fall in
        # first: ranking them by corpus-wide uncoveredness put an area holding a single
        # label of the tag ahead of the tag's own subject.
        known = [a for t in scope.tags for a in tag_areas.get(t, ())]
        areas = tuple(dict.fromkeys(known))[:regions]
    else:
        areas = tuple(open_areas[:regions])
    if not limit or gate.regression_relative or parse_metric(gate.metric).family.unit == "ms":
        return Need(gate, scope, n, math.nan, math.nan, min_n if n < min_n else 0, areas)
    target = min(catch * limit, 0.99)
    drop = detectable_drop(n, 0.0, limit, alpha) if n >= 2 else math.inf
    needed = queries_to_catch(target, 0.0, limit, alpha) if target > limit else n
    return Need(gate, scope, n, drop, target, max(needed, min_n), areas)
