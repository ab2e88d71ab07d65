"""How wide is the gate's interval for graded scores, beside other tests of a bounded mean?

The gate's graded test (`llm_eval.stats`, a betting test) is valid for every
distribution of per-query differences in [-1, 1] at every number of queries. The paired
t-test is narrower but is not valid at every size (its false-fail rate at the limit is
above alpha in skewed, low-churn cells: docs/soundness.md). This script measures what a
valid test costs, as the width of the two-sided 90% interval of the mean difference
(two one-sided 95% bounds, as the gate reports) divided by the t-interval's, on
SciFact-shaped data: per-query nDCG@10 of two retrievers, with many queries scoring 0
or 1 under both (ties), some moving a little and a few jumping between 0 and 1.

The tests compared:

- **gate**: `stats.margin_tests`, the gate's own bounds (betting: Waudby-Smith & Ramdas
  2024, hedged capital with predictable plug-in bets, averaged over fixed orders).
- **Hoeffding-Bentkus**: Bentkus's bound (Bentkus 2004, Ann. Probab. 32:1650-1673):
  for independent Y_i <= b with mean 0 and variance <= v, P(sum Y >= x) <= inf_h
  E(T - h)_+ / (x - h), T a sum of n two-point variables (b with probability v / (v +
  b^2), else -v / b). The variance is bounded from the data at level gamma = alpha / 10
  (the mean of (x - m)^2 in [0, (1 + |m|)^2], whose lower tail Hoeffding 1963 bounds by
  the binomial's), and the p-value is gamma + the tail bound (as Kuchibhotla & Zheng
  2021 do). Valid at every n.
- **Bentkus, sample variance**: the same tail bound with the sample variance plugged
  in. Not valid (the variance is not bounded); it is the floor of what any test of
  this family could reach here.
- **t**: the paired t-interval, not valid at every size.

Widths are medians over `--draws` data sets per shape and size; CPU seconds are printed.

Usage:
    python scripts/bench_graded_tests.py [--draws 20] [--seed 0] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_eval.stats import margin_tests

ALPHA = 0.05
GAMMA = ALPHA / 10
SIZES = (100, 300, 1000)


def scifact_pair(rng: np.random.Generator, n: int, moved: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-query nDCG@10 of two retrievers: about 30% of queries score 0 and 25% score 1
    under the first, the rest Beta(2, 2); a share `moved` of the queries score
    differently under the second (a small move, or, one time in five, a jump between 0
    and 1), the others tie."""
    u = rng.random(n)
    a = np.where(u < 0.30, 0.0, np.where(u < 0.55, 1.0, rng.beta(2.0, 2.0, n)))
    moves = rng.random(n) < moved
    jumps = moves & (rng.random(n) < 0.2)
    b = np.where(moves, np.clip(a + rng.normal(0.0, 0.25, n), 0.0, 1.0), a)
    b = np.where(jumps, 1.0 - np.round(a), b)
    return a, b


def binomial_tail_bound(x: float, n: int, variance: float, b: float) -> float:
    """Bentkus's bound on P(sum of n Y_i >= x), Y_i <= b, mean 0, variance <= `variance`:
    the infimum over h of E(T - h)_+ / (x - h) is reached at a support point of T."""
    if x <= 0.0:
        return 1.0
    if variance <= 0.0:
        return 0.0
    p = variance / (variance + b * b)
    k = np.arange(n + 1)
    t = b * k - (variance / b) * (n - k)
    pmf = sp.binom.pmf(k, n, p)
    above = np.append(np.cumsum(pmf[::-1])[::-1][1:], 0.0)  # P(T > t_k)
    above_t = np.append(np.cumsum((pmf * t)[::-1])[::-1][1:], 0.0)  # E[T; T > t_k]
    excess = above_t - t * above
    below = t < x
    return float(min(1.0, (excess[below] / (x - t[below])).min())) if below.any() else 1.0


