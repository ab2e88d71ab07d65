"""The exact test's catch rate for 0/1 scores: the power model behind
`detection.py`'s 0/1 figures (pure).

Of n queries, each goes bad with probability P(bad) and good with P(good); the exact
test (`exact_test.ExactPairs`) finds a worsening beyond the margin when the bad count
reaches its rejection threshold for the changed count (`rejection_threshold`), found
from the critical value of Tango's statistic at each nuisance share the test
maximises over (`_critical_statistic`). The catch rate is the trinomial summed over
that region below `LARGE_BINARY` queries (`exact_catch_rate`) and a normal law of the
statistic above (`normal_catch_rate`), averaged over the churn's posterior
(`churn_posterior`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

from llm_eval.bounds import EDGE, FloatArray, IntArray
from llm_eval.exact_test import (
    LIKELY,
    NUISANCE_GAMMA,
    SIMULATION_ELEMENTS,
    ExactPairs,
    frozen,
    log_factorials,
    nuisance_shares,
    regularized_beta,
    restricted_variance,
    tango_z,
)

CHURN_POINTS = 16


"""Equally likely values of the churn a 0/1 power figure averages its catch rate over."""


LARGE_BINARY = 1_000


"""From this many 0/1 queries on, a catch rate comes from a normal approximation of the
exact test (`normal_catch_rate`), whose cost does not grow with the number of queries;
below it, from the exact sum. There they agree within 3 points of catch rate (with no
churn; within 1 with churn), as tests/test_power.py checks."""


def catch_rate_over_churn(
    n: int, changes: FloatArray, margin: float, alpha: float
) -> Callable[[float], float]:
    """The probability that the exact test at n queries finds a true worsening D beyond
    the margin when P(good) = q / 2 and P(bad) = q / 2 + D, averaged over the shares q
    of churning queries in `changes` (equally likely values), each by `exact_catch_rate`
    (`normal_catch_rate` from `LARGE_BINARY` queries on)."""
    if n >= LARGE_BINARY:

        def rate(drop: float) -> float:
            return float(
                np.mean(
                    [normal_catch_rate(n, q / 2.0 + drop, q / 2.0, margin, alpha) for q in changes]
                )
            )

        return rate

    def summed(drop: float) -> float:
        shares = (changes / 2.0 + drop) + changes / 2.0  # P(bad) + P(good), as summed one by one
        return float(np.mean(_exact_catch_rates(n, shares, drop, margin, alpha)))

    return summed


def exact_catch_rate(n: int, p_bad: float, p_good: float, margin: float, alpha: float) -> float:
    """The probability that the exact test finds a worsening beyond `margin` (p_beyond
    <= alpha) when of n queries each goes bad with probability p_bad and good with
    p_good: the trinomial summed over the region the test rejects. Changed counts with
    probability below `LIKELY` times the likeliest's are left out (6.4 standard deviations
    from the mean and beyond: under 2e-10 in all)."""
    return float(
        _exact_catch_rates(n, np.array([p_bad + p_good]), p_bad - p_good, margin, alpha)[0]
    )


def _exact_catch_rates(
    n: int, shares: FloatArray, drop: float, margin: float, alpha: float
) -> FloatArray:
    """`exact_catch_rate` at each share of changed queries (P(bad) + P(good)) with the
    same P(bad) - P(good), summed together: the changed counts left out are those
    unlikely at every share (so a share's sum may hold a few of its own unlikely counts,
    under 2e-10 in all)."""
    test = ExactPairs(n, 0, 0)
    shares = np.minimum(shares, 1.0 - EDGE)
    rates = np.zeros(shares.size)
    live = shares > 0.0
    if not live.any():
        return rates
    likely = np.unique(
        np.concatenate(
            [
                _likely_counts(n, float(share), test.log_factorial, math.log(LIKELY))[0]
                for share in shares[live]
            ]
        )
    )
    thresholds = np.full(n + 1, n + 1, dtype=np.int64)
    thresholds[likely] = rejection_thresholds(n, likely, margin, alpha)
    delta = min(max(drop, -1.0 + EDGE), 1.0 - EDGE)
    rates[live] = test.region_probability(shares[live], delta, np.arange(n + 1), thresholds)
    return rates


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
    null_spread = math.sqrt(float(restricted_variance(bad, good, n, margin)) / n)
    spread = math.sqrt(max(p_bad + p_good - drop * drop, 0.0))
    distance = math.sqrt(n) * (drop - margin) - critical * null_spread
    if spread == 0.0:
        return 1.0 if distance > 0.0 else 0.0
    return NormalDist().cdf(distance / spread)


@functools.lru_cache(maxsize=256)
def churn_posterior(changed: int, n: int, points: int = CHURN_POINTS) -> FloatArray:
    """The share of queries that churn, as `points` equally likely values: the medians
    of equal-probability slices of its posterior Beta(changed + 1, n - changed + 1)
    (a uniform prior) after `changed` of n queries changed. The churn seen is only an
    estimate; a power figure at the estimate itself is optimistic, since a catch rate
    near 80% falls faster when the churn is higher than it rises when it is lower. No
    query changed: no churn, the assumption the statement then says in words. Computed
    once per process for each (changed, n): every size `queries_to_catch` tries, and
    `detectable_worsening`, average over the same values."""
    if changed == 0:
        return frozen(np.zeros(1))
    a = np.full(points, changed + 1.0)
    b = np.full(points, n - changed + 1.0)
    target = (np.arange(points) + 0.5) / points
    lf = log_factorials(n + 2)
    log_beta = lf[changed] + lf[n - changed] - lf[n + 1]
    # Newton's method from the normal law's quantiles, kept inside the bracket that
    # the values seen so far set (bisection where a step would leave it)
    mean, spread = (
        (changed + 1.0) / (n + 2.0),
        math.sqrt((changed + 1.0) * (n - changed + 1.0) / ((n + 2.0) ** 2 * (n + 3.0))),
    )
    guess = np.array([mean + spread * NormalDist().inv_cdf(t) for t in target])
    low, high = np.zeros(points), np.ones(points)
    share = np.clip(guess, 1e-12, 1.0 - 1e-12)
    for _ in range(64):
        cdf = regularized_beta(a, b, share, lf)
        below = cdf < target
        low, high = np.where(below, share, low), np.where(below, high, share)
        density = np.exp(changed * np.log(share) + (n - changed) * np.log1p(-share) - log_beta)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = share - (cdf - target) / density
        inside = np.isfinite(step) & (step > low) & (step < high)
        moved = np.where(inside, step, (low + high) / 2.0)
        settled = np.max(np.abs(moved - share)) <= 1e-14
        share = moved
        if settled:
            break
    return frozen(share)


_THRESHOLDS: dict[tuple[int, float, float], dict[int, int]] = {}
"""`rejection_threshold`'s values by (n, margin, alpha), then by changed count, kept for
the process (at most `CRITICAL_KEPT` in all)."""


def rejection_threshold(n: int, changed: int, margin: float, alpha: float) -> int:
    """The fewest bad queries among `changed` of n whose p_beyond(margin) is <= alpha
    (changed + 1: none). The p-value is gamma plus the largest tail over the shares of
    `nuisance_shares`, so it is <= alpha exactly when at each of those shares the
    observed statistic lies beyond that share's critical value (`_critical_statistic`);
    Tango's statistic rises with the bad count at a fixed changed count, so the region
    is every bad count from the first beyond the largest of them."""
    return int(rejection_thresholds(n, np.array([changed]), margin, alpha)[0])


def rejection_thresholds(n: int, changed: IntArray, margin: float, alpha: float) -> IntArray:
    """`rejection_threshold` at each changed count; the critical values of the counts
    not known yet are computed together (their nuisance shares overlap)."""
    known = _THRESHOLDS.setdefault((n, margin, alpha), {})
    missing = sorted({int(count) for count in changed} - known.keys())
    level = alpha - NUISANCE_GAMMA
    shares = {count: nuisance_shares(n, count, margin) for count in missing}
    every = [found for found in shares.values() if found.size]
    if every:
        _critical_statistics(n, margin, level, np.unique(np.concatenate(every)))
    if sum(map(len, _THRESHOLDS.values())) + len(missing) > CRITICAL_KEPT:
        _THRESHOLDS.clear()
        known = _THRESHOLDS.setdefault((n, margin, alpha), {})
    if missing:
        counts = np.array(missing)
        critical = np.array(
            [
                _critical_statistics(n, margin, level, shares[count]).max()
                if shares[count].size
                else -math.inf
                for count in missing
            ]
        )
        for count, found in zip(missing, _first_beyond(n, counts, margin, critical), strict=True):
            known[count] = int(found)
    return np.array([known[int(count)] for count in changed], dtype=np.int64)


def _first_beyond(n: int, changed: IntArray, margin: float, critical: FloatArray) -> IntArray:
    """For each changed count, the fewest bad ones whose Tango statistic lies beyond the
    critical value (beyond the tolerance), changed + 1: none; 0 where the critical value
    is -inf (no share to test at, or every tail within the level: all reject)."""
    sizes = changed + 1
    row = np.repeat(np.arange(changed.size), sizes)
    bad = np.arange(row.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    z = tango_z(bad, changed[row] - bad, n, margin)
    edge = critical[row]
    with np.errstate(invalid="ignore"):  # -inf + inf: that count's answer is 0 anyway
        meets = np.flatnonzero(z > edge + 1e-9 * np.maximum(1.0, np.abs(edge)))
    found = np.array(sizes, dtype=np.int64)
    rows, first = np.unique(row[meets], return_index=True)
    found[rows] = bad[meets[first]]
    return np.where(np.isneginf(critical), 0, found)


_CRITICAL: dict[tuple[int, float, float], dict[float, float]] = {}
"""`_critical_statistic`'s values by (n, delta, level), then by share, kept for the
process: every size the power statement tries asks for the shares of many changed
counts, which overlap."""


CRITICAL_KEPT = 65_536


"""The most values `_CRITICAL` (and `_THRESHOLDS`) hold; each starts afresh beyond."""


SHARES_TOGETHER = 16


"""How many neighbouring shares `_critical_among` takes at a time: their outcomes
overlap, so listing and sorting them once serves all; farther apart, most of each
share's row would be outcomes of the others."""


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
    return float(_critical_statistics(n, delta, level, np.array([share]))[0])


