"""Is the gate's decision sound? Its error rates, power statement and speed, simulated.

The gate tests each scope's paired change against its regression limit with
`llm_eval.stats` and decides: **fail** when `p_beyond <= alpha` (the test rejects "the
mean worsening is at most the limit"), **pass** when `p_within <= alpha` (it rejects "at
least the limit"), **cannot tell** otherwise, and a scope in which no query's score
changed passes as **unchanged**. (The gate's `min_n` of 30 never applies: the smallest
scope here has 30 queries.) This script applies exactly that rule to simulated changes,
taking the p-values at the limit from `stats.column_test(before, after, alpha, seed=0,
span=1)` -- the same object `margin_tests` reads its p-values from, without the interval
bounds, which the decision does not need. For 0/1 scores the exact test depends only on
(n, queries that went bad, queries that went good), so its p-values are memoised on those
counts; that changes nothing but the run time. Nothing else from the package is used:
`gate.py` and `against_baseline.py` are not imported.

Generative model of a retriever (section A)
    Every query has relevant documents at ranks 1..50 (rank r drawn with probability
    proportional to r^-1.3, ranks made distinct; 50 stands for "not retrieved"), and a
    metric scores the ranking:

    - hit@5 -- 0/1, one relevant document: 1 when it is in the top 5 (= recall@5 with
      one relevant document); limit 0.03;
    - MRR@10 -- one relevant document, 1/rank when in the top 10, else 0; limit 0.05;
    - nDCG@10 -- 1-3 relevant documents graded 1-3, gain 2^g - 1, discount
      1/log2(rank + 1), divided by the ideal DCG; limit 0.05;
    - recall@5 (2-4 rel) -- 2-4 relevant documents, the share found in the top 5;
      limit 0.03.

    "After" is "before" with each query, independently, taking one branch of a change
    model: unchanged, or one of the model's changes. A change that is "either way" is
    seen in a random direction (before and after swapped with probability 1/2), so it
    is churn with no trend: its mean worsening is exactly 0. The models:

    - 0/1 metric: churn c (redrawn ranks) set so that a share of 0.5%, 1%, 5% or 20%
      of the queries flip between hit and miss (half each way), plus the true drop: a
      share s of queries pushed out of the top 10. For 0/1 scores any model reduces to
      the pair P(hit -> miss), P(miss -> hit), so these churn levels (including the
      low-churn ones, 0.5-1%) are what "skew" can mean there;
    - graded metrics, four models (each plus the drop branch whose share s is
      calibrated):
      G1 redraw churn: 20% of queries get fresh ranks (either way); s lose everything;
      G2 small moves, a few total losses: 40% move every relevant document 1-2 ranks
         (either way); s lose everything;
      G3 many small gains, rare total losses: 30% move up 1-2 ranks; s lose
         everything (at a true worsening of 0, s is what cancels the gains);
      G4 many small losses, rare total gains: 3% jump to the ideal ranking; s move
         down 1-2 ranks.

    The true mean worsening of a model is sum over branches of P(branch) x E[before -
    after | branch]; each branch's expectation is a Monte Carlo mean over
    `--calibration-draws` (2 million) queries, computed once per (metric, model) on the
    same draws for every branch (either-way branches are exactly 0; their Monte Carlo
    mean is checked to be within 5 standard errors of 0). The drop share s is then
    found by bisection so that the true worsening is 0, 1/2, 1, 3/2 or 2 times the
    limit; the Monte Carlo standard error of the true worsening at the limit is
    printed (1e-5 to 1e-4, well under 1% of a limit). A target a model cannot reach
    is reported as n/a.

Error rates and detection (section B)
    Per (metric, model, n) with n = 30, 50, 100, 200 (small scopes, tag slices) and 500,
    1000 (the gate itself), alpha = 0.05: the false-fail rate at a true worsening of 0,
    1/2 and 1 x the limit (must be <= alpha), each with the upper end of a one-sided 95%
    Clopper-Pearson bound ([..]); the "cannot tell" share at 0 and 1 x; the pass share
    at 1 x (also an error: the pass side of the test promises <= alpha there) and the
    share of it that is the "unchanged" rule; the fail (detection) rate at 1.5 x and
    2 x the limit. Beside them, on the same samples: the one-sided paired t-test of the
    mean worsening against the limit (t fail@1, its false-fail rate, with its bound;
    t fail@1.5 and @2, its detection), and for hit@5 the exact test with its tail
    maximised over every share of changed queries (whole fail@1.5 and @2: the gate's
    test before the nuisance was restricted; the gate's own columns are the restricted
    test's, so that one is not shown twice). `--trials` (2,000) samples at 1 x the
    limit, `--side-trials` (1,000) at the other levels. For the 0/1 metric the fail and
    pass probabilities exactly at the limit are also computed without Monte Carlo
    ("exact"): summed over every
    (bad, good) count of the trinomial P(bad) = flips/2 + limit, P(good) = flips/2,
    using that at each number of changed queries the exact p-value is a monotone
    function of Tango's statistic (`exact_test.tango_z`), so the test rejects from a
    threshold count up (`exact_power.rejection_threshold`), an ordering checked against every
    p-value the simulations computed. A cell is flagged FF when a false-fail rate's
    one-sided 95% Clopper-Pearson LOWER bound exceeds alpha (or an exact one does), FP when the pass
    share at 1 x does. "changed" is the mean share of queries whose score moved at a
    true worsening of 0.

Flagged cells (section C)
    Every flagged rate is simulated again, independently (another seed), with 5 x
    `--trials` samples; both results are listed with the exact settings to reproduce.

The power statement (section D)
    For 0/1 churn 1%, 5%, 20% and for the graded metrics under G1 and G2, at n = 100,
    500, 1000: one sample with no true change, `detection.detectable_worsening(before, after,
    limit, alpha)` (the drop claimed to be caught 4 times in 5), then the gate's catch
    rate at that drop simulated under the model the function's docstring documents
    (queries keep the observed change in a random direction and others lose their whole
    score: for 0/1 scores the churning share q drawn from its posterior given the
    changes seen, P(good) = q / 2, P(bad) = q / 2 + drop; for graded ones a truth
    resampled from the observed queries and the sample resampled from it, each change
    flipped at random, whole-score losses taken from the unchanged queries first),
    `--trials` samples; for 0/1 scores also exactly (as in section B, averaged over 16
    equally likely values of q). scripts/bench_power_statement.py checks the statement
    against the retriever model itself (docs/power-statement.md). Separately
    labelled: the catch rate at the same claimed drop under each change model of
    section A for that metric (a different model: the claim is not made for it),
    `--side-trials` samples each.

Holm-corrected tag slices (section E)
    10 disjoint slices of 50 queries, the true worsening at the limit in every slice
    (every null true, on its boundary): a slice in which nothing changed passes as
    unchanged and leaves the family, the others' p_beyond are Holm-adjusted
    (`stats.holm`) and a slice fails when its adjusted p-value is <= alpha. Printed:
    the family-wise false-fail rate (any slice fails; must be <= alpha) over `--trials`
    families, and at 2 x the limit the share of slices failed and of families with any
    failure, over `--side-trials` families.

Timing (section F)
    CPU seconds (`time.process_time`, not wall time) of each section and of the whole
    run, and of per-tag gates of gate size: for each metric above, one gate under its
    own name over 1,400 queries with 20 tag slices of 70 (no true change; 0/1 churn
    5%, graded model G1), timing every test against the limit the gate runs (its own
    scope, then the slices as one Holm family with their bounds, as
    `against_baseline` runs them) and its power statement (`detectable_worsening` of
    its own scope).

Queries for 80% detection (section G)
    Per (metric, model): the fewest queries at which the gate fails a true worsening of
    2 x the limit 80% of the time, and the same for the t-test, by doubling from 10 then
    bisection to within 5%, `--side-trials` / 5 (at least 100) fresh samples per n tried
    (the 0/1 gate's rate computed exactly instead, `exact_power.exact_catch_rate`); their
    ratio.

Interval widths (section H)
    300 queries of "SciFact-shaped" nDCG@10 (35% score 0 in both runs, 25% score 1 in
    both, the rest graded and correlated), 5 draws with no trend and 5 with a drop of
    0.05 on the graded ones: the width of the gate's interval (`stats.margin_tests`
    high - low) over that of the t-interval at the same level (target <= 1.3).

Usage:
    python scripts/bench_gate_soundness.py [--trials 2000] [--side-trials 1000] [--seed 0]
        [--calibration-draws 2000000] [--markdown PATH] [--quick]

`--quick` (smoke runs only) shrinks the grid, the trials and the calibration draws.
Others edit the tests (`llm_eval/stats.py`, `bounds.py`, `exact_test.py`, `betting.py`):
the output names the SHA-256 of those files measured.
"""

