"""Is the gate's decision sound? Its error rates, power and speed on simulated changes.

Every figure here comes from the gate's own code: `llm_eval.stats.margin_tests` (the
paired test against the limit) and `llm_eval.gate.decide` / `decide_slices` (the
three-zone decision), and the timing from `llm_eval.comparison`, as `llm-eval gate`
calls them. Nothing below re-implements the rule.

Each query has a baseline ("before") and a head ("after") recall@5-like outcome, 1 (hit)
or 0 (miss), drawn per query from a joint distribution:

    P(hit -> miss) = churn + drop      P(miss -> hit) = churn

with a baseline hit rate of --hit-rate (0.85). The gate is an `error` gate on recall@5
with regression_max 0.03 (3 pp), alpha 0.05, min_n 30 and the default on_inconclusive.

(a) for n = 1,000 and 1,400: for each true drop from 0 to 3 pp (allowed changes), how
    often the gate decides "fail" (must stay <= alpha), how often it cannot tell, and
    how often it blocks the merge (fail, or cannot tell with the estimate beyond the
    limit, the default on_inconclusive); for true drops of 4, 5 and 8 pp, how often it
    fails and blocks (its power);
(b) the power statement: the drop the gate claims to catch 4 times in 5, from one run
    with no true change, against the detection rate simulated at that drop;
(c) 20 tag slices (Holm-corrected), a true drop in every slice: how often any slice
    fails at allowed drops, and the share of slices failed at larger ones;
(d) the time of all statistics for 1,400 queries x 20 tags x 5 metrics as the gate
    computes them (10,000 resamples), against a 0.5 s target.

Usage: python scripts/bench_gate_soundness.py [--trials 1000] [--slice-trials 200] [--seed 0]
"""

from __future__ import annotations

import os

# One BLAS thread: on a 2-core runner, BLAS threads and the test's own work fight.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from llm_eval.baseline import Baseline  # noqa: E402
from llm_eval.comparison import decide_gates  # noqa: E402
from llm_eval.criteria import Gate, Location, Scope, Statistics  # noqa: E402
from llm_eval.gate import GateResult, SliceInput, decide, decide_slices  # noqa: E402
from llm_eval.gold import GoldQuery  # noqa: E402
from llm_eval.slices import ScoreTable  # noqa: E402
from llm_eval.stats import margin_tests  # noqa: E402

LIMIT = 0.03
ALLOWED_DROPS = (0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03)
LARGER_DROPS = (0.04, 0.05, 0.08)
SIZES = (1_000, 1_400)
TAGS = 20
TIMING_QUERIES = 1_400
METRICS = ("recall@5", "hit_rate@5", "mrr", "ndcg@10", "map")
TIMING_TARGET_SECONDS = 0.5
HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000, help="trials per gate figure")
    parser.add_argument("--slice-trials", type=int, default=200, help="trials per slice figure")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulations")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--hit-rate", type=float, default=0.85, help="baseline hit rate")
    parser.add_argument(
        "--churn", type=float, default=0.02, help="per-query probability of each flip direction"
    )
    parser.add_argument("--timing-repeat", type=int, default=5)
    return parser.parse_args()


def make_gate(alpha: float, per_tag: bool = False, metric: str = "recall@5") -> Gate:
    return Gate(
        "retrieval_recall_at_5",
        metric,
        None,
        LIMIT,
        "error",
        Scope(),
        HERE,
        HERE,
        statistics=Statistics(alpha=alpha),
        per_tag=per_tag,
    )


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


def gate_once(gate: Gate, before: np.ndarray, after: np.ndarray) -> GateResult:
    """The gate's decision on one simulated change."""
    margin = margin_tests(before, after, [LIMIT], alpha=gate.statistics.alpha)[0]
    return decide(gate, float(after.mean()), before.size, float(before.mean()), margin=margin)


def rate(count: int, trials: int) -> str:
    value = count / trials
    return f"{value:6.3f} ± {math.sqrt(value * (1 - value) / trials):.3f}"


