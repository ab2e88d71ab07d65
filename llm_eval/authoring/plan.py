"""How many questions each gated scope needs, and where to write them (pure).

Each gate's regression check can only catch drops its questions can see. The gate's
own power model (`power.baseline_power`: the baseline's per-query scores, no churn, the
gate's own test, caught 4 times in 5) says which drop a scope catches now and how many
questions catch `catch` times the gate's limit. The plan asks every gated scope (the
gate's own, and each tag slice of a `per_tag` gate) for those, and at least `min_n`
questions so it can be judged at all; `llm-eval gold stats` and `llm-eval gate` print
the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from llm_eval.authoring.corpus_coverage import Coverage
from llm_eval.builds import build_spread
from llm_eval.criteria import Criteria, Gate, Scope
from llm_eval.gate import Power
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.power import CATCH, baseline_power
from llm_eval.slices import members


@dataclass(frozen=True, slots=True)
class Need:
    """One gated scope: what it can catch now, and the questions it lacks."""

    gate: Gate
    scope: Scope
    n: int
    """Questions in the scope that the gate's metric scores."""
    power: Power | None
    """What the scope catches now and the questions that catch `catch` × the gate's
    limit (None: the gate runs no paired test against an absolute limit)."""
    needed: int | None
    """Questions the scope needs in all (None: more than any size searched)."""
    areas: tuple[str, ...]
    """Corpus areas to write them for, most useful first."""

    @property
    def drop(self) -> float:
        """The drop caught 4 times in 5 now (NaN: no power; inf: none is)."""
        if self.power is None:
            return math.nan
        return math.inf if self.power.detectable_drop is None else self.power.detectable_drop

    @property
    def target(self) -> float:
        """The drop it should catch (NaN: no power)."""
        return math.nan if self.power is None else self.power.target

    @property
    def more(self) -> int:
        """Questions to add (0 when none is known to help)."""
        return 0 if self.needed is None else max(0, self.needed - self.n)


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
    catch: float = CATCH,
    regions: int = 5,
    scores: Mapping[str, Mapping[str, float]] | None = None,
    builds: Sequence[Mapping[str, Mapping[str, float]]] = (),
    known: MutableMapping[str, Power] | None = None,
) -> list[Need]:
    """Every gated scope's need, the largest first; `scores` are the baseline's per-query
    scores (None: no baseline, see `power.baseline_power`), `builds` each of its builds'
    when it holds several (the figures then count builds as well as questions); `known`
    the power figures already computed (`power.gate_power`'s)."""
    tag_areas = {t.tag: t.areas for t in found.tags}
    open_areas = tuple(a.name for a in found.areas if a.uncovered > 0)
    needs = []
    for gate in criteria.gates:
        for scope in gated_scopes(gate, queries):
            ids = scored_ids(queries, scope, gate.metric)
            if not ids and scope != gate.scope:
                continue  # a tag whose questions the metric does not score (rejection ones)
            power = scope_power_before_run(gate, ids, scores, catch, builds, known)
            areas = _areas(scope, tag_areas, open_areas, regions)
            needs.append(_need(gate, scope, len(ids), power, areas))
    needs.sort(key=lambda need: (-need.more, need.gate.name, need.scope.label()))
    return needs


def scored_ids(queries: Sequence[GoldQuery], scope: Scope, metric: str) -> list[str]:
    """The scope's questions that the metric scores, in gold-set order."""
    by_id = {q.query_id: q for q in queries}
    return [q for q in members(queries, scope) if _scored(by_id[q], metric)]


def scope_power_before_run(
    gate: Gate,
    ids: Sequence[str],
    scores: Mapping[str, Mapping[str, float]] | None,
    catch: float = CATCH,
    builds: Sequence[Mapping[str, Mapping[str, float]]] = (),
    known: MutableMapping[str, Power] | None = None,
) -> Power | None:
    """`power.baseline_power` over these questions: the baseline's scores of those it
    holds, or none without a baseline; with its builds' spread when it holds several;
    `known` the figures already computed."""
    if scores is None:
        return baseline_power(gate, None, len(ids), catch, known=known)
    metric = gate.metric
    held = [q for q in ids if metric in scores.get(q, {})]
    held_scores = [scores[q][metric] for q in held]
    spread = build_spread(builds, builds, held, metric)
    return baseline_power(gate, held_scores, len(held_scores), catch, spread, known)


def _areas(
    scope: Scope,
    tag_areas: Mapping[str, Sequence[str]],
    open_areas: Sequence[str],
    regions: int,
) -> tuple[str, ...]:
    if scope.tags:
        # A tag's questions are about its own areas, the ones most of its labels fall in
        # first: ranking them by corpus-wide uncoveredness put an area holding a single
        # label of the tag ahead of the tag's own subject.
        known = [a for t in scope.tags for a in tag_areas.get(t, ())]
        return tuple(dict.fromkeys(known))[:regions]
    return tuple(open_areas[:regions])


def _need(gate: Gate, scope: Scope, n: int, power: Power | None, areas: tuple[str, ...]) -> Need:
    min_n = gate.statistics.min_n
    if power is None:
        return Need(gate, scope, n, None, min_n if n < min_n else 0, areas)
    needed = None if power.queries_needed is None else max(power.queries_needed, min_n)
    return Need(gate, scope, n, power, needed, areas)
