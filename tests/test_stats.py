"""Paired statistics: the exact test against full enumeration, validity at every size
(exhaustive for small 0/1 samples, simulated for skewed graded ones), bounds that agree
with the decisions, Holm and its levels, and the sizing formulas."""

from __future__ import annotations

import functools
import itertools
import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from llm_eval import betting, detection, exact_power, exact_test
from llm_eval.betting import Betting
from llm_eval.detection import detectable_worsening, queries_to_catch
from llm_eval.exact_power import exact_catch_rate, rejection_threshold
from llm_eval.exact_test import ExactPairs, share_grid, tango_z
from llm_eval.stats import (
    format_p,
    holm,
    holm_levels,
    is_binary,
    margin_tests,
    quantile_interval,
)

# z_{0.975} and z_{0.8}, from tables, not from the code under test.
Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143


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


def test_holm_levels_agree_with_holm() -> None:
    """An interval at its Holm level excludes the limit exactly when Holm rejects."""
    rng = np.random.default_rng(7)
    for _ in range(500):
        raw = list(rng.choice([0.001, 0.004, 0.01, 0.02, 0.04, 0.2, 0.6], size=rng.integers(1, 8)))
        adjusted, levels = holm(raw), holm_levels(raw, 0.05)
        for p, a, level in zip(raw, adjusted, levels, strict=True):
            assert (p <= level) == (a <= 0.05)


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


# --- the exact unconditional test ------------------------------------------------------


def _trinomial_tail(n: int, bad: int, good: int, delta: float, share: float) -> float:
    """P(T >= T_observed) by enumerating every (bad, good) outcome: the definition."""
    observed = tango_z([bad], [good], n, delta)[0]
    p_bad, p_good = (share + delta) / 2, (share - delta) / 2
    total = 0.0
    for b, c in product(range(n + 1), repeat=2):
        if b + c > n or tango_z([b], [c], n, delta)[0] < observed - 1e-9 * max(1, abs(observed)):
            continue
        log_p = (
            math.lgamma(n + 1)
            - math.lgamma(b + 1)
            - math.lgamma(c + 1)
            - math.lgamma(n - b - c + 1)
        )
        log_p += b * math.log(p_bad) if b else 0.0
        log_p += c * math.log(p_good) if c else 0.0
        log_p += (n - b - c) * math.log1p(-share)
        total += math.exp(log_p)
    return total


@pytest.mark.parametrize(
    ("n", "bad", "good", "delta"),
    [(30, 3, 1, 0.03), (40, 0, 0, 0.03), (25, 5, 0, 0.1), (50, 2, 6, -0.05), (12, 4, 4, 0.0)],
)
def test_exact_tail_matches_full_enumeration(n: int, bad: int, good: int, delta: float) -> None:
    test = ExactPairs(n, bad, good)
    counts = np.arange(n + 1)
    observed = float(tango_z([bad], [good], n, delta)[0])
    thresholds = test._thresholds(counts, delta, observed)
    for share in (0.15, 0.4, 0.8):
        fast = test.region_probability(np.array([share]), delta, counts, thresholds)[0]
        assert fast == pytest.approx(_trinomial_tail(n, bad, good, delta, share), rel=1e-9)


def test_unchanged_small_sample_p_value_is_hand_worked() -> None:
    """No change among 30 queries: the worst case is a share 0.03 of queries losing a
    hit, which leaves all 30 unchanged with probability 0.97^30 (0.03 lies in the 99.9%
    interval of the share changed, [0, 0.224]), plus gamma = 0.001."""
    test = ExactPairs(30, 0, 0)
    assert test.p_within(0.03) == pytest.approx(0.97**30 + 0.001, rel=1e-6)