def gate_rates(args: argparse.Namespace, n: int) -> list[str]:
    """(a) at n queries: fail, cannot-tell and blocking rates at each true drop."""
    gate = make_gate(args.alpha)
    rng = np.random.default_rng(args.seed)
    lines = [f"    {'true drop':>9}  {'fail':>14}  {'cannot tell':>14}  {'blocks':>14}  check"]
    for drop in ALLOWED_DROPS + LARGER_DROPS:
        counts = {"fail": 0, "inconclusive": 0, "blocks": 0}
        for _ in range(args.trials):
            result = gate_once(gate, *paired_hits(rng, n, args.hit_rate, args.churn, drop))
            counts["fail"] += result.decision == "fail"
            counts["inconclusive"] += result.decision == "inconclusive"
            counts["blocks"] += result.blocking
        check = ""
        if drop <= LIMIT:
            ceiling = args.alpha + 2.326 * math.sqrt(args.alpha * (1 - args.alpha) / args.trials)
            ok = counts["fail"] / args.trials <= ceiling
            check = f"fail <= alpha: {'PASS' if ok else 'FAIL'}"
        cells = "  ".join(rate(counts[k], args.trials) for k in ("fail", "inconclusive", "blocks"))
        lines.append(f"    {drop * 100:6.1f} pp  {cells}  {check}")
    lines.append(f"    ({args.trials} trials a row, seed {args.seed}; ± one standard error)")
    return lines


def power_check(args: argparse.Namespace, n: int) -> list[str]:
    """(b) the drop the report claims is caught 4 times in 5, simulated at that drop."""
    gate = make_gate(args.alpha)
    rng = np.random.default_rng(args.seed + 1)
    claimed = gate_once(gate, *paired_hits(rng, n, args.hit_rate, args.churn))
    from llm_eval.comparison import _power  # the gate's own power statement

    power = _power(gate, claimed.margin, claimed.decision, claimed.baseline or 0.0)
    assert power is not None
    drop = power.detectable_drop
    detected = sum(
        gate_once(gate, *paired_hits(rng, n, args.hit_rate, args.churn, drop)).decision == "fail"
        for _ in range(args.trials)
    )
    observed = detected / args.trials
    verdict = "PASS" if abs(observed - 0.8) <= 0.05 else "FAIL"
    return [
        f"    claimed: a drop of {drop * 100:.1f} pp is caught 4 times in 5; simulated at that "
        f"drop: {rate(detected, args.trials)}  within 0.80 ± 0.05: {verdict}"
    ]


