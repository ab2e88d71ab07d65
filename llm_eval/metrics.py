"""The metric registry and the vectorised relevance kernels.

Every fact about a metric lives in its `Family` entry: what kind it is (computed from
relevance labels, from rejection queries, from stale or conflicting context, or from
what the retriever cost), whether it takes a cutoff, which way is better, its unit
and label, how a slice pools it, and the code that computes it. Other modules ask
the parsed `Metric` (`parse_metric("recall@5").lower_is_better`) and never test names.
Adding a metric is one `register(Family(...))` call here; an installed distribution
adds its own through the `llm_eval.metrics` entry points (`llm_eval.plugins`), read
the first time a name is not a built-in one or the registry is listed: a gate on
built-in metrics neither reads the installed distributions' metadata nor trips over
a broken plugin it does not use.

Names are parsed from strings (`recall@5`, `P@10`, `ndcg@10`, `mrr`), the way
ir_measures parses measures: a family, an optional cutoff `@k`. Every kernel
takes `Judgments` (flat arrays over all queries) and returns one value per query;
no kernel loops over queries in Python.

Conventions are trec_eval's (the reference behind pytrec_eval):
- binary metrics count a document relevant when grade >= relevance_level;
- P@k divides by k even when fewer than k documents were retrieved;
- AP and AP@k divide by the number of relevant documents of the query;
- R-precision is the precision at R, the number of relevant documents;
- nDCG uses the raw grades as gains (trec_eval's `ndcg_cut`) with discount
  1/log2(rank + 1); `ndcg_exp` uses gain 2^grade - 1 (Burges et al.).

`judged@k` is not a trec_eval measure: it is ir_measures' `Judged@k`, the share of the
top k with any grade in the qrels (0 and negative too), divided by k like P@k; a
document repeated in a list counts at its first rank only. It says how much of what
the retriever returns the labels can speak for: a new retriever that surfaces
relevant but unlabelled chunks looks like a recall drop, and its judged@k falls.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from llm_eval.errors import InputError, PluginError
from llm_eval.judgments import FloatArray, IntArray, Judgments, group_starts
from llm_eval.service_metrics import ServiceRecord, error_rate, latency_percentile

Kernel = Callable[[Judgments, "int | None"], FloatArray]
Aggregate = Callable[[list[ServiceRecord]], float]

Kind = Literal["relevance", "rejection", "context", "ranking", "judged", "service"]
"""Where a metric's values come from: relevance labels (`Judgments`), rejection
queries (`llm_eval.rejection`), stale or conflicting context (`llm_eval.versions`),
the returned ranking's own scores and order (`llm_eval.ranking`),
a judge model's verdicts (`llm_eval.judge`, advisory unless a gate opts in), or what
each query cost (`llm_eval.service_metrics`)."""
Unit = Literal["share", "score", "ratio", "ms"]
"""`share`: a proportion, shown as a percentage with deltas in points; `score`: a
rank-based score in [0, 1], shown as a decimal; `ratio`: a decimal not bounded to
[0, 1] (a correlation, a coefficient of variation); `ms`: milliseconds."""
Pooling = Literal["mean", "positions", "aggregate"]
"""How a slice of queries gets its value: the mean of per-query values (which can
be paired query by query), the mean weighted by each query's `positions@k`, or an
aggregate over the queries' records (a latency percentile)."""


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family, e.g. recall (which takes a cutoff)."""

    name: str
    kind: Kind
    cutoff: Literal["required", "optional", "none"]
    description: str
    label: str
    """How a person reads it: `MRR`, `hit rate`, `latency p95`."""
    unit: Unit
    higher_is_better: bool = True
    pooling: Pooling = "mean"
    aliases: tuple[str, ...] = ()
    kernel: Kernel | None = None
    """Relevance metrics: the per-query values from judgments."""
    aggregate: Aggregate | None = None
    """Service metrics: the value over a slice's records."""
    score_range: tuple[float, float] | None = (0.0, 1.0)
    """Where every per-query value lies; None when unbounded (no paired test with
    error rates valid at every size exists for an unbounded mean)."""
    source: str = "built-in"
    """Where it comes from: `built-in`, or the plugin distribution's `name version`."""

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

    @property
    def anchor(self) -> str:
        """Its id on the docs' metrics page: `recall-at-k`, `mrr`, `judged-at-k`."""
        name = self.name.lower().replace("_", "-")
        return f"{name}-at-k" if self.cutoff == "required" else name


