"""Paired statistics for the gate: is a change beyond the allowed limit, within it, or
can the data not tell?

The gate compares a change ("after") with the baseline ("before") query by query, so
every test here is paired: it works on the per-query worsening `before - after`, a
number in [-w, w] when the metric's scores lie in an interval of width w.

Every bound and p-value here is valid at every number of queries and for every
distribution of per-query scores, not only asymptotically:

- 0/1 scores (hit rate, recall@k with one relevant document) get an exact
  unconditional test: Tango's score statistic (Tango 1998, Stat. Med. 17:891-908),
  with the p-value of Berger & Boos (1994, JASA 89:1012-1016): the largest tail
  probability over the values of the nuisance parameter (the share of queries that
  changed) in its 99.9% Clopper-Pearson interval, plus 0.001 (`NUISANCE_GAMMA`) for
  the chance that the interval misses it. The largest over the whole range is set by
  shares no data support (e.g. no query improving), which cost 4-6 points of power at
  the gate's sizes; the restricted p-value is as valid: P(p <= alpha) <= gamma + (alpha
  - gamma) at every share. At a given number of changed queries the p-value falls as
  more of them went bad, so the test rejects when the bad count reaches a threshold
  that depends on the changed count (`rejection_threshold`), which the power
  statement sums over exactly.
- Graded scores (MRR, nDCG, recall with several relevant documents) get the
  betting test of a bounded mean (Waudby-Smith & Ramdas 2024, JRSS-B 86:1-27,
  "hedged capital" with the predictable plug-in bets of their section 5.1): a
  wealth process that is a non-negative supermartingale under the null, so by
  Ville's inequality 1 / wealth is a p-value. The wealth is averaged over a few
  fixed orders of the queries (an average of e-values is an e-value).

Bounds are found by bisection on the same p-value, bracketed at the limit first, so
a bound lies beyond the limit exactly when that side's test rejects. A bound can
reach the end of the possible range (the data say nothing on that side); it is then
marked open, and it is always a finite number.

Across the slices of one gate, p-values are Holm-corrected (`holm`); `holm_levels`
gives each slice the level at which its interval agrees with that decision.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypeVar

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Frozen = TypeVar("Frozen", FloatArray, IntArray)

BISECTION_STEPS = 22
"""Halvings of the range when a bound is searched: 2 / 2^22 < 5e-7, far below any shown
digit (0.1 pp is 1e-3); the bound returned is the rejected end of the last bracket, so
stopping earlier only widens it by that much."""
SHARE_STEPS = 8.0
"""The exact test's tail is maximised over a fixed grid of shares of changed queries:
evenly spaced on the arcsine scale, where an estimated share's standard deviation is
1 / (2 sqrt(n)), SHARE_STEPS points to that standard deviation (`share_grid`). Fixed,
so that the power statement can find the test's rejection region exactly."""
LIKELY = 1e-9
"""Numbers of changed queries less likely than this times the likeliest one are left out
of the power sum."""
NUISANCE_GAMMA = 0.001
"""Berger & Boos's gamma: the exact test maximises over a (1 - gamma) confidence interval
of the share of changed queries and adds gamma to the p-value."""
BET_CAP = 0.75
"""The largest share of the wealth bet on one query (c in Waudby-Smith & Ramdas)."""
BET_ORDERS = 16
"""Fixed orders of the queries over which the betting wealth is averaged."""
POWER_SIMULATIONS = 400
"""Simulated samples behind the power statement of a graded metric."""
POWER = 0.8
"""The catch rate the power statement speaks of: "caught 4 times in 5"."""
CHURN_POINTS = 16
"""Equally likely values of the churn a 0/1 power figure averages its catch rate over."""
LARGE_BINARY = 1_000
"""From this many 0/1 queries on, a catch rate comes from a normal approximation of the
exact test (`normal_catch_rate`), whose cost does not grow with the number of queries;
below it, from the exact sum. There they agree within 3 points of catch rate (with no
churn; within 1 with churn), as tests/test_power.py checks."""
LARGE_GRADED = 500
"""From this many graded queries on, a catch rate comes from a normal approximation of
the betting test on a fixed-size summary of the scores (`_normal_catcher`), and a
scope this large is its own truth in the simulation (`_truths`); below it, from the
simulation. tests/test_power.py checks the drop named against the full simulation."""
SUMMARY_POINTS = 401
"""Points of the grid on [-1, 1] that the large-sample model holds the scaled per-query
changes on, 0.005 apart; each value is split between its two neighbours so that its
mean is kept (the variance grows by at most 0.0025^2)."""
WEALTH_BLOCKS = 64
"""Runs of queries, geometrically longer, over which the large-sample model takes one
bet: the bets settle as the running variance does, so later runs can be long."""
SIMULATION_ELEMENTS = 1 << 18
"""About how many numbers (samples x orders x queries) the power simulation tests at a
time: 2 MiB of floats, so the arrays it sweeps a dozen times stay in cache."""
EDGE = 1e-9
"""How close to the end of the range a tested value may come."""
BETA_EPSILON = 1e-14
BETA_MAX_ITERATIONS = 2_000


def is_binary(before: npt.ArrayLike, after: npt.ArrayLike) -> bool:
    """True when every score in both arrays is 0 or 1."""
    return bool(np.isin(before, (0.0, 1.0)).all() and np.isin(after, (0.0, 1.0)).all())


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order (Holm 1979).

    The i-th smallest of m p-values is multiplied by m - i + 1; adjusted values are
    made non-decreasing in that order and capped at 1.
    """
    values = np.asarray(p_values, dtype=np.float64)
    if values.size and not ((values >= 0.0) & (values <= 1.0)).all():
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(values, kind="stable")
    scaled = values[order] * np.arange(values.size, 0, -1)
    adjusted = np.empty_like(values)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return [float(x) for x in adjusted]


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """Per p-value, the one-sided level at which its interval agrees with Holm's
    step-down decision at `alpha`: a rejected one (the i-th smallest) gets
    alpha / (m - i + 1), every other alpha / (m - r) with r the number rejected.
    An interval at that level excludes the limit exactly when Holm rejects."""
    m = len(p_values)
    order = sorted(range(m), key=lambda j: (p_values[j], j))
    levels = [0.0] * m
    rejected = 0
    for rank, j in enumerate(order):
        if rejected == rank and p_values[j] <= alpha / (m - rank):
            levels[j] = alpha / (m - rank)
            rejected += 1
    for j in order[rejected:]:
        levels[j] = alpha / (m - rejected)
    return levels


EXACT_METHODS = frozenset({"exact-unconditional", "tango-score", "mcnemar-exact"})
"""Tests whose p-value is the tail probability itself (the last two: reports written by
earlier versions). Every other test's p-value is a conservative bound: the betting
test's is 1 / wealth, by Ville's inequality at least the exact p-value."""
NO_EVIDENCE_P = 0.5
"""A bound at or above this says nothing against the null: printed `p > 0.5`."""


def format_p(p: float, method: str | None) -> str:
    """The one way every surface prints a p-value of the test `method`: `p < 0.001`;
    an exact p-value as `p = 0.034`; a bound as `p ≤ 0.034`, or `p > 0.5` when it is
    0.5 or more (no evidence), rounded up so that it stays a bound. `method` None: not
    known (an old report), a bound."""
    if p < 0.001:
        return "p < 0.001"
    if method in EXACT_METHODS:
        return f"p = {p:.3f}"
    if p >= NO_EVIDENCE_P:
        return "p > 0.5"
    return f"p ≤ {math.ceil(p * 1000 - 1e-9) / 1000:.3f}"


# --- the test against the limit --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MarginTest:
    """A paired change tested against the allowed worsening (the margin), both ways.

    Worsening is `before - after` for higher-is-better metrics (a drop is positive).
    `low` and `high` are one-sided (1 - alpha) confidence bounds of the mean worsening,
    so together they form a (1 - 2 alpha) interval. The gate reads its decision off the
    p-values: beyond the limit when `p_beyond <= alpha` (then `low` > margin), within
    it when `p_within <= alpha` (then `high` < margin), and cannot tell otherwise.
    """

    n: int
    worsening: float
    """Mean worsening over the paired queries."""
    low: float
    high: float
    confidence: float
    """Level of the interval [low, high]: 1 - 2 alpha."""
    p_beyond: float
    """One-sided p-value against "the worsening is at most the margin"."""
    p_within: float
    """One-sided p-value against "the worsening is at least the margin"."""
    spread: float
    """Sample standard deviation of the per-query differences."""
    method: str
    """`exact-unconditional` (0/1 scores) or `betting` (graded scores)."""
    went_worse: int | None = None
    """0/1 scores: queries that went from the good value to the bad one."""
    went_better: int | None = None
    """0/1 scores: queries that went the other way."""
    low_open: bool = False
    """`low` is the end of the possible range: the data cannot bound it."""
    high_open: bool = False
    """`high` is the end of the possible range: the data cannot bound it."""
    changed: int = 0
    """Queries whose score differs from the baseline's."""