def tag_members(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Query indices of each of TAGS tags: 1-3 tags a query, popular tags more often."""
    weights = 1.0 / np.arange(1, TAGS + 1)
    weights /= weights.sum()
    members: list[list[int]] = [[] for _ in range(TAGS)]
    for query in range(n):
        count = rng.choice([1, 2, 3], p=[0.25, 0.3, 0.45])
        for tag in rng.choice(TAGS, size=count, replace=False, p=weights):
            members[tag].append(query)
    return [np.array(m, dtype=np.intp) for m in members]


def slice_rates(args: argparse.Namespace, n: int) -> list[str]:
    """(c) Holm-corrected tag slices with the same true drop in every slice."""
    gate = make_gate(args.alpha, per_tag=True)
    rng = np.random.default_rng(args.seed + 2)
    members = tag_members(rng, n)
    sizes = sorted(len(m) for m in members)
    lines = [
        f"    {TAGS} tags of {sizes[0]}-{sizes[-1]} queries (median {sizes[TAGS // 2]}); "
        f"{args.slice_trials} trials a row",
        f"    {'true drop':>9}  {'any slice fails':>15}  {'slices failed':>13}",
    ]
    for drop in ALLOWED_DROPS + LARGER_DROPS:
        any_fail = failed = 0
        for _ in range(args.slice_trials):
            before, after = paired_hits(rng, n, args.hit_rate, args.churn, drop)
            inputs = []
            for tag, index in enumerate(members):
                b, a = before[index], after[index]
                margin = margin_tests(b, a, [LIMIT], alpha=args.alpha)[0]
                inputs.append(SliceInput(str(tag), b.size, a.mean(), b.mean(), margin))
            statuses = [s.status for s in decide_slices(gate, inputs)]
            any_fail += "fail" in statuses
            failed += statuses.count("fail")
        share = failed / (args.slice_trials * TAGS)
        check = ""
        if drop <= LIMIT:
            ok = any_fail / args.slice_trials <= args.alpha + 2.326 * math.sqrt(
                args.alpha * (1 - args.alpha) / args.slice_trials
            )
            check = f"  any <= alpha: {'PASS' if ok else 'FAIL'}"
        lines.append(
            f"    {drop * 100:6.1f} pp  {rate(any_fail, args.slice_trials):>15}  "
            f"{share:13.3f}{check}"
        )
    return lines


def timing_workload(rng: np.random.Generator) -> Callable[[], None]:
    """Five per-tag gates over 1,400 queries, decided as the gate decides them: two
    0/1 metrics and three graded ones, every query changed in the graded ones."""
    members = tag_members(rng, TIMING_QUERIES)
    tags_of: list[list[str]] = [[] for _ in range(TIMING_QUERIES)]
    for tag, index in enumerate(members):
        for query in index:
            tags_of[query].append(f"t{tag}")
    queries = [
        GoldQuery(f"q{i}", "?", "A", tuple(tags_of[i]), (("d", 1),), False, None, None, "g", i)
        for i in range(TIMING_QUERIES)
    ]
    before = rng.random((TIMING_QUERIES, len(METRICS)))
    after = np.clip(before + rng.normal(0.0, 0.1, before.shape), 0.0, 1.0)
    before[:, :2], after[:, :2] = (before[:, :2] < 0.85), (after[:, :2] < 0.85)
    rows = [
        (
            q.query_id,
            dict(zip(METRICS, map(float, b), strict=True)),
            dict(zip(METRICS, map(float, a), strict=True)),
        )
        for q, b, a in zip(queries, before, after, strict=True)
    ]
    baseline = Baseline(
        "2026-01-01T00:00:00Z",
        None,
        "bench",
        {},
        {},
        1,
        5,
        METRICS,
        {qid: b for qid, b, _ in rows},
        {},
        {},
    )
    now = ScoreTable({qid: a for qid, _, a in rows})
    gates = [make_gate(0.05, per_tag=True, metric=m) for m in METRICS]

    def run() -> None:
        decide_gates(queries, gates, now, baseline, None)

    return run


def timing(args: argparse.Namespace) -> list[str]:
    """(d) seconds for the workload, best and median of --timing-repeat runs."""
    run = timing_workload(np.random.default_rng(args.seed))
    seconds = []
    for _ in range(args.timing_repeat):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    best = min(seconds)
    verdict = "PASS" if best < TIMING_TARGET_SECONDS else "FAIL"
    return [
        f"    best {best:.3f} s, median {statistics.median(seconds):.3f} s of "
        f"{args.timing_repeat} runs  {verdict} (target < {TIMING_TARGET_SECONDS} s)"
    ]


def main() -> None:
    args = parse_args()
    print(
        f"error gate on recall@5, regression_max {LIMIT}, alpha {args.alpha}, min_n 30, "
        f"on_inconclusive default; baseline hit rate {args.hit_rate}, churn {args.churn} "
        "each way per query"
    )
    sections: list[tuple[str, Callable[[], list[str]]]] = []
    for n in SIZES:
        sections.append((f"(a) one gate, n = {n}", lambda n=n: gate_rates(args, n)))
    for n in SIZES:
        sections.append((f"(b) power statement, n = {n}", lambda n=n: power_check(args, n)))
    sections.append(
        (f"(c) {TAGS} tag slices, n = {SIZES[-1]}", lambda: slice_rates(args, SIZES[-1]))
    )
    sections.append(
        (
            f"(d) timing: {TIMING_QUERIES} queries x {TAGS} tags (+ overall) x {len(METRICS)} "
            "metrics, 10,000 resamples, as the gate calls them",
            lambda: timing(args),
        )
    )
    for title, compute in sections:
        start = time.perf_counter()
        lines = compute()
        print(f"{title}  [{time.perf_counter() - start:.1f} s]")
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
