"""Is the power statement honest? Its claimed drop against the gate's real catch rate.

Every surface prints "a drop of D is caught 4 times in 5" with D from
`detection.detectable_worsening` (the churn and scores it sees are its only knowledge of
the truth). This script checks that claim where the truth is known: the generative
retriever model of `scripts/bench_gate_soundness.py` (imported from it, section A of
its docstring), with no true change in the sample the statement is made from.

Per cell -- a metric, a change model and n queries, alpha = 0.05:

1. draw one "observed" paired sample of n queries from the model with no true change
   (the churn alone), and compute the statement's D with `detectable_worsening(before,
   after, limit, alpha)` (the gate's settings: seed 0, 400 simulations);
2. make the truth worse by exactly D: the model's drop branch (queries pushed out of
   the top 10) with its share calibrated so that the true mean worsening is D;
3. draw `--trials` fresh samples of n queries from that true model and apply the
   gate's decision to each: `stats.column_test(before, after, alpha)` (exact for 0/1
   scores, the graded test otherwise), fail when `p_beyond(limit) <= alpha`; the share
   failed is this statement's realised catch rate;
4. repeat over `--observed` observed samples.

Printed per cell: the mean realised catch rate (the statement says 0.80) with its
standard error over the observed samples, the 10th and 90th percentiles of the single
statements' rates (each also carries the binomial noise of `--trials` samples, about
+-0.03 at 200), the mean claimed D in units of the limit, the share of statements
with no finite D, and the CPU seconds (`time.process_time` of the cell's worker).

Cells: 0/1 hit@5 with 1%, 5% and 20% of queries flipping (churn); MRR@10 and nDCG@10
(1-3 graded relevant) under G1 (20% of queries redrawn either way) and G2 (40% move
1-2 ranks either way); n = 100, 200, 500, 1000.

Usage:
    python scripts/bench_power_statement.py [--observed 40] [--trials 200] [--seed 0]
        [--sizes 100,200,500,1000] [--workers 2] [--calibration-draws 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from bench_gate_soundness import (
    BINARY_MODELS,
    GRADED_MODELS,
    METRICS,
    Calibration,
    ChangeModel,
    Metric,
    calibrate,
    sample,
)

from llm_eval import betting, bounds, exact_test, stats
from llm_eval.detection import POWER, detectable_worsening
from llm_eval.stats import column_test

ALPHA = 0.05
STATS_SHA256 = hashlib.sha256(
    b"".join(Path(m.__file__).read_bytes() for m in (stats, bounds, exact_test, betting))
).hexdigest()


@dataclass(frozen=True)
class Cell:
    metric: int
    model: int
    n: int


@dataclass(frozen=True)
class Outcome:
    cell: Cell
    rates: tuple[float, ...]
    """Realised catch rate of each statement with a finite D."""
    claimed: tuple[float, ...]
    """Each finite D, in units of the limit."""
    open_claims: int
    """Statements with no finite D (nothing caught 4 times in 5)."""
    unreachable: int
    """Finite claims the model cannot make true (beyond its largest drop)."""
    cpu: float


def models_of(metric: Metric) -> tuple[ChangeModel, ...]:
    return BINARY_MODELS if metric.key == "hit@5" else GRADED_MODELS


def cells(sizes: tuple[int, ...]) -> list[Cell]:
    chosen = []
    for i, metric in enumerate(METRICS):
        if metric.key == "hit@5":
            models = (1, 2, 3)  # churn 1%, 5%, 20%
        elif metric.key in ("mrr@10", "ndcg@10"):
            models = (0, 1)  # G1 redraw, G2 small moves
        else:
            continue
        chosen += [Cell(i, j, n) for j in models for n in sizes]
    return chosen


def rng_for(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *key]))


def catches(before: np.ndarray, after: np.ndarray, limit: float) -> int:
    """Samples (rows) the gate fails: `column_test`'s p_beyond at the limit <= alpha."""
    caught = 0
    for b, a in zip(before, after, strict=True):
        if np.any(b != a) and column_test(b, a, ALPHA).p_beyond(limit) <= ALPHA:
            caught += 1
    return caught


