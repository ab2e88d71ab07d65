"""Is the statistical gate sound? Error rates and speed on simulated paired outcomes.

Each query has a baseline ("before") and a head ("after") recall@5-like outcome, 1 (hit)
or 0 (miss), drawn per query from a joint distribution:

    P(hit -> miss) = churn + drop      P(miss -> hit) = churn

with a baseline hit rate of --hit-rate. With drop = 0 the two directions are equally
likely, so both means are the same: no true change, only churn.

(a) false fails with no true change: the gate's rule "fail when the observed drop >
    regression_max AND p < alpha", and plain significance (p < alpha, any direction);
    for recall@5-like hits (exact McNemar) and MRR-like scores (sign-flip test);
(b) detection of a true 3 pp drop at 1,400 queries;
(c) family-wise false alarms over 20 tag slices, Holm-corrected and uncorrected;
(d) the time of all statistics for 1,400 queries x 20 tag slices (+ overall) x 5 metrics
    at 10,000 resamples.

Usage: python scripts/bench_gate_soundness.py [--trials 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from llm_eval.stats import holm, minimum_detectable_drop, paired_tests

QUERIES = 1_400
TAGS = 20
METRICS = ("recall@5", "hit_rate@5", "mrr", "ndcg@10", "map")
TIMING_RESAMPLES = 10_000
TIMING_TARGET_SECONDS = 1.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000, help="simulated trials per figure")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulations")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--hit-rate", type=float, default=0.85, help="baseline hit rate")
    parser.add_argument(
        "--churn", type=float, default=0.02, help="per-query probability of each flip direction"
    )
    parser.add_argument(
        "--trial-resamples",
        type=int,
        default=1_000,
        help="resamples inside the trials (only p-values are used there)",
    )
    parser.add_argument("--timing-repeat", type=int, default=5)
    return parser.parse_args()


def paired_hits(
    rng: np.random.Generator, n: int, hit_rate: float, churn: float, drop: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and head 0/1 outcomes of n queries (see the module docstring)."""
    u = rng.random(n)
    hit_to_miss = u < churn + drop
    miss_to_hit = (u >= churn + drop) & (u < 2 * churn + drop)
    stays_hit = (u >= 2 * churn + drop) & (u < hit_rate + churn)
    before = (hit_to_miss | stays_hit).astype(np.float64)
    after = (miss_to_hit | stays_hit).astype(np.float64)
    return before, after


def paired_reciprocal_ranks(
    rng: np.random.Generator, n: int, churn: float
) -> tuple[np.ndarray, np.ndarray]:
    """MRR-like scores with no true change: a changed query redraws its rank from the
    same distribution (first relevant rank geometric, 0 beyond rank 10)."""
    ranks = rng.geometric(0.45, size=(2, n))
    before = np.where(ranks[0] <= 10, 1.0 / ranks[0], 0.0)
    redrawn = np.where(ranks[1] <= 10, 1.0 / ranks[1], 0.0)
    after = np.where(rng.random(n) < 2 * churn, redrawn, before)
    return before, after