from __future__ import annotations

import os

# One BLAS thread: on a 2-core runner, BLAS threads and the test's own work fight.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import hashlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402

from llm_eval import betting, bounds, detection, exact_power, exact_test, stats  # noqa: E402
from llm_eval.detection import detectable_worsening  # noqa: E402
from llm_eval.exact_power import churn_posterior, exact_catch_rate, rejection_threshold  # noqa: E402
from llm_eval.exact_test import ExactPairs, tango_z  # noqa: E402
from llm_eval.stats import column_test, holm, holm_levels, tested_margin  # noqa: E402

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ALPHA = 0.05
SIZES = (30, 50, 100, 200, 500, 1_000)
QUICK_SIZES = (30, 200, 1_000)
LEVELS = (0.0, 0.5, 1.0, 1.5, 2.0)
"""True mean worsening, in units of the limit."""
MAX_RANK = 50
RANK_EXPONENT = 1.3
RANK_PMF = np.arange(1, MAX_RANK + 1, dtype=np.float64) ** -RANK_EXPONENT
RANK_PMF /= RANK_PMF.sum()
ABSENT = 1_000_000
"""Rank of a document slot the query does not have (never in any top k)."""
HIT_SHARE = float(RANK_PMF[:5].sum())
SLICES = 10
SLICE_SIZE = 50
POWER_SIZES = (100, 500, 1_000)
GATE_SIZE = 1_400
GATE_TAGS = 20
CHUNK = 200_000
"""Queries generated at once."""
RECHECK_FACTOR = 5

FAIL, PASS, CANNOT, UNCHANGED = "fail", "pass", "cannot tell", "unchanged"
STATS_SHA256 = hashlib.sha256(
    b"".join(Path(m.__file__).read_bytes() for m in (stats, bounds, exact_test, betting))
).hexdigest()
"""The statistics measured (others edit the tests' modules): their hash when imported."""


# --- the retriever model -----------------------------------------------------------------


def draw_ranks(rng: np.random.Generator, shape: tuple[int, ...]) -> IntArray:
    return rng.choice(np.arange(1, MAX_RANK + 1), size=shape, p=RANK_PMF)


def settle(ranks: IntArray, grades: IntArray) -> tuple[IntArray, IntArray]:
    """Sort each query's documents by rank (grades follow) and make the ranks distinct:
    a document tied with or above the one before it moves just below it."""
    order = np.argsort(ranks, axis=1, kind="stable")
    r = np.take_along_axis(ranks, order, axis=1)
    g = np.take_along_axis(grades, order, axis=1)
    j = np.arange(r.shape[1])
    return np.maximum.accumulate(r - j, axis=1) + j, g


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    limit: float
    slots: int
    """Most relevant documents a query has."""
    relevant: tuple[int, ...]
    """Numbers of relevant documents, drawn uniformly."""
    graded: bool
    """Grades 1-3 (nDCG) rather than all 1."""

    def draw(self, rng: np.random.Generator, m: int) -> tuple[IntArray, IntArray]:
        k = rng.choice(self.relevant, size=m)
        present = np.arange(self.slots)[None, :] < k[:, None]
        ranks = np.where(present, draw_ranks(rng, (m, self.slots)), ABSENT)
        if self.graded:
            grades = np.where(present, rng.integers(1, 4, size=(m, self.slots)), 0)
        else:
            grades = present.astype(np.int64)
        return settle(ranks, grades)

    def score(self, ranks: IntArray, grades: IntArray) -> FloatArray:
        present = grades > 0
        if self.key == "hit@5":
            return (ranks[:, 0] <= 5).astype(np.float64)
        if self.key == "mrr@10":
            first = ranks[:, 0].astype(np.float64)
            return np.where(first <= 10, 1.0 / first, 0.0)
        if self.key == "recall@5":
            found = ((ranks <= 5) & present).sum(axis=1)
            return found / present.sum(axis=1)
        gains = (2.0**grades - 1.0) * present
        discount = 1.0 / np.log2(np.minimum(ranks, 10**6) + 1.0)
        dcg = np.sum(np.where(ranks <= 10, gains * discount, 0.0), axis=1)
        ideal = -np.sort(-gains, axis=1)
        idcg = np.sum(ideal / np.log2(np.arange(2, self.slots + 2)), axis=1)
        return np.asarray(dcg / idcg, dtype=np.float64)


METRICS = (
    Metric("hit@5", "hit@5 (0/1; = recall@5, 1 relevant)", 0.03, 1, (1,), False),
    Metric("mrr@10", "MRR@10 (graded)", 0.05, 1, (1,), False),
    Metric("ndcg@10", "nDCG@10, 1-3 graded relevant (graded)", 0.05, 3, (1, 2, 3), True),
    Metric("recall@5", "recall@5, 2-4 relevant (graded share)", 0.03, 4, (2, 3, 4), False),
)

Transform = Callable[[IntArray, IntArray, np.random.Generator], IntArray]


def redraw(ranks: IntArray, grades: IntArray, rng: np.random.Generator) -> IntArray:
    return np.where(grades > 0, draw_ranks(rng, ranks.shape), ranks)


def shift(steps: Sequence[int]) -> Transform:
    def move(ranks: IntArray, grades: IntArray, rng: np.random.Generator) -> IntArray:
        step = rng.choice(np.asarray(steps), size=ranks.shape)
        return np.where(grades > 0, np.clip(ranks + step, 1, MAX_RANK), ranks)

    return move


def push_out(ranks: IntArray, grades: IntArray, rng: np.random.Generator) -> IntArray:
    return np.where(grades > 0, rng.integers(11, MAX_RANK + 1, size=ranks.shape), ranks)


def ideal(ranks: IntArray, grades: IntArray, rng: np.random.Generator) -> IntArray:
    order = np.argsort(-grades, axis=1, kind="stable")
    positions = np.empty_like(ranks)
    places = np.broadcast_to(np.arange(1, ranks.shape[1] + 1), ranks.shape)
    np.put_along_axis(positions, order, places, axis=1)
    return np.where(grades > 0, positions, ranks)


@dataclass(frozen=True)
class Branch:
    label: str
    transform: Transform
    either_way: bool
    """Seen in a random direction: churn with no trend, mean worsening exactly 0."""


REDRAW = Branch("redraw", redraw, True)
SMALL_MOVES = Branch("move 1-2 ranks", shift((-2, -1, 1, 2)), True)
SMALL_GAINS = Branch("up 1-2 ranks", shift((-2, -1)), False)
SMALL_LOSSES = Branch("down 1-2 ranks", shift((1, 2)), False)
LOSE_ALL = Branch("out of top 10", push_out, False)
TOTAL_GAIN = Branch("ideal ranking", ideal, False)