def _critical_statistics(n: int, delta: float, level: float, shares: FloatArray) -> FloatArray:
    """`_critical_statistic` at each share; those not known yet are computed together
    (`_critical_among`) and kept."""
    known = _CRITICAL.setdefault((n, delta, level), {})
    missing = sorted({float(s) for s in shares} - known.keys())
    if missing:
        found = np.concatenate(
            [
                _critical_among(
                    n, delta, level, np.array(missing[at : at + SHARES_TOGETHER]), upper=True
                )
                for at in range(0, len(missing), SHARES_TOGETHER)
            ]
        )
        for at in np.flatnonzero(np.isnan(found)):
            found[at] = _critical_among(n, delta, level, np.array([missing[at]]), upper=False)[0]
        if sum(map(len, _CRITICAL.values())) + len(missing) > CRITICAL_KEPT:
            _CRITICAL.clear()
            known = _CRITICAL.setdefault((n, delta, level), {})
        for share, value in zip(missing, found, strict=True):
            known[share] = -math.inf if math.isnan(value) else float(value)
    return np.array([known[float(s)] for s in shares])


def _critical_among(
    n: int, delta: float, level: float, shares: FloatArray, *, upper: bool
) -> FloatArray:
    """`_critical_statistic` at each share over the outcomes listed for it (upper: those
    with a statistic of at least 0); nan where the tail of every listed outcome is at
    most the level, so the answer may lie among those left out (or, with all listed,
    there is none: the caller reads nan as -inf).

    All shares at once, to the last bit the values of listing and sorting each share's
    outcomes alone: the outcomes of every share are laid out once, in the order of
    changed then bad count that each share's list has, and sorted by the statistic,
    which does not depend on the share (a stable sort, so ties keep that order, as in
    each share's own sort); a share's weights are 0 outside its own list, and adding 0
    leaves every running sum as it was."""
    lf = log_factorials(n)
    low, firsts, lasts, log_changed, log_bad, log_good = _listed(n, delta, shares, lf, upper)
    width = firsts.shape[1]
    first, last = firsts.min(axis=0, initial=n + 1), lasts.max(axis=0, initial=-1)
    sizes = np.maximum(last - first + 1, 0)
    found = np.full(shares.size, np.nan)
    if width <= 0 or not sizes.any():
        return found
    column = np.repeat(np.arange(width), sizes)
    b = (
        np.repeat(first, sizes)
        + np.arange(column.size)
        - np.repeat(np.cumsum(sizes) - sizes, sizes)
    )
    z = tango_z(b, column + low - b, n, delta)
    order = np.argsort(-z, kind="stable")  # every share's weights are made in this order
    z, column, b = z[order], column[order], b[order]
    d = column + low
    # P(T >= t), ties (within the test's tolerance) counted in, at each statistic t seen
    reach = np.searchsorted(-z, -(z - 1e-9 * np.maximum(1.0, np.abs(z))), side="right") - 1
    rows = max(1, SIMULATION_ELEMENTS // z.size)
    for start in range(0, shares.size, rows):
        chosen = slice(start, start + rows)
        listed = (firsts[chosen][:, column] <= b) & (b <= lasts[chosen][:, column])
        with np.errstate(invalid="ignore"):
            log_weight = (
                log_changed[chosen][:, column]
                + lf[d]
                - lf[b]
                - lf[d - b]
                + np.where(b > 0, b * log_bad[chosen], 0.0)
                + np.where(d > b, (d - b) * log_good[chosen], 0.0)
            )
        tail = np.cumsum(np.exp(np.where(listed, log_weight, -np.inf)), axis=1)[:, reach]
        above = (tail > level) & listed
        found[chosen] = np.where(above.any(axis=1), z[np.argmax(above, axis=1)], np.nan)
    return found


def _listed(
    n: int, delta: float, shares: FloatArray, lf: FloatArray, upper: bool
) -> tuple[int, IntArray, IntArray, FloatArray, FloatArray, FloatArray]:
    """The (bad, good) outcomes `_critical_statistic` lists for each share, as rows over
    the changed counts from the first returned on: the first and last bad count listed
    (n + 1 and -1: none), the changed count's log-probability (-inf: not listed); and
    the logs of each share's bad and good ratios (columns). The changed counts are those
    `_likely_counts` keeps, computed for all the shares at once on a stretch holding
    every share's (each value as `_likely_counts` makes it, from the share's own logs)."""
    logs = np.array([math.log(share) for share in shares])[:, None]
    others = np.array([math.log1p(-share) for share in shares])[:, None]
    ratio = np.array([min(max((s + delta) / (2.0 * s), 0.0), 1.0) for s in shares])[:, None]
    spread = np.sqrt(60.0 * n * shares * (1.0 - shares))
    modes = np.clip(np.floor((n + 1) * shares), 0, n)
    low = int(max(np.min(modes - 2.0 * spread) - 64, 0))
    high = int(min(np.max(modes + 2.0 * spread) + 64, n))
    for counts in (np.arange(low, high + 1), np.arange(n + 1)):
        with np.errstate(divide="ignore"):
            log_pmf = lf[n] - lf[counts] - lf[n - counts]
            log_pmf = log_pmf + counts * logs + (n - counts) * others
        keep = log_pmf > log_pmf.max(axis=1, keepdims=True) - 30.0
        if (counts[0] == 0 or not keep[:, 0].any()) and (counts[-1] == n or not keep[:, -1].any()):
            break
    mean = counts * ratio
    width = math.sqrt(60.0) * np.sqrt(counts * ratio * (1.0 - ratio)) + 1.0
    first = np.floor(mean - width)
    if upper:
        first = np.maximum(first, np.floor((counts + n * delta) / 2.0) - 1.0)
    first = np.clip(first, 0, counts).astype(np.int64)
    last = np.clip(np.ceil(mean + width), 0, counts).astype(np.int64)
    return (
        int(counts[0]),
        np.where(keep, first, n + 1),
        np.where(keep, last, -1),
        np.where(keep, log_pmf, -np.inf),
        np.array([math.log(r) if r > 0.0 else -math.inf for r in ratio[:, 0]])[:, None],
        np.array([math.log1p(-r) if r < 1.0 else -math.inf for r in ratio[:, 0]])[:, None],
    )


def _likely_counts(
    n: int, share: float, lf: FloatArray, floor: float = -30.0
) -> tuple[IntArray, FloatArray]:
    """The numbers of changed queries within exp(`floor`) of the likeliest under Bin(n,
    share), and their log-probabilities. Worked out on a stretch around the mode wide
    enough to hold them (the log-probabilities are concave in the count, so when both
    ends of the stretch fall outside, every count beyond does), else on every count."""
    mode = min(max(math.floor((n + 1) * share), 0), n)
    reach = math.ceil(2.0 * math.sqrt(-2.0 * floor * n * share * (1.0 - share))) + 64
    low, high = max(mode - reach, 0), min(mode + reach, n)
    for counts in (np.arange(low, high + 1), np.arange(n + 1)):
        with np.errstate(divide="ignore"):
            log_pmf = lf[n] - lf[counts] - lf[n - counts]
            log_pmf = log_pmf + counts * math.log(share) + (n - counts) * math.log1p(-share)
        keep = log_pmf > log_pmf.max() + floor
        if (counts[0] == 0 or not keep[0]) and (counts[-1] == n or not keep[-1]):
            break
    return counts[keep], log_pmf[keep]
