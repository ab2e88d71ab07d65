"""How large a drop the gate's own tests catch 4 times in 5, and how many queries
catch a given one: the power simulation behind `power.py` (pure).

The tests are the gate's (`stats.column_test`): the exact test for 0/1 scores, whose
rejection region (`rejection_threshold`) is summed over exactly below `LARGE_BINARY` queries and
approximated by a normal law of Tango's statistic above; the betting test for graded
scores, simulated below `LARGE_GRADED` queries and taken from a fixed-size summary of
the scores above, so that the cost does not grow with the number of queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from llm_eval.betting import BET_CAP, BET_ORDERS, graded_rejects
from llm_eval.bounds import FloatArray, IntArray, bisect
from llm_eval.exact_power import catch_rate_over_churn, churn_posterior
from llm_eval.stats import is_binary

POWER_SIMULATIONS = 400


"""Simulated samples behind the power statement of a graded metric."""


POWER = 0.8


"""The catch rate the power statement speaks of: "caught 4 times in 5"."""


LARGE_GRADED = 500


"""From this many graded queries on, a catch rate comes from a normal approximation of
the betting test on a fixed-size summary of the scores (`_normal_catcher`), and a
scope this large is its own truth in the simulation (`_truths`); below it, from the
simulation. tests/test_power.py checks the drop named against the full simulation."""


SUMMARY_POINTS = 401


"""Points of the grid on [-1, 1] that the large-sample model holds the scaled per-query
changes on, 0.005 apart; each value is split between its two neighbours so that its
mean is kept (the variance grows by at most 0.0025^2)."""


SIMULATION_ELEMENTS = 1 << 16
"""About how many numbers (samples x orders x queries) the graded power simulation
tests at a time: 512 KiB of floats, so that the arrays it sweeps a dozen times (the
ordered worsenings, their bets, the wealth's factors) stay in a core's cache together.
The demo's figures cost 0.6x the CPU they did with 1 << 18 (`llm_eval.exact_test`'s
batch), to the last bit: the batch never changes a figure (see `_catcher`)."""

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
    test (`graded_rejects`). From `LARGE_BINARY` 0/1 or `LARGE_GRADED` graded queries
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
        changes = churn_posterior(changed, before.size)
        return _exact_catcher(size, changes, margin, alpha), largest
    if size >= LARGE_GRADED:
        return _normal_catcher(_spread(before, after, span), margin, alpha, span, size)
    return _simulated_catcher(before, after, margin, alpha, seed, span, simulations, size)


def _exact_catcher(
    n: int, changes: FloatArray, margin: float, alpha: float
) -> Callable[[float], bool]:
    """Whether the exact test at n queries catches D with probability `POWER`, by
    `exact_power.catch_rate_over_churn`."""
    rate = catch_rate_over_churn(n, changes, margin, alpha)
    return lambda drop: rate(drop) >= POWER


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
            hit = graded_rejects(worse, margin / span, alpha, seed)
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
    return bisect(caught, largest, low, steps=12)