@dataclass(frozen=True)
class ChangeModel:
    key: str
    label: str
    fixed: tuple[tuple[float, Branch], ...]
    drop: Branch
    """The branch whose share is calibrated to the true worsening."""
    flips: float | None = None
    """0/1 models: the share of queries flipping hit/miss with no true change."""

    def branches(self) -> list[Branch]:
        return [b for _, b in self.fixed] + [self.drop]

    def shares(self, drop: float) -> FloatArray:
        return np.array([p for p, _ in self.fixed] + [drop])


def binary_churn(flips: float) -> ChangeModel:
    """Redrawn ranks flip a hit with probability 2 h (1 - h), h = P(rank <= 5)."""
    share = flips / (2.0 * HIT_SHARE * (1.0 - HIT_SHARE))
    return ChangeModel(
        f"churn {flips:.1%}",
        f"{flips:.1%} of queries flip hit/miss (half each way); drop: pushed out",
        ((share, REDRAW),),
        LOSE_ALL,
        flips,
    )


BINARY_MODELS = tuple(binary_churn(f) for f in (0.005, 0.01, 0.05, 0.2))
GRADED_MODELS = (
    ChangeModel(
        "G1 redraw", "20% redrawn (either way); drop: lose all", ((0.2, REDRAW),), LOSE_ALL
    ),
    ChangeModel(
        "G2 small moves",
        "40% move 1-2 ranks (either way); drop: lose all",
        ((0.4, SMALL_MOVES),),
        LOSE_ALL,
    ),
    ChangeModel(
        "G3 gains/losses",
        "30% gain 1-2 ranks; drop: lose all (rare, large)",
        ((0.3, SMALL_GAINS),),
        LOSE_ALL,
    ),
    ChangeModel(
        "G4 losses/gains",
        "3% jump to the ideal ranking; drop: 1-2 ranks down (many, small)",
        ((0.03, TOTAL_GAIN),),
        SMALL_LOSSES,
    ),
)


def models_of(metric: Metric) -> tuple[ChangeModel, ...]:
    return GRADED_MODELS if metric.key != "hit@5" else BINARY_MODELS


