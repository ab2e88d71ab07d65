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
    builds: tuple[int, int] = (1, 1)
    """Builds of the retriever (baseline, now) whose per-query means were compared."""
    build_sd: float = 0.0
    """Pooled standard deviation of a build's mean score (0 with one build a side)."""
    build_values: tuple[float, ...] = ()
    """Each of the run's builds' mean score over the compared queries, with several."""


class ColumnTest:
    """One column's test: p-values of both one-sided nulls at any worsening delta."""

    span: float
    """Width of the range the worsening lies in, halved: it lies in [-span, span]."""

    @property
    def queries(self) -> ColumnTest:
        """The test of the queries' part: this one, unless it is joined with the
        variance between builds (`llm_eval.builds.WithBuilds`)."""
        return self

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
    return bisect(lambda delta: p_value(delta) <= level, inside, outside), False


def bisect(
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
    inner = test.queries
    exact = isinstance(inner, ExactPairs)
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
        went_worse=inner.bad if isinstance(inner, ExactPairs) else None,
        went_better=inner.good if isinstance(inner, ExactPairs) else None,
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


def log_factorials(n: int) -> FloatArray:
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
        self.log_factorial = log_factorials(n)

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
        tail = float(np.max(self.region_probability(shares, delta, counts, thresholds)))
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

    def region_probability(
        self, share: FloatArray, delta: float, changed: IntArray, thresholds: IntArray
    ) -> FloatArray:
        """P(bad >= threshold(D)) with D ~ Bin(n, share) and bad | D ~ Bin(D, r), where
        share = P(bad) + P(good) and r = P(bad) / share, for each share given."""
        n = self.n
        lf = self.log_factorial
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
    lf = log_factorials(n)
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
    """`bisect` over `size` shares at once, 60 halvings: each starts between `inside`,
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
    lf = log_factorials(n)
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
    return frozen(np.maximum(at_or_below - 1, 0)), frozen(np.minimum(below, grid.size - 1))


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
    variance = restricted_variance(b, c, n, delta)
    numerator = b - c - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(variance)
    certain = np.where(numerator == 0.0, 0.0, np.copysign(1e300, numerator))
    return np.asarray(np.where(variance > 0.0, z, certain), dtype=np.float64)


def restricted_variance(
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


def graded_rejects(
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


def frozen(values: Frozen) -> Frozen:
    """`values` made read-only: a cached result must not be changed by a caller."""
    values.flags.writeable = False
    return values


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
    lf = log_factorials(n)
    log_pmf = lf[n] - lf[k] - lf[n - k] + k * math.log(q) + (n - k) * math.log1p(-q)
    cdf = np.cumsum(np.exp(log_pmf))
    lower = np.flatnonzero(cdf <= alpha / 2)  # candidates for l - 1
    upper = np.flatnonzero(cdf >= 1.0 - alpha / 2)  # candidates for u - 1
    low = float(x[lower[-1]]) if lower.size else None
    high = float(x[upper[0]]) if upper.size and upper[0] < n else None
    return QuantileInterval(low, high)