class ColumnTest:
    """One column's test: p-values of both one-sided nulls at any worsening delta."""

    span: float
    """Width of the range the worsening lies in, halved: it lies in [-span, span]."""

    def p_beyond(self, delta: float) -> float:
        """p-value against "the mean worsening is at most delta"."""
        raise NotImplementedError

    def p_within(self, delta: float) -> float:
        """p-value against "the mean worsening is at least delta"."""
        raise NotImplementedError

    def bounds(self, margin: float, level: float) -> tuple[float, float, bool, bool]:
        """One-sided `level` bounds (low, high, low_open, high_open), bracketed at the
        margin so that low > margin exactly when p_beyond(margin) <= level, and high <
        margin exactly when p_within(margin) <= level."""
        edge = self.span * (1.0 - EDGE)
        margin = min(max(margin, -edge), edge)
        low, low_open = _bound(self.p_beyond, margin, level, -edge)
        high, high_open = _bound(self.p_within, margin, level, edge)
        return low, high, low_open, high_open


def _bound(
    p_value: Callable[[float], float], margin: float, level: float, end: float
) -> tuple[float, bool]:
    """The bound where `p_value` crosses `level`, found by bisection between the margin
    and whichever end of the range lies on the other side of the crossing. Returns the
    rejected side of the final bracket, and whether the bound is the range's end."""
    rejected_at_margin = p_value(margin) <= level
    far = -end if rejected_at_margin else end
    if rejected_at_margin and p_value(far) <= level:
        return far, False  # rejected everywhere up to the end: the bound is the end itself
    if not rejected_at_margin and p_value(far) > level:
        return far, True  # nothing rejected: the data cannot bound this side
    inside, outside = (margin, far) if rejected_at_margin else (far, margin)
    return _bisect(lambda delta: p_value(delta) <= level, inside, outside), False


def _bisect(
    holds: Callable[[float], bool], inside: float, outside: float, steps: int = BISECTION_STEPS
) -> float:
    """Halve [inside, outside], where `holds` is true at `inside` and false at `outside`
    and changes once between them; returns the end of the last bracket where it holds."""
    for _ in range(steps):
        middle = (inside + outside) / 2.0
        if holds(middle):
            inside = middle
        else:
            outside = middle
    return inside


def margin_tests(
    worsening_before: npt.ArrayLike,
    worsening_after: npt.ArrayLike,
    margins: Sequence[float],
    *,
    alpha: float,
    seed: int = 0,
    span: float = 1.0,
    levels: Sequence[float] | None = None,
) -> list[MarginTest]:
    """Test each column's mean worsening (`before - after`) against its margin.

    Pass the scores oriented so that a larger `before - after` is worse (swap the
    arguments for lower-is-better metrics). Scores lie in an interval of width `span`
    (1 for shares and rank scores). `levels` gives each column the one-sided level of
    its bounds (default: alpha); the p-values do not depend on it.
    """
    base, head = _as_columns(worsening_before), _as_columns(worsening_after)
    _check_inputs(base, head, alpha)
    columns = base.shape[1]
    if len(margins) != columns:
        raise ValueError(f"expected {columns} margins, got {len(margins)}")
    chosen = [alpha] * columns if levels is None else list(levels)
    return [
        _margin_test(base[:, j], head[:, j], margins[j], alpha, chosen[j], seed, span)
        for j in range(columns)
    ]


def column_test(
    before: FloatArray, after: FloatArray, alpha: float, seed: int = 0, span: float = 1.0
) -> ColumnTest:
    """The test the gate uses for one column: exact for 0/1 scores, betting otherwise.
    Scores outside a range of width `span` are refused: no test here would be valid."""
    if not np.all(np.abs(before - after) <= span * (1.0 + 1e-12)):
        raise ValueError(f"per-query differences must lie within ±{span:g}")
    if is_binary(before, after):
        bad = int(np.sum((before == 1.0) & (after == 0.0)))
        good = int(np.sum((before == 0.0) & (after == 1.0)))
        return ExactPairs(before.size, bad, good)
    return Betting((before - after) / span, alpha, seed, span)


def _margin_test(
    before: FloatArray,
    after: FloatArray,
    margin: float,
    alpha: float,
    level: float,
    seed: int,
    span: float,
) -> MarginTest:
    test = column_test(before, after, alpha, seed, span)
    return tested_margin(test, before, after, margin, level)


def tested_margin(
    test: ColumnTest, before: FloatArray, after: FloatArray, margin: float, level: float
) -> MarginTest:
    """The record of `test` (from `column_test`) against the margin, with bounds at the
    one-sided `level`."""
    diffs = before - after
    n = diffs.size
    low, high, low_open, high_open = test.bounds(margin, level)
    exact = isinstance(test, ExactPairs)
    return MarginTest(
        n=n,
        worsening=float(diffs.mean()),
        low=low,
        high=high,
        confidence=1.0 - 2.0 * level,
        p_beyond=test.p_beyond(margin),
        p_within=test.p_within(margin),
        spread=float(np.std(diffs, ddof=1)) if n > 1 else 0.0,
        method="exact-unconditional" if exact else "betting",
        went_worse=test.bad if isinstance(test, ExactPairs) else None,
        went_better=test.good if isinstance(test, ExactPairs) else None,
        low_open=low_open,
        high_open=high_open,
        changed=int(np.count_nonzero(diffs)),
    )


def _as_columns(scores: npt.ArrayLike) -> FloatArray:
    array = np.asarray(scores, dtype=np.float64)
    return array[:, None] if array.ndim == 1 else array


def _check_inputs(before: FloatArray, after: FloatArray, alpha: float) -> None:
    if before.ndim != 2 or before.shape != after.shape:
        raise ValueError(
            f"before and after must be paired (n_queries, n_metrics) arrays of the same "
            f"shape, got {before.shape} and {after.shape}"
        )
    if before.shape[0] == 0:
        raise ValueError("no paired queries to compare")
    if not (np.isfinite(before).all() and np.isfinite(after).all()):
        raise ValueError("scores must be finite numbers")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5, got {alpha}")


# --- 0/1 scores: the exact unconditional test --------------------------------------------


def _log_factorials(n: int) -> FloatArray:
    table = np.zeros(n + 2)
    table[2:] = np.cumsum(np.log(np.arange(2, n + 2, dtype=np.float64)))
    return table