def branch_pairs(
    metric: Metric, branch: Branch, ranks: IntArray, grades: IntArray, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """(before, after) scores of queries taking this branch."""
    before = metric.score(ranks, grades)
    after = metric.score(*settle(branch.transform(ranks, grades, rng), grades))
    if branch.either_way:
        swap = rng.random(before.size) < 0.5
        before, after = np.where(swap, after, before), np.where(swap, before, after)
    return before, after


def sample(
    metric: Metric,
    model: ChangeModel,
    drop: float,
    n: int,
    trials: int,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """`trials` paired samples of n queries: arrays (trials, n) of before and after."""
    shares = model.shares(drop)
    edges = np.cumsum(shares)
    branches = model.branches()
    befores, afters = [], []
    per_chunk = max(1, CHUNK // n)
    for start in range(0, trials, per_chunk):
        m = min(per_chunk, trials - start) * n
        ranks, grades = metric.draw(rng, m)
        before = metric.score(ranks, grades)
        after = before.copy()
        which = np.searchsorted(edges, rng.random(m), side="right")
        for index, branch in enumerate(branches):
            rows = np.flatnonzero(which == index)
            if rows.size:
                b, a = branch_pairs(metric, branch, ranks[rows], grades[rows], rng)
                before[rows], after[rows] = b, a
        befores.append(before.reshape(-1, n))
        afters.append(after.reshape(-1, n))
    return np.concatenate(befores), np.concatenate(afters)


@dataclass(frozen=True)
class Calibration:
    """Per-branch mean worsening (Monte Carlo) and its covariance, for one model."""

    means: FloatArray
    covariance: FloatArray
    draws: int
    model: ChangeModel

    def worsening(self, drop: float) -> float:
        return float(self.model.shares(drop) @ self.means)

    def standard_error(self, drop: float) -> float:
        p = self.model.shares(drop)
        return math.sqrt(max(float(p @ self.covariance @ p), 0.0) / self.draws)

    def largest_drop(self) -> float:
        return 1.0 - sum(p for p, _ in self.model.fixed)

    def drop_for(self, target: float) -> float | None:
        """The drop share giving a true mean worsening of `target`, by bisection
        (None: the model cannot reach it)."""
        low, high = 0.0, self.largest_drop()
        if abs(self.worsening(low) - target) < 1e-15:
            return 0.0
        if self.worsening(low) > target or self.worsening(high) < target:
            return None
        for _ in range(80):
            middle = (low + high) / 2.0
            if self.worsening(middle) < target:
                low = middle
            else:
                high = middle
        return (low + high) / 2.0


def calibrate(
    metric: Metric, model: ChangeModel, draws: int, rng: np.random.Generator
) -> Calibration:
    branches = model.branches()
    total = np.zeros(len(branches))
    products = np.zeros((len(branches), len(branches)))
    for start in range(0, draws, CHUNK):
        m = min(CHUNK, draws - start)
        ranks, grades = metric.draw(rng, m)
        diffs = np.array(
            [np.subtract(*branch_pairs(metric, b, ranks, grades, rng)) for b in branches]
        )
        total += diffs.sum(axis=1)
        products += diffs @ diffs.T
    means = total / draws
    covariance = products / draws - np.outer(means, means)
    for index, branch in enumerate(branches):
        if branch.either_way:
            error = math.sqrt(covariance[index, index] / draws)
            if abs(means[index]) > 5.0 * error + 1e-12:
                raise AssertionError(f"{branch.label}: either-way mean {means[index]} is not 0")
            means[index] = 0.0  # exactly 0 by symmetry, so no Monte Carlo error either
            covariance[index, :] = covariance[:, index] = 0.0
    return Calibration(means, covariance, draws, model)


# --- the gate's decision ---------------------------------------------------------------------


class _MemoExact:
    """The exact test of one (n, bad, good), its p-values remembered per limit."""

    def __init__(self, test: Any) -> None:
        self.test = test
        self.beyond: dict[float, float] = {}
        self.within: dict[float, float] = {}

    def p_beyond(self, limit: float) -> float:
        if limit not in self.beyond:
            self.beyond[limit] = float(self.test.p_beyond(limit))
        return self.beyond[limit]

    def p_within(self, limit: float) -> float:
        if limit not in self.within:
            self.within[limit] = float(self.test.p_within(limit))
        return self.within[limit]


class Gate:
    """The gate's decision on one scope (see the module docstring)."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.memo: dict[tuple[int, int, int], _MemoExact] = {}

    def test(self, before: FloatArray, after: FloatArray) -> Any:
        if ((before == 0.0) | (before == 1.0)).all() and ((after == 0.0) | (after == 1.0)).all():
            bad = int(np.sum((before == 1.0) & (after == 0.0)))
            good = int(np.sum((before == 0.0) & (after == 1.0)))
            return self.exact(before.size, bad, good)
        return column_test(before, after, self.alpha, 0, 1.0)

    def exact(self, n: int, bad: int, good: int) -> _MemoExact:
        key = (n, bad, good)
        if key not in self.memo:
            before = np.zeros(n)
            after = np.zeros(n)
            before[:bad] = 1.0
            after[bad : bad + good] = 1.0
            self.memo[key] = _MemoExact(column_test(before, after, self.alpha, 0, 1.0))
        return self.memo[key]

    def decide(self, before: FloatArray, after: FloatArray, limit: float) -> str:
        if not np.any(before != after):
            return UNCHANGED
        return self._zone(self.test(before, after), limit)

    def decide_counts(self, n: int, bad: int, good: int, limit: float) -> str:
        if bad == 0 and good == 0:
            return UNCHANGED
        return self._zone(self.exact(n, bad, good), limit)

    def _zone(self, test: Any, limit: float) -> str:
        if test.p_beyond(limit) <= self.alpha:
            return FAIL
        if test.p_within(limit) <= self.alpha:
            return PASS
        return CANNOT


@dataclass
class ExactCheck:
    """How many memoised exact p-values were checked against the ordering by the
    Tango statistic that `exact_binary` relies on, and how many disagreed."""

    checked: int = 0
    disagree: int = 0


def _count_log(count: IntArray, p: float) -> FloatArray:
    """count x log(p), with 0 x log(0) = 0."""
    if p <= 0.0:
        return np.where(count == 0, 0.0, -np.inf)
    return count * math.log(p)


def exact_binary(
    gate: Gate,
    n: int,
    p_bad: float,
    p_good: float,
    limit: float,
    what: str,
    check: ExactCheck,
) -> float:
    """The exact probability that the gate fails (`what` = FAIL) or passes (PASS, the
    "unchanged" rule included) when (bad, good) is trinomial(n, p_bad, p_good): a sum
    over every pair of counts with probability above 1e-13, no Monte Carlo.

    At a fixed number of changed queries the exact p-value falls as Tango's statistic
    at the limit rises (`exact_test.tango_z`; for p_within, the statistic with the roles
    swapped), so the rejected pairs with that many changed are those from a threshold
    count up: `exact_power.rejection_threshold`, which finds it from the test's nuisance
    shares. Every p-value the simulations memoised for this n is checked against those
    thresholds (`check`)."""
    lf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])
    i = np.arange(n + 1)[:, None]
    j = np.arange(n + 1)[None, :]
    rest = n - i - j
    valid = rest >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (
            lf[n]
            - lf[i]
            - lf[j]
            - lf[np.where(valid, rest, 0)]
            + _count_log(i, p_bad)
            + _count_log(j, p_good)
            + _count_log(rest, 1.0 - p_bad - p_good)
        )
    keep = valid & (log_pmf > math.log(1e-13)) & ((i > 0) | (j > 0))
    bad = np.broadcast_to(i, keep.shape)[keep]
    good = np.broadcast_to(j, keep.shape)[keep]
    weight = np.exp(log_pmf[keep])
    # FAIL rejects on the bad count at +limit; PASS on the good count at -limit
    counted, delta = (bad, limit) if what == FAIL else (good, -limit)

    def threshold(changed: int) -> int:
        return rejection_threshold(n, changed, delta, gate.alpha)

    changed = bad + good
    thresholds = {int(c): threshold(int(c)) for c in np.unique(changed)}
    rejected = counted >= np.array([thresholds[int(c)] for c in changed], dtype=np.int64)
    total = float(weight[rejected].sum())
    if what == PASS:
        total += (1.0 - p_bad - p_good) ** n  # nothing changed: "unchanged"
    for (size, b, g), memo in gate.memo.items():
        seen = memo.beyond if what == FAIL else memo.within
        if size != n or limit not in seen or b + g == 0:
            continue
        check.checked += 1
        count = b if what == FAIL else g
        check.disagree += (seen[limit] <= gate.alpha) != (count >= threshold(b + g))
    return total


# --- the tests the gate's is compared with ---------------------------------------------------


@functools.cache
def t_critical(n: int, alpha: float) -> float:
    """The one-sided (1 - alpha) quantile of Student's t with n - 1 degrees of freedom."""
    return float(scipy_stats.t.ppf(1.0 - alpha, n - 1))


def t_test_fails(diffs: FloatArray, limit: float, alpha: float) -> npt.NDArray[np.bool_]:
    """The paired t-test per sample (rows of per-query worsening): rejects "the mean
    worsening is at most the limit" when (mean - limit) / (sd / sqrt(n)) exceeds the t
    quantile (a sample with no spread: never)."""
    n = diffs.shape[-1]
    mean = diffs.mean(axis=-1)
    sd = diffs.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean - limit) / (sd / math.sqrt(n))
    return np.asarray((sd > 0.0) & (t > t_critical(n, alpha)))


def t_interval_width(diffs: FloatArray, alpha: float) -> float:
    """Width of the t-interval matching the gate's bounds: two one-sided (1 - alpha)
    bounds, mean -+ t_(1 - alpha) sd / sqrt(n)."""
    n = diffs.size
    return 2.0 * t_critical(n, alpha) * float(diffs.std(ddof=1)) / math.sqrt(n)


@functools.cache
def whole_range_critical(n: int, limit: float, alpha: float) -> float:
    """The exact test as it was before its nuisance was restricted: the tail maximised
    over every share of changed queries above the limit (the test's grid of shares and
    just above the limit), no gamma; one critical Tango statistic for every outcome, the
    test rejecting beyond it."""
    shares = [limit + 1e-9, *(float(s) for s in exact_test.share_grid(n) if s > limit)]
    return max(exact_power._critical_statistic(n, limit, alpha, s) for s in shares)


def whole_range_fails(
    before: FloatArray, after: FloatArray, limit: float, alpha: float
) -> npt.NDArray[np.bool_]:
    """The whole-range exact test's fail decision per sample of 0/1 scores."""
    n = before.shape[-1]
    bad = np.sum((before == 1.0) & (after == 0.0), axis=-1)
    good = np.sum((before == 0.0) & (after == 1.0), axis=-1)
    critical = whole_range_critical(n, limit, alpha)
    z = tango_z(bad, good, n, limit)
    return np.asarray(z > critical + 1e-9 * max(1.0, abs(critical)))


# --- binomial bounds -------------------------------------------------------------------------


def _binomial_cdf(k: int, n: int, p: float) -> float:
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    i = np.arange(k + 1, dtype=np.float64)
    log_choose = (
        math.lgamma(n + 1)
        - np.array([math.lgamma(x + 1) for x in i])
        - np.array([math.lgamma(n - x + 1) for x in i])
    )
    return float(min(1.0, np.exp(log_choose + i * math.log(p) + (n - i) * math.log1p(-p)).sum()))


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate seen k times in n."""
    if k >= n:
        return 1.0
    low, high = k / n, 1.0
    for _ in range(50):
        middle = (low + high) / 2.0
        if _binomial_cdf(k, n, middle) > 1.0 - confidence:
            low = middle
        else:
            high = middle
    return high


def lower_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound of a rate seen k times in n."""
    if k <= 0:
        return 0.0
    low, high = 0.0, k / n
    for _ in range(50):
        middle = (low + high) / 2.0
        if 1.0 - _binomial_cdf(k - 1, n, middle) < 1.0 - confidence:
            low = middle
        else:
            high = middle
    return low


# --- output ----------------------------------------------------------------------------------


class Report:
    """Tables printed as text and kept as Markdown."""

    def __init__(self) -> None:
        self.markdown: list[str] = []

    def heading(self, title: str) -> None:
        print(f"\n{title}\n{'=' * len(title)}", flush=True)
        self.markdown += [f"## {title}", ""]

    def subheading(self, title: str) -> None:
        print(f"\n{title}", flush=True)
        self.markdown += [f"### {title}", ""]

    def text(self, *lines: str) -> None:
        print("\n".join(lines), flush=True)
        self.markdown += [*lines, ""]

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
        for row in rows:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)), flush=True)
        self.markdown.append("| " + " | ".join(headers) + " |")
        self.markdown.append("|" + "|".join("---:" for _ in headers) + "|")
        self.markdown += ["| " + " | ".join(row) + " |" for row in rows]
        self.markdown.append("")


def rate(count: int, trials: int) -> str:
    return f"{count / trials:.3f}"


