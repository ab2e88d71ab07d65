"""How large a drop the gate's own tests catch 4 times in 5, and how many queries
catch a given one: the power simulation behind `power.py` (pure).

The tests are `stats.py`'s: the exact test for 0/1 scores, whose rejection region
(`rejection_threshold`) is summed over exactly below `LARGE_BINARY` queries and
approximated by a normal law of Tango's statistic above; the betting test for graded
scores, simulated below `LARGE_GRADED` queries and taken from a fixed-size summary of
the scores above, so that the cost does not grow with the number of queries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from llm_eval.stats import (
    BET_CAP,
    BET_ORDERS,
    EDGE,
    LIKELY,
    NUISANCE_GAMMA,
    SIMULATION_ELEMENTS,
    ExactPairs,
    FloatArray,
    IntArray,
    _bisect,
    _frozen,
    _graded_rejects,
    _log_factorials,
    _restricted_variance,
    is_binary,
    nuisance_shares,
    regularized_beta,
    tango_z,
)

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
                _likely_counts(n, float(share), test._log_factorial, math.log(LIKELY))[0]
                for share in shares[live]
            ]
        )
    )
    thresholds = np.full(n + 1, n + 1, dtype=np.int64)
    thresholds[likely] = rejection_thresholds(n, likely, margin, alpha)
    delta = min(max(drop, -1.0 + EDGE), 1.0 - EDGE)
    rates[live] = test._probability(shares[live], delta, np.arange(n + 1), thresholds)
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
    return _frozen(share)


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
    lf = _log_factorials(n)
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
