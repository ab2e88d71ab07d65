"""Retrievers built more than once: the variance between builds in the gate's test.

An approximate index (IVF-PQ, HNSW) is trained or linked at random when it is built;
an LLM reranker samples. When the baseline and the change are each measured on
`builds: K` builds of their retriever, the gate's question is about the retriever's
configuration, not about one build of it, and the variance between builds belongs in
its interval.

The model: each build b of a side moves that side's mean score by a shift B_b, shared
by all its queries, and each query's score in a build carries noise of its own; the
queries are a sample from the queries the retriever will be asked. The mean worsening
over the queries, each query's scores averaged over the builds, estimates the true
worsening plus mean(B of the baseline's builds) - mean(B of the change's).

The gate's test with builds rejects only where two tests both do, each at alpha:

- the queries' test (`stats.column_test`: exact for 0/1 scores, betting for graded
  ones) on the per-query averages, valid at every size given the builds but blind to
  the shared shifts;
- Student's t on the mean worsening, whose variance adds the shifts' variance to the
  queries' (Satterthwaite's degrees of freedom). The shifts' variance is the spread of
  the builds' mean scores, pooled over both sides, less what each query's own noise
  puts into a build's mean (a two-way analysis of variance of queries by builds), so
  that the per-query noise, already in the queries' variance, is not counted twice.

A false fail needs both to reject, so it is at most as likely as with either alone:
the exact test guards small and low-churn scopes, where a t-test errs, and the t-test
holds the builds, which the exact test cannot see. Assumed: builds independent and
drawn the same way on both sides, with roughly normal shifts of the mean. With one
build a side there is no spread to estimate, and the test is exactly the single-build
test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from llm_eval.bounds import ColumnTest, FloatArray
from llm_eval.criteria import Gate
from llm_eval.gate import allowed_change
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.slices import members


@dataclass(frozen=True, slots=True)
class BuildSpread:
    """How the builds of both sides spread in one scope's mean score."""

    before: tuple[float, ...]
    """The baseline's builds' mean scores over the paired queries."""
    after: tuple[float, ...]
    """The change's builds' mean scores over the paired queries."""
    within: float = 0.0
    """What each query's own noise puts into a build's mean score: the variance it
    adds, pooled over both sides (0 when no side's builds scored the same queries)."""

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
    def shift_sd(self) -> float:
        """The standard deviation of a build's shift of the mean: the spread of the
        builds' means less what per-query noise explains of it (never below 0)."""
        return math.sqrt(max(self.sd**2 - self.within, 0.0))

    @property
    def scale(self) -> float:
        """sqrt(1/K_before + 1/K_after): the builds' standard error per unit of sd."""
        return math.sqrt(1.0 / len(self.before) + 1.0 / len(self.after))

    @property
    def widest_move(self) -> float:
        """The largest difference between two builds of one side (0 with one build)."""
        moves = [max(side) - min(side) for side in (self.before, self.after) if len(side) > 1]
        return max(moves, default=0.0)

    def shift_variance(self) -> tuple[float, float]:
        """(the variance the builds' shifts add to the mean worsening, its Satterthwaite
        degrees of freedom); (0, inf) when the builds' means spread no more than
        per-query noise explains."""
        spread, noise = self.sd**2 * self.scale**2, self.within * self.scale**2
        if self.degrees == 0 or spread <= noise:
            return 0.0, math.inf
        # The noise term's degrees of freedom are (builds - 1) x (queries - 1) summed
        # over the sides, in the thousands: its share of the estimate's variance is nil.
        return spread - noise, (spread - noise) ** 2 / (spread**2 / self.degrees)


def builds_bound(sd: float, degrees: int, scale: float, level: float) -> float:
    """Student's one-sided `level` bound of the builds' error: t(1 - level, degrees) x sd
    x scale (0 without degrees of freedom or spread)."""
    if degrees == 0 or sd == 0.0:
        return 0.0
    return t_quantile(1.0 - level, degrees) * sd * scale


def spread_of(before: FloatArray, after: FloatArray) -> BuildSpread:
    """The spread of two sides' builds, each an array (builds, queries) of one metric's
    scores on the same queries."""
    return BuildSpread(
        tuple(float(m) for m in before.mean(axis=1)),
        tuple(float(m) for m in after.mean(axis=1)),
        _pooled_within([before, after]),
    )