@pytest.mark.parametrize("n", [15, 24])
@pytest.mark.parametrize("margin", [0.0, 0.03, 0.1])
def test_exact_test_never_fails_a_drop_at_the_limit_more_than_alpha(n: int, margin: float) -> None:
    """The size of the test, exhaustively: the probability, over every outcome, that a
    true worsening equal to the margin is called beyond it, at many churn levels."""
    alpha = 0.05
    rejected = [
        (b, c)
        for b in range(n + 1)
        for c in range(n + 1 - b)
        if ExactPairs(n, b, c).p_beyond(margin) <= alpha
    ]
    for share in (margin + 0.002, margin + 0.02, 0.2, 0.5, 0.9):
        p_bad, p_good = (share + margin) / 2, (share - margin) / 2
        size = sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(b + 1)
                - math.lgamma(c + 1)
                - math.lgamma(n - b - c + 1)
                + b * math.log(p_bad)
                + (c * math.log(p_good) if c else 0.0)
                + (n - b - c) * math.log1p(-share)
            )
            for b, c in rejected
        )
        assert size <= alpha + 1e-9


# --- betting ---------------------------------------------------------------------------


def test_betting_keeps_its_level_on_a_small_skewed_scope() -> None:
    """n = 30, most queries unchanged, a few lose a lot, many gain a little: a true mean
    worsening exactly at the margin is called beyond it at most alpha of the time."""
    rng = np.random.default_rng(11)
    margin, alpha, trials = 0.05, 0.05, 2000
    values = np.array([0.0, 0.9, -0.02])
    weights = np.array([0.0, 0.0, 0.0])
    # P(0.9) = a, P(-0.02) = b, rest 0 with 0.9 a - 0.02 b = margin
    b_share = 0.5
    a_share = (margin + 0.02 * b_share) / 0.9
    weights[:] = [1 - a_share - b_share, a_share, b_share]
    failed = 0
    for _ in range(trials):
        diffs = rng.choice(values, size=30, p=weights)
        failed += Betting(diffs, alpha, 0, 1.0).p_beyond(margin) <= alpha
    rate = failed / trials
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


@pytest.mark.parametrize("shape", [(16, 7), (16, 3_000), (2, 16, 500)])
def test_a_large_scopes_bets_made_in_place_are_the_bets_to_the_bit(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.random.default_rng(5).uniform(-1.0, 1.0, size=shape)
    apart = betting._plug_in_bets(x.copy(), 0.05)
    monkeypatch.setattr(betting, "_ONE_PASS", 0)  # every scope "large": bets in place
    in_place = betting._plug_in_bets(x.copy(), 0.05)
    assert in_place.tobytes() == apart.tobytes()


def test_betting_finds_a_clear_drop() -> None:
    rng = np.random.default_rng(2)
    before = rng.random(300)
    after = before - 0.2 * (rng.random(300) < 0.8)
    test = margin_tests(before, after, [0.05], alpha=0.05)[0]
    assert test.method == "betting"
    assert test.p_beyond <= 0.05 < test.low / 0.05  # low beyond the margin


# --- bounds and decisions ---------------------------------------------------------------


class _Unsteered(Betting):
    """The betting test searched by plain halving, as before the wealth steered it."""

    def evidence(self, side: float) -> None:
        return None


def test_a_bound_steered_by_the_wealth_is_the_halvings_bound_in_fewer_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regula falsi on the log wealth only narrows where the halving asks the p-value: the
    bounds are the plain halving's to the bit, on tiny, skewed, sparse and dense scopes,
    and the passes over the queries fall to under half."""
    passes = {"count": 0}
    wealth = betting._log_mean_wealth

    def counted(*args: object) -> object:
        passes["count"] += 1
        return wealth(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(betting, "_log_mean_wealth", counted)
    rng = np.random.default_rng(11)
    plain_passes = steered_passes = 0
    for trial in range(120):
        n = int(rng.choice([2, 3, 7, 40, 500, 5_000]))
        if trial % 3 == 0:  # sparse: a few queries move a whole step
            scaled = np.where(rng.random(n) < 0.05, rng.choice([-1.0, 1.0], n), 0.0)
        elif trial % 3 == 1:  # skewed graded
            scaled = np.clip(rng.exponential(0.1, n) - 0.05, -1.0, 1.0)
        else:
            scaled = rng.uniform(-1.0, 1.0, n)
        span = float(rng.choice([1.0, 0.5]))
        margin = float(rng.uniform(-0.2, 0.2)) * span
        level = float(rng.choice([0.05, 0.0125]))
        passes["count"] = 0
        plain = _Unsteered(scaled, 0.05, 3, span).bounds(margin, level)
        plain_passes += passes["count"]
        passes["count"] = 0
        steered = Betting(scaled, 0.05, 3, span).bounds(margin, level)
        steered_passes += passes["count"]
        assert steered == plain
    assert steered_passes < plain_passes / 2


def test_bounds_are_where_the_tests_decide() -> None:
    """The interval and the p-values come from one procedure: a bound lies beyond the
    margin exactly when that side's p-value is at most alpha."""
    rng = np.random.default_rng(3)
    for trial in range(60):
        n = int(rng.integers(30, 300))
        before = (rng.random(n) < 0.8).astype(float)
        if trial % 2:
            before = before * rng.random(n)  # graded
        after = np.where(rng.random(n) < 0.1, rng.random(n), before)
        margin = float(rng.choice([0.0, 0.01, 0.03, 0.05]))
        test = margin_tests(before, after, [margin], alpha=0.05)[0]
        assert (test.low > margin) == (test.p_beyond <= 0.05)
        assert (test.high < margin) == (test.p_within <= 0.05)
        assert -1.0 <= test.low <= test.high <= 1.0


@settings(max_examples=60, deadline=None)  # each exact bound is a bisection of exact tails
@given(
    st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.2]), min_size=1, max_size=40),
    st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.2]), min_size=1, max_size=40),
)
def test_bounds_are_always_finite(before: list[float], after: list[float]) -> None:
    size = min(len(before), len(after))
    test = margin_tests(before[:size], after[:size], [0.03], alpha=0.05)[0]
    values = (test.low, test.high, test.p_beyond, test.p_within)
    assert all(math.isfinite(v) for v in values)


