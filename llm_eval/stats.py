"""Paired statistics for the gate: is a change beyond the allowed limit, within it, or
can the data not tell?

The gate compares a change ("after") with the baseline ("before") query by query, so
every test here is paired: it works on the per-query worsening `before - after`, a
number in [-w, w] when the metric's scores lie in an interval of width w.

Every bound and p-value here is valid at every number of queries and for every
distribution of per-query scores, not only asymptotically:

- 0/1 scores (hit rate, recall@k with one relevant document) get an exact
  unconditional test (`exact_test.py`: Tango's score statistic with Berger & Boos's
  p-value). At a given number of changed queries the p-value falls as more of them
  went bad, so the test rejects when the bad count reaches a threshold that depends
  on the changed count (`rejection_threshold`), which the power statement sums over
  exactly.
- Graded scores (MRR, nDCG, recall with several relevant documents) get the betting
  test of a bounded mean (`betting.py`, Waudby-Smith & Ramdas 2024): 1 / wealth is a
  p-value by Ville's inequality.

Bounds are found by bisection on the same p-value (`bounds.py`), bracketed at the
limit first, so a bound lies beyond the limit exactly when that side's test rejects.

Across the slices of one gate, p-values are Holm-corrected (`holm`); `holm_levels`
gives each slice the level at which its interval agrees with that decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from llm_eval.betting import Betting
from llm_eval.bounds import ColumnTest, FloatArray
from llm_eval.exact_test import ExactPairs, log_factorials


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