def rate_bound(count: int, trials: int) -> str:
    return f"{count / trials:.3f} [{upper_bound(count, trials):.3f}]"


def share(
    fails: dict[float, int], trials: dict[float, int], level: float, bound: bool = False
) -> str:
    """A count of another test's fails at one level, as a rate."""
    if level not in fails:
        return "n/a"
    return rate_bound(fails[level], trials[level]) if bound else rate(fails[level], trials[level])


def cell(
    counts: dict[float, dict[str, int]],
    trials: dict[float, int],
    level: float,
    what: str,
    bound: bool = False,
) -> str:
    """A rate of one decision at one level (pass counts "unchanged" in)."""
    if level not in counts:
        return "n/a"
    c = counts[level]
    k = c[PASS] + c[UNCHANGED] if what == PASS else c[what]
    return rate_bound(k, trials[level]) if bound else rate(k, trials[level])


# --- sections --------------------------------------------------------------------------------


@dataclass
class Settings:
    trials: int
    side_trials: int
    seed: int
    sizes: tuple[int, ...]
    calibration_draws: int
    power_sizes: tuple[int, ...]
    alpha: float = ALPHA


def rng_for(settings: Settings, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([settings.seed, *key]))


def count_decisions(
    gate: Gate, before: FloatArray, after: FloatArray, limit: float
) -> dict[str, int]:
    counts = dict.fromkeys((FAIL, PASS, CANNOT, UNCHANGED), 0)
    for b, a in zip(before, after, strict=True):
        counts[gate.decide(b, a, limit)] += 1
    return counts


@dataclass
class Flag:
    metric: Metric
    model: ChangeModel
    metric_index: int
    model_index: int
    n: int
    level: float
    what: str
    count: int
    trials: int


def calibrations(settings: Settings, report: Report) -> dict[tuple[int, int], Calibration]:
    report.heading("A. Models and calibration")
    report.text(
        f"Ranks 1..{MAX_RANK} with P(r) proportional to r^-{RANK_EXPONENT}; "
        f"P(rank <= 5) = {HIT_SHARE:.4f}. True worsening = sum of branch shares x branch "
        f"means, the means by Monte Carlo over {settings.calibration_draws:,} queries; the "
        "drop share s is found by bisection. SE: Monte Carlo standard error of the true "
        "worsening at 1 x the limit."
    )
    result = {}
    rows = []
    for i, metric in enumerate(METRICS):
        for j, model in enumerate(models_of(metric)):
            cal = calibrate(metric, model, settings.calibration_draws, rng_for(settings, 1, i, j))
            result[(i, j)] = cal
            drops = [cal.drop_for(level * metric.limit) for level in LEVELS]
            at_limit = drops[2]
            rows.append(
                [
                    metric.key,
                    model.key,
                    model.label,
                    f"{metric.limit:.2f}",
                    " / ".join("n/a" if d is None else f"{d:.4f}" for d in drops),
                    "n/a" if at_limit is None else f"{cal.standard_error(at_limit):.1e}",
                ]
            )
    report.table(
        ["metric", "model", "change branches", "limit", "s at 0 / ½ / 1 / 1.5 / 2 x", "SE"],
        rows,
    )
    return result


def error_rates(
    settings: Settings,
    report: Report,
    cals: dict[tuple[int, int], Calibration],
    gate: Gate,
) -> list[Flag]:
    report.heading("B. Error rates and detection per cell")
    report.text(
        f"alpha = {settings.alpha}. fail@x: share of samples the gate fails at a true "
        "worsening of x times the limit (at 0, ½, 1 a false fail; [..] = one-sided 95% "
        "Clopper-Pearson upper bound). cannot: 'cannot tell' share. pass@1: pass share "
        "at 1 x (a false pass), unch@1: of which by the 'unchanged' rule. changed: mean "
        "share of queries whose score moved at 0. "
        f"Trials: {settings.trials:,} at 1 x, {settings.side_trials:,} at the other levels. "
        "flag FF/FP: the 95% lower bound of a false-fail / false-pass rate exceeds alpha. "
        "On the same samples, for comparison: t fail@x, the one-sided paired t-test of the "
        "mean worsening against the limit (a false fail at 1 x, with its bound); for hit@5, "
        "whole fail@x, the exact test with its tail maximised over every share of changed "
        "queries (the gate's test before its nuisance was restricted to a 99.9% interval; "
        "the gate's own fail@x is the restricted test's)."
    )
    flags: list[Flag] = []
    check = ExactCheck()
    for i, metric in enumerate(METRICS):
        report.subheading(f"{metric.label}, limit {metric.limit}")
        rows = []
        for j, model in enumerate(models_of(metric)):
            cal = cals[(i, j)]
            for n in settings.sizes:
                counts: dict[float, dict[str, int]] = {}
                trials: dict[float, int] = {}
                t_fails: dict[float, int] = {}
                whole_fails: dict[float, int] = {}
                changed = float("nan")
                for index, level in enumerate(LEVELS):
                    drop = cal.drop_for(level * metric.limit)
                    if drop is None:
                        continue
                    t = settings.trials if level == 1.0 else settings.side_trials
                    rng = rng_for(settings, 2, i, j, n, index)
                    before, after = sample(metric, model, drop, n, t, rng)
                    if level == 0.0:
                        changed = float(np.mean(before != after))
                    counts[level] = count_decisions(gate, before, after, metric.limit)
                    trials[level] = t
                    if level >= 1.0:
                        fails = t_test_fails(before - after, metric.limit, settings.alpha)
                        t_fails[level] = int(np.count_nonzero(fails))
                        if model.flips is not None:
                            whole = whole_range_fails(before, after, metric.limit, settings.alpha)
                            whole_fails[level] = int(np.count_nonzero(whole))
                flag = []
                exact = []
                if model.flips is not None:
                    p_good = model.flips / 2.0
                    p_bad = p_good + metric.limit
                    rates = [
                        exact_binary(gate, n, p_bad, p_good, metric.limit, what, check)
                        for what in (FAIL, PASS)
                    ]
                    exact = [f"{x:.4f}" for x in rates]
                    if rates[0] > settings.alpha:
                        flag.append("FF")
                        flags.append(Flag(metric, model, i, j, n, 1.0, "exact fail", 0, 0))
                for level in (0.0, 0.5, 1.0):
                    if level in counts and lower_bound(counts[level][FAIL], trials[level]) > (
                        settings.alpha
                    ):
                        flag.append("FF")
                        flags.append(
                            Flag(
                                metric,
                                model,
                                i,
                                j,
                                n,
                                level,
                                FAIL,
                                counts[level][FAIL],
                                trials[level],
                            )
                        )
                if 1.0 in counts:
                    passed = counts[1.0][PASS] + counts[1.0][UNCHANGED]
                    if lower_bound(passed, trials[1.0]) > settings.alpha:
                        flag.append("FP")
                        flags.append(Flag(metric, model, i, j, n, 1.0, PASS, passed, trials[1.0]))

                rows.append(
                    [
                        model.key,
                        str(n),
                        f"{changed:.3f}",
                        *(cell(counts, trials, x, FAIL, True) for x in (0.0, 0.5, 1.0)),
                        *exact,
                        cell(counts, trials, 0.0, CANNOT),
                        cell(counts, trials, 1.0, CANNOT),
                        cell(counts, trials, 1.0, PASS),
                        cell(counts, trials, 1.0, UNCHANGED),
                        cell(counts, trials, 1.5, FAIL),
                        cell(counts, trials, 2.0, FAIL),
                        *(
                            [share(whole_fails, trials, x) for x in (1.5, 2.0)]
                            if model.flips is not None
                            else []
                        ),
                        share(t_fails, trials, 1.0, bound=True),
                        *(share(t_fails, trials, x) for x in (1.5, 2.0)),
                        " ".join(sorted(set(flag))) or "-",
                    ]
                )
        report.table(
            [
                "model",
                "n",
                "changed",
                "fail@0",
                "fail@½",
                "fail@1",
                *(["exact fail@1", "exact pass@1"] if metric.key == "hit@5" else []),
                "cannot@0",
                "cannot@1",
                "pass@1",
                "unch@1",
                "fail@1.5",
                "fail@2",
                *(["whole fail@1.5", "whole fail@2"] if metric.key == "hit@5" else []),
                "t fail@1",
                "t fail@1.5",
                "t fail@2",
                "flag",
            ],
            rows,
        )
        if metric.key == "hit@5":
            report.text(
                "exact fail@1 / exact pass@1: the probability, summed over every (bad, good) "
                "count with probability above 1e-13 (no Monte Carlo), that the gate fails / "
                "passes when P(hit -> miss) = flips/2 + limit and P(miss -> hit) = flips/2, "
                "i.e. exactly at the limit. At each number of changed queries the pairs are "
                "ordered by Tango's statistic, on which the exact p-value depends "
                "monotonically there, and rejected from `exact_power.rejection_threshold` up: "
                f"{check.checked:,} memoised p-values checked against those thresholds, "
                f"{check.disagree} disagree."
            )
    return flags