def test_one_changed_query_gives_a_finite_interval() -> None:
    """The case that made the old bootstrap-t interval infinite: one query slightly worse."""
    before = np.full(186, 0.5)
    after = before.copy()
    after[52] = 0.4
    test = margin_tests(before, after, [0.03], alpha=0.05)[0]
    assert math.isfinite(test.low) and math.isfinite(test.high)
    assert test.changed == 1


def test_with_no_change_a_small_sample_cannot_tell_and_a_large_one_passes() -> None:
    hits = np.ones(24)
    small = margin_tests(hits, hits, [0.03], alpha=0.05)[0]
    assert small.low < 0.03 < small.high  # 24 unchanged queries: the test cannot tell
    hits = np.ones(200)
    large = margin_tests(hits, hits, [0.03], alpha=0.05)[0]
    assert large.high < 0.03  # 200 unchanged queries: within the limit


# --- what a scope can tell --------------------------------------------------------------


def test_power_statement_of_an_exact_gate_is_met() -> None:
    """At the claimed drop, the exact test catches the drop about 4 times in 5."""
    n, margin = 200, 0.03
    before = np.ones(n)
    after = before.copy()
    after[:4] = 0.0
    after[4:8] = 1.0
    claimed = detectable_worsening(before, after, margin, 0.05)
    assert margin < claimed < 0.2
    rng = np.random.default_rng(5)
    churn = 4 / n / 2

    @functools.cache  # the 300 draws hold about 90 distinct outcomes
    def p_beyond(bad: int, good: int) -> float:
        return ExactPairs(n, bad, good).p_beyond(margin)

    caught = 0
    for _ in range(300):
        u = rng.random(n)
        bad = int(np.sum(u < churn + claimed))
        good = int(np.sum((u >= churn + claimed) & (u < 2 * churn + claimed)))
        caught += p_beyond(bad, good) <= 0.05
    assert 0.72 <= caught / 300 <= 0.9


def plain_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """The plug-in bets as Waudby-Smith & Ramdas write them, one array per step."""
    n = x.shape[-1]
    seen = np.arange(1, n + 1, dtype=np.float64)
    means = np.cumsum(x, axis=-1) / (seen + 1.0)
    variance = (1.0 + np.cumsum((x - means) ** 2, axis=-1)) / (seen + 1.0)
    before = np.concatenate([np.ones((*x.shape[:-1], 1)), variance[..., :-1]], axis=-1)
    return np.asarray(np.sqrt(2.0 * math.log(1.0 / alpha) / (n * before)))


