"""The betting test of a bounded mean, for graded scores (MRR, nDCG, recall with
several relevant documents): Waudby-Smith & Ramdas 2024, JRSS-B 86:1-27, "hedged
capital" with the predictable plug-in bets of their section 5.1. The wealth process is
a non-negative supermartingale under the null, so by Ville's inequality 1 / wealth is
a p-value. The wealth is averaged over a few fixed orders of the queries (an average of
e-values is an e-value).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from llm_eval.bounds import EDGE, ColumnTest, FloatArray, IntArray

BET_CAP = 0.75
"""The largest share of the wealth bet on one query (c in Waudby-Smith & Ramdas)."""
BET_ORDERS = 16
"""Fixed orders of the queries over which the betting wealth is averaged."""


class Betting(ColumnTest):
    """Differences scaled to [-1, 1]; the wealth of betting against each null, averaged
    over `BET_ORDERS` fixed orders of the queries. The bets are the predictable plug-in
    of Waudby-Smith & Ramdas (2024), sqrt(2 log(1/alpha) / (n sigma^2)), from the
    running variance of the queries seen before in that order; they do not depend on
    the tested value except through the cap c / (1 -+ m), which keeps the wealth
    monotone in m, so the bounds are intervals."""

    def __init__(self, scaled: FloatArray, alpha: float, seed: int, span: float) -> None:
        self.span = span
        self._x = _ordered(scaled, seed)
        self._bets = _plug_in_bets(self._x, alpha)
        self._seen: dict[tuple[float, float], float] = {}

    def p_beyond(self, delta: float) -> float:
        return _p_from_wealth(self._log_wealth(delta, +1.0))

    def p_within(self, delta: float) -> float:
        return _p_from_wealth(self._log_wealth(delta, -1.0))

    def evidence(self, side: float) -> Callable[[float], float]:
        return lambda delta: self._log_wealth(delta, side)

    def _log_wealth(self, delta: float, side: float) -> float:
        """log of the mean wealth betting that the mean worsening is above delta (side
        +1) or below. Each is a pass over every order of the queries, and a bound's
        search and the record of its test ask some values twice: they are kept."""
        key = (delta, side)
        value = self._seen.get(key)
        if value is None:
            value = float(_log_mean_wealth(self._x, self._bets, delta / self.span, side))
            self._seen[key] = value
        return value


def _log_mean_wealth(x: FloatArray, bets: FloatArray, m: float, side: float) -> FloatArray:
    """log of the wealth averaged over the orders (axis -2) of `x` (..., orders, n),
    betting `bets` capped at c / (1 -+ m) that the mean is above m (side +1) or below."""
    m = min(max(m, -1.0 + EDGE), 1.0 - EDGE)
    if x.ndim == 2 and x.size > _ONE_PASS:  # a large scope: an order at a time
        factors, shifted = np.empty(x.shape[-1]), np.empty(x.shape[-1])  # each order's
        rows = zip(x, bets, strict=True)
        logs = np.array([_log_wealths(row, bet, m, side, factors, shifted) for row, bet in rows])
    else:
        logs = _log_wealths(x, bets, m, side)
    top = logs.max(axis=-1)
    return np.asarray(top + np.log(np.mean(np.exp(logs - top[..., None]), axis=-1)))


_ONE_PASS = 1 << 20
"""Numbers `_log_mean_wealth` takes in one pass: beyond, the orders of one scope go one
at a time, so that its temporaries are an order's (at a million queries, one pass over
16 orders makes two arrays of 128 MB). Each order's wealth is the same either way."""


def _log_wealths(
    x: FloatArray,
    bets: FloatArray,
    m: float,
    side: float,
    factors: FloatArray | None = None,
    shifted: FloatArray | None = None,
) -> FloatArray:
    """log of the wealth of each order (the last axis summed), `m` within the edges.
    `factors` and `shifted`, shaped as `x`, take the temporaries when given: an order
    of a million queries would otherwise make two arrays of 8 MB each time."""
    factors = np.minimum(bets, BET_CAP / (1.0 + side * m), out=factors)
    if side < 0.0:
        np.negative(factors, out=factors)  # capped * side, side being +-1: exact
    factors *= np.subtract(x, m, out=shifted)
    return np.log1p(factors, out=factors).sum(axis=-1)


def _orders(n: int, seed: int) -> IntArray:
    """`BET_ORDERS` fixed orders of n queries, from the seed alone."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((BET_ORDERS, n)), axis=1)


def _ordered(scaled: FloatArray, seed: int) -> FloatArray:
    """`scaled[_orders(scaled.size, seed)]`, drawn an order at a time (the same draws,
    row after row): at a million queries the whole draw and its sort would be two more
    arrays of 128 MB beside the result."""
    rng = np.random.default_rng(seed)
    ordered = np.empty((BET_ORDERS, scaled.size))
    for row in ordered:
        np.take(scaled, np.argsort(rng.random(scaled.size)), out=row)
    return ordered


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
    if x.size > _ONE_PASS:  # a large scope: each bet made in its square's place
        bets = squares
        for row in bets.reshape(-1, n):
            row[1:] = row[:-1]  # numpy copies an order's overlap: 8 MB at a million
        bets += 1.0
    else:
        bets = np.empty_like(squares)
        np.add(1.0, squares[..., :-1], out=bets[..., 1:])
    bets[..., 0] = 1.0  # the prior's variance
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