class ExactPairs(ColumnTest):
    """Paired 0/1 scores: of n queries, `bad` went from the good value to the bad one
    and `good` the other way. Under the null the pair (bad, good) is trinomial with
    P(bad) - P(good) = delta; the p-value is the largest probability, over the shares
    of queries that change in `nuisance_shares` (those a 99.9% interval from bad + good
    leaves plausible), of a Tango statistic at least as extreme as the one seen, plus
    `NUISANCE_GAMMA`."""

    def __init__(self, n: int, bad: int, good: int) -> None:
        self.n, self.bad, self.good = n, bad, good
        self.span = 1.0
        self._log_factorial = _log_factorials(n)

    def p_beyond(self, delta: float) -> float:
        return self._tail(self.bad, self.good, delta)

    def p_within(self, delta: float) -> float:
        # "Worsening >= delta" is "improvement <= -delta": the same test, roles swapped.
        return self._tail(self.good, self.bad, -delta)

    def _tail(self, bad: int, good: int, delta: float) -> float:
        """sup over the nuisance of P(T >= T_observed) when P(bad) - P(good) = delta."""
        return _exact_tail(self.n, bad, good, delta)

    def _uncached_tail(self, bad: int, good: int, delta: float) -> float:
        edge = 1.0 - EDGE
        delta = min(max(delta, -edge), edge)
        shares = nuisance_shares(self.n, bad + good, delta)
        if shares.size == 0:
            return NUISANCE_GAMMA  # no share in the interval is on the null
        observed = float(tango_z(np.array([bad]), np.array([good]), self.n, delta)[0])
        counts = np.arange(self.n + 1)
        thresholds = self._thresholds(counts, delta, observed)
        tail = float(np.max(self._probability(shares, delta, counts, thresholds)))
        return min(1.0, tail + NUISANCE_GAMMA)

    def _thresholds(self, changed: IntArray, delta: float, observed: float) -> IntArray:
        """For each number of changed queries D, the fewest bad ones with a statistic at
        least the observed one (D + 1: none). The statistic rises with the bad count at
        fixed D, so the region is bad >= threshold."""
        tolerance = 1e-9 * max(1.0, abs(observed))
        low = np.zeros_like(changed)
        high = changed + 1
        while np.any(low < high):
            middle = (low + high) // 2
            safe = np.minimum(middle, changed)
            z = tango_z(safe, changed - safe, self.n, delta)
            meets = (z >= observed - tolerance) & (middle <= changed)
            high = np.where(meets, middle, high)
            low = np.where(meets | (low >= high), low, middle + 1)
            low = np.minimum(low, high)
        return high

    def _probability(
        self, share: FloatArray, delta: float, changed: IntArray, thresholds: IntArray
    ) -> FloatArray:
        """P(bad >= threshold(D)) with D ~ Bin(n, share) and bad | D ~ Bin(D, r), where
        share = P(bad) + P(good) and r = P(bad) / share, for each share given."""
        n = self.n
        lf = self._log_factorial
        q = share[:, None]
        ratio = np.clip((share + delta) / (2.0 * share), 0.0, 1.0)[:, None]
        unchanged = n - changed
        with np.errstate(divide="ignore", invalid="ignore"):
            log_pmf = (
                lf[n]
                - lf[changed]
                - lf[unchanged]
                + np.where(changed > 0, changed * np.log(q), 0.0)
                + np.where(unchanged > 0, unchanged * np.log1p(-q), 0.0)
            )
        weight = np.exp(log_pmf)
        keep = weight > 1e-17 * weight.max(axis=1, keepdims=True)
        k = np.broadcast_to(thresholds, weight.shape)
        d = np.broadcast_to(changed, weight.shape)
        r = np.broadcast_to(ratio, weight.shape)
        tail = np.where(k <= 0, 1.0, 0.0)
        inner = keep & (k > 0) & (k <= d)
        if inner.any():
            tail[inner] = _binomial_tail(d[inner], k[inner], r[inner], lf)
        return np.sum(weight * tail, axis=1)


@functools.lru_cache(maxsize=8192)
def _exact_tail(n: int, bad: int, good: int, delta: float) -> float:
    """`ExactPairs._tail`, computed once per process for each (n, bad, good, delta): the
    gate, its power statement, `compare` and `experiment` bisect over the same limits
    for the same counts, and each value costs a sweep over every number of changed
    queries."""
    return ExactPairs(n, bad, good)._uncached_tail(bad, good, delta)


def share_interval(n: int, changed: int) -> tuple[float, float]:
    """The two-sided (1 - `NUISANCE_GAMMA`) Clopper-Pearson interval of the share of
    changed queries, from `changed` of n (Clopper & Pearson 1934): the shares at which
    that many or more, or that many or fewer, has probability gamma / 2."""
    lows, highs = _share_intervals(n)
    return float(lows[changed]), float(highs[changed])


@functools.lru_cache(maxsize=64)
def _share_intervals(n: int) -> tuple[FloatArray, FloatArray]:
    """`share_interval` for every count 0..n at once: bisection on the binomial tails
    (60 halvings, each end kept on the wider side), vectorised over the counts."""
    lf = _log_factorials(n)
    half = NUISANCE_GAMMA / 2.0
    counts = np.arange(n + 1, dtype=np.float64)

    def at_least(k: FloatArray, share: FloatArray) -> FloatArray:
        # P(Bin(n, share) >= k) for 1 <= k <= n
        return regularized_beta(k, n - k + 1.0, share, lf)

    # 0 changed: the low end is 0; n changed: the high end is 1. P(<= k) = 1 - P(>= k + 1).
    lows = _bisect_shares(lambda share: at_least(counts[1:], share) <= half, 0.0, 1.0, n)
    highs = _bisect_shares(
        lambda share: 1.0 - at_least(counts[:-1] + 1.0, share) <= half, 1.0, 0.0, n
    )
    lows = np.concatenate([[0.0], lows])
    highs = np.concatenate([highs, [1.0]])
    lows.flags.writeable = False
    highs.flags.writeable = False
    return lows, highs


def _bisect_shares(
    holds: Callable[[FloatArray], npt.NDArray[np.bool_]], inside: float, outside: float, size: int
) -> FloatArray:
    """`_bisect` over `size` shares at once, 60 halvings: each starts between `inside`,
    where `holds` is true, and `outside`, and keeps the end of its last bracket where it
    holds."""
    near, far = np.full(size, inside), np.full(size, outside)
    for _ in range(60):
        middle = (near + far) / 2.0
        held = holds(middle)
        near, far = np.where(held, middle, near), np.where(held, far, middle)
    return near


@functools.lru_cache(maxsize=64)
def share_grid(n: int) -> FloatArray:
    """The shares of changed queries the exact test at n queries maximises over: sin^2
    of evenly spaced angles, `SHARE_STEPS` to a standard deviation (1 / (2 sqrt(n))
    on that scale), from just above 0 to just below 1."""
    steps = math.ceil(SHARE_STEPS * math.pi * math.sqrt(n))
    grid = np.sin(np.linspace(0.0, math.pi / 2.0, steps + 1)) ** 2
    grid[0], grid[-1] = EDGE, 1.0 - EDGE
    grid.flags.writeable = False
    return grid


def _grid_span(n: int, changed: int) -> tuple[int, int]:
    """Indices into `share_grid(n)` of the last point at or below the interval's low end
    and the first at or above its high end: the grid points that cover the interval."""
    firsts, lasts = _grid_spans(n)
    return int(firsts[changed]), int(lasts[changed])