def tag_slices(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Query indices of each of TAGS tags: 1-3 tags a query (mean 2.2), popular tags
    more often, as in the bundled gold set."""
    weights = 1.0 / np.arange(1, TAGS + 1)
    weights /= weights.sum()
    members: list[list[int]] = [[] for _ in range(TAGS)]
    for query in range(n):
        count = rng.choice([1, 2, 3], p=[0.25, 0.3, 0.45])
        for tag in rng.choice(TAGS, size=count, replace=False, p=weights):
            members[tag].append(query)
    return [np.array(m, dtype=np.intp) for m in members]


def rate_line(label: str, hits: int, args: argparse.Namespace, limit: bool = False) -> str:
    """A rate with its Monte Carlo standard error, trials and seed; against alpha when
    `limit`.

    A test of size exactly alpha lands above alpha in about half of all runs, so a rate
    over alpha passes while it stays within Monte Carlo error (one-sided, 1%).
    """
    trials, alpha = args.trials, args.alpha
    rate = hits / trials
    line = f"    {label:<47} {rate:6.3f} ± {math.sqrt(rate * (1 - rate) / trials):.3f} "
    line += f"({hits}/{trials} trials, seed {args.seed})"
    if not limit:
        return line
    ceiling = alpha + 2.326 * math.sqrt(alpha * (1 - alpha) / trials)
    if rate <= alpha:
        return f"{line}  PASS (<= alpha {alpha})"
    verdict = "PASS" if rate <= ceiling else "FAIL"
    return f"{line}  {verdict} (alpha {alpha}, Monte Carlo limit {ceiling:.3f})"


def false_fails(args: argparse.Namespace, n: int, continuous: bool = False) -> list[str]:
    """(a) at n queries: gate failures and significant results with no true change.

    The regression limits are those of config/ship-criteria.yaml: 0.03 for recall@5,
    0.05 for MRR.
    """
    rng = np.random.default_rng(args.seed)
    limit = 0.05 if continuous else 0.03
    gate_fails = significant = 0
    for trial in range(args.trials):
        if continuous:
            before, after = paired_reciprocal_ranks(rng, n, args.churn)
        else:
            before, after = paired_hits(rng, n, args.hit_rate, args.churn)
        result = paired_tests(before, after, resamples=args.trial_resamples, seed=trial)[0]
        significant += result.p_value < args.alpha
        gate_fails += result.p_value < args.alpha and -result.delta > limit
    return [
        rate_line(f"gate false-fail (drop > {limit} and p < alpha)", gate_fails, args, True),
        rate_line("significance rejections (p < alpha)", significant, args, True),
    ]


def detection(args: argparse.Namespace, drop: float = 0.03) -> list[str]:
    """(b) a true drop of `drop` at QUERIES queries."""
    rng = np.random.default_rng(args.seed)
    limits = (0.02, 0.03)
    detected = 0
    fails = dict.fromkeys(limits, 0)
    for trial in range(args.trials):
        before, after = paired_hits(rng, QUERIES, args.hit_rate, args.churn, drop)
        result = paired_tests(before, after, resamples=args.trial_resamples, seed=trial)[0]
        significant = result.p_value < args.alpha and result.delta < 0
        detected += significant
        for limit in limits:
            fails[limit] += significant and -result.delta > limit
    rates = {"the significance test (p < alpha, a drop)": detected}
    rates |= {f"the gate with regression_max = {limit}": fails[limit] for limit in limits}
    reaching = [label for label, count in rates.items() if count >= 0.8 * args.trials]
    lines = [rate_line(label, count, args) for label, count in rates.items()]
    return [*lines, f"    detection rate >= 0.8: {'; '.join(reaching) or 'none'}"]


def family_wise(args: argparse.Namespace, slices: list[np.ndarray]) -> list[str]:
    """(c) TAGS slices, no true change in any: does any slice come out significant?

    The slices overlap (a query has 1-3 tags); Holm holds under any dependence.
    """
    rng = np.random.default_rng(args.seed)
    corrected = uncorrected = gate_fails = 0
    for trial in range(args.trials):
        before, after = paired_hits(rng, QUERIES, args.hit_rate, args.churn)
        results = [
            paired_tests(before[s], after[s], resamples=args.trial_resamples, seed=trial)[0]
            for s in slices
        ]
        raw = [r.p_value for r in results]
        adjusted = holm(raw)
        uncorrected += min(raw) < args.alpha
        corrected += min(adjusted) < args.alpha
        gate_fails += any(
            p < args.alpha and -r.delta > 0.03 for p, r in zip(adjusted, results, strict=True)
        )
    return [
        rate_line("any slice significant, Holm-corrected", corrected, args, True),
        rate_line("any slice gate-fails, Holm (drop > 0.03)", gate_fails, args, True),
        rate_line("any slice significant, uncorrected", uncorrected, args),
    ]


def timing_workload(rng: np.random.Generator, slices: list[np.ndarray]) -> Callable[[], None]:
    """All statistics of one gate run: 2 binary and 3 continuous metrics, every query
    changed in the continuous ones (the slowest case for the sign-flip test)."""
    before = rng.random((QUERIES, len(METRICS)))
    after = np.clip(before + rng.normal(0.0, 0.1, before.shape), 0.0, 1.0)
    before[:, :2], after[:, :2] = (before[:, :2] < 0.85), (after[:, :2] < 0.85)
    everything = [np.arange(QUERIES), *slices]

    def run() -> None:
        results = [
            paired_tests(before[s], after[s], resamples=TIMING_RESAMPLES) for s in everything
        ]
        for column in range(len(METRICS)):
            holm([r[column].p_value for r in results[1:]])
            for s in everything:
                minimum_detectable_drop(before[s, column], alpha=0.05)

    return run


def timing(
    args: argparse.Namespace, slices: list[np.ndarray], repeat: int, target: bool = True
) -> list[str]:
    """(d) seconds for the workload, best and median of `repeat` runs."""
    run = timing_workload(np.random.default_rng(args.seed), slices)
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    best = min(seconds)
    line = f"    best {best:.3f} s, median {statistics.median(seconds):.3f} s of {repeat} runs"
    if not target:
        return [line]
    verdict = "PASS" if best < TIMING_TARGET_SECONDS else "FAIL"
    return [f"{line}  {verdict} (target < {TIMING_TARGET_SECONDS:.0f} s)"]


def main() -> None:
    args = parse_args()
    slices = tag_slices(np.random.default_rng(args.seed), QUERIES)
    sizes = sorted(len(s) for s in slices)
    median_slice = sizes[len(sizes) // 2]
    print(
        f"seed {args.seed}, {args.trials} trials per figure, alpha {args.alpha}, baseline hit "
        f"rate {args.hit_rate}; per query P(miss->hit) = {args.churn} and P(hit->miss) = "
        f"{args.churn} + the true drop"
    )
    print(
        f"trials use {args.trial_resamples} resamples: only p-values matter there; "
        "McNemar's is exact and does not resample at all"
    )
    print(
        f"tag slices: {TAGS}, {sizes[0]}-{sizes[-1]} queries (median {median_slice}), "
        f"{sum(sizes)} query-slice rows in all"
    )
    sections: list[tuple[str, Callable[[], list[str]]]] = [
        (
            f"(a) no true change, recall@5-like hits, n = {QUERIES}",
            lambda: false_fails(args, QUERIES),
        ),
        (
            f"(a) no true change, recall@5-like hits, n = {median_slice} (median tag slice)",
            lambda: false_fails(args, median_slice),
        ),
        (
            f"(a) no true change, MRR-like scores (sign-flip test), n = {QUERIES}",
            lambda: false_fails(args, QUERIES, continuous=True),
        ),
        (f"(b) true 3 pp recall@5 drop, n = {QUERIES}", lambda: detection(args)),
        (f"(c) {TAGS} tag slices, no true change in any", lambda: family_wise(args, slices)),
        (
            f"(d) timing: {QUERIES} queries, {TAGS} tag slices + overall, {len(METRICS)} "
            f"metrics, {TIMING_RESAMPLES} resamples (seed {args.seed})",
            lambda: timing(args, slices, args.timing_repeat),
        ),
        (
            f"(d) for scale, not a target: every tag slice holding all {QUERIES} queries",
            lambda: timing(args, [np.arange(QUERIES)] * TAGS, 3, target=False),
        ),
    ]
    for title, compute in sections:
        start = time.perf_counter()
        lines = compute()
        print(f"{title}  [{time.perf_counter() - start:.1f} s]")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