def mean_upper_bound(z: np.ndarray, gamma: float) -> float:
    """A (1 - gamma) upper bound of the mean of values in [0, 1]: the largest q at
    which the binomial-dominated lower tail of their sum is above gamma."""
    n, s = z.size, float(z.sum())
    k = np.arange(n + 1)

    def lower_tail(q: float) -> float:
        pmf = sp.binom.pmf(k, n, q)
        cumulative, weighted = np.cumsum(pmf), np.cumsum(pmf * k)
        j = k[k > s]
        excess = j * cumulative[j - 1] - weighted[j - 1]
        return float(min(1.0, (excess / (j - s)).min()))

    low, high = s / n, 1.0
    if lower_tail(high) > gamma:
        return 1.0
    for _ in range(40):
        middle = (low + high) / 2.0
        low, high = (middle, high) if lower_tail(middle) > gamma else (low, middle)
    return high


def bentkus_p(x: np.ndarray, m: float, valid: bool) -> float:
    """p-value against "the mean of x is at most m" (x in [-1, 1])."""
    centred = x - m
    if valid:
        scale = (1.0 + abs(m)) ** 2
        variance = mean_upper_bound(centred**2 / scale, GAMMA) * scale
        return min(
            1.0, GAMMA + binomial_tail_bound(float(centred.sum()), x.size, variance, 1.0 - m)
        )
    return binomial_tail_bound(float(centred.sum()), x.size, float(x.var(ddof=1)), 1.0 - m)


def bentkus_width(x: np.ndarray, valid: bool) -> float:
    def low_side(values: np.ndarray) -> float:
        def p(m: float) -> float:
            return bentkus_p(values, m, valid)

        inside, outside = -1.0 + 1e-9, float(values.mean())
        if p(inside) > ALPHA:
            return inside
        for _ in range(30):
            middle = (inside + outside) / 2.0
            inside, outside = (middle, outside) if p(middle) <= ALPHA else (inside, middle)
        return inside

    return -low_side(-x) - low_side(x)


def gate_width(a: np.ndarray, b: np.ndarray) -> float:
    test = margin_tests(a, b, [0.0], alpha=ALPHA)[0]
    return test.high - test.low


def t_width(x: np.ndarray) -> float:
    return 2.0 * sp.t.ppf(1.0 - ALPHA, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    started = time.process_time()
    rng = np.random.default_rng(args.seed)
    rows = []
    for moved in (0.1, 0.4):
        for n in SIZES:
            ratios: dict[str, list[float]] = {"gate": [], "valid": [], "plug-in": []}
            for _ in range(args.draws):
                a, b = scifact_pair(rng, n, moved)
                x = a - b
                if not x.any():
                    continue
                t = t_width(x)
                ratios["gate"].append(gate_width(a, b) / t)
                ratios["valid"].append(bentkus_width(x, True) / t)
                ratios["plug-in"].append(bentkus_width(x, False) / t)
            rows.append((moved, n, {k: float(np.median(v)) for k, v in ratios.items()}))
            print(
                f"moved {moved:.0%} n {n}: "
                + ", ".join(f"{k} {v:.2f}x" for k, v in rows[-1][2].items()),
                flush=True,
            )
    seconds = time.process_time() - started
    table = [
        "| queries that move | n | gate (betting) | Hoeffding-Bentkus (valid) "
        "| Bentkus, sample variance (not valid) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for moved, n, r in rows:
        table.append(
            f"| {moved:.0%} | {n:,} | {r['gate']:.2f}x | {r['valid']:.2f}x | {r['plug-in']:.2f}x |"
        )
    print("\n".join(table))
    print(f"CPU seconds: {seconds:.0f}")
    if args.markdown:
        page = [
            "# Graded scores: what a valid test costs",
            "",
            f"Produced by `python scripts/bench_graded_tests.py --draws {args.draws} --markdown "
            f"{args.markdown.as_posix()}` ({seconds:.0f} CPU seconds). What the columns mean: the "
            "script's docstring. Each figure is the median, over the data sets drawn, of a "
            "two-sided 90% interval's width divided by the paired t-interval's, on "
            "SciFact-shaped per-query nDCG@10 (many ties at 0 and 1).",
            "",
            *table,
            "",
            "What it says: the gate's betting interval is 1.5-2x the t-interval's. The valid "
            "Hoeffding-Bentkus interval is wider still below 1,000 queries, and even with the "
            "variance known (not a valid test) that family stays near 1.3x: the t-interval's "
            "width is not reached by a test that must hold for every distribution of per-query "
            "differences, because a rare large loss is always possible. The t-test buys its width "
            "by running above alpha in skewed, low-churn cells (docs/soundness.md).",
        ]
        args.markdown.write_text("\n".join(page) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