def plain_log_wealth(x: np.ndarray, bets: np.ndarray, m: float, side: float) -> np.ndarray:
    capped = np.minimum(bets, betting.BET_CAP / (1.0 + side * m))
    logs = np.log1p(capped * side * (x - m)).sum(axis=-1)
    top = logs.max(axis=-1)
    return np.asarray(top + np.log(np.mean(np.exp(logs - top[..., None]), axis=-1)))


def plain_detectable(
    before: np.ndarray, after: np.ndarray, margin: float, alpha: float, simulations: int
) -> float:
    """The power simulation with every sample tested at every drop, in one batch."""
    rng = np.random.default_rng(1)  # seed 0 + 1, as `detectable_worsening` draws
    n = before.size
    worlds = rng.integers(0, n, size=(simulations, n))
    picks = rng.integers(0, n, size=(simulations, n))
    rows = np.array([world[pick] for world, pick in zip(worlds, picks, strict=True)])
    flips = rng.random((simulations, n)) < 0.5
    lose = rng.random((simulations, n))
    churn = np.where(flips, after[rows] - before[rows], before[rows] - after[rows])
    whole = np.maximum(before[rows], after[rows])
    mean_whole = float(np.maximum(before, after).mean())
    still = before[rows] == after[rows]
    world_still = (before == after)[worlds]
    steady = np.array(
        [
            np.mean(np.where(s, np.maximum(before, after)[w], 0.0))
            for s, w in zip(world_still, worlds, strict=True)
        ]
    )
    moving = np.array(
        [
            np.mean(np.where(s, 0.0, np.maximum(before, after)[w]))
            for s, w in zip(world_still, worlds, strict=True)
        ]
    )
    orders = betting._orders(n, 0)

    def power(drop: float) -> float:
        share = np.empty((simulations, n))
        for i in range(simulations):  # each world's unchanged queries lose first
            first = min(drop / steady[i], 1.0) if steady[i] > 0.0 else 1.0
            rest = min(max((drop - steady[i]) / moving[i], 0.0), 1.0) if moving[i] > 0 else 1.0
            share[i] = np.where(still[i], first, rest)
        x = np.where(lose < share, whole, churn)[:, orders]
        wealth = plain_log_wealth(x, plain_bets(x, alpha), margin, +1.0)
        return float(np.mean(wealth >= math.log(1.0 / alpha)))

    low = max(margin, 0.0)
    if mean_whole <= low or power(mean_whole) < detection.POWER:
        return math.inf
    inside, outside = mean_whole, low
    for _ in range(12):
        middle = (inside + outside) / 2.0
        inside, outside = (
            (middle, outside) if power(middle) >= detection.POWER else (inside, middle)
        )
    return inside


