"""Paired statistics: exact tests against hand-worked cases and scipy, resampling
properties, Holm, and the sizing formulas."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_eval.stats import (
    PairedResult,
    detectable_drop,
    format_p,
    holm,
    is_binary,
    margin_tests,
    mcnemar_exact,
    paired_tests,
    queries_to_catch,
    regularized_beta,
)

# z_{0.975} and z_{0.8}, from tables, not from the code under test.
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143


# --- McNemar -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hit_to_miss", "miss_to_hit", "expected"),
    [
        (0, 0, 1.0),
        (1, 1, 1.0),
        (5, 0, 2 * 0.5**5),  # 0.0625
        (0, 5, 2 * 0.5**5),
        (3, 0, 0.25),
        (6, 1, 2 * (1 + 7) / 2**7),  # P(X <= 1), X ~ Bin(7, 1/2) = 8/128
        (10, 0, 2 / 1024),
        (4, 4, 1.0),
        (2, 3, 1.0),  # 2 P(X <= 2) = 2 * 16/32 = 1
    ],
)
def test_mcnemar_hand_worked(hit_to_miss: int, miss_to_hit: int, expected: float) -> None:
    assert mcnemar_exact(hit_to_miss, miss_to_hit) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("hit_to_miss", "miss_to_hit"),
    [
        *[(1, 0), (7, 2), (2, 7), (12, 37), (60, 30), (100, 70)],
        *[(400, 350), (350, 400), (0, 400), (1000, 900), (5000, 5200), (50_000, 49_000)],
    ],
)
def test_mcnemar_matches_scipy_binomtest(hit_to_miss: int, miss_to_hit: int) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.binomtest(hit_to_miss, hit_to_miss + miss_to_hit, 0.5).pvalue
    assert mcnemar_exact(hit_to_miss, miss_to_hit) == pytest.approx(expected, rel=1e-9)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match=r"^discordant counts must be non-negative$"):
        mcnemar_exact(-1, 3)


# --- t-test and the incomplete beta ---------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "x"),
    list(
        itertools.product(
            [0.5, 1.0, 2.5, 10.0, 15.0, 100.0, 1e3, 1e5],
            [0.5, 1.0, 2.5, 10.0, 15.0, 100.0, 1e3, 1e5],
            [1e-8, 1e-3, 0.1, 0.3, 0.5, 0.7, 0.99, 0.999999],
        )
    ),
)
def test_regularized_beta_matches_scipy(a: float, b: float, x: float) -> None:
    special = pytest.importorskip("scipy.special")
    assert regularized_beta(a, b, x) == pytest.approx(
        special.betainc(a, b, x), rel=1e-9, abs=1e-300
    )


def test_regularized_beta_edges() -> None:
    assert regularized_beta(2.0, 3.0, 0.0) == 0.0
    assert regularized_beta(2.0, 3.0, 1.0) == 1.0
    assert regularized_beta(1.0, 1.0, 0.25) == pytest.approx(0.25, rel=1e-14)


# --- Holm ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "adjusted"),
    [
        ([], []),
        ([0.2], [0.2]),
        # sorted 0.005 0.01 0.03 0.04 -> x4 x3 x2 x1 = 0.02 0.03 0.06 0.04 -> running max
        ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        # sorted 0.2 0.5 0.9 -> 0.6 1.0 0.9 -> running max, capped
        ([0.5, 0.2, 0.9], [1.0, 0.6, 1.0]),
        ([0.01, 0.01, 0.5], [0.03, 0.03, 0.5]),
        ([0.0, 1.0], [0.0, 1.0]),
    ],
)
def test_holm_hand_worked(raw: list[float], adjusted: list[float]) -> None:
    assert holm(raw) == pytest.approx(adjusted, rel=1e-12)


@given(st.lists(st.floats(0.0, 1.0), max_size=30))
def test_holm_is_monotone_capped_and_keeps_order(raw: list[float]) -> None:
    adjusted = holm(raw)
    assert len(adjusted) == len(raw)
    for p, q in zip(raw, adjusted, strict=True):
        assert p <= q <= 1.0
        assert q == 1.0 or q >= min(1.0, p)
    for i, j in itertools.combinations(range(len(raw)), 2):
        if raw[i] <= raw[j]:
            assert adjusted[i] <= adjusted[j]
        else:
            assert adjusted[i] >= adjusted[j]
    if raw:
        assert min(adjusted) == pytest.approx(min(1.0, min(raw) * len(raw)))


@pytest.mark.parametrize("bad", [[0.1, 1.5], [-0.01], [math.nan]])
def test_holm_rejects_values_that_are_not_p_values(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"^p-values must lie in \[0, 1\]$"):
        holm(bad)


# --- is_binary -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ([0, 1, 1], [1, 1, 0], True),
        ([0.0, 1.0], [1.0, 1.0], True),
        ([True, False], [False, False], True),
        ([0, 1, 1], [1, 0.5, 0], False),
        ([0, 0.2], [0, 1], False),
        ([1, 2], [1, 1], False),
        ([0.25, 0.5], [0.25, 0.5], False),
    ],
)
def test_is_binary(before: list[float], after: list[float], expected: bool) -> None:
    assert is_binary(np.array(before), np.array(after)) is expected


# --- paired_tests --------------------------------------------------------------------


def test_binary_column_uses_mcnemar_with_exact_counts() -> None:
    before = np.array([1, 1, 1, 1, 1, 0, 0, 1, 0, 1], dtype=float)
    after = np.array([0, 0, 0, 1, 1, 0, 1, 0, 0, 1], dtype=float)
    [result] = paired_tests(before, after)
    assert result.method == "mcnemar-exact"
    assert (result.hit_to_miss, result.miss_to_hit) == (4, 1)
    assert result.p_value == mcnemar_exact(4, 1)
    assert (result.n, result.mean_before, result.mean_after) == (10, 0.7, 0.4)
    assert result.delta == pytest.approx(-0.3)


def test_columns_are_tested_each_by_its_kind() -> None:
    rng = np.random.default_rng(7)
    hits_before = (rng.random(300) < 0.8).astype(float)
    hits_after = np.where(rng.random(300) < 0.1, 1.0 - hits_before, hits_before)
    mrr_before = rng.random(300)
    mrr_after = np.clip(mrr_before + rng.normal(0, 0.1, 300), 0, 1)
    before = np.column_stack([mrr_before, hits_before])
    after = np.column_stack([mrr_after, hits_after])
    mrr, hits = paired_tests(before, after)
    assert (mrr.method, mrr.hit_to_miss, mrr.miss_to_hit) == ("sign-flip", None, None)
    assert hits.method == "mcnemar-exact"
    assert hits.hit_to_miss == int(np.sum((hits_before == 1) & (hits_after == 0)))
    assert hits.miss_to_hit == int(np.sum((hits_before == 0) & (hits_after == 1)))
    assert mrr.delta == pytest.approx(mrr_after.mean() - mrr_before.mean())


def test_columns_share_one_bootstrap_resampling() -> None:
    rng = np.random.default_rng(3)
    before = rng.random((150, 3))
    after = before + rng.normal(0, 0.1, (150, 3))
    together = paired_tests(before, after, resamples=2000, seed=11)
    for j, result in enumerate(together):
        [alone] = paired_tests(before[:, j], after[:, j], resamples=2000, seed=11)
        # the same counts; only the matrix product's rounding may differ
        assert alone.ci_low == pytest.approx(result.ci_low, rel=1e-12)
        assert alone.ci_high == pytest.approx(result.ci_high, rel=1e-12)


def test_same_seed_same_numbers_other_seed_other_numbers() -> None:
    rng = np.random.default_rng(1)
    before = rng.random((120, 2))
    after = before + rng.normal(0.01, 0.1, (120, 2))
    first = paired_tests(before, after, resamples=3000, seed=5)
    assert paired_tests(before, after, resamples=3000, seed=5) == first
    other = paired_tests(before, after, resamples=3000, seed=6)
    assert [(r.ci_low, r.ci_high, r.p_value) for r in other] != [
        (r.ci_low, r.ci_high, r.p_value) for r in first
    ]
    assert all(isinstance(r, PairedResult) for r in first)


def test_bootstrap_interval_covers_the_true_delta_at_the_stated_rate() -> None:
    rng = np.random.default_rng(2)
    trials, n, true_delta, sigma = 300, 400, 0.05, 0.2
    covered = 0
    for seed in range(trials):
        before = rng.random(n)
        after = before + rng.normal(true_delta, sigma, n)
        [result] = paired_tests(before, after, resamples=2000, seed=seed)
        covered += result.ci_low < true_delta < result.ci_high
        assert result.ci_low < result.delta < result.ci_high
    tolerance = 3.5 * math.sqrt(0.95 * 0.05 / trials)
    assert abs(covered / trials - 0.95) < tolerance


def test_bootstrap_interval_of_a_large_sample_is_the_normal_one() -> None:
    rng = np.random.default_rng(2)
    n, sigma = 5000, 0.2
    before = rng.random(n)
    after = before + rng.normal(0.05, sigma, n)
    [result] = paired_tests(before, after)
    normal_width = 2 * Z_975 * sigma / math.sqrt(n)
    assert result.ci_high - result.ci_low == pytest.approx(normal_width, rel=0.05)
    assert (result.ci_low + result.ci_high) / 2 == pytest.approx(result.delta, abs=0.001)


def test_interval_widens_with_confidence() -> None:
    rng = np.random.default_rng(4)
    before = rng.random(200)
    after = before + rng.normal(0, 0.1, 200)
    [narrow] = paired_tests(before, after, confidence=0.8)
    [wide] = paired_tests(before, after, confidence=0.99)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


@pytest.mark.parametrize(
    "scores",
    [np.array([0.2, 0.9, 0.0, 0.5]), np.array([1.0, 0.0, 1.0, 1.0]), np.zeros(3)],
)
def test_no_change_gives_zero_interval_and_p_one(scores: np.ndarray) -> None:
    [result] = paired_tests(scores, scores.copy())
    assert (result.delta, result.ci_low, result.ci_high, result.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_sign_flip_finds_a_clear_shift() -> None:
    rng = np.random.default_rng(0)
    before = rng.random(200)
    after = before + rng.normal(0.1, 0.1, 200)
    [result] = paired_tests(before, after)
    assert result.method == "sign-flip"
    assert result.p_value < 0.001
    assert result.p_value == 1 / 10_001  # never 0: the observed sign pattern counts


def test_sign_flip_on_symmetric_noise_is_not_significant() -> None:
    rng = np.random.default_rng(8)
    before = rng.random(200)
    after = before + rng.normal(0.0, 0.1, 200)
    [result] = paired_tests(before, after)
    assert result.p_value > 0.1


def test_sign_flip_rejects_at_the_nominal_rate_under_no_change() -> None:
    rng = np.random.default_rng(12)
    trials, alpha = 600, 0.05
    rejections = 0
    for seed in range(trials):
        noise = rng.normal(0.0, 0.1, 60)
        [result] = paired_tests(np.full(60, 0.5), 0.5 + noise, resamples=1000, seed=seed)
        rejections += result.p_value < alpha
    # The exact size is alpha; 3.5 Monte Carlo standard errors either side.
    tolerance = 3.5 * math.sqrt(alpha * (1 - alpha) / trials)
    assert abs(rejections / trials - alpha) < tolerance


def test_sign_flip_agrees_with_full_enumeration_including_ties() -> None:
    # 12 changed queries with repeated values (reciprocal ranks): many tied sums.
    diffs = np.array([0.5, 0.5, -0.5, 1.0, -1.0, 0.5, 1 / 3, -1 / 3, 0.5, 0.25, -0.25, 0.5])
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=diffs.size)))
    observed = abs(diffs.sum())
    exact = np.mean(np.abs(signs @ diffs) >= observed - 1e-12)
    before = np.full(20, 0.5)
    after = before.copy()
    after[4:16] += diffs  # 8 unchanged queries around them, which must not matter
    [result] = paired_tests(before, after, resamples=40_000, seed=1)
    assert result.p_value == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 40_000))


def test_bootstrap_spread_matches_the_standard_error() -> None:
    # Percentile interval of a mean of n draws: about mean ± z sd/sqrt(n) (ddof=0).
    diffs = np.tile([-1.0, 0.0, 0.0, 2.0], 100)
    [result] = paired_tests(np.zeros(diffs.size), diffs, resamples=20_000, seed=3)
    half_width = Z_975 * diffs.std() / math.sqrt(diffs.size)
    assert result.ci_low == pytest.approx(diffs.mean() - half_width, abs=0.01)
    assert result.ci_high == pytest.approx(diffs.mean() + half_width, abs=0.01)


def test_many_queries_use_wide_indices() -> None:
    rng = np.random.default_rng(9)
    before = rng.random(70_000)
    after = before + rng.normal(0.0, 0.1, 70_000)
    [result] = paired_tests(before, after, resamples=50)
    assert result.ci_low < result.delta < result.ci_high


@pytest.mark.parametrize(
    ("before", "after", "kwargs", "message"),
    [
        (
            np.zeros((3, 2)),
            np.zeros((3, 3)),
            {},
            "before and after must be paired (n_queries, n_metrics) arrays of the same "
            "shape, got (3, 2) and (3, 3)",
        ),
        (np.zeros(0), np.zeros(0), {}, "no paired queries to compare"),
        (np.array([0.5, math.nan]), np.zeros(2), {}, "scores must be finite numbers"),
        (np.zeros(2), np.zeros(2), {"resamples": 0}, "resamples must be at least 1, got 0"),
        (
            np.zeros(2),
            np.zeros(2),
            {"confidence": 95},
            "confidence must be between 0 and 1, got 95",
        ),
    ],
)
def test_paired_tests_rejects_bad_input(
    before: np.ndarray, after: np.ndarray, kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError) as error:
        paired_tests(before, after, **kwargs)
    assert str(error.value) == message


# --- sizing --------------------------------------------------------------------------


# --- format_p ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (0.0, "p < 0.001"),
        (0.00099, "p < 0.001"),
        (0.001, "p = 0.001"),
        (0.0344, "p = 0.034"),
        (0.05, "p = 0.050"),
        (1.0, "p = 1.000"),
    ],
)
def test_format_p(p: float, text: str) -> None:
    assert format_p(p) == text


@pytest.mark.parametrize("n", [30, 176, 1_000, 1_400])
def test_queries_to_catch_inverts_detectable_drop(n: int) -> None:
    drop = detectable_drop(n, 0.1, 0.03, 0.05)
    assert drop > 0.03
    assert queries_to_catch(drop, 0.1, 0.03, 0.05) in (n, n + 1)  # n rounded up
    assert detectable_drop(4 * n, 0.1, 0.03, 0.05) < drop  # more queries, smaller drops


def test_queries_to_catch_needs_a_drop_beyond_the_margin() -> None:
    with pytest.raises(ValueError, match="must exceed the margin"):
        queries_to_catch(0.03, 0.0, 0.03, 0.05)


def test_tango_bounds_are_where_the_score_test_decides() -> None:
    """The interval and the p-values come from one procedure: a bound lies beyond the
    margin exactly when that side's p-value is below alpha."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(30, 400))
        before = (rng.random(n) < 0.8).astype(float)
        after = np.where(rng.random(n) < 0.1, 1.0 - before, before)
        margin = float(rng.choice([0.0, 0.01, 0.03, 0.05]))
        test = margin_tests(before, after, [margin], alpha=0.05)[0]
        assert test.method == "tango-score"
        assert (test.low > margin) == (test.p_beyond < 0.05)
        assert (test.high < margin) == (test.p_within < 0.05)
        assert test.low <= test.worsening <= test.high


def test_with_no_change_a_small_sample_cannot_tell_and_a_large_one_passes() -> None:
    hits = np.ones(24)
    small = margin_tests(hits, hits, [0.03], alpha=0.05)[0]
    assert small.low < 0.03 < small.high  # 24 unchanged queries: cannot tell
    hits = np.ones(200)
    large = margin_tests(hits, hits, [0.03], alpha=0.05)[0]
    assert large.high < 0.03  # 200 unchanged queries: within the limit