@dataclass(frozen=True, slots=True)
class Metric:
    """A parsed metric name: a family and its cutoff. Every fact comes from the family."""

    family: Family
    k: int | None

    @property
    def name(self) -> str:
        """The canonical spelling, used as the key in every output."""
        return self.family.name if self.k is None else f"{self.family.name}@{self.k}"

    @property
    def kind(self) -> Kind:
        """Where its values come from."""
        return self.family.kind

    @property
    def label(self) -> str:
        """`recall@5`, `MRR`, `nDCG@10`, `hit rate@5`, `latency p95`, `stale rate@5`."""
        base = self.family.label
        return base if self.k is None else f"{base}@{self.k}"

    @property
    def lower_is_better(self) -> bool:
        """Latency, error rate and the rates of failures improve when they fall."""
        return not self.family.higher_is_better

    @property
    def percent(self) -> bool:
        """Whether it reads as a share (shown as a percentage, deltas in points)."""
        return self.family.unit == "share"

    @property
    def pairable(self) -> bool:
        """Whether each query has its own value, so two runs can be compared query by query."""
        return self.family.pooling == "mean"

    @property
    def testable(self) -> bool:
        """Whether changes are tested query by query: pairable, with bounded values."""
        return self.pairable and self.family.score_range is not None

    @property
    def span(self) -> float:
        """Width of the range of per-query values (1 for shares and rank scores)."""
        low, high = self.family.score_range or (0.0, 1.0)
        return high - low

    @property
    def weight_key(self) -> str | None:
        """For a metric pooled over positions, the per-query key of its weight."""
        return f"positions@{self.k}" if self.family.pooling == "positions" else None

    def compute(self, judgments: Judgments) -> FloatArray:
        """One value per evaluated query (relevance metrics only). A plugin's kernel is
        checked: an exception in it, or values that are not one finite number per
        query within the family's range, are a PluginError naming the metric and its
        distribution, never a traceback or a value the gate would read."""
        assert self.family.kernel is not None, f"{self.name} is not computed from judgments"
        if self.family.source == "built-in":
            return self.family.kernel(judgments, self.k)
        return self._checked(judgments)

    def _checked(self, judgments: Judgments) -> FloatArray:
        assert self.family.kernel is not None
        where = f"metric {self.name} of the plugin {self.family.source}"
        # A warning inside the kernel is the plugin's to report, not the user's to read:
        # kept from stderr, and named in the error when the values it warned of are bad.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                raw = np.asarray(self.family.kernel(judgments, self.k))
            except Exception as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
                raise PluginError(f"{where} failed: {detail}") from None
        if raw.dtype.kind not in "iuf":
            word = _NOT_REAL.get(raw.dtype.kind, "other")
            raise PluginError(
                f"{where} gave {word} values ({raw.dtype.name}), not one real number per query"
            )
        values = raw.astype(np.float64)
        expected = (len(judgments.query_ids),)
        if values.shape != expected:
            raise PluginError(
                f"{where} gave values of shape {values.shape}, not one per query {expected}"
            )
        if not np.isfinite(values).all():
            bad = int((~np.isfinite(values)).sum())
            warned = (
                f" ({caught[0].category.__name__}: {str(caught[0].message).splitlines()[0]})"
                if caught and str(caught[0].message).strip()
                else ""
            )
            raise PluginError(f"{where} gave {bad} value(s) that are NaN or infinite{warned}")
        if self.family.score_range is not None:
            low, high = self.family.score_range
            outside = (values < low - 1e-9) | (values > high + 1e-9)
            if outside.any():
                first = float(values[outside][0])
                raise PluginError(
                    f"{where} gave {int(outside.sum())} value(s) outside its range "
                    f"[{low:g}, {high:g}], e.g. {first:g}"
                )
        return values

    def aggregate(self, records: list[ServiceRecord]) -> float:
        """The value over a slice's records (service metrics only)."""
        assert self.family.aggregate is not None, f"{self.name} is not a service metric"
        return self.family.aggregate(records)