def graded_pair(n: int, changed: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Skewed graded scores (most near 0), `changed` of them redrawn."""
    rng = np.random.default_rng(seed)
    before = rng.random(n) ** 4
    after = before.copy()
    after[rng.choice(n, changed, replace=False)] = rng.random(changed)
    return before, after


@pytest.mark.parametrize(
    ("n", "changed"),
    [(2, 1), (5, 1), (30, 1), (30, 30), (60, 3), (200, 2), (200, 14), (500, 35)],
    ids=["n2", "n5", "n30-one", "n30-all", "n60", "n200-low-churn", "n200", "n500"],
)
@pytest.mark.parametrize("batch", ["one-sample", "all-samples"])
def test_power_simulation_equals_every_sample_at_every_drop(
    monkeypatch: pytest.MonkeyPatch, n: int, changed: int, batch: str
) -> None:
    """The simulation tests a few samples at a time and stops counting once the answer
    is settled; its figure is the one-batch, count-everything figure to the last bit,
    at small, skewed and low-churn sizes alike."""
    before, after = graded_pair(n, changed, seed=n + changed)
    monkeypatch.setattr(detection, "LARGE_GRADED", n + 1)  # the simulation at every size here
    if batch == "one-sample":
        monkeypatch.setattr(detection, "SIMULATION_ELEMENTS", 1)
    claimed = detectable_worsening(before, after, 0.05, 0.05, simulations=100)
    expected = plain_detectable(before, after, 0.05, 0.05, simulations=100)
    assert claimed == expected


@given(
    st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=40),
    st.sampled_from([0.01, 0.05, 0.2]),
    st.floats(-0.9, 0.9),
    st.sampled_from([1.0, -1.0]),
)
def test_bets_and_wealth_computed_in_place_are_the_plain_formulas(
    values: list[float], alpha: float, m: float, side: float
) -> None:
    x = np.array([values, values[::-1]])[None]  # (1, 2 orders, n)
    bets = betting._plug_in_bets(x, alpha)
    assert np.array_equal(bets, plain_bets(x, alpha))
    wealth = betting._log_mean_wealth(x, bets, m, side)
    assert np.array_equal(wealth, plain_log_wealth(x, bets, m, side))


def test_catches_needed_reads_the_rate_as_the_float_comparison() -> None:
    for simulations in (1, 3, 7, 100, 400, 401):
        needed = detection._catches_needed(simulations)
        assert needed / simulations >= detection.POWER
        assert (needed - 1) / simulations < detection.POWER


# --- sizing --------------------------------------------------------------------------


# --- format_p ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "method", "text"),
    [
        (0.0, "exact-unconditional", "p < 0.001"),
        (0.00099, "betting", "p < 0.001"),
        (0.001, "exact-unconditional", "p = 0.001"),
        (0.0344, "exact-unconditional", "p = 0.034"),
        (1.0, "exact-unconditional", "p = 1.000"),
        (0.034, "betting", "p ≤ 0.034"),
        (0.0341, "betting", "p ≤ 0.035"),
        (0.4999, "betting", "p ≤ 0.500"),
        (0.5, "betting", "p > 0.5"),
        (1.0, "betting", "p > 0.5"),
        (0.05, None, "p ≤ 0.050"),
    ],
)
def test_format_p_says_whether_p_is_exact_or_a_bound(p: float, method: str, text: str) -> None:
    assert format_p(p, method) == text


@pytest.mark.parametrize("n", [30, 176])
def test_queries_to_catch_inverts_the_detectable_drop(n: int) -> None:
    """0/1 scores, no churn: the exact power depends on the size alone, so the queries
    that catch the drop detectable at n are at most n, and catch it."""
    hits = np.ones(n)
    drop = detectable_worsening(hits, hits, 0.03, 0.05)
    needed = queries_to_catch(hits, hits, drop, 0.03, 0.05)
    assert needed is not None and n // 2 <= needed <= n
    at_needed = np.ones(needed)
    assert detectable_worsening(at_needed, at_needed, 0.03, 0.05) <= drop


def test_queries_to_catch_grow_as_the_drop_nears_the_margin() -> None:
    before, after = graded_pair(120, 12, seed=3)
    options = {"simulations": 100}
    far = queries_to_catch(before, after, 0.15, 0.03, 0.05, **options)
    near = queries_to_catch(before, after, 0.08, 0.03, 0.05, **options)
    assert far is not None and near is not None and far < near


def test_queries_to_catch_is_open_when_no_size_catches_the_drop() -> None:
    """A drop beyond what the scores can show (their mean is 0.01) is never caught."""
    scores = np.full(50, 0.01)
    assert queries_to_catch(scores, scores, 0.2, 0.005, 0.05, simulations=50, most=64) is None


def test_queries_to_catch_needs_a_drop_beyond_the_margin() -> None:
    hits = np.ones(10)
    with pytest.raises(ValueError, match="must exceed the margin"):
        queries_to_catch(hits, hits, 0.03, 0.03, 0.05)


def test_scores_outside_the_declared_range_are_refused() -> None:
    """An unbounded score (score discrimination) has no valid test here: refused, never
    scored with a wealth that is not a supermartingale."""
    with pytest.raises(ValueError, match=r"^per-query differences must lie within ±1$"):
        margin_tests([0.5, 2.0, 3.1], [0.4, 0.1, 3.5], [0.0], alpha=0.05)


# --- the interval of a quantile ---------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "q", "low", "high"),
    [
        (100, 0.5, 40, 61),  # Conover, Practical Nonparametric Statistics, table A3
        (20, 0.5, 6, 15),
        (327, 0.95, 303, 319),
        (100, 0.95, 90, 100),
        (71, 0.95, 63, None),  # 0.95^71 > 0.025: no rank bounds the p95 from above
        (72, 0.95, 64, 72),
        (5, 0.5, None, None),  # too few values to bound the median at 95%
    ],
)
def test_quantile_interval_takes_the_order_statistics_of_the_binomial_rule(
    n: int, q: float, low: int | None, high: int | None
) -> None:
    interval = quantile_interval(np.arange(1, n + 1)[::-1], q, 0.05)  # any order
    assert (interval.low, interval.high) == (low, high)


@given(st.integers(1, 400), st.sampled_from([0.05, 0.5, 0.9, 0.95, 0.99]))
@settings(max_examples=200, deadline=None)
def test_quantile_interval_covers_at_least_one_minus_alpha(n: int, q: float) -> None:
    interval = quantile_interval(np.arange(1, n + 1), q, 0.05)
    below = scipy_stats.binom(n, q)
    l_rank = 0 if interval.low is None else int(interval.low)  # the values are the ranks
    u_rank = n + 1 if interval.high is None else int(interval.high)
    # The interval misses when fewer than l or u or more values lie below the quantile.
    miss = below.cdf(l_rank - 1) + below.sf(u_rank - 1)
    assert miss <= 0.05 + 1e-12


def test_intervals_apart_only_when_one_ends_before_the_other_starts() -> None:
    a, b = (
        quantile_interval(np.arange(1, 101), 0.95, 0.05),
        quantile_interval(np.arange(1, 101) + 9.0, 0.95, 0.05),
    )
    assert (a.low, a.high, b.low, b.high) == (90, 100, 99, 109)
    assert not a.below(b) and not b.below(a)
    c = quantile_interval(np.arange(1, 101) + 10.5, 0.95, 0.05)
    assert a.below(c) and not c.below(a)
    open_above = quantile_interval(np.arange(1, 11), 0.95, 0.05)
    assert open_above.high is None and not open_above.below(c)


# --- the restricted nuisance (Berger & Boos) --------------------------------------------


def _whole_range_catch_rate(n: int, p_bad: float, p_good: float, margin: float) -> float:
    """The exact test without the restriction (its tail maximised over every share, no
    gamma): one critical statistic for every changed count, the largest of the shares'
    on the test's grid above the margin and just above it, rejected beyond; the
    trinomial summed over the region it rejects."""
    alpha = 0.05
    shares = [margin + 1e-9, *(float(s) for s in share_grid(n) if s > margin)]
    critical = max(exact_power._critical_statistic(n, margin, alpha, s) for s in shares)
    test = ExactPairs(n, 0, 0)
    counts = np.arange(n + 1)
    beyond = critical + 2e-9 * max(1.0, abs(critical))  # the region is z > critical
    thresholds = test._thresholds(counts, margin, beyond)
    share = np.array([p_bad + p_good])
    return float(test.region_probability(share, p_bad - p_good, counts, thresholds)[0])


@pytest.mark.parametrize("n", [30, 50, 200])
@pytest.mark.parametrize("margin", [0.03, -0.03])
def test_rejection_region_is_where_the_p_value_is_at_most_alpha(n: int, margin: float) -> None:
    """The power statement's region, every changed count (up to 60), against the
    p-values themselves on both sides of its threshold; at -margin it is the pass
    side's (p_within is this tail with the counts' roles swapped), where Tango's
    statistic of a few changed queries crosses the observed one between outcomes the
    region must not count."""
    for changed in range(min(n, 60) + 1):
        k = rejection_threshold(n, changed, margin, 0.05)
        for bad in range(max(0, k - 2), min(changed, k + 1) + 1):
            p = exact_test._exact_tail(n, bad, changed - bad, margin)
            assert (p <= 0.05) == (bad >= k), (changed, bad, k, p)


@pytest.mark.parametrize("n", [30, 50, 100, 200, 500])
@pytest.mark.parametrize("flips", [0.005, 0.02, 0.2])
def test_restricted_exact_test_fails_a_drop_at_the_limit_at_most_alpha(
    n: int, flips: float
) -> None:
    """The size at the limit, summed over every trinomial outcome: P(bad) = flips / 2 +
    limit, P(good) = flips / 2."""
    size = exact_catch_rate(n, flips / 2 + 0.03, flips / 2, 0.03, 0.05)
    assert size <= 0.05


@pytest.mark.parametrize("n", [30, 100, 500])
@pytest.mark.parametrize("flips", [0.005, 0.2])
def test_restricted_exact_test_passes_a_drop_at_the_limit_at_most_alpha(
    n: int, flips: float
) -> None:
    """The other side: p_within is the same test with the roles of the counts swapped
    at -limit, so its size at the limit is the catch rate of the swapped trinomial."""
    size = exact_catch_rate(n, flips / 2, flips / 2 + 0.03, -0.03, 0.05)
    assert size <= 0.05


@pytest.mark.parametrize(
    ("flips", "times", "restricted"),
    [(0.02, 1.5, 0.375), (0.02, 2.0, 0.811), (0.2, 1.5, 0.164), (0.2, 2.0, 0.369)],
)
def test_restricted_exact_test_catches_more_than_the_whole_range_one(
    flips: float, times: float, restricted: float
) -> None:
    """500 queries, a drop of 1.5 and 2 times the 0.03 limit: the restricted test's
    catch rates are those a separate computation of it found (37.5/81.1% at 2% churn,
    16.4/36.9% at 20%), and at least 3 points above the whole-range test's on the same
    grid of shares (32.9/76.4%, 11.5/29.0%)."""
    p_bad, p_good = flips / 2 + times * 0.03, flips / 2
    new = exact_catch_rate(500, p_bad, p_good, 0.03, 0.05)
    old = _whole_range_catch_rate(500, p_bad, p_good, 0.03)
    assert new == pytest.approx(restricted, abs=0.001)
    assert new > old + 0.03


@pytest.mark.parametrize("n", [1, 2, 7, 30, 176, 999, 1024, 3000])
def test_grid_spans_are_the_grid_points_around_the_share_interval(n: int) -> None:
    """The grid indices counted from the binomial tails at each grid point are those
    `searchsorted` finds on the ends of the Clopper-Pearson interval, for every count."""
    grid = exact_test.share_grid(n)
    for changed in range(n + 1):
        low, high = exact_test.share_interval(n, changed)
        first = max(int(np.searchsorted(grid, low, side="right")) - 1, 0)
        last = min(int(np.searchsorted(grid, high, side="left")), grid.size - 1)
        assert exact_test._grid_span(n, changed) == (first, last), changed


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 70_001])
def test_betting_orders_drawn_a_row_at_a_time_are_the_orders(n: int) -> None:
    scaled = np.random.default_rng(n).uniform(-1.0, 1.0, n)
    for seed in (0, 5):
        expected = scaled[betting._orders(n, seed)]
        assert np.array_equal(betting._ordered(scaled, seed), expected)


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_a_large_scopes_wealth_an_order_at_a_time_is_the_one_pass_wealth(
    side: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orders of a large scope read one at a time, their temporaries kept from one
    order to the next, give the wealth of one pass over them all, to the bit."""
    x = betting._ordered(np.random.default_rng(9).uniform(-1.0, 1.0, 3_000), 4)
    bets = betting._plug_in_bets(x.copy(), 0.05)
    margins = (-0.3, -0.01, 0.0, 0.02, 0.4)
    whole = [betting._log_mean_wealth(x, bets, m, side) for m in margins]
    monkeypatch.setattr(betting, "_ONE_PASS", 0)  # every scope "large"
    by_order = [betting._log_mean_wealth(x, bets, m, side) for m in margins]
    assert [w.tobytes() for w in by_order] == [w.tobytes() for w in whole]
