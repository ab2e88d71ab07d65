"""Paired statistics for the gate: is a change in per-query scores real?

The gate compares a change ("after") with the baseline ("before") query by query, so
every test here is paired: it works on the per-query differences `after - before`.

- Binary metrics (every value 0 or 1, e.g. hit_rate@k, or recall@k with one relevant
  document per query) get the exact McNemar test on the discordant pairs.
- Continuous metrics (MRR, nDCG, MAP) get a sign-flip randomisation test of the mean
  difference.
- Every metric gets a percentile bootstrap confidence interval of the mean difference.
- Across the slices of one gate, p-values are Holm-corrected.
- `detectable_drop` and `queries_to_catch` say what a gold set of a given size can catch.

Only numpy and the standard library: the Student t and binomial tails come from the
regularized incomplete beta function below, the normal quantiles from
`statistics.NormalDist`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Resampling works through the resamples in chunks of about this many array
# elements, which bounds memory (a few MB) whatever the slice size.
CHUNK_ELEMENTS = 1 << 17

# Sums of the same numbers in another order differ in the last bits; a resampled
# statistic this close (relative to the sum of |differences|) to the observed one
# counts as a tie, i.e. as at least as extreme.
TIE_TOLERANCE = 1e-9

# The continued fraction of the incomplete beta function converges when successive
# convergents agree to this relative precision.
BETA_EPSILON = 1e-15
BETA_MAX_ITERATIONS = 10_000

# Eight queries to a byte: each of the 256 values of a random byte is one pattern of
# eight signs. Row b holds +1 where bit j of b is set, else -1.
SIGN_PATTERNS = np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, 1.0, -1.0)


@dataclass(frozen=True, slots=True)
class PairedResult:
    """The paired comparison of one metric over one slice."""

    n: int
    """Paired queries."""
    mean_before: float
    mean_after: float
    delta: float
    """mean_after - mean_before."""
    ci_low: float
    """Lower end of the percentile bootstrap interval of delta."""
    ci_high: float
    """Upper end of the percentile bootstrap interval of delta."""
    p_value: float
    """Two-sided p-value of `method`."""
    method: str
    """`mcnemar-exact` (binary scores) or `sign-flip` (continuous scores)."""
    hit_to_miss: int | None
    """Queries that went from 1 to 0 (binary scores only)."""
    miss_to_hit: int | None
    """Queries that went from 0 to 1 (binary scores only)."""


def is_binary(before: npt.ArrayLike, after: npt.ArrayLike) -> bool:
    """True when every score in both arrays is 0 or 1."""
    return bool(np.isin(before, (0.0, 1.0)).all() and np.isin(after, (0.0, 1.0)).all())


def mcnemar_exact(hit_to_miss: int, miss_to_hit: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of the discordant pairs.

    Under no change each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); 1.0 when b = c = 0.
    """
    if hit_to_miss < 0 or miss_to_hit < 0:
        raise ValueError("discordant counts must be non-negative")
    discordant = hit_to_miss + miss_to_hit
    smaller = min(hit_to_miss, miss_to_hit)
    if 2 * smaller >= discordant:
        return 1.0
    # P(X <= k) for X ~ Binomial(n, p) is I_{1-p}(n - k, k + 1).
    return min(1.0, 2.0 * regularized_beta(discordant - smaller, smaller + 1.0, 0.5))


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0.

    Evaluated by its continued fraction with the modified Lentz method, on whichever
    of I_x(a, b) = 1 - I_{1-x}(b, a) converges fast (Numerical Recipes, 3rd ed., §6.4).
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(_log_beta_front(a, b, x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _log_beta_front(a: float, b: float, x: float) -> float:
    """log(x^a (1-x)^b / B(a, b)).

    Written with Stirling's series so that the large terms cancel before rounding:
    straight from lgamma, a million queries would lose nine digits.
    """
    return (
        a * (math.log(x) + math.log1p(b / a))
        + b * (math.log1p(-x) + math.log1p(a / b))
        + 0.5 * math.log(a * b / (2.0 * math.pi * (a + b)))
        + _stirling_error(a + b)
        - _stirling_error(a)
        - _stirling_error(b)
    )


def _stirling_error(z: float) -> float:
    """lgamma(z) - [(z - 1/2) log z - z + log(2 pi) / 2]."""
    if z < 15.0:
        return math.lgamma(z) - (z - 0.5) * math.log(z) + z - 0.5 * math.log(2.0 * math.pi)
    inverse, square = 1.0 / z, 1.0 / (z * z)
    series = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
    return inverse * sum(c * square**i for i, c in enumerate(series))


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes `betacf`)."""
    tiny = 1e-300

    def guard(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c = 1.0
    d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    fraction = d
    for m in range(1, BETA_MAX_ITERATIONS + 1):
        even = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        for coefficient in (even, odd):
            d = 1.0 / guard(1.0 + coefficient * d)
            c = guard(1.0 + coefficient / c)
            fraction *= d * c
        if abs(d * c - 1.0) < BETA_EPSILON:
            return fraction
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def paired_tests(
    before: npt.ArrayLike,
    after: npt.ArrayLike,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[PairedResult]:
    """Paired comparison of each column (metric) of `after` with the same column of `before`.

    Rows are queries, paired by position; a 1-D array is one metric. All columns share
    one resampling of the queries, drawn from `numpy.random.default_rng(seed)`, so the
    same inputs always give the same numbers. The interval is the percentile bootstrap
    (Efron & Tibshirani 1993, ch. 13); the p-value is McNemar's exact test for binary
    columns and the sign-flip test for the others, where
    p = (1 + #{|T*| >= |T|}) / (resamples + 1) is never 0.
    """
    base, head = _as_columns(before), _as_columns(after)
    _check_inputs(base, head, resamples, confidence)
    diffs = head - base
    rng = np.random.default_rng(seed)
    boot = _bootstrap_means(diffs, resamples, rng)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail], axis=0)
    binary = [is_binary(base[:, j], head[:, j]) for j in range(diffs.shape[1])]
    continuous = [j for j, flag in enumerate(binary) if not flag]
    flip_p = _sign_flip_p(diffs[:, continuous], resamples, rng)
    p_values = dict(zip(continuous, flip_p, strict=True))
    return [
        _result(base[:, j], head[:, j], (float(low[j]), float(high[j])), p_values.get(j))
        for j in range(diffs.shape[1])
    ]


def _result(
    before: FloatArray, after: FloatArray, interval: tuple[float, float], flip_p: float | None
) -> PairedResult:
    """One column's record; `flip_p` is None for a binary column."""
    counts: tuple[int, int] | tuple[None, None] = (None, None)
    if flip_p is None:
        hit_to_miss = int(np.sum((before == 1.0) & (after == 0.0)))
        miss_to_hit = int(np.sum((before == 0.0) & (after == 1.0)))
        counts = (hit_to_miss, miss_to_hit)
        p_value, method = mcnemar_exact(hit_to_miss, miss_to_hit), "mcnemar-exact"
    else:
        p_value, method = flip_p, "sign-flip"
    return PairedResult(
        n=before.size,
        mean_before=float(before.mean()),
        mean_after=float(after.mean()),
        delta=float((after - before).mean()),
        ci_low=interval[0],
        ci_high=interval[1],
        p_value=p_value,
        method=method,
        hit_to_miss=counts[0],
        miss_to_hit=counts[1],
    )


def _as_columns(scores: npt.ArrayLike) -> FloatArray:
    array = np.asarray(scores, dtype=np.float64)
    return array[:, None] if array.ndim == 1 else array


def _check_inputs(before: FloatArray, after: FloatArray, resamples: int, confidence: float) -> None:
    if before.ndim != 2 or before.shape != after.shape:
        raise ValueError(
            f"before and after must be paired (n_queries, n_metrics) arrays of the same "
            f"shape, got {before.shape} and {after.shape}"
        )
    if before.shape[0] == 0:
        raise ValueError("no paired queries to compare")
    if not (np.isfinite(before).all() and np.isfinite(after).all()):
        raise ValueError("scores must be finite numbers")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def _bootstrap_means(diffs: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """Bootstrap means of each column: (counts @ diffs) / n, counts ~ Multinomial(n, 1/n).

    Each resample's counts come from n indices drawn with replacement, tallied with one
    `bincount` per chunk of resamples.
    """
    n = diffs.shape[0]
    index_type = np.uint16 if n <= 1 << 16 else np.int64  # half the random bits when it fits
    means = np.empty((resamples, diffs.shape[1]))
    for start, stop in _chunks(resamples, n):
        rows = stop - start
        picks = rng.integers(0, n, size=(rows, n), dtype=index_type)
        flat = (picks + np.arange(0, rows * n, n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=rows * n).reshape(rows, n)
        means[start:stop] = counts.astype(np.float64) @ diffs
    means /= n
    return means


def _sign_flip_p(diffs: FloatArray, resamples: int, rng: np.random.Generator) -> list[float]:
    """Two-sided sign-flip p-value of each column's mean (Fisher's randomisation test).

    Under no change each query's difference is as likely to have either sign. The null
    statistic sums signs * diffs; queries whose differences are all zero add nothing and
    are left out. Random signs come eight to a byte: the signed sums of each group of
    eight queries are tabulated for all 256 sign patterns, so a resample is one table
    look-up per eight queries.
    """
    changed = diffs[np.any(diffs != 0.0, axis=1)]
    if changed.shape[0] == 0:  # nothing changed: every resample ties the observed zero
        return [1.0] * diffs.shape[1]
    observed = np.abs(changed.sum(axis=0))
    tolerance = TIE_TOLERANCE * np.abs(changed).sum(axis=0)
    tables = _sign_tables(changed)
    groups = tables.shape[1] // 256
    extreme = np.zeros(diffs.shape[1], dtype=np.int64)
    for start, stop in _chunks(resamples, groups):
        patterns = rng.integers(0, 256, size=(stop - start, groups), dtype=np.uint8)
        rows = patterns + np.arange(0, groups * 256, 256)
        for j, table in enumerate(tables):
            sums = np.abs(table.take(rows).sum(axis=1))
            extreme[j] += np.count_nonzero(sums >= observed[j] - tolerance[j])
    return [float(x) for x in (1.0 + extreme) / (resamples + 1.0)]


def _sign_tables(diffs: FloatArray) -> FloatArray:
    """Per column, entry 256 g + b: the signed sum of queries 8g..8g+7 under pattern b."""
    groups = -(-diffs.shape[0] // 8)
    padded = np.zeros((groups * 8, diffs.shape[1]))
    padded[: diffs.shape[0]] = diffs
    tables = SIGN_PATTERNS @ padded.reshape(groups, 8, -1)  # (groups, 256, columns)
    return np.ascontiguousarray(tables.reshape(groups * 256, -1).T)


def _chunks(total: int, width: int) -> list[tuple[int, int]]:
    """[start, stop) ranges over `total` resamples, about CHUNK_ELEMENTS / width each."""
    step = max(1, CHUNK_ELEMENTS // max(1, width))
    return [(start, min(start + step, total)) for start in range(0, total, step)]


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


def format_p(p: float) -> str:
    """`p < 0.001`, else `p = 0.034` (three decimals), for every report."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


# --- the gate's decision: two one-sided tests against the allowed change -------------


@dataclass(frozen=True, slots=True)
class MarginTest:
    """A paired change tested against the allowed worsening (the margin), both ways.

    Worsening is `before - after` for higher-is-better metrics (a drop is positive).
    `low` and `high` are one-sided (1 - alpha) confidence bounds of the mean worsening,
    so together they form a (1 - 2 alpha) interval; the gate reads its decision off them:
    beyond the limit when `low > margin`, within it when `high < margin`, and cannot
    tell otherwise. The p-values are those of the same two one-sided tests.
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
    """Per-query standard deviation of the test at the margin (sqrt(n) times its
    standard error there); sizes the gold set in `queries_to_decide`."""
    observed_spread: float
    """Sample standard deviation of the per-query differences."""
    method: str
    """`tango-score` (0/1 scores) or `bootstrap-t` (graded scores)."""
    went_worse: int | None = None
    """0/1 scores: queries that went from the good value to the bad one."""
    went_better: int | None = None
    """0/1 scores: queries that went the other way."""


def margin_tests(
    worsening_before: npt.ArrayLike,
    worsening_after: npt.ArrayLike,
    margins: Sequence[float],
    *,
    alpha: float,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[MarginTest]:
    """Test each column's mean worsening (`before - after`) against its margin.

    Pass the scores oriented so that a larger `before - after` is worse (swap the
    arguments for lower-is-better metrics). Columns of 0/1 scores use Tango's score
    test for paired proportions (Tango 1998, Stat. Med. 17:891-908), whose size stays
    near nominal at a non-zero margin where McNemar's test does not apply; graded
    columns use the studentized (bootstrap-t) interval of the mean (Efron & Tibshirani
    1993, ch. 12.5), which keeps its level better than the percentile interval on the
    skewed, zero-heavy differences of unchanged rankings.
    """
    base, head = _as_columns(worsening_before), _as_columns(worsening_after)
    _check_inputs(base, head, resamples, 1.0 - 2.0 * alpha)
    if len(margins) != base.shape[1]:
        raise ValueError(f"expected {base.shape[1]} margins, got {len(margins)}")
    results: dict[int, MarginTest] = {}
    graded = []
    for j in range(base.shape[1]):
        if is_binary(base[:, j], head[:, j]):
            results[j] = _tango(base[:, j], head[:, j], margins[j], alpha)
        else:
            graded.append(j)
    if graded:
        diffs = base[:, graded] - head[:, graded]
        rng = np.random.default_rng(seed)
        picked = [margins[j] for j in graded]
        for j, result in zip(
            graded, _bootstrap_t(diffs, picked, alpha, resamples, rng), strict=True
        ):
            results[j] = result
    return [results[j] for j in range(base.shape[1])]


def _tango_z(went_bad: int, went_good: int, n: int, delta: FloatArray) -> FloatArray:
    """Tango's score statistic for H0: P(bad) - P(good) = delta, at each delta."""
    b, c = float(went_bad), float(went_good)
    a_coef = 2.0 * n
    b_coef = -b - c + (2.0 * n - b + c) * delta
    c_coef = -c * delta * (1.0 - delta)
    root = np.sqrt(np.maximum(b_coef * b_coef - 4.0 * a_coef * c_coef, 0.0))
    p_good = (root - b_coef) / (2.0 * a_coef)
    variance = n * (2.0 * p_good + delta * (1.0 - delta))
    numerator = b - c - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(variance)
    # No variance: certain when the numerator is not zero, no evidence when it is.
    certain = np.where(numerator == 0.0, 0.0, np.copysign(np.inf, numerator))
    return np.where(variance > 0.0, z, certain)


def _tango(before: FloatArray, after: FloatArray, margin: float, alpha: float) -> MarginTest:
    n = before.size
    bad = int(np.sum((before == 1.0) & (after == 0.0)))
    good = int(np.sum((before == 0.0) & (after == 1.0)))
    z_crit = NormalDist().inv_cdf(1.0 - alpha)
    low, high = _score_bounds(bad, good, n, z_crit)
    z_margin = float(_tango_z(bad, good, n, np.array([margin]))[0])
    normal = NormalDist()
    p_beyond = 1.0 - normal.cdf(z_margin) if math.isfinite(z_margin) else float(z_margin < 0)
    p_within = normal.cdf(z_margin) if math.isfinite(z_margin) else float(z_margin > 0)
    p_good = (bad + good) / (2.0 * n)
    spread = math.sqrt(max(2.0 * p_good + margin * (1.0 - margin), 0.0))
    observed = float(np.std(before - after, ddof=1)) if n > 1 else 0.0
    return MarginTest(
        n,
        (bad - good) / n,
        low,
        high,
        1.0 - 2.0 * alpha,
        p_beyond,
        p_within,
        spread,
        observed,
        "tango-score",
        bad,
        good,
    )


def _score_bounds(bad: int, good: int, n: int, z_crit: float) -> tuple[float, float]:
    """The deltas where Tango's statistic crosses +z and -z, by bisection on [-1, 1]:
    the statistic falls as delta rises."""
    ends = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    targets = np.array([z_crit, -z_crit])
    lower, upper = ends
    for _ in range(60):
        middle = (lower + upper) / 2.0
        above = _tango_z(bad, good, n, middle) > targets
        lower = np.where(above, middle, lower)
        upper = np.where(above, upper, middle)
    bounds = (lower + upper) / 2.0
    return float(bounds[0]), float(bounds[1])


def _bootstrap_t(
    diffs: FloatArray,
    margins: Sequence[float],
    alpha: float,
    resamples: int,
    rng: np.random.Generator,
) -> list[MarginTest]:
    """Studentized bootstrap bounds and p-values of each column's mean."""
    n = diffs.shape[0]
    mean = diffs.mean(axis=0)
    spread = diffs.std(axis=0, ddof=1) if n > 1 else np.zeros(diffs.shape[1])
    error = spread / math.sqrt(n)
    moments = _bootstrap_means(np.hstack([diffs, diffs * diffs]), resamples, rng)
    boot_mean, boot_square = moments[:, : diffs.shape[1]], moments[:, diffs.shape[1] :]
    boot_error = np.sqrt(np.maximum(boot_square - boot_mean**2, 0.0) * n / max(n - 1, 1) / n)
    shift = boot_mean - mean
    tolerance = TIE_TOLERANCE * (np.abs(diffs).sum(axis=0) / n + 1e-300)
    shift = np.where(np.abs(shift) <= tolerance, 0.0, shift)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.where(boot_error > 0.0, shift / boot_error, np.sign(shift) * np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf between two infinite t* values
        top, bottom = np.quantile(t_star, [1.0 - alpha, alpha], axis=0)
    if np.isnan(top).any() or np.isnan(bottom).any():
        # Interpolating between two infinite t* gives nan; the quantile there is infinite.
        exact_top, exact_bottom = np.quantile(
            t_star, [1.0 - alpha, alpha], axis=0, method="inverted_cdf"
        )
        top = np.where(np.isnan(top), exact_top, top)
        bottom = np.where(np.isnan(bottom), exact_bottom, bottom)
    results = []
    for j, margin in enumerate(margins):
        low = float(mean[j] - top[j] * error[j]) if error[j] > 0 else float(mean[j])
        high = float(mean[j] - bottom[j] * error[j]) if error[j] > 0 else float(mean[j])
        p_beyond, p_within = _bootstrap_p(float(mean[j]), float(error[j]), t_star[:, j], margin)
        results.append(
            MarginTest(
                n,
                float(mean[j]),
                low,
                high,
                1.0 - 2.0 * alpha,
                p_beyond,
                p_within,
                float(spread[j]),
                float(spread[j]),
                "bootstrap-t",
            )
        )
    return results


def _bootstrap_p(
    mean: float, error: float, t_star: FloatArray, margin: float
) -> tuple[float, float]:
    """One-sided p-values of the two hypotheses about the margin, from the t* sample."""
    count = t_star.size
    if error == 0.0:  # every difference equal: the mean is known exactly
        beyond = mean > margin
        return (0.0, 1.0) if beyond else ((1.0, 0.0) if mean < margin else (1.0, 1.0))
    statistic = (mean - margin) / error
    p_beyond = (1.0 + np.count_nonzero(t_star >= statistic)) / (count + 1.0)
    p_within = (1.0 + np.count_nonzero(t_star <= statistic)) / (count + 1.0)
    return float(p_beyond), float(p_within)


def queries_to_decide(test: MarginTest, margin: float, alpha: float) -> int | None:
    """About how many queries, with the same per-query spread and the same mean change,
    the test needs to tell which side of the margin the change is on (None: never,
    the change sits on the margin)."""
    distance = abs(test.worsening - margin)
    if distance == 0.0:
        return None
    z = NormalDist().inv_cdf(1.0 - alpha)
    return max(test.n + 1, math.ceil((z * test.spread / distance) ** 2))


def detectable_worsening(
    test: MarginTest, margin: float, alpha: float, power: float = 0.8
) -> float:
    """The true worsening the test finds beyond the margin with probability `power`,
    at the test's size and observed spread (see `detectable_drop`)."""
    return detectable_drop(test.n, test.observed_spread, margin, alpha, power)


def detectable_drop(
    n: int, spread: float, margin: float, alpha: float, power: float = 0.8
) -> float:
    """The true worsening D that n paired queries find beyond the margin with
    probability `power`: D = margin + (z_{1-alpha} + z_power) * sigma(D) / sqrt(n),
    normal approximation, solved by fixed-point iteration.

    sigma(D)^2 = s^2 + D (1 - D): the spread s of the per-query differences already
    there (churn) plus that of a share D of queries losing their whole score. With 0/1
    scores that is exactly how a drop adds to the churn; with graded scores it is on the
    safe side (a real drop spread over partial losses is caught sooner).
    """
    normal = NormalDist()
    z_sum = normal.inv_cdf(1.0 - alpha) + normal.inv_cdf(power)
    drop = margin
    for _ in range(100):
        share = min(max(drop, 0.0), 1.0)
        sigma = math.sqrt(spread**2 + share * (1.0 - share))
        drop = margin + z_sum * sigma / math.sqrt(n)
    return drop


def queries_to_catch(
    drop: float, spread: float, margin: float, alpha: float, power: float = 0.8
) -> int:
    """About how many paired queries catch a true worsening `drop` (beyond `margin`)
    with probability `power`: the n at which `detectable_drop` falls to `drop`."""
    if not drop > margin:
        raise ValueError(f"the drop ({drop}) must exceed the margin ({margin})")
    normal = NormalDist()
    z_sum = normal.inv_cdf(1.0 - alpha) + normal.inv_cdf(power)
    sigma = math.sqrt(spread**2 + drop * (1.0 - drop))
    return max(2, math.ceil((z_sum * sigma / (drop - margin)) ** 2))