_NOT_REAL = {
    "b": "bool",
    "c": "complex",
    "O": "object",
    "U": "text",
    "S": "bytes",
    "M": "datetime",
    "m": "timedelta",
    "V": "structured",
}
"""What a kernel's values are when they are not real numbers, by numpy's dtype kind."""


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


def _judged(j: Judgments, k: int | None) -> FloatArray:
    assert k is not None
    within = j.labelled_query[j.labelled_rank <= k]
    return np.bincount(within, minlength=len(j.query_ids)).astype(np.float64) / k


def _hit_rate(j: Judgments, k: int | None) -> FloatArray:
    return (_relevant_count(j, k) > 0).astype(np.float64)


def _reciprocal_rank(j: Judgments, k: int | None) -> FloatArray:
    first = j.first_relevant_rank()
    found = (first > 0) if k is None else (first > 0) & (first <= k)
    values = np.zeros(len(j.query_ids), dtype=np.float64)
    values[found] = 1.0 / first[found]
    return values


def _average_precision(j: Judgments, k: int | None) -> FloatArray:
    # The hits are in rank order within each query, so those within k are the first of
    # each query's: they are kept before the counting, which they alone decide. The
    # precision at each hit is made in one array, in place (these are the gate's
    # largest temporaries: a few numbers per hit, at a million queries).
    relevant = j.hit_relevant if k is None else j.hit_relevant & (j.hit_rank <= k)
    queries, ranks = j.hit_query[relevant], j.hit_rank[relevant]
    del relevant
    starts = group_starts(queries)
    precision = np.arange(1, queries.size + 1, dtype=np.float64)  # relevant so far, then
    precision -= np.repeat(starts, np.diff(np.append(starts, queries.size)))
    precision /= ranks  # the precision at the hit
    del ranks, starts
    total = np.bincount(queries, precision, minlength=len(j.query_ids))
    return total / j.num_relevant


def _dcg(
    queries: IntArray, ranks: IntArray, gains: FloatArray, k: int | None, size: int
) -> FloatArray:
    # One array of the hits within k, made in place; the others are cut to those hits
    # one at a time, as each is needed.
    keep = None if k is None else ranks <= k
    discounted = (ranks if keep is None else ranks[keep]) + 1.0
    np.log2(discounted, out=discounted)
    np.divide(gains if keep is None else gains[keep], discounted, out=discounted)
    kept = queries if keep is None else queries[keep]
    return np.bincount(kept, discounted, minlength=size).astype(np.float64)


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


def _r_precision(j: Judgments, k: int | None) -> FloatArray:
    """Share of the top R that is relevant, R being the query's number of relevant documents."""
    cutoff = j.num_relevant[j.hit_query]
    within = j.hit_relevant & (j.hit_rank <= cutoff)
    counts = np.bincount(j.hit_query[within], minlength=len(j.query_ids))
    return counts.astype(np.float64) / j.num_relevant


_REGISTRY: dict[str, Family] = {}
_SPELLINGS: dict[str, Family] = {}
_PLUGIN_KINDS = ("relevance",)
"""The kinds a plugin may add: a relevance metric's values come from its own kernel;
the others are computed by name in their own modules."""
_loading: str | None = None
"""The source of the plugin being loaded, stamped on what it registers."""
_plugins_loaded = False


