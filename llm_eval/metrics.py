"""The metric registry and the vectorised relevance kernels.

Names are parsed from strings (`recall@5`, `P@10`, `ndcg@10`, `mrr`), the way
ir_measures parses measures: a family, an optional cutoff `@k`. Every kernel
takes `Judgments` (flat arrays over all queries) and returns one value per query;
no kernel loops over queries in Python.

Conventions are trec_eval's (the reference behind pytrec_eval):
- binary metrics count a document relevant when grade >= relevance_level;
- P@k divides by k even when fewer than k documents were retrieved;
- AP and AP@k divide by the number of relevant documents of the query;
- nDCG uses the raw grades as gains (trec_eval's `ndcg_cut`) with discount
  1/log2(rank + 1); `ndcg_exp` uses gain 2^grade - 1 (Burges et al.).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from llm_eval.errors import InputError
from llm_eval.judgments import FloatArray, IntArray, Judgments, _group_starts
from llm_eval.service import SERVICE_METRICS, is_service_metric

Kernel = Callable[[Judgments, "int | None"], FloatArray]


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family of the registry, e.g. recall (which takes a cutoff)."""

    name: str
    kernel: Kernel
    cutoff: str
    """'required', 'optional' or 'none'."""
    description: str
    aliases: tuple[str, ...] = ()
    proportion: bool = True
    """Values lie in [0, 1] (shown as percentages)."""
    higher_is_better: bool = True

    def usage(self) -> str:
        """How the name is written, e.g. `recall@k` or `mrr, mrr@k`."""
        forms = {
            "required": [f"{self.name}@k"],
            "optional": [self.name, f"{self.name}@k"],
            "none": [self.name],
        }[self.cutoff]
        text = ", ".join(forms)
        if self.aliases:
            alias_forms = ", ".join(
                f"{a}@k" if self.cutoff == "required" else a for a in self.aliases
            )
            text += f" (alias {alias_forms})"
        return text


@dataclass(frozen=True, slots=True)
class Metric:
    """A parsed metric name: a family and its cutoff."""

    family: Family
    k: int | None

    @property
    def name(self) -> str:
        """The canonical spelling, used as the key in every output."""
        return self.family.name if self.k is None else f"{self.family.name}@{self.k}"

    def compute(self, judgments: Judgments) -> FloatArray:
        """One value per evaluated query."""
        return self.family.kernel(judgments, self.k)


def _relevant_within(j: Judgments, k: int | None) -> np.ndarray:
    mask = j.hit_relevant
    return mask if k is None else mask & (j.hit_rank <= k)


def _relevant_count(j: Judgments, k: int | None) -> FloatArray:
    mask = _relevant_within(j, k)
    counts = np.bincount(j.hit_query[mask], minlength=len(j.query_ids))
    return counts.astype(np.float64)


def _recall(j: Judgments, k: int | None) -> FloatArray:
    return _relevant_count(j, k) / j.num_relevant


def _precision(j: Judgments, k: int | None) -> FloatArray:
    assert k is not None
    return _relevant_count(j, k) / k


def _hit_rate(j: Judgments, k: int | None) -> FloatArray:
    return (_relevant_count(j, k) > 0).astype(np.float64)


def _reciprocal_rank(j: Judgments, k: int | None) -> FloatArray:
    first = j.first_relevant_rank()
    found = (first > 0) if k is None else (first > 0) & (first <= k)
    values = np.zeros(len(j.query_ids), dtype=np.float64)
    values[found] = 1.0 / first[found]
    return values


def _average_precision(j: Judgments, k: int | None) -> FloatArray:
    relevant = j.hit_relevant
    queries, ranks = j.hit_query[relevant], j.hit_rank[relevant]
    starts = _group_starts(queries)
    group_start = np.repeat(starts, np.diff(np.append(starts, queries.size)))
    relevant_so_far = np.arange(queries.size) - group_start + 1
    precision_at_hit = relevant_so_far / ranks
    keep = slice(None) if k is None else ranks <= k
    total = np.bincount(queries[keep], precision_at_hit[keep], minlength=len(j.query_ids))
    return total / j.num_relevant


def _dcg(
    queries: IntArray, ranks: IntArray, gains: FloatArray, k: int | None, size: int
) -> FloatArray:
    keep = slice(None) if k is None else ranks <= k
    discounted = gains[keep] / np.log2(ranks[keep] + 1.0)
    return np.bincount(queries[keep], discounted, minlength=size).astype(np.float64)


def _ndcg_with(gain: Callable[[IntArray], FloatArray]) -> Kernel:
    def kernel(j: Judgments, k: int | None) -> FloatArray:
        size = len(j.query_ids)
        actual = _dcg(j.hit_query, j.hit_rank, gain(j.hit_grade), k, size)
        ideal = _dcg(j.ideal_query, j.ideal_position, gain(j.ideal_grade), k, size)
        values = np.zeros(size, dtype=np.float64)
        np.divide(actual, ideal, out=values, where=ideal > 0)
        return values

    return kernel


def _linear_gain(grades: IntArray) -> FloatArray:
    return grades.astype(np.float64)