def recheck(
    settings: Settings,
    report: Report,
    cals: dict[tuple[int, int], Calibration],
    gate: Gate,
    flags: list[Flag],
) -> None:
    report.heading("C. Flagged cells, simulated again")
    if not flags:
        report.text(
            "No cell's false-fail or false-pass rate exceeds alpha beyond Monte Carlo error."
        )
        return
    report.text(
        f"Each flagged rate simulated again with {RECHECK_FACTOR} x {settings.trials:,} "
        "samples and another seed (an exact flag is not simulated). To reproduce: the "
        "model of section A at the drop share s, n queries, the gate's rule."
    )
    rows = []
    for flag in flags:
        cal = cals[(flag.metric_index, flag.model_index)]
        drop = cal.drop_for(flag.level * flag.metric.limit)
        assert drop is not None
        row = [
            flag.metric.key,
            flag.model.key,
            str(flag.n),
            f"{flag.level:g} x = {cal.worsening(drop):.5f}",
            f"{drop:.5f}",
            f"false {flag.what}",
        ]
        if flag.trials == 0:
            rows.append([*row, "exact", "-", "-", "-", "yes"])
            continue
        t = RECHECK_FACTOR * settings.trials
        key = (flag.metric_index, flag.model_index, flag.n, int(flag.level * 2))
        rng = rng_for(settings, 3, *key)
        before, after = sample(flag.metric, flag.model, drop, flag.n, t, rng)
        counts = count_decisions(gate, before, after, flag.metric.limit)
        k = counts[FAIL] if flag.what == FAIL else counts[PASS] + counts[UNCHANGED]
        confirmed = lower_bound(k, t) > settings.alpha
        rows.append(
            [
                *row,
                f"{flag.count / flag.trials:.3f} ({flag.count}/{flag.trials})",
                f"{k / t:.3f} ({k}/{t})",
                f"{counts[UNCHANGED] / t:.3f}" if flag.what == PASS else "-",
                f"{lower_bound(k, t):.3f}",
                "yes" if confirmed else "no",
            ]
        )
    report.table(
        [
            "metric",
            "model",
            "n",
            "true worsening",
            "drop share s",
            "error",
            "first run",
            "re-run",
            "of which unchanged",
            "re-run 95% lower",
            "confirmed > alpha",
        ],
        rows,
    )


def docstring_model_catch(
    gate: Gate,
    before: FloatArray,
    after: FloatArray,
    drop: float,
    limit: float,
    trials: int,
    rng: np.random.Generator,
) -> int:
    """Fails among `trials` samples of the model `detectable_worsening` documents: for 0/1
    scores the churning share q drawn from its posterior Beta(changed + 1, n - changed +
    1) (none when nothing changed), then P(bad) = q / 2 + drop, P(good) = q / 2; for
    graded ones a truth of n queries resampled from those seen, the sample resampled
    from it, each change flipped at random, and whole-score losses taken from the
    unchanged queries first, so that the truth's mean worsening is the drop."""
    n = before.size
    binary = bool(np.isin(before, (0.0, 1.0)).all() and np.isin(after, (0.0, 1.0)).all())
    if binary:
        changed = int(np.count_nonzero(before != after))
        caught = 0
        for _ in range(trials):
            q = 0.0 if changed == 0 else float(rng.beta(changed + 1, n - changed + 1))
            p_bad = min(q / 2.0 + drop, 1.0 - q / 2.0)
            b, g, _ = rng.multinomial(n, [p_bad, q / 2.0, 1.0 - q / 2.0 - p_bad])
            caught += gate.decide_counts(n, int(b), int(g), limit) == FAIL
        return caught
    whole_all = np.maximum(before, after)
    still = before == after
    caught = 0
    for _ in range(trials):
        world = rng.integers(0, n, size=n)
        steady = float(np.where(still, whole_all, 0.0)[world].mean())
        moving = float(np.where(still, 0.0, whole_all)[world].mean())
        from_still = min(drop / steady, 1.0) if steady > 0.0 else 1.0
        from_moving = min(max((drop - steady) / moving, 0.0), 1.0) if moving > 0.0 else 1.0
        rows = world[rng.integers(0, n, size=n)]
        b, a = before[rows], after[rows]
        flip = rng.random(n) < 0.5
        b, a = np.where(flip, a, b), np.where(flip, b, a)
        lose = rng.random(n) < np.where(still[rows], from_still, from_moving)
        whole = whole_all[rows]
        b, a = np.where(lose, whole, b), np.where(lose, 0.0, a)
        caught += gate.decide(b, a, limit) == FAIL
    return caught


def power_statement(
    settings: Settings,
    report: Report,
    cals: dict[tuple[int, int], Calibration],
    gate: Gate,
) -> None:
    report.heading("D. The power statement: claimed 80% against simulated")
    report.text(
        "claimed drop: `detectable_worsening` on one sample with no true change (the drop "
        "it says is caught 4 times in 5). caught (same model): fail rate simulated at that "
        f"drop under the model its docstring documents, {settings.trials:,} samples, "
        "[95% two-sided Clopper-Pearson interval]. The last columns are a DIFFERENT "
        "model: the catch rate at the same claimed true worsening under each change model "
        f"of section A ({settings.side_trials:,} samples each; n/a: not reachable)."
    )
    for i, metric in enumerate(METRICS):
        models = models_of(metric)
        binary = metric.key == "hit@5"
        sources = (1, 2, 3) if binary else (0, 1)
        report.subheading(f"{metric.label}, limit {metric.limit}")
        rows = []
        for j in sources:
            source = models[j]
            zero = cals[(i, j)].drop_for(0.0)
            assert zero is not None
            for n in settings.power_sizes:
                rng = rng_for(settings, 4, i, j, n)
                before, after = (x[0] for x in sample(metric, source, zero, n, 1, rng))
                claimed = detectable_worsening(before, after, metric.limit, settings.alpha)
                row = [source.key, str(n), f"{np.mean(before != after):.3f}"]
                if not math.isfinite(claimed):
                    rows.append(
                        [*row, "inf", "-", "-", *("-" for _ in range(binary + len(models)))]
                    )
                    continue
                k = docstring_model_catch(
                    gate, before, after, claimed, metric.limit, settings.trials, rng
                )
                t = settings.trials
                low, high = lower_bound(k, t, 0.975), upper_bound(k, t, 0.975)
                row += [f"{claimed:.4f}", f"{claimed / metric.limit:.2f}"]
                row.append(f"{k / t:.3f} [{low:.3f}, {high:.3f}]")
                if binary:
                    # the churn's posterior, as 16 equally likely shares q: P(good) = q / 2
                    shares = churn_posterior(int(np.count_nonzero(before != after)), n)
                    exact = np.mean(
                        [
                            exact_binary(
                                gate, n, q / 2 + claimed, q / 2, metric.limit, FAIL, ExactCheck()
                            )
                            for q in shares
                        ]
                    )
                    row.append(f"{exact:.4f}")
                for m, other in enumerate(models):
                    drop = cals[(i, m)].drop_for(claimed)
                    if drop is None:
                        row.append("n/a")
                        continue
                    b, a = sample(metric, other, drop, n, settings.side_trials, rng)
                    caught = count_decisions(gate, b, a, metric.limit)[FAIL]
                    row.append(rate(caught, settings.side_trials))
                rows.append(row)
        report.table(
            [
                "sample from",
                "n",
                "changed",
                "claimed drop",
                "x limit",
                "caught (same model)",
                *(["exact (same model)"] if binary else []),
                *(f"other: {m.key}" for m in models),
            ],
            rows,
        )