def register(family: Family) -> Family:
    """Add a family to the registry; its name and aliases must be new."""
    if _loading is not None:
        if family.kind not in _PLUGIN_KINDS:
            raise ValueError(f"{family.name}: a plugin metric must be of kind relevance")
        family = replace(family, source=_loading)
    if (family.kernel is not None) != (family.kind == "relevance"):
        raise ValueError(f"{family.name}: a relevance metric, and only one, has a kernel")
    if (family.aggregate is not None) != (family.kind == "service"):
        raise ValueError(f"{family.name}: a service metric, and only one, has an aggregate")
    spellings = [s.lower() for s in (family.name, *family.aliases)]
    for spelling in spellings:
        if spelling in _SPELLINGS:
            raise ValueError(f"metric {spelling!r} is already registered")
    _SPELLINGS.update(dict.fromkeys(spellings, family))
    _REGISTRY[family.name] = family
    parse_metric.cache_clear()
    return family


def _load_plugins() -> None:
    """Register the metrics of the installed plugins, once per process."""
    global _plugins_loaded, _loading
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from llm_eval.plugins import installed_plugins  # reads installed distributions' metadata

    for plugin in installed_plugins():
        _loading = plugin.source
        try:
            plugin.load()
        finally:
            _loading = None


def families() -> Iterator[Family]:
    """Every registered family, built-in first, then the plugins', in registration order."""
    _load_plugins()
    return iter(list(_REGISTRY.values()))


def valid_metric_names() -> str:
    """The accepted spellings, for error messages and help text."""
    return "; ".join(f.usage() for f in families())


_NAME = re.compile(r"^\s*([a-z_0-9]+?)(?:\s*@\s*(\S+))?\s*$")


@lru_cache(maxsize=1024)
def parse_metric(name: str) -> Metric:
    """Parse `recall@5`, `P@10`, `MRR`, `latency_p95` ... (case-insensitive). The
    installed plugins are read the first time a name is not a built-in one."""
    match = _NAME.match(name.lower())
    family = _SPELLINGS.get(match.group(1)) if match else None
    if match is not None and family is None and not _plugins_loaded:
        _load_plugins()
        family = _SPELLINGS.get(match.group(1))
    if match is None or family is None:
        raise InputError(f"unknown metric {name!r}; valid metrics: {valid_metric_names()}")
    return Metric(family, _cutoff(name, family, match.group(2)))


def coverage_metric(metric: str, default_k: int) -> str | None:
    """The `judged@k` shown beside a gate on `metric` when its value moves: at the
    metric's cutoff (else `default_k`); None for metrics not computed from the labels."""
    parsed = parse_metric(metric)
    if parsed.kind != "relevance" or parsed.family.name == "judged":
        return None
    return f"judged@{parsed.k or default_k}"


def relevance_metric(name: str) -> Metric:
    """A metric computed from relevance labels; any other kind is an error saying so."""
    parsed = parse_metric(name)
    if parsed.kind in ("ranking", "rejection"):
        raise InputError(
            f"llm_eval.evaluate computes relevance metrics; {parsed.name} needs the run's "
            "scores or rejection queries: `llm-eval evaluate --gold` computes it"
        )
    if parsed.kind != "relevance":
        raise InputError(
            f"llm_eval.evaluate computes relevance metrics; {parsed.name} is computed by "
            "`llm-eval gate`, which reads the config"
        )
    return parsed


def _cutoff(name: str, family: Family, cutoff: str | None) -> int | None:
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


def _relevance(
    name: str,
    kernel: Kernel,
    cutoff: Literal["required", "optional", "none"],
    description: str,
    label: str,
    unit: Unit,
    aliases: tuple[str, ...] = (),
) -> None:
    register(
        Family(name, "relevance", cutoff, description, label, unit, aliases=aliases, kernel=kernel)
    )