def _pooled_within(sides: Sequence[FloatArray]) -> float:
    """The per-query noise's variance in one build's mean, pooled over the sides with
    two builds or more: each side's residual mean square of a queries-by-builds
    analysis of variance (scores less their query's and their build's means), divided
    by the number of queries."""
    weighted, degrees = 0.0, 0
    for table in sides:
        builds, queries = table.shape
        if builds < 2 or queries < 2:
            continue
        residual = (
            table - table.mean(axis=0, keepdims=True) - table.mean(axis=1, keepdims=True)
        ) + table.mean()
        mean_square = float(np.sum(residual**2)) / ((builds - 1) * (queries - 1))
        weighted += (builds - 1) * mean_square / queries
        degrees += builds - 1
    return weighted / degrees if degrees else 0.0


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
    within = _pooled_within(
        [_common(builds_before, ids, metric), _common(builds_after, ids, metric)]
    )
    return BuildSpread(before, after, within)


def _common(
    builds: Sequence[Mapping[str, Mapping[str, float]]], ids: Sequence[str], metric: str
) -> FloatArray:
    """(builds, queries): the scores of the queries of `ids` that every build scored."""
    shared = [q for q in ids if all(metric in build.get(q, {}) for build in builds)]
    return np.asarray([[build[q][metric] for q in shared] for build in builds], dtype=np.float64)


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


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """The degrees of freedom of a sum of variance estimates, each (variance, its degrees
    of freedom): Satterthwaite's approximation (inf when no part varies)."""
    denominator = sum(v * v / f for v, f in parts if v > 0.0 and f > 0)
    total = sum(v for v, _ in parts)
    return total * total / denominator if denominator > 0.0 else math.inf


class BuildsT(ColumnTest):
    """Student's t on the mean worsening (`worsening`: per query, before less after,
    each averaged over its side's builds), its variance the queries' plus the builds'
    shifts' (`BuildSpread.shift_variance`), with Satterthwaite's degrees of freedom."""

    def __init__(self, worsening: FloatArray, spread: BuildSpread, span: float = 1.0) -> None:
        n = worsening.size
        self.span = span
        self.mean = float(worsening.mean()) if n else 0.0
        queries = float(worsening.var(ddof=1)) / n if n > 1 else 0.0
        shifts, shift_degrees = spread.shift_variance()
        self.variance = queries + shifts
        self.degrees = satterthwaite([(queries, n - 1), (shifts, shift_degrees)])

    def p_beyond(self, delta: float) -> float:
        return self._upper(self.mean - delta)

    def p_within(self, delta: float) -> float:
        return self._upper(delta - self.mean)

    def _upper(self, distance: float) -> float:
        """P(T >= distance / se): the chance of a distance this far above the null."""
        if self.variance == 0.0:
            return 0.0 if distance > 0.0 else 1.0
        t = distance / math.sqrt(self.variance)
        if math.isinf(self.degrees):
            return 1.0 - NormalDist().cdf(t)
        return 1.0 - t_cdf(t, self.degrees)


class WithBuilds(ColumnTest):
    """The queries' test (`inner`, on per-query averages over builds) and the builds' t
    (`BuildsT`), both at the gate's level: a side is rejected where both reject it."""

    def __init__(self, inner: ColumnTest, spread: BuildSpread, t: BuildsT) -> None:
        self.inner = inner
        self.spread = spread
        self.t = t
        self.span = inner.span

    @property
    def queries(self) -> ColumnTest:
        return self.inner

    def p_beyond(self, delta: float) -> float:
        return max(self.inner.p_beyond(delta), self.t.p_beyond(delta))

    def p_within(self, delta: float) -> float:
        return max(self.inner.p_within(delta), self.t.p_within(delta))

    def bounds(self, margin: float, level: float) -> tuple[float, float, bool, bool]:
        # Each test's bound lies beyond the margin exactly where it rejects there, so
        # the lower of the two low bounds (the higher of the high ones) lies beyond it
        # exactly where both do: the interval agrees with the joined decision.
        low_inner, high_inner, low_open_inner, high_open_inner = self.inner.bounds(margin, level)
        low_t, high_t, low_open_t, high_open_t = self.t.bounds(margin, level)
        low, low_open = (low_inner, low_open_inner) if low_inner <= low_t else (low_t, low_open_t)
        high, high_open = (
            (high_inner, high_open_inner) if high_inner >= high_t else (high_t, high_open_t)
        )
        return low, high, low_open, high_open


def joined_test(inner: ColumnTest, spread: BuildSpread | None, worsening: FloatArray) -> ColumnTest:
    """The gate's test of a scope: `inner` alone with one build a side, else joined with
    the builds' t on `worsening` (per query, before less after, oriented so that a
    worsening is positive)."""
    if spread is None:
        return inner
    return WithBuilds(inner, spread, BuildsT(worsening, spread, inner.span))


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