def _exponential_gain(grades: IntArray) -> FloatArray:
    return np.exp2(grades.astype(np.float64)) - 1.0


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("recall", _recall, "required", "share of the relevant documents in the top k"),
        Family(
            "precision",
            _precision,
            "required",
            "share of the top k that is relevant",
            aliases=("P",),
        ),
        Family(
            "hit_rate",
            _hit_rate,
            "required",
            "1 when a relevant document is in the top k",
            aliases=("success",),
        ),
        Family(
            "mrr",
            _reciprocal_rank,
            "optional",
            "1 / rank of the first relevant document",
            aliases=("recip_rank",),
        ),
        Family("map", _average_precision, "optional", "average precision"),
        Family("ndcg", _ndcg_with(_linear_gain), "optional", "nDCG, linear gain (trec_eval)"),
        Family("ndcg_exp", _ndcg_with(_exponential_gain), "optional", "nDCG, gain 2^grade - 1"),
    )
}


@dataclass(frozen=True, slots=True)
class QueryFamily:
    """A metric of what the retriever returned beyond relevance labels, scored per query.

    Rejection (`llm_eval.rejection`) and stale or conflicting context
    (`llm_eval.versions`): the pipeline writes each query's value into its row of
    scores, so slices average them like relevance scores (a pooled one is weighted).
    """

    name: str
    cutoff: str
    """'required' or 'none'."""
    description: str
    higher_is_better: bool
    pooled: bool = False
    """The slice value pools positions over queries (weighted by `positions@k`)
    instead of averaging queries equally."""

    def usage(self) -> str:
        """How the name is written, e.g. `stale_rate@k`."""
        return f"{self.name}@k" if self.cutoff == "required" else self.name


@dataclass(frozen=True, slots=True)
class QueryMetric:
    """A parsed query metric: a family and its cutoff."""

    family: QueryFamily
    k: int | None

    @property
    def name(self) -> str:
        """The canonical spelling."""
        return self.family.name if self.k is None else f"{self.family.name}@{self.k}"


QUERY_FAMILIES: dict[str, QueryFamily] = {
    f.name: f
    for f in (
        QueryFamily(
            "rejection_accuracy",
            "none",
            "share of rejection queries the retriever rejected (abstained, empty, low score)",
            higher_is_better=True,
        ),
        QueryFamily(
            "false_confidence_rate",
            "none",
            "share of rejection queries answered with confident results",
            higher_is_better=False,
        ),
        QueryFamily(
            "stale_rate",
            "required",
            "share of the top-k positions holding a superseded document, pooled over queries",
            higher_is_better=False,
            pooled=True,
        ),
        QueryFamily(
            "stale_query_rate",
            "required",
            "share of queries with a superseded document in the top k",
            higher_is_better=False,
        ),
        QueryFamily(
            "conflict_rate",
            "required",
            "share of queries with two versions of one document (same version_key) in the top k",
            higher_is_better=False,
        ),
    )
}

_ALIASES: dict[str, Family] = {
    alias.lower(): family
    for family in FAMILIES.values()
    for alias in (family.name, *family.aliases)
}

_NAME = re.compile(r"^\s*([a-z_]+?)(?:\s*@\s*(\S+))?\s*$")


def valid_metric_names() -> str:
    """The accepted spellings, for error messages and help text."""
    return "; ".join(
        [
            *(f.usage() for f in FAMILIES.values()),
            *(f.usage() for f in QUERY_FAMILIES.values()),
            ", ".join(SERVICE_METRICS),
        ]
    )


def canonical_metric(name: str) -> str:
    """The canonical name of any metric (relevance, query or service); unknown ones are errors."""
    if is_service_metric(name):
        return name.strip().lower()
    query = query_metric(name)
    return query.name if query is not None else parse_metric(name).name


def metric_cutoff(name: str) -> int | None:
    """The `@k` of a metric; None for metrics without one (and service metrics)."""
    if is_service_metric(name):
        return None
    query = query_metric(name)
    return query.k if query is not None else parse_metric(name).k


def lower_is_better(name: str) -> bool:
    """Service metrics (latency, error rate) and the rates of failures are better when lower."""
    query = query_metric(name)
    return is_service_metric(name) or (query is not None and not query.family.higher_is_better)


def is_relevance_metric(name: str) -> bool:
    """Whether the metric is computed from relevance judgments (not a query or service one)."""
    return not is_service_metric(name) and query_metric(name) is None


def pooling_weight(name: str) -> str | None:
    """For a metric pooled over positions, the per-query key of its weight (`positions@k`)."""
    query = query_metric(name)
    if query is None or not query.family.pooled:
        return None
    return f"positions@{query.k}"


def query_metric(name: str) -> QueryMetric | None:
    """The rejection or context metric `name` spells; None when it names no such metric."""
    match = _NAME.match(name.lower())
    family = QUERY_FAMILIES.get(match.group(1)) if match else None
    if match is None or family is None:
        return None
    return QueryMetric(family, _cutoff(name, family, match.group(2)))


def parse_metric(name: str) -> Metric:
    """Parse `recall@5`, `P@10`, `MRR`, ... (case-insensitive) into a `Metric`."""
    match = _NAME.match(name.lower())
    family = _ALIASES.get(match.group(1)) if match else None
    if match is None or family is None:
        raise InputError(f"unknown metric {name!r}; valid metrics: {valid_metric_names()}")
    return Metric(family, _cutoff(name, family, match.group(2)))


def _cutoff(name: str, family: Family | QueryFamily, cutoff: str | None) -> int | None:
    """The cutoff written after `@`, checked against what the family takes."""
    if cutoff is None:
        if family.cutoff == "required":
            raise InputError(f"metric {name!r} needs a cutoff, e.g. {family.name}@5")
        return None
    if family.cutoff == "none":
        raise InputError(f"metric {name!r} takes no cutoff; write {family.name}")
    if not cutoff.isdigit() or int(cutoff) < 1:
        raise InputError(f"metric {name!r}: the cutoff must be a whole number >= 1")
    return int(cutoff)