def run_cell(job: tuple[Cell, int, int, int, int]) -> Outcome:
    cell, observed, trials, seed, draws = job
    start = time.process_time()
    metric = METRICS[cell.metric]
    model = models_of(metric)[cell.model]
    cal: Calibration = calibrate(metric, model, draws, rng_for(seed, 1, cell.metric, cell.model))
    zero = cal.drop_for(0.0)
    assert zero is not None
    rates: list[float] = []
    claimed: list[float] = []
    open_claims = unreachable = 0
    for k in range(observed):
        rng = rng_for(seed, 2, cell.metric, cell.model, cell.n, k)
        before, after = (x[0] for x in sample(metric, model, zero, cell.n, 1, rng))
        drop = detectable_worsening(before, after, metric.limit, ALPHA)
        if not math.isfinite(drop):
            open_claims += 1
            continue
        share = cal.drop_for(drop)
        if share is None:
            unreachable += 1
            continue
        b, a = sample(metric, model, share, cell.n, trials, rng)
        rates.append(catches(b, a, metric.limit) / trials)
        claimed.append(drop / metric.limit)
    cpu = time.process_time() - start
    return Outcome(cell, tuple(rates), tuple(claimed), open_claims, unreachable, cpu)


def table(outcomes: list[Outcome], observed: int, trials: int) -> list[str]:
    headers = [
        "metric",
        "model",
        "n",
        "mean caught",
        "± SE",
        "p10-p90 single",
        "D / limit",
        "no D",
        "CPU s",
    ]
    rows = []
    for o in outcomes:
        metric = METRICS[o.cell.metric]
        model = models_of(metric)[o.cell.model]
        r = np.asarray(o.rates)
        if r.size:
            se = float(r.std(ddof=1) / math.sqrt(r.size)) if r.size > 1 else math.nan
            mean, spread = f"{r.mean():.3f}", f"{np.quantile(r, 0.1):.2f}-{np.quantile(r, 0.9):.2f}"
            ratio = f"{np.mean(o.claimed):.2f}"
            error = f"{se:.3f}"
        else:
            mean = spread = ratio = error = "-"
        missing = o.open_claims + o.unreachable
        rows.append(
            [
                metric.key,
                model.key,
                str(o.cell.n),
                mean,
                error,
                spread,
                ratio,
                str(missing),
                f"{o.cpu:.0f}",
            ]
        )
    widths = [max(len(h), *(len(row[c]) for row in rows)) for c, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += [
        "| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observed", type=int, default=40)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default="100,200,500,1000")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calibration-draws", type=int, default=1_000_000)
    parser.add_argument("--only", default="", help="metric keys to run, comma-separated")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(","))
    chosen = cells(sizes)
    if args.only:
        keys = set(args.only.split(","))
        chosen = [c for c in chosen if METRICS[c.metric].key in keys]
    jobs = [(c, args.observed, args.trials, args.seed, args.calibration_draws) for c in chosen]
    # The largest cells first, so the workers finish together.
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][0].n)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = dict(zip(order, pool.map(run_cell, [jobs[i] for i in order]), strict=True))
    outcomes = [done[i] for i in range(len(jobs))]
    print(f"llm_eval/stats.py, bounds.py, exact_test.py, betting.py sha256 {STATS_SHA256[:16]}")
    print(
        f"alpha {ALPHA}, claimed catch rate {POWER:.2f}; {args.observed} observed samples "
        f"per cell, {args.trials} fresh samples per statement, seed {args.seed}, "
        f"{args.calibration_draws:,} calibration draws"
    )
    print("\n".join(table(outcomes, args.observed, args.trials)))
    print(f"CPU seconds in all: {sum(o.cpu for o in outcomes):.0f}")


if __name__ == "__main__":
    main()
