"""scripts/bench_graded_tests.py: the tests it sets beside the gate's are what they say.

The Hoeffding–Bentkus bound must bound the real tail (checked against the exact tail of
the two-point sums that attain it and of a skewed three-point law), and the figures the
page docs/graded-tests.md prints must come from the gate's own interval.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import script
from scipy import stats as sp

from llm_eval.stats import margin_tests

bench = script("bench_graded_tests")


def _exact_tail(values: np.ndarray, weights: np.ndarray, n: int, x: float) -> float:
    """P(sum of n draws >= x) for a law on a few points, by convolving the pmf."""
    grid = {0.0: 1.0}
    for _ in range(n):
        nxt: dict[float, float] = {}
        for total, p in grid.items():
            for v, w in zip(values, weights, strict=True):
                key = round(total + v, 9)
                nxt[key] = nxt.get(key, 0.0) + p * w
        grid = nxt
    return sum(p for total, p in grid.items() if total >= x - 1e-12)


@pytest.mark.parametrize("n", [5, 12, 30])
def test_the_bentkus_bound_is_at_least_the_exact_tail_of_a_skewed_law(n: int) -> None:
    # mean 0: a rare large loss (1.0 w.p. 0.05) against many small gains
    values = np.array([1.0, -0.05 / 0.95 * 0.4, -0.05 / 0.95 * 1.6])
    weights = np.array([0.05, 0.475, 0.475])
    assert abs(float(values @ weights)) < 1e-12
    variance = float((values**2) @ weights)
    for x in (0.5, 1.0, 2.0, 3.0):
        exact = _exact_tail(values, weights, n, x)
        bound = bench.binomial_tail_bound(x, n, variance, 1.0)
        assert exact <= bound + 1e-12
        assert bound <= 1.0


def test_the_bentkus_bound_is_within_its_constant_of_the_binomial_tail() -> None:
    n, p, b = 200, 0.1, 0.9  # the two-point law: b w.p. p, else -p b / (1 - p); mean 0
    variance = p * b * b / (1 - p)
    low = variance / b
    for k in (30, 35, 40):
        x = b * k - low * (n - k)
        exact = float(sp.binom.sf(k - 1, n, p))
        bound = bench.binomial_tail_bound(x, n, variance, b)
        assert exact <= bound <= math.e * exact * 1.05


def test_the_variance_bound_covers_the_mean_of_values_in_the_unit_interval() -> None:
    rng = np.random.default_rng(3)
    misses = 0
    for _ in range(300):
        z = (rng.random(100) < 0.05).astype(float)  # mean 0.05
        misses += bench.mean_upper_bound(z, 0.05) < 0.05
    assert misses <= 0.05 * 300 + 3 * math.sqrt(300 * 0.05)


def test_the_page_measures_the_gate_s_own_interval() -> None:
    rng = np.random.default_rng(0)
    a, b = bench.scifact_pair(rng, 300, 0.4)
    test = margin_tests(a, b, [0.0], alpha=bench.ALPHA)[0]
    assert bench.gate_width(a, b) == pytest.approx(test.high - test.low)
    ratio = bench.gate_width(a, b) / bench.t_width(a - b)
    assert 1.0 < ratio < 2.0  # docs/graded-tests.md: 1.5-1.6x at 300 queries, 40% moving