def holm_slices(
    settings: Settings,
    report: Report,
    cals: dict[tuple[int, int], Calibration],
    gate: Gate,
) -> None:
    report.heading(f"E. Holm-corrected tag slices: {SLICES} slices of {SLICE_SIZE} queries")
    report.text(
        "The true worsening equals the limit in every slice (all nulls true). any@1: "
        f"share of {settings.trials:,} families in which any slice fails (family-wise "
        "false-fail rate, must be <= alpha) [one-sided 95% upper bound]; at 2 x the limit "
        f"({settings.side_trials:,} families): share of slices failed, share of families "
        "with any failure."
    )
    rows = []
    for i, metric in enumerate(METRICS):
        for j, model in enumerate(models_of(metric)):
            cal = cals[(i, j)]
            row = [metric.key, model.key]
            for level, t in ((1.0, settings.trials), (2.0, settings.side_trials)):
                drop = cal.drop_for(level * metric.limit)
                if drop is None:
                    row += ["n/a"] if level == 1.0 else ["n/a", "n/a"]
                    continue
                rng = rng_for(settings, 5, i, j, int(level * 2))
                before, after = sample(metric, model, drop, SLICE_SIZE, t * SLICES, rng)
                any_fail = failed = 0
                for family in range(t):
                    raw = []
                    for s in range(family * SLICES, (family + 1) * SLICES):
                        if np.any(before[s] != after[s]):
                            raw.append(gate.test(before[s], after[s]).p_beyond(metric.limit))
                    fails = sum(p <= settings.alpha for p in holm(raw))
                    failed += fails
                    any_fail += fails > 0
                if level == 1.0:
                    row.append(rate_bound(any_fail, t))
                    if lower_bound(any_fail, t) > settings.alpha:
                        row[-1] += " FWER>α"
                else:
                    row += [f"{failed / (t * SLICES):.3f}", rate(any_fail, t)]
            rows.append(row)
    report.table(["metric", "model", "any@1", "slices failed@2", "any@2"], rows)


def gate_sized(settings: Settings, report: Report) -> None:
    report.heading(
        f"F. Per-tag gates of gate size: {GATE_SIZE:,} queries, {GATE_TAGS} tag slices each"
    )
    rng = rng_for(settings, 6)
    rows, total = [], 0.0
    timed: set[str] = set()
    for metric in METRICS:
        if metric.key in timed:  # each gate timed once, under its own name
            raise ValueError(f"two gates named {metric.key}")
        timed.add(metric.key)
        model = BINARY_MODELS[2] if metric.key == "hit@5" else GRADED_MODELS[0]
        drop = calibrate(metric, model, 200_000, rng).drop_for(0.0) or 0.0
        before, after = (x[0] for x in sample(metric, model, drop, GATE_SIZE, 1, rng))
        start = time.process_time()
        method = gate_tests(before, after, metric.limit, settings.alpha)
        tests = time.process_time() - start
        start = time.process_time()
        detectable_worsening(before, after, metric.limit, settings.alpha)
        power = time.process_time() - start
        total += tests + power
        rows.append([metric.label, method, f"{tests:.2f}", f"{power:.2f}", f"{tests + power:.2f}"])
    rows.append(["all gates", "", "", "", f"{total:.2f}"])
    report.table(["gate", "test", "tests CPU s", "power CPU s", "CPU s"], rows)


def gate_tests(before: FloatArray, after: FloatArray, limit: float, alpha: float) -> str:
    """Every test against the limit that the gate runs for one per-tag gate, as
    `against_baseline` runs them: its own scope at alpha, and its tag slices (equal
    parts of the queries) as one Holm family, p-values adjusted and bounds drawn at
    `holm_levels`. Returns the test's method."""
    test = column_test(before, after, alpha)
    tested_margin(test, before, after, limit, alpha)
    family = [
        (column_test(b, a, alpha), b, a)
        for b, a in zip(
            np.array_split(before, GATE_TAGS), np.array_split(after, GATE_TAGS), strict=True
        )
        if np.any(b != a)
    ]
    raw = [slice_test.p_beyond(limit) for slice_test, _, _ in family]
    holm(raw)
    for (slice_test, b, a), level in zip(family, holm_levels(raw, alpha), strict=True):
        tested_margin(slice_test, b, a, limit, level)
    return "exact" if isinstance(test, ExactPairs) else "betting"