@functools.lru_cache(maxsize=64)
def _grid_spans(n: int) -> tuple[IntArray, IntArray]:
    """`_grid_span` for every count 0..n at once, without finding the interval's ends:
    a grid point lies at or below count k's low end exactly when P(Bin(n, point) >= k)
    <= gamma / 2 (that tail rises with the share), and below its high end exactly when
    P(Bin(n, point) <= k) > gamma / 2; so each index is a count of grid points, from
    the binomial tails at each point (cumulative sums over the counts, smallest terms
    first). The same indices as `searchsorted` on `share_interval`'s ends but where a
    grid point lies within rounding of an end; a few times cheaper, as the power
    statement asks for them at every size it tries."""
    grid = share_grid(n)
    lf = _log_factorials(n)
    counts = np.arange(n + 1)
    log_choose = lf[n] - lf[counts] - lf[n - counts]
    at_or_below = np.zeros(n + 1, dtype=np.int64)
    below = np.zeros(n + 1, dtype=np.int64)
    rows = max(1, SIMULATION_ELEMENTS // (n + 1))
    for start in range(0, grid.size, rows):
        share = grid[start : start + rows, None]
        pmf = np.exp(log_choose + counts * np.log(share) + (n - counts) * np.log1p(-share))
        at_least = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
        at_or_below += np.count_nonzero(at_least <= NUISANCE_GAMMA / 2.0, axis=0)
        below += np.count_nonzero(np.cumsum(pmf, axis=1) > NUISANCE_GAMMA / 2.0, axis=0)
    return _frozen(np.maximum(at_or_below - 1, 0)), _frozen(np.minimum(below, grid.size - 1))


def nuisance_shares(n: int, changed: int, delta: float) -> FloatArray:
    """The shares the exact test maximises over when `changed` of n queries changed:
    the grid points covering the (1 - gamma) interval of the share (one beyond each end,
    so the set is never narrower than the interval), and |delta| itself (just above)
    when the covered range reaches it. Under "worsening <= delta" a share s below
    delta > 0 is on the null with every changed query gone bad (worsening s, the
    largest it allows; `_probability` clips the bad share to 1 there); with delta < 0
    a share below -delta is not on the null at all and is left out."""
    grid = share_grid(n)
    first, last = _grid_span(n, changed)
    lowest = abs(delta) + EDGE * (1.0 - abs(delta))
    shares = grid[first : last + 1]
    if delta < 0.0:
        shares = shares[shares > lowest]
    if grid[first] <= lowest <= grid[last]:
        shares = np.concatenate([[lowest], shares])
    return shares


def tango_z(bad: npt.ArrayLike, good: npt.ArrayLike, n: int, delta: float) -> FloatArray:
    """Tango's score statistic for H0: P(bad) - P(good) = delta (Tango 1998), for each
    pair of counts; +-1e300 where the restricted variance is zero and the counts are
    not on the null (certain), 0 where they are."""
    b = np.asarray(bad, dtype=np.float64)
    c = np.asarray(good, dtype=np.float64)
    variance = _restricted_variance(b, c, n, delta)
    numerator = b - c - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(variance)
    certain = np.where(numerator == 0.0, 0.0, np.copysign(1e300, numerator))
    return np.asarray(np.where(variance > 0.0, z, certain), dtype=np.float64)


def _restricted_variance(
    bad: npt.ArrayLike, good: npt.ArrayLike, n: int, delta: float
) -> FloatArray:
    """n times the variance of bad - good under the null P(bad) - P(good) = delta, at
    the restricted maximum-likelihood P(good) given the counts (Tango 1998)."""
    b, c = np.asarray(bad, dtype=np.float64), np.asarray(good, dtype=np.float64)
    a_coef = 2.0 * n
    b_coef = -b - c + (2.0 * n - b + c) * delta
    c_coef = -c * delta * (1.0 - delta)
    root = np.sqrt(np.maximum(b_coef * b_coef - 4.0 * a_coef * c_coef, 0.0))
    p_good = (root - b_coef) / (2.0 * a_coef)
    return np.asarray(n * (2.0 * p_good + delta * (1.0 - delta)), dtype=np.float64)


def _binomial_tail(trials: IntArray, k: IntArray, p: FloatArray, lf: FloatArray) -> FloatArray:
    """P(Bin(trials, p) >= k) for 1 <= k <= trials: the regularized incomplete beta
    I_p(k, trials - k + 1), elementwise."""
    out = np.where(p >= 1.0, 1.0, 0.0)
    inside = (p > 0.0) & (p < 1.0)
    if inside.any():
        a = k[inside].astype(np.float64)
        b = (trials[inside] - k[inside] + 1).astype(np.float64)
        out[inside] = regularized_beta(a, b, p[inside], lf)
    return out


def regularized_beta(a: FloatArray, b: FloatArray, x: FloatArray, lf: FloatArray) -> FloatArray:
    """I_x(a, b) for whole a, b >= 1 and 0 < x < 1, elementwise: the continued fraction
    by the modified Lentz method on whichever of I_x(a, b) = 1 - I_{1-x}(b, a)
    converges fast (Numerical Recipes, 3rd ed., section 6.4). `lf` holds log k!."""
    swap = x > (a + 1.0) / (a + b + 2.0)
    aa, bb = np.where(swap, b, a), np.where(swap, a, b)
    xx = np.where(swap, 1.0 - x, x)
    ia, ib = aa.astype(np.int64), bb.astype(np.int64)
    log_beta = lf[ia - 1] + lf[ib - 1] - lf[ia + ib - 1]
    front = np.exp(aa * np.log(xx) + bb * np.log1p(-xx) - log_beta)
    value = front * _beta_fraction(aa, bb, xx) / aa
    return np.where(swap, 1.0 - value, value)


def _beta_fraction(a: FloatArray, b: FloatArray, x: FloatArray) -> FloatArray:
    tiny = 1e-300

    def guard(value: FloatArray) -> FloatArray:
        return np.where(np.abs(value) < tiny, tiny, value)

    c = np.ones_like(x)
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    fraction = d.copy()
    for m in range(1, BETA_MAX_ITERATIONS + 1):
        even = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        step = np.ones_like(x)
        for coefficient in (even, odd):
            d = 1.0 / guard(1.0 + coefficient * d)
            c = guard(1.0 + coefficient / c)
            step = step * d * c
        fraction *= step
        if np.all(np.abs(step - 1.0) < BETA_EPSILON):
            return fraction
    raise ArithmeticError("incomplete beta did not converge")


# --- graded scores: betting on a bounded mean --------------------------------------------


class Betting(ColumnTest):
    """Differences scaled to [-1, 1]; the wealth of betting against each null, averaged
    over `BET_ORDERS` fixed orders of the queries. The bets are the predictable plug-in
    of Waudby-Smith & Ramdas (2024), sqrt(2 log(1/alpha) / (n sigma^2)), from the
    running variance of the queries seen before in that order; they do not depend on
    the tested value except through the cap c / (1 -+ m), which keeps the wealth
    monotone in m, so the bounds are intervals."""

    def __init__(self, scaled: FloatArray, alpha: float, seed: int, span: float) -> None:
        self.span = span
        self._x = scaled[_orders(scaled.size, seed)]
        self._bets = _plug_in_bets(self._x, alpha)

    def p_beyond(self, delta: float) -> float:
        return _p_from_wealth(self._log_wealth(delta / self.span, +1.0))

    def p_within(self, delta: float) -> float:
        return _p_from_wealth(self._log_wealth(delta / self.span, -1.0))

    def _log_wealth(self, m: float, side: float) -> float:
        """log of the mean wealth betting that the mean is above m (side +1) or below."""
        return float(_log_mean_wealth(self._x, self._bets, m, side))


def _log_mean_wealth(x: FloatArray, bets: FloatArray, m: float, side: float) -> FloatArray:
    """log of the wealth averaged over the orders (axis -2) of `x` (..., orders, n),
    betting `bets` capped at c / (1 -+ m) that the mean is above m (side +1) or below."""
    m = min(max(m, -1.0 + EDGE), 1.0 - EDGE)
    factors = np.minimum(bets, BET_CAP / (1.0 + side * m))
    if side < 0.0:
        np.negative(factors, out=factors)  # capped * side, side being +-1: exact
    factors *= x - m
    logs = np.log1p(factors, out=factors).sum(axis=-1)
    top = logs.max(axis=-1)
    return np.asarray(top + np.log(np.mean(np.exp(logs - top[..., None]), axis=-1)))


def _orders(n: int, seed: int) -> IntArray:
    """`BET_ORDERS` fixed orders of n queries, from the seed alone."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((BET_ORDERS, n)), axis=1)


@functools.lru_cache(maxsize=64)
def _cached_orders(n: int, seed: int) -> IntArray:
    """`_orders`, drawn once per (n, seed): the power simulation asks for them per batch."""
    orders = _orders(n, seed)
    orders.flags.writeable = False
    return orders


def _plug_in_bets(x: FloatArray, alpha: float) -> FloatArray:
    """Bet i from the queries before it (in each order): running mean and variance with
    a prior of mean 0 and variance 1 (the widest on [-1, 1]) counted as one query.
    (Computed in place: the power simulation calls it on millions of numbers.)"""
    n = x.shape[-1]
    counted = np.arange(2, n + 2, dtype=np.float64)  # the queries seen, and the prior
    deviations = np.cumsum(x, axis=-1)
    deviations /= counted  # the running means
    np.subtract(x, deviations, out=deviations)
    np.square(deviations, out=deviations)
    squares = np.cumsum(deviations, axis=-1, out=deviations)
    bets = np.empty_like(squares)
    bets[..., 0] = 1.0  # the prior's variance
    np.add(1.0, squares[..., :-1], out=bets[..., 1:])
    bets[..., 1:] /= counted[:-1]  # the variance of the queries before each one
    bets *= n
    np.divide(2.0 * math.log(1.0 / alpha), bets, out=bets)
    return np.sqrt(bets, out=bets)


def _graded_rejects(
    worse: FloatArray, margin: float, alpha: float, seed: int = 0
) -> npt.NDArray[np.bool_]:
    """Whether the gate's graded test (`column_test` with this seed) finds each sample's
    mean worsening beyond the margin, p_beyond(margin) <= alpha: `worse` (samples,
    queries) holds per-query worsenings scaled to [-1, 1], `margin` is scaled the same
    way. The one place the power model runs the graded test (today the betting wealth
    over the seed's fixed orders reaching 1 / alpha)."""
    x = worse[:, _cached_orders(worse.shape[-1], seed)]  # (samples, orders, queries)
    wealth = _log_mean_wealth(x, _plug_in_bets(x, alpha), margin, +1.0)
    return np.asarray(wealth >= math.log(1.0 / alpha))


def _p_from_wealth(log_wealth: float) -> float:
    return 1.0 if log_wealth <= 0.0 else min(1.0, math.exp(-log_wealth))


# --- what a scope can tell ----------------------------------------------------------------


def detectable_worsening(
    before: FloatArray,
    after: FloatArray,
    margin: float,
    alpha: float,
    *,
    seed: int = 0,
    span: float = 1.0,
    simulations: int = POWER_SIMULATIONS,
) -> float:
    """The true mean worsening this scope catches (finds beyond the margin) with
    probability `POWER`, under this model of a regression: the queries that changed
    keep changing as seen, in either direction at random (churn with no trend, at the
    rate seen), and queries drawn at random from the others (from the changed ones only
    once those run out) lose their whole score. The churn seen is an estimate, and its
    noise is counted: for 0/1 scores the exact catch rate is averaged over the churn's
    posterior; for graded ones, each of `simulations` samples is drawn from a truth
    that is itself resampled from the queries seen, and tested by the gate's graded
    test (`_graded_rejects`). From `LARGE_BINARY` 0/1 or `LARGE_GRADED` graded queries
    on, the catch rate is a normal approximation of the same test under the same model
    (`normal_catch_rate`, `_normal_catcher`), whose cost does not grow with the number
    of queries. Checked against a known truth by
    scripts/bench_power_statement.py (docs/power-statement.md). inf: no drop the metric
    can show is caught that often."""
    catcher = _catcher(before, after, margin, alpha, seed, span, simulations, before.size)
    if catcher is None:
        return math.inf
    caught, largest = catcher
    return _bisect_drop(caught, margin, largest)


def queries_to_catch(
    before: FloatArray,
    after: FloatArray,
    drop: float,
    margin: float,
    alpha: float,
    *,
    seed: int = 0,
    span: float = 1.0,
    simulations: int = POWER_SIMULATIONS,
    most: int = 10_000,
) -> int | None:
    """The fewest queries, like these ones (the same scores and churn, drawn at random),
    that catch a true worsening `drop` with probability `POWER`, under the model of
    `detectable_worsening`: doubling from 2 until one size does, then bisection on the
    whole numbers between, to within 1% (a size that catches it, never one below the
    last that did not). None: not even `most` queries do."""
    if not drop > margin:
        raise ValueError(f"the drop ({drop}) must exceed the margin ({margin})")

    def enough(size: int) -> bool:
        catcher = _catcher(before, after, margin, alpha, seed, span, simulations, size)
        return catcher is not None and drop <= catcher[1] and catcher[0](drop)

    failed, held = 1, 2  # one query never decides: the bracket starts above it
    while not enough(held):
        if held >= most:
            return None
        failed, held = held, min(2 * held, most)
    while held - failed > max(1, held // 100):  # "about": within 1%, the last steps cost most
        middle = (failed + held) // 2
        failed, held = (failed, middle) if enough(middle) else (middle, held)
    return held


def _catcher(
    before: FloatArray,
    after: FloatArray,
    margin: float,
    alpha: float,
    seed: int,
    span: float,
    simulations: int,
    size: int,
) -> tuple[Callable[[float], bool], float] | None:
    """For a scope of `size` queries like these: whether a true worsening is caught
    with probability `POWER`, and the largest worsening the scores can show (None:
    none). The gate's own test decides: exact for 0/1 scores, betting otherwise."""
    if before.size == 0:
        return None  # no query to draw from: nothing to say
    if is_binary(before, after):
        # Only a query that scores 1 somewhere can lose it: no drop beyond their share.
        changed = int(np.count_nonzero(before != after))
        largest = min(1.0 - changed / before.size, float(np.maximum(before, after).mean()))
        changes = _churn_posterior(changed, before.size)
        return _exact_catcher(size, changes, margin, alpha), largest
    if size >= LARGE_GRADED:
        return _normal_catcher(_spread(before, after, span), margin, alpha, span, size)
    return _simulated_catcher(before, after, margin, alpha, seed, span, simulations, size)


def _exact_catcher(
    n: int, changes: FloatArray, margin: float, alpha: float
) -> Callable[[float], bool]:
    """Whether the exact test at n queries catches D with probability `POWER`, by
    `_exact_catch_rate`."""
    rate = _exact_catch_rate(n, changes, margin, alpha)
    return lambda drop: rate(drop) >= POWER


def _exact_catch_rate(
    n: int, changes: FloatArray, margin: float, alpha: float
) -> Callable[[float], float]:
    """The probability that the exact test at n queries finds a true worsening D beyond
    the margin when P(good) = q / 2 and P(bad) = q / 2 + D, averaged over the shares q
    of churning queries in `changes` (equally likely values), each by `exact_catch_rate`
    (`normal_catch_rate` from `LARGE_BINARY` queries on)."""
    each = exact_catch_rate if n < LARGE_BINARY else normal_catch_rate

    def rate(drop: float) -> float:
        return float(np.mean([each(n, q / 2.0 + drop, q / 2.0, margin, alpha) for q in changes]))

    return rate


def exact_catch_rate(n: int, p_bad: float, p_good: float, margin: float, alpha: float) -> float:
    """The probability that the exact test finds a worsening beyond `margin` (p_beyond
    <= alpha) when of n queries each goes bad with probability p_bad and good with
    p_good: the trinomial summed over the region the test rejects. Changed counts with
    probability below `LIKELY` times the likeliest's are left out (6.4 standard deviations
    from the mean and beyond: under 2e-10 in all)."""
    test = ExactPairs(n, 0, 0)
    share = min(p_bad + p_good, 1.0 - EDGE)
    if share <= 0.0:
        return 0.0
    counts = np.arange(n + 1)
    likely, _ = _likely_counts(n, share, test._log_factorial, math.log(LIKELY))
    thresholds = np.full(n + 1, n + 1, dtype=np.int64)
    for changed in likely:
        thresholds[changed] = rejection_threshold(n, int(changed), margin, alpha)
    delta = min(max(p_bad - p_good, -1.0 + EDGE), 1.0 - EDGE)
    return float(test._probability(np.array([share]), delta, counts, thresholds)[0])


def normal_catch_rate(n: int, p_bad: float, p_good: float, margin: float, alpha: float) -> float:
    """`exact_catch_rate` for large n: Tango's statistic is about normal, so the exact
    test rejects about when it exceeds the normal critical value at alpha - gamma (the
    nuisance shares in the interval then all give about that value); the statistic's
    restricted variance is taken at the expected counts, and bad - good has mean n D and
    variance n (p_bad + p_good - D^2). Within 3 points of the exact sum at 1,000 queries
    and more (tests/test_power.py)."""
    drop = p_bad - p_good
    if p_bad + p_good <= 0.0:
        return 0.0
    critical = NormalDist().inv_cdf(1.0 - (alpha - NUISANCE_GAMMA))
    bad, good = n * p_bad, n * p_good
    null_spread = math.sqrt(float(_restricted_variance(bad, good, n, margin)) / n)
    spread = math.sqrt(max(p_bad + p_good - drop * drop, 0.0))
    distance = math.sqrt(n) * (drop - margin) - critical * null_spread
    if spread == 0.0:
        return 1.0 if distance > 0.0 else 0.0
    return NormalDist().cdf(distance / spread)


@functools.lru_cache(maxsize=256)
def _churn_posterior(changed: int, n: int, points: int = CHURN_POINTS) -> FloatArray:
    """The share of queries that churn, as `points` equally likely values: the medians
    of equal-probability slices of its posterior Beta(changed + 1, n - changed + 1)
    (a uniform prior) after `changed` of n queries changed. The churn seen is only an
    estimate; a power figure at the estimate itself is optimistic, since a catch rate
    near 80% falls faster when the churn is higher than it rises when it is lower. No
    query changed: no churn, the assumption the statement then says in words. Computed
    once per process for each (changed, n): every size `queries_to_catch` tries, and
    `detectable_worsening`, average over the same values."""
    if changed == 0:
        return _frozen(np.zeros(1))
    a = np.full(points, changed + 1.0)
    b = np.full(points, n - changed + 1.0)
    target = (np.arange(points) + 0.5) / points
    lf = _log_factorials(n + 2)
    low, high = np.zeros(points), np.ones(points)
    for _ in range(40):
        middle = (low + high) / 2.0
        below = regularized_beta(a, b, middle, lf) < target
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    return _frozen((low + high) / 2.0)


def _frozen(values: Frozen) -> Frozen:
    """`values` made read-only: a cached result must not be changed by a caller."""
    values.flags.writeable = False
    return values


@functools.lru_cache(maxsize=65536)
def rejection_threshold(n: int, changed: int, margin: float, alpha: float) -> int:
    """The fewest bad queries among `changed` of n whose p_beyond(margin) is <= alpha
    (changed + 1: none). The p-value is gamma plus the largest tail over the shares of
    `nuisance_shares`, so it is <= alpha exactly when at each of those shares the
    observed statistic lies beyond that share's critical value (`_critical_statistic`);
    Tango's statistic rises with the bad count at a fixed changed count, so the region
    is every bad count from the first beyond the largest of them."""
    shares = nuisance_shares(n, changed, margin)
    if shares.size == 0:
        return 0  # the p-value is gamma: every outcome with this many changed rejects
    level = alpha - NUISANCE_GAMMA
    critical = max(_critical_statistic(n, margin, level, float(share)) for share in shares)
    if critical == -math.inf:
        return 0
    bad = np.arange(changed + 1)
    z = tango_z(bad, changed - bad, n, margin)
    meets = np.flatnonzero(z > critical + 1e-9 * max(1.0, abs(critical)))
    return int(meets[0]) if meets.size else changed + 1


@functools.lru_cache(maxsize=65536)
def _critical_statistic(n: int, delta: float, level: float, share: float) -> float:
    """The largest Tango statistic t (at delta) with P(T >= t) > level when n queries
    change with probability `share` and a changed one goes bad with probability
    (share + delta) / (2 share) (clipped to [0, 1], as in the test's tail): a statistic
    beyond it has a tail of at most the level, one at or below it (within the test's
    tolerance) more; -inf: every tail is at most the level. The (bad, good) outcomes
    within exp(-30) of the likeliest (in changed count, then in bad count) are listed
    with their probabilities and sorted by the statistic; first only those with a
    statistic of at least 0 (bad >= (changed + n delta) / 2), which hold the answer
    when one of them has a tail above the level (always, in practice), else all."""
    critical = _critical_among(n, delta, level, share, upper=True)
    if critical is None:
        critical = _critical_among(n, delta, level, share, upper=False)
    return -math.inf if critical is None else critical


def _critical_among(
    n: int, delta: float, level: float, share: float, *, upper: bool
) -> float | None:
    """`_critical_statistic` over the outcomes listed (upper: those with a statistic of
    at least 0); None when the tail of every listed outcome is at most the level, so
    the answer may lie among those left out (or, with all listed, there is none: the
    caller reads None as -inf)."""
    lf = _log_factorials(n)
    ratio = min(max((share + delta) / (2.0 * share), 0.0), 1.0)
    changed, log_changed = _likely_counts(n, share, lf)
    mean = changed * ratio
    width = math.sqrt(60.0) * np.sqrt(changed * ratio * (1.0 - ratio)) + 1.0
    first = np.floor(mean - width)
    if upper:
        first = np.maximum(first, np.floor((changed + n * delta) / 2.0) - 1.0)
    first = np.clip(first, 0, changed).astype(np.int64)
    last = np.clip(np.ceil(mean + width), 0, changed).astype(np.int64)
    sizes = np.maximum(last - first + 1, 0)
    d = np.repeat(changed, sizes)
    offsets = np.arange(d.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    b = np.repeat(first, sizes) + offsets
    with np.errstate(divide="ignore"):
        log_bad = (
            np.where(b > 0, b * math.log(ratio), 0.0)
            if ratio > 0.0
            else np.where(b > 0, -np.inf, 0.0)
        )
        log_good = (
            np.where(d > b, (d - b) * math.log1p(-ratio), 0.0)
            if ratio < 1.0
            else np.where(d > b, -np.inf, 0.0)
        )
    log_weight = np.repeat(log_changed, sizes) + lf[d] - lf[b] - lf[d - b] + log_bad + log_good
    weight = np.exp(log_weight)
    z = tango_z(b, d - b, n, delta)
    order = np.argsort(-z, kind="stable")
    z, cumulative = z[order], np.cumsum(weight[order])
    # P(T >= t), ties (within the test's tolerance) counted in, at each statistic t seen
    reach = np.searchsorted(-z, -(z - 1e-9 * np.maximum(1.0, np.abs(z))), side="right")
    tail = cumulative[reach - 1]
    above = np.flatnonzero(tail > level)
    return float(z[above[0]]) if above.size else None


def _likely_counts(
    n: int, share: float, lf: FloatArray, floor: float = -30.0
) -> tuple[IntArray, FloatArray]:
    """The numbers of changed queries within exp(`floor`) of the likeliest under Bin(n,
    share), and their log-probabilities."""
    counts = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        log_pmf = lf[n] - lf[counts] - lf[n - counts]
        log_pmf = log_pmf + counts * math.log(share) + (n - counts) * math.log1p(-share)
    keep = log_pmf > log_pmf.max() + floor
    return counts[keep], log_pmf[keep]


def _simulated_catcher(
    before: FloatArray,
    after: FloatArray,
    margin: float,
    alpha: float,
    seed: int,
    span: float,
    simulations: int,
    size: int,
) -> tuple[Callable[[float], bool], float] | None:
    """The graded test's power, by simulation. Each of `simulations` samples is drawn
    from its own truth: n of the n queries seen, drawn with replacement (the queries
    seen are one sample of the truth, so the churn and scores it holds vary as they
    would); the sample draws `size` queries from that truth with replacement, flips
    each one's change at random, and makes queries lose their whole score (the larger
    of its two) so that the truth's mean worsening is the drop: the unchanged queries
    first, each with the same chance, then the changed ones when the unchanged cannot
    lose enough. The churn thus goes on at the rate seen when a regression comes, as in
    the 0/1 model (P(good) = q / 2, P(bad) = q / 2 + D). Returns whether a drop is
    caught, and the mean whole score (None: it is 0, no drop shows).

    Why the figure is the one of testing every sample at every drop, to the last bit:
    the random numbers are drawn whole, as before; a sample's wealth depends on its own
    row alone (every operation works along the queries, row by row, in the order it
    always had), so testing the samples a few at a time (`SIMULATION_ELEMENTS`) or in
    another order gives each the same float. A drop is caught when at least `needed`
    samples reject: once that many have, more cannot undo it, and once more than
    `simulations - needed` have not, the rest cannot reach it; so the count stops there
    with the answer the full count gives. Which samples go first only decides how soon:
    those the drops tried before say will settle it (a sample caught at a smaller drop
    is likely caught at a larger one). Why not resample only the changed queries: in
    this model an unchanged query may lose its whole score, and a zero difference still
    moves the wealth (by 1 - bet x margin) and the running variance the next bets are
    drawn from, so every query of every sample is tested.
    """
    rng = np.random.default_rng(seed + 1)
    whole_all = np.maximum(before, after)
    still = before == after
    rows, steady, moving = _truths(rng, whole_all, still, simulations, size)
    flips = rng.random((simulations, size)) < 0.5
    lose = rng.random((simulations, size))
    churn = np.where(flips, after[rows] - before[rows], before[rows] - after[rows])
    whole = whole_all[rows]
    mean_whole = float(whole_all.mean())
    if mean_whole <= 0.0:
        return None
    row_still = still[rows]
    batch = max(1, SIMULATION_ELEMENTS // (BET_ORDERS * size))
    needed = _catches_needed(simulations)
    caught_at = np.full(simulations, math.inf)  # the smallest drop that caught each
    missed_at = np.full(simulations, -math.inf)  # the largest drop that missed each

    def caught(drop: float) -> bool:
        with np.errstate(divide="ignore", invalid="ignore"):  # a 0 share: its side is empty
            from_still = np.where(steady > 0.0, np.minimum(drop / steady, 1.0), 1.0)
            from_moving = np.where(moving > 0.0, np.clip((drop - steady) / moving, 0.0, 1.0), 1.0)
        share = np.where(row_still, from_still, from_moving)  # the drop in each truth
        catches, misses = 0, 0
        for chosen in _settling_first(caught_at <= drop, missed_at >= drop, needed, batch):
            worse = np.where(lose[chosen] < share[chosen], whole[chosen], churn[chosen]) / span
            hit = _graded_rejects(worse, margin / span, alpha, seed)
            caught_at[chosen[hit]] = np.minimum(caught_at[chosen[hit]], drop)
            missed_at[chosen[~hit]] = np.maximum(missed_at[chosen[~hit]], drop)
            catches += int(np.count_nonzero(hit))
            misses += int(hit.size - np.count_nonzero(hit))
            if catches >= needed or misses > simulations - needed:
                break  # the samples left cannot change the answer
        return catches >= needed

    return caught, mean_whole


@dataclass(frozen=True, slots=True)
class _Spread:
    """A graded scope's scores as the large-sample model needs them, of a fixed size
    whatever the number of queries: on the grid of `SUMMARY_POINTS` (scaled to [-1, 1]),
    the whole scores of the queries that did not change, and the whole scores and the
    sizes of the change of those that did, each as a share of all queries; and the
    mean whole score of each group (as a share of all queries)."""

    still: FloatArray
    moving: FloatArray
    churn: FloatArray
    steady: float
    moved: float


def _spread(before: FloatArray, after: FloatArray, span: float) -> _Spread:
    whole = np.maximum(before, after) / span
    still = before == after

    def on_grid(values: FloatArray) -> FloatArray:
        place = (values + 1.0) / 2.0 * (SUMMARY_POINTS - 1)
        low = np.minimum(np.floor(place).astype(np.int64), SUMMARY_POINTS - 2)
        above = place - low
        mass = np.bincount(low, 1.0 - above, SUMMARY_POINTS)
        mass += np.bincount(low + 1, above, SUMMARY_POINTS)
        return np.asarray(mass / before.size)

    return _Spread(
        still=on_grid(whole[still]),
        moving=on_grid(whole[~still]),
        churn=on_grid(np.abs(before - after)[~still] / span),
        steady=float(np.sum(whole[still]) / before.size),
        moved=float(np.sum(whole[~still]) / before.size),
    )


def _worsening_law(spread: _Spread, drop: float) -> FloatArray:
    """The probabilities, on the grid, of one query's worsening under a true drop (scaled
    to the grid), in the model of `_simulated_catcher` with the truth the queries seen:
    an unchanged query loses its whole score with the share that makes the drop (all of
    them, then the changed ones), else keeps its score; a changed one loses its whole
    score, or changes by as much as it did, either way with equal chance."""
    from_still = min(drop / spread.steady, 1.0) if spread.steady > 0.0 else 1.0
    from_moving = 1.0
    if spread.moved > 0.0:
        from_moving = min(max((drop - spread.steady) / spread.moved, 0.0), 1.0)
    churn = (spread.churn + spread.churn[::-1]) / 2.0  # either way: the grid is symmetric
    law = from_still * spread.still + from_moving * spread.moving + (1.0 - from_moving) * churn
    law[SUMMARY_POINTS // 2] += max(1.0 - float(law.sum()), 0.0)  # unchanged, not lost
    return law


def _normal_catcher(
    spread: _Spread, margin: float, alpha: float, span: float, size: int
) -> tuple[Callable[[float], bool], float] | None:
    """`_simulated_catcher` for a large sample (`LARGE_GRADED`): the log
    of the betting wealth is a sum of `size` nearly independent terms, so about normal.
    Each query's bet is the plug-in bet at the expected running variance (prior
    included) before it; the sum's mean and variance come from the worsening's law on
    the grid (`_worsening_law`) at each run of bets (`WEALTH_BLOCKS`), and the mean of
    the wealth over orders from how much the log wealth varies between them
    (`_spread_of_orders`). The full simulation catches the drop it names 77-83% of the
    time at 500 to 5,000 queries, 80% claimed (tests/test_power.py)."""
    largest = (spread.steady + spread.moved) * span
    if largest <= 0.0:
        return None
    margin /= span
    grid = np.linspace(-1.0, 1.0, SUMMARY_POINTS)
    threshold = math.log(1.0 / alpha)
    edges = np.unique(np.geomspace(1.0, size + 1.0, WEALTH_BLOCKS).astype(np.int64) - 1)
    starts = np.unique(np.r_[0, edges[edges < size]])
    runs = np.diff(np.r_[starts, size]).astype(np.float64)
    seen = np.arange(size, dtype=np.float64)

    def caught(drop: float) -> bool:
        law = _worsening_law(spread, drop / span)
        mean, square = float(law @ grid), float(law @ grid**2)
        # E (x_j - running mean after j)^2, the running mean counting a prior 0
        kept, shrink = (seen + 1.0) / (seen + 2.0), 1.0 / (seen + 2.0)
        deviation = kept * kept * square - 2.0 * kept * shrink * seen * mean * mean
        deviation += shrink * shrink * (seen * square + seen * (seen - 1.0) * mean * mean)
        variance = np.ones(size)
        variance[1:] = (1.0 + np.cumsum(deviation)[:-1]) / (seen[1:] + 1.0)
        bets = np.minimum(np.sqrt(2.0 * threshold / (size * variance)), BET_CAP / (1.0 + margin))
        bet = np.add.reduceat(bets, starts) / runs
        logs = np.log1p(bet[:, None] * (grid - margin))
        each = logs @ law
        total, noise = runs @ each, runs @ (logs**2 @ law - each**2)
        spread_of_orders = _spread_of_orders(law, grid, bets, variance, margin)
        total += spread_of_orders * (1.0 - 1.0 / BET_ORDERS) / 2.0
        noise -= min(spread_of_orders * (1.0 - 1.0 / BET_ORDERS), noise / 2.0)
        rate = NormalDist().cdf((total - threshold) / math.sqrt(max(noise, 1e-300)))
        return rate >= POWER

    return caught, largest


def _spread_of_orders(
    law: FloatArray, grid: FloatArray, bets: FloatArray, variance: FloatArray, margin: float
) -> float:
    """About the variance, from one order of the queries to another, of the log wealth:
    the same changes meet other bets (those of the first queries are smaller), and
    each order's running variance, so its bets, wander (by the delta method, from the
    law's fourth moment, while the bet is below its cap). The mean of the `BET_ORDERS`
    wealths gains about half of it in log, and its spread loses it."""
    mean = float(law @ grid)
    second = float(law @ (grid - mean) ** 2)
    fourth = float(law @ (grid - mean) ** 4)
    seen = np.arange(bets.size, dtype=np.float64)
    free = bets < BET_CAP / (1.0 + margin)
    wander = (fourth - second**2) / (4.0 * (seen + 1.0) * variance**2) * (seen / (seen + 1.0)) ** 2
    wander = np.where(free, bets**2 * wander, 0.0)
    return second * float(np.sum((bets - bets.mean()) ** 2) + np.sum(wander))


def _truths(
    rng: np.random.Generator,
    whole: FloatArray,
    still: npt.NDArray[np.bool_],
    simulations: int,
    size: int,
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Each sample's queries (indices into the queries seen), and its truth's whole
    scores of the unchanged and of the changed queries, each summed over the truth's
    queries and divided by their number (columns of `simulations` rows). Below
    `LARGE_GRADED` queries seen, each truth is the queries seen drawn again with
    replacement, and the sample is drawn from it; from there on the truth is the
    queries seen (the noise of so many is small beside that of the smaller samples
    `queries_to_catch` draws, and a (simulations, n) array of truths would grow with
    n), as in `_normal_catcher`."""
    n = whole.size
    steady, moving = np.where(still, whole, 0.0), np.where(still, 0.0, whole)
    if n < LARGE_GRADED:
        worlds = rng.integers(0, n, size=(simulations, n))  # the queries each truth holds
        picks = rng.integers(0, n, size=(simulations, size))
        rows = np.take_along_axis(worlds, picks, axis=1)
        means = [part[worlds].mean(axis=1, keepdims=True) for part in (steady, moving)]
        return rows, means[0], means[1]
    rows = rng.integers(0, n, size=(simulations, size))
    return rows, np.full((simulations, 1), steady.mean()), np.full((simulations, 1), moving.mean())


def _settling_first(
    likely: npt.NDArray[np.bool_], unlikely: npt.NDArray[np.bool_], needed: int, batch: int
) -> list[IntArray]:
    """Every sample once, in batches, those expected to settle the count first: the
    likely catches when there are enough of them to reach `needed`, else the likely
    misses when there are enough of them to keep it from being reached, else the
    samples with no expectation."""
    if np.count_nonzero(likely) >= needed:
        keys = np.where(likely, 0, np.where(unlikely, 2, 1))
    elif np.count_nonzero(unlikely) > likely.size - needed:
        keys = np.where(unlikely, 0, np.where(likely, 2, 1))
    else:
        keys = np.where(likely | unlikely, 1, 0)
    order = np.argsort(keys, kind="stable")
    return [order[start : start + batch] for start in range(0, order.size, batch)]


def _catches_needed(simulations: int) -> int:
    """The fewest catches c with c / simulations >= POWER, as the float comparison of a
    mean of 0/1 outcomes reads it (simulations + 1: none)."""
    return next((c for c in range(simulations + 1) if c / simulations >= POWER), simulations + 1)


def _bisect_drop(caught: Callable[[float], bool], margin: float, largest: float) -> float:
    """The smallest drop in (margin, largest] caught with probability >= POWER (`caught`
    says whether it is); inf: none."""
    low = max(margin, 0.0)
    if largest <= low or not caught(largest):
        return math.inf
    return _bisect(caught, largest, low, steps=12)


# --- a quantile: the order-statistic interval ---------------------------------------------


@dataclass(frozen=True, slots=True)
class QuantileInterval:
    """A confidence interval of a quantile; a side no order statistic reaches is open."""

    low: float | None
    """None: open below (too few values to bound it)."""
    high: float | None
    """None: open above."""

    def below(self, other: QuantileInterval) -> bool:
        """Whether this interval lies wholly below the other (they do not overlap)."""
        return self.high is not None and other.low is not None and self.high < other.low


def quantile_interval(values: npt.ArrayLike, q: float, alpha: float) -> QuantileInterval:
    """The distribution-free interval [x_(l), x_(u)] of the q-quantile from the sorted
    values x_(1..n) (Conover, Practical Nonparametric Statistics, 3rd ed., §3.2): the
    number of values below the quantile is Binomial(n, q), so with l the largest rank
    with P(B <= l - 1) <= alpha / 2 and u the smallest with P(B >= u) <= alpha / 2 the
    interval covers the quantile with probability at least 1 - alpha, whatever the
    distribution. A side without such a rank among 1..n is open."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0 or not 0.0 < q < 1.0:
        raise ValueError(f"needs values and 0 < q < 1, got {n} values and q = {q}")
    k = np.arange(n + 1)
    lf = _log_factorials(n)
    log_pmf = lf[n] - lf[k] - lf[n - k] + k * math.log(q) + (n - k) * math.log1p(-q)
    cdf = np.cumsum(np.exp(log_pmf))
    lower = np.flatnonzero(cdf <= alpha / 2)  # candidates for l - 1
    upper = np.flatnonzero(cdf >= 1.0 - alpha / 2)  # candidates for u - 1
    low = float(x[lower[-1]]) if lower.size else None
    high = float(x[upper[0]]) if upper.size and upper[0] < n else None
    return QuantileInterval(low, high)
