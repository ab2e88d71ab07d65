"""Retrievers built more than once: the variance between builds in the gate's test.

An approximate index (IVF-PQ, HNSW) is trained or linked at random when it is built;
an LLM reranker samples. When the baseline and the change are each measured on
`builds: K` builds of their retriever, the gate's question is about the retriever's
configuration, not about one build of it, and the variance between builds belongs in
its interval.

The model: each build b of a side moves that side's mean score by a shift B_b, and
the queries are a sample from the queries the retriever will be asked. The mean
worsening over the queries, each query's scores averaged over the builds, estimates
the true worsening plus mean(B of the baseline's builds) - mean(B of the change's).

- The queries' part is today's test (`stats.column_test`: exact for 0/1 scores,
  betting for graded ones) on the per-query averages, valid at every size given the
  builds.
- The builds' part is Student's t on the builds' mean scores over the same queries,
  their variance pooled over both sides (each side's own spread of build means,
  which also holds the per-query noise of a build and so over-states the shift's:
  a wider bound, never a narrower one). Assumed: builds are independent, drawn the
  same way on both sides, with roughly normal shifts of the mean.

The two are joined by Bonferroni: a bound at level a is the queries' bound at a/2
moved by the builds' bound at a/2, so its error is at most a whatever the two parts
do together. With one build a side there is nothing to estimate the builds' part
from, and the test is exactly the single-build test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llm_eval.criteria import Gate
from llm_eval.gate import allowed_change
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.slices import members
from llm_eval.stats import EDGE, ColumnTest

P_STEPS = 48
"""Halvings of log(alpha') when a joined p-value is searched: the p-value returned is
at most 2^-48 of its own log above the smallest level that rejects."""
SMALLEST_P = 1e-12


@dataclass(frozen=True, slots=True)
class BuildSpread:
    """How the builds of both sides spread in one scope's mean score."""

    before: tuple[float, ...]
    """The baseline's builds' mean scores over the paired queries."""
    after: tuple[float, ...]
    """The change's builds' mean scores over the paired queries."""

    @property
    def degrees(self) -> int:
        """Degrees of freedom of the pooled variance: builds less one, on each side."""
        return max(len(self.before) - 1, 0) + max(len(self.after) - 1, 0)

    @property
    def sd(self) -> float:
        """The pooled standard deviation of a build's mean score around its side's mean
        (0 without a second build on either side)."""
        if self.degrees == 0:
            return 0.0
        squares = sum(
            float(np.sum((np.asarray(side) - np.mean(side)) ** 2))
            for side in (self.before, self.after)
            if len(side) > 1
        )
        return math.sqrt(squares / self.degrees)

    @property
    def scale(self) -> float:
        """sqrt(1/K_before + 1/K_after): the builds' standard error per unit of sd."""
        return math.sqrt(1.0 / len(self.before) + 1.0 / len(self.after))

    @property
    def widest_move(self) -> float:
        """The largest difference between two builds of one side (0 with one build)."""
        moves = [max(side) - min(side) for side in (self.before, self.after) if len(side) > 1]
        return max(moves, default=0.0)

    def half_width(self, level: float) -> float:
        """The one-sided `level` bound of |mean shift before - mean shift after|."""
        return builds_bound(self.sd, self.degrees, self.scale, level)


def builds_bound(sd: float, degrees: int, scale: float, level: float) -> float:
    """Student's one-sided `level` bound of the builds' error: t(1 - level, degrees) x sd
    x scale (0 without degrees of freedom or spread)."""
    if degrees == 0 or sd == 0.0:
        return 0.0
    return t_quantile(1.0 - level, degrees) * sd * scale


def build_spread(
    builds_before: Sequence[Mapping[str, Mapping[str, float]]],
    builds_after: Sequence[Mapping[str, Mapping[str, float]]],
    ids: Sequence[str],
    metric: str,
) -> BuildSpread | None:
    """Each build's mean of `metric` over the queries `ids` (each build over those it
    scored), on both sides; None when both sides hold one build (or none)."""
    if len(builds_before) < 2 and len(builds_after) < 2:
        return None

    def means(builds: Sequence[Mapping[str, Mapping[str, float]]]) -> tuple[float, ...]:
        return tuple(m for build in builds if (m := _mean_of(build, ids, metric)) is not None)

    before, after = means(builds_before), means(builds_after)
    if not before or not after or (len(before) < 2 and len(after) < 2):
        return None
    return BuildSpread(before, after)


def averaged(builds: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Per query and metric, the mean over the builds that scored it (in first-seen order
    of queries and metrics)."""
    sums: dict[str, dict[str, list[float]]] = {}
    for build in builds:
        for query_id, row in build.items():
            slot = sums.setdefault(query_id, {})
            for metric, value in row.items():
                slot.setdefault(metric, []).append(value)
    return {q: {m: float(math.fsum(v) / len(v)) for m, v in row.items()} for q, row in sums.items()}


class WithBuilds(ColumnTest):
    """The queries' test (`inner`, on per-query averages over builds) joined with the
    builds' t bound by Bonferroni: at level a, the queries' side at a/2, moved by the
    builds' bound at a/2."""

    def __init__(self, inner: ColumnTest, spread: BuildSpread) -> None:
        self.inner = inner
        self.spread = spread
        self.span = inner.span

    @property
    def queries(self) -> ColumnTest:
        return self.inner

    def p_beyond(self, delta: float) -> float:
        return self._joined(lambda a: self.inner.p_beyond(self._at(delta + self._h(a))))

    def p_within(self, delta: float) -> float:
        return self._joined(lambda a: self.inner.p_within(self._at(delta - self._h(a))))

    def bounds(self, margin: float, level: float) -> tuple[float, float, bool, bool]:
        half = level / 2.0
        h = self.spread.half_width(half)
        edge = self.span * (1.0 - EDGE)
        low, _, low_open, _ = self.inner.bounds(self._at(margin + h), half)
        _, high, _, high_open = self.inner.bounds(self._at(margin - h), half)
        low, high = low - h, high + h
        if low <= -edge:
            low, low_open = -edge, True
        if high >= edge:
            high, high_open = edge, True
        return low, high, low_open, high_open

    def _h(self, level: float) -> float:
        return self.spread.half_width(level / 2.0)

    def _at(self, delta: float) -> float:
        edge = self.span * (1.0 - EDGE)
        return min(max(delta, -edge), edge)

    @staticmethod
    def _joined(inner_p: Callable[[float], float]) -> float:
        """The smallest level a at which the joined test rejects: inner_p(a) <= a/2,
        where inner_p(a) is the queries' p-value at the delta moved by the builds'
        bound at a/2 (it falls as a grows, so the rejecting levels are an interval)."""

        def rejects(level: float) -> bool:
            return inner_p(level) <= level / 2.0

        if not rejects(1.0):
            return 1.0
        if rejects(SMALLEST_P):
            return SMALLEST_P
        low, high = math.log(SMALLEST_P), 0.0  # rejects at exp(high), not at exp(low)
        for _ in range(P_STEPS):
            middle = (low + high) / 2.0
            if rejects(math.exp(middle)):
                high = middle
            else:
                low = middle
        return math.exp(high)


def joined_test(inner: ColumnTest, spread: BuildSpread | None) -> ColumnTest:
    """The gate's test of a scope: `inner` alone with one build a side, else joined with
    the builds' spread."""
    return inner if spread is None else WithBuilds(inner, spread)


# --- Student's t ----------------------------------------------------------------------


def t_cdf(t: float, degrees: float) -> float:
    """P(T <= t) for Student's t with `degrees` degrees of freedom."""
    x = degrees / (degrees + t * t)
    tail = 0.5 * _incomplete_beta(degrees / 2.0, 0.5, x)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, degrees: float) -> float:
    """The t with P(T <= t) = p, for 0.5 <= p < 1, by bisection on `t_cdf`."""
    if not 0.5 <= p < 1.0:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1, got {p}")
    low, high = 0.0, 1.0
    while t_cdf(high, degrees) < p:
        low, high = high, high * 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        if t_cdf(middle, degrees) < p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return high


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta, by its continued fraction (modified
    Lentz; Numerical Recipes, 3rd ed., section 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for coefficient in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + coefficient * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + coefficient / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            fraction *= step
        if abs(step - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


# --- how far a rebuild alone moves the gates -------------------------------------------


@dataclass(frozen=True, slots=True)
class GateMove:
    """How far the builds' means of one gate's scope lie apart."""

    gate: Gate
    widest: float
    """The largest difference between two builds' means over the gate's scope."""
    limit: float
    """The move the gate allows (its regression limit, absolute)."""


@dataclass(frozen=True, slots=True)
class BuildNoise:
    """What building the retriever again changed, with no other change."""

    builds: int
    k: int
    """The cutoff whose ranked lists are compared (the gating k)."""
    compared: int
    """Queries every build answered."""
    differing: int
    """Of those, the queries whose top-k lists are not the same in every build."""
    moves: tuple[GateMove, ...]
    """Each gate with a regression limit on a metric tested query by query."""
    same_scores: bool
    """Every build gave every query the same score on every metric."""

    @property
    def alike(self) -> bool:
        """Every build answered every query with the same top-k and the same scores."""
        return self.differing == 0 and self.same_scores


def _mean_of(
    table: Mapping[str, Mapping[str, float]], ids: Sequence[str], metric: str
) -> float | None:
    """The mean of `metric` over the queries of `ids` that `table` scores; None: none."""
    values = [row[metric] for q in ids if metric in (row := table.get(q, {}))]
    return float(np.mean(values)) if values else None


def build_noise(
    queries: Sequence[GoldQuery],
    gates: Sequence[Gate],
    tables: Sequence[Mapping[str, Mapping[str, float]]],
    rankings: Sequence[Mapping[str, tuple[str, ...]]],
    k: int,
) -> BuildNoise:
    """How the builds differ: their top-k lists per query (`rankings`: each build's
    ranked doc ids of the queries it answered) and each gate's mean (`tables`: each
    build's per-query scores)."""
    shared = [q.query_id for q in queries if all(q.query_id in r for r in rankings)]
    differing = sum(len({r[q][:k] for r in rankings}) > 1 for q in shared)
    moves = []
    for gate in gates:
        if gate.regression_max is None or not parse_metric(gate.metric).pairable:
            continue
        ids = members(queries, gate.scope)
        means = [m for table in tables if (m := _mean_of(table, ids, gate.metric)) is not None]
        if len(means) < 2:
            continue
        moves.append(GateMove(gate, max(means) - min(means), allowed_change(gate, means[0])))
    same = all(table == tables[0] for table in tables)
    return BuildNoise(len(tables), k, len(shared), differing, tuple(moves), same)