def queries_for_power(
    catch_rate: Callable[[int], float], lowest: int = 10, most: int = 20_000
) -> int | None:
    """The fewest queries whose catch rate reaches `detection.POWER`, by doubling from
    `lowest` then bisection to within 5% (None: not even `most`). The rate is a
    simulated (or exact) function of n; noise can make it non-monotone, so this is the
    bisection's answer, not a proven minimum."""
    failed, held = lowest, 2 * lowest
    while catch_rate(held) < detection.POWER:
        if held >= most:
            return None
        failed, held = held, min(2 * held, most)
    while held - failed > max(1, held // 20):
        middle = (failed + held) // 2
        failed, held = (failed, middle) if catch_rate(middle) >= detection.POWER else (middle, held)
    return held


class ModelSamples:
    """Samples of one model at a given true worsening, drawn afresh per n (one n kept at a
    time: the arrays are large)."""

    def __init__(self, settings: Settings, i: int, j: int, drop: float, trials: int) -> None:
        self.settings, self.i, self.j, self.drop, self.trials = settings, i, j, drop, trials
        self.kept: dict[int, tuple[FloatArray, FloatArray]] = {}

    def __call__(self, n: int) -> tuple[FloatArray, FloatArray]:
        if n not in self.kept:
            self.kept.clear()
            metric = METRICS[self.i]
            model = models_of(metric)[self.j]
            rng = rng_for(self.settings, 7, self.i, self.j, n)
            self.kept[n] = sample(metric, model, self.drop, n, self.trials, rng)
        return self.kept[n]


def t_test_rate(drawn: ModelSamples, limit: float, alpha: float, n: int) -> float:
    before, after = drawn(n)
    return float(np.mean(t_test_fails(before - after, limit, alpha)))


def gate_fail_rate(gate: Gate, drawn: ModelSamples, limit: float, n: int) -> float:
    before, after = drawn(n)
    decided = [gate.decide(b, a, limit) == FAIL for b, a in zip(before, after, strict=True)]
    return float(np.mean(decided))


def exact_rate(p_good: float, limit: float, alpha: float, n: int) -> float:
    """The exact 0/1 test's catch rate at 2 x the limit, summed over every outcome."""
    return exact_catch_rate(n, p_good + 2.0 * limit, p_good, limit, alpha)


def sample_sizes(
    settings: Settings,
    report: Report,
    cals: dict[tuple[int, int], Calibration],
    gate: Gate,
) -> None:
    trials = max(100, settings.side_trials // 5)
    report.heading("G. Queries for 80% detection at 2 x the limit: the gate's test and the t-test")
    report.text(
        "Per (metric, model): the fewest queries at which the test fails a true worsening "
        "of 2 x the limit 80% of the time, found by doubling from 10 then bisection to "
        f"within 5%; each n tried is {trials} fresh samples of the model (both tests on the "
        "same samples), except the gate's exact 0/1 test, whose rate is computed exactly "
        "(`exact_power.exact_catch_rate`). ratio: gate / t-test (> 1: the gate needs more "
        "queries). The t-test is not valid at every n (its false-fail rate at the limit is "
        "in section B); it is the yardstick, not an alternative."
    )
    rows = []
    for i, metric in enumerate(METRICS):
        for j, model in enumerate(models_of(metric)):
            drop = cals[(i, j)].drop_for(2.0 * metric.limit)
            if drop is None:
                rows.append([metric.key, model.key, "n/a", "n/a", "n/a"])
                continue
            drawn = ModelSamples(settings, i, j, drop, trials)
            t_rate = functools.partial(t_test_rate, drawn, metric.limit, settings.alpha)
            if model.flips is not None:
                gate_rate = functools.partial(
                    exact_rate, model.flips / 2.0, metric.limit, settings.alpha
                )
            else:
                gate_rate = functools.partial(gate_fail_rate, gate, drawn, metric.limit)
            ours = queries_for_power(gate_rate)
            theirs = queries_for_power(t_rate)
            ratio = "n/a" if ours is None or theirs is None else f"{ours / theirs:.2f}"
            rows.append(
                [
                    metric.key,
                    model.key,
                    "> 20000" if ours is None else str(ours),
                    "> 20000" if theirs is None else str(theirs),
                    ratio,
                ]
            )
    report.table(["metric", "model", "n gate", "n t-test", "ratio"], rows)


def scifact_shaped(rng: np.random.Generator, n: int, trend: float) -> tuple[FloatArray, FloatArray]:
    """Per-query nDCG@10 of two retrievers shaped like SciFact's: 35% of queries score 0
    in both, 25% score 1 in both, the rest graded and correlated (a shared level, each
    retriever's own noise, a third of them unchanged), `trend` subtracted from "after"
    on the graded ones."""
    kind = rng.choice(3, size=n, p=[0.35, 0.25, 0.40])
    level = rng.uniform(0.15, 0.95, size=n)
    before = np.clip(level + rng.normal(0.0, 0.08, size=n), 0.0, 1.0)
    moved = np.clip(level + rng.normal(0.0, 0.08, size=n) - trend, 0.0, 1.0)
    after = np.where(rng.random(n) < 1.0 / 3.0, before, moved)
    before = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, before))
    after = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, after))
    return np.round(before, 4).astype(np.float64), np.round(after, 4).astype(np.float64)


def interval_widths(settings: Settings, report: Report) -> None:
    n, limit, draws = 300, 0.05, 5
    report.heading("H. Interval widths on SciFact-shaped nDCG@10")
    report.text(
        f"{n} queries (see `scifact_shaped`): 35% score 0 in both runs, 25% score 1 in "
        "both, 40% graded and correlated (a third of those unchanged). gate: high - low of "
        f"`stats.margin_tests` (limit {limit}, alpha {settings.alpha}, its one-sided bounds); "
        "t: 2 t_(1 - alpha) sd / sqrt(n), the t-interval at the same level. Target: "
        "ratio <= 1.3."
    )
    rows = []
    for trend in (0.0, 0.05):
        for draw in range(draws):
            before, after = scifact_shaped(rng_for(settings, 8, draw, int(trend * 100)), n, trend)
            tested = stats.margin_tests(before, after, [limit], alpha=settings.alpha)[0]
            ours = tested.high - tested.low
            theirs = t_interval_width(before - after, settings.alpha)
            rows.append(
                [
                    f"{trend:.2f}",
                    str(draw),
                    f"{tested.worsening:+.4f}",
                    f"{ours:.4f}" + (" (open)" if tested.low_open or tested.high_open else ""),
                    f"{theirs:.4f}",
                    f"{ours / theirs:.2f}",
                ]
            )
    report.table(["trend", "draw", "worsening", "gate width", "t width", "ratio"], rows)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--trials", type=int, default=2_000, help="samples at 1 x the limit (and per family)"
    )
    parser.add_argument(
        "--side-trials", type=int, default=1_000, help="samples at the other levels"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulations")
    parser.add_argument("--calibration-draws", type=int, default=2_000_000)
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    parser.add_argument("--quick", action="store_true", help="smoke run: small grid, few trials")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.process_time()
    if args.quick:
        settings = Settings(200, 100, args.seed, QUICK_SIZES, 200_000, (100,))
    else:
        settings = Settings(
            args.trials, args.side_trials, args.seed, SIZES, args.calibration_draws, POWER_SIZES
        )
    report = Report()
    report.text(
        f"llm_eval/stats.py, bounds.py, exact_test.py, betting.py SHA-256 {STATS_SHA256[:16]}, "
        f"BET_CAP {betting.BET_CAP}, BET_ORDERS {betting.BET_ORDERS}, "
        f"POWER_SIMULATIONS {detection.POWER_SIMULATIONS}"
    )
    gate = Gate(settings.alpha)
    seconds: list[tuple[str, float]] = []

    def timed(name: str, run: Callable[[], Any]) -> Any:
        start = time.process_time()
        result = run()
        seconds.append((name, time.process_time() - start))
        print(f"[{name}: {seconds[-1][1]:.1f} CPU s]", file=sys.stderr, flush=True)
        return result

    cals = timed("A", lambda: calibrations(settings, report))
    flags = timed("B", lambda: error_rates(settings, report, cals, gate))
    timed("C", lambda: recheck(settings, report, cals, gate, flags))
    timed("D", lambda: power_statement(settings, report, cals, gate))
    timed("E", lambda: holm_slices(settings, report, cals, gate))
    timed("F", lambda: gate_sized(settings, report))
    timed("G", lambda: sample_sizes(settings, report, cals, gate))
    timed("H", lambda: interval_widths(settings, report))
    total = time.process_time() - started
    report.heading("CPU time")
    report.table(
        ["section", "CPU s"],
        [*([name, f"{s:.1f}"] for name, s in seconds), ["total", f"{total:.1f}"]],
    )
    if args.markdown:
        command = " ".join(["python", *sys.argv])
        header = [
            "# Gate soundness: error rates, power statement, speed",
            "",
            f"Produced by `{command}` on {datetime.date.today().isoformat()} "
            f"({total:,.0f} CPU seconds), measuring `llm_eval/stats.py`, `bounds.py`, "
            f"`exact_test.py` and `betting.py` with SHA-256 `{STATS_SHA256[:16]}` "
            f"(BET_CAP {betting.BET_CAP}, BET_ORDERS {betting.BET_ORDERS}, "
            f"POWER_SIMULATIONS {detection.POWER_SIMULATIONS}). What every section means: the "
            "docstring of `scripts/bench_gate_soundness.py`.",
            "",
            "Whether the power statement is honest when the churn is only estimated from "
            "the data (its drop against the gate's real catch rate, over many observed "
            "samples): [The power statement, checked](power-statement.md).",
            "",
        ]
        args.markdown.write_text("\n".join(header + report.markdown) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