_relevance(
    "recall", _recall, "required", "share of the relevant documents in the top k", "recall", "share"
)
_relevance(
    "precision",
    _precision,
    "required",
    "share of the top k that is relevant",
    "precision",
    "share",
    aliases=("P",),
)
_relevance(
    "hit_rate",
    _hit_rate,
    "required",
    "1 when a relevant document is in the top k",
    "hit rate",
    "share",
    aliases=("success",),
)
_relevance(
    "mrr",
    _reciprocal_rank,
    "optional",
    "1 / rank of the first relevant document",
    "MRR",
    "score",
    aliases=("recip_rank",),
)
_relevance("map", _average_precision, "optional", "average precision", "MAP", "score")
_relevance(
    "ndcg", _ndcg_with(_linear_gain), "optional", "nDCG, linear gain (trec_eval)", "nDCG", "score"
)
_relevance(
    "ndcg_exp",
    _ndcg_with(_exponential_gain),
    "optional",
    "nDCG, gain 2^grade - 1",
    "nDCG(exp)",
    "score",
)
_relevance(
    "judged",
    _judged,
    "required",
    "share of the top k carrying any gold label (relevant or not): where it falls, the "
    "labels have holes the retriever now reaches",
    "judged",
    "share",
)
_relevance(
    "rprec",
    _r_precision,
    "none",
    "share of the top R that is relevant, R = the number of relevant documents",
    "R-precision",
    "share",
    aliases=("r_precision",),
)

register(
    Family(
        "score_discrimination",
        "ranking",
        "optional",
        "coefficient of variation of the returned scores (top k): how far the retriever "
        "separates what it returns; unscored when it returns no scores",
        "score discrimination",
        "ratio",
        score_range=None,
    )
)
register(
    Family(
        "rank_correlation",
        "ranking",
        "optional",
        "Spearman's rho between the returned order and the gold grades of the top k "
        "(unlabelled = 0); unscored when the grades are all equal",
        "rank correlation",
        "ratio",
        score_range=(-1.0, 1.0),
    )
)
register(
    Family(
        "rejection_accuracy",
        "rejection",
        "none",
        "share of rejection queries the retriever rejected (abstained, empty, low score)",
        "rejection accuracy",
        "share",
    )
)
register(
    Family(
        "false_confidence_rate",
        "rejection",
        "none",
        "share of rejection queries answered with confident results",
        "false confidence rate",
        "share",
        higher_is_better=False,
    )
)
register(
    Family(
        "stale_rate",
        "context",
        "required",
        "share of the top-k positions holding a superseded document, pooled over queries",
        "stale rate",
        "share",
        higher_is_better=False,
        pooling="positions",
    )
)
register(
    Family(
        "stale_query_rate",
        "context",
        "required",
        "share of queries with a superseded document in the top k",
        "stale query rate",
        "share",
        higher_is_better=False,
    )
)
register(
    Family(
        "conflict_rate",
        "context",
        "required",
        "share of queries with two versions of one document (same version_key) in the top k",
        "conflict rate",
        "share",
        higher_is_better=False,
    )
)
register(
    Family(
        "context_precision",
        "judged",
        "required",
        "RAGAS context precision: useful chunks in the top k, weighted by rank (judged)",
        "context precision",
        "score",
    )
)
register(
    Family(
        "context_recall",
        "judged",
        "none",
        "RAGAS context recall: share of the reference answer's statements the context "
        "supports (judged)",
        "context recall",
        "share",
    )
)
register(
    Family(
        "context_sufficiency",
        "judged",
        "none",
        "how much of what the expected answer needs is in the context, 0 to 1 (judged)",
        "context sufficiency",
        "score",
    )
)
register(
    Family(
        "faithfulness",
        "judged",
        "none",
        "RAGAS faithfulness: share of the run's answer's statements the context supports "
        "(judged; the run needs an answer)",
        "faithfulness",
        "share",
    )
)
register(
    Family(
        "answer_relevance",
        "judged",
        "none",
        "RAGAS answer relevance: mean cosine between the question and questions the judge "
        "writes from the run's answer (judged; needs embeddings:)",
        "answer relevance",
        "score",
    )
)
for _q in (50, 95, 99):
    register(
        Family(
            f"latency_p{_q}",
            "service",
            "none",
            f"{'median' if _q == 50 else f'{_q}th-percentile'} retrieval latency",
            f"latency p{_q}",
            "ms",
            higher_is_better=False,
            pooling="aggregate",
            aggregate=latency_percentile(_q),
        )
    )
register(
    Family(
        "error_rate",
        "service",
        "none",
        "share of queries that failed",
        "error rate",
        "share",
        higher_is_better=False,
        pooling="aggregate",
        aggregate=error_rate,
    )
)
