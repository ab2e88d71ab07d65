"""The exact unconditional test of paired 0/1 scores (hit rate, recall@k with one
relevant document): Tango's score statistic (Tango 1998, Stat. Med. 17:891-908), with
the p-value of Berger & Boos (1994, JASA 89:1012-1016): the largest tail probability
over the values of the nuisance parameter (the share of queries that changed) in its
99.9% Clopper-Pearson interval, plus 0.001 (`NUISANCE_GAMMA`) for the chance that the
interval misses it. The largest over the whole range is set by shares no data support
(e.g. no query improving), which cost 4-6 points of power at the gate's sizes; the
restricted p-value is as valid: P(p <= alpha) <= gamma + (alpha - gamma) at every
share.

Also the binomial arithmetic it rests on (log factorials, the regularized incomplete
beta), which `exact_power.py` and `stats.quantile_interval` use too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from llm_eval.bounds import EDGE, ColumnTest, FloatArray, IntArray

Frozen = TypeVar("Frozen", FloatArray, IntArray)

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
SIMULATION_ELEMENTS = 1 << 18
"""About how many numbers (samples x orders x queries) the power simulation tests at a
time: 2 MiB of floats, so the arrays it sweeps a dozen times stay in cache."""
BETA_EPSILON = 1e-14
BETA_MAX_ITERATIONS = 2_000


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
    """`bounds.bisect` over `size` shares at once, 60 halvings: each starts between `inside`,
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


def frozen(values: Frozen) -> Frozen:
    """`values` made read-only: a cached result must not be changed by a caller."""
    values.flags.writeable = False
    return values
