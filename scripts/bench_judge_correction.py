"""Does the judged value corrected by the human labels cover the truth? Simulated.

`llm_eval.judged.correction` corrects a judged metric (context precision@k) with the
queries a person labelled: prediction-powered inference (Angelopoulos et al. 2023,
Science 382:669), its interval built from finite-sample betting bounds. This script
draws judged gold sets where the truth is known and counts how often each interval
holds it, against the nominal 1 − 2·alpha (90% at the gate's default alpha 0.05):

- **raw**: the judge's own mean and bounds (`correction.mean_bounds`), as if the judge
  were right: what a report without the correction would show;
- **PPI, normal**: the paper's large-sample interval (θ̂ ± z·√(var Ŷ/N + var(Y−Ŷ)/n));
- **PPI, llm-eval**: `correction.prediction_powered`, what the gate decides on;
- **labels only**: the same bounds over the n labelled queries alone, ignoring the
  judge: the peer the correction must beat on width to be worth the judge's calls.

Generative model: each query has 5 retrieved chunks; each is truly relevant with the
query's own probability p (drawn from a skewed Beta, so most queries have few or many
relevant chunks). The judge calls a relevant chunk useful with probability `sens` and a
not relevant one with 1 − `spec`: sens 0.9 / spec 0.55 leans up (it calls many useless
chunks useful), sens 0.5 / spec 0.95 leans down, both agreeing poorly; sens = spec =
0.95 agrees well (Cohen's kappa printed). Y is context precision@5 (RAGAS) from the
true relevance, Ŷ from the judge's verdicts. n queries carry human labels (Y known),
N = 500 others only the judge's Ŷ. The truth θ = E[Y] is the mean over 200,000 queries
drawn the same way.

    python scripts/bench_judge_correction.py            # 1,000 gold sets a case
    python scripts/bench_judge_correction.py --sets 200 # quicker
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from llm_eval.judged.arithmetic import calibration
from llm_eval.judged.correction import mean_bounds, prediction_powered

CHUNKS = 5
UNLABELLED = 500
ALPHA = 0.05


@dataclass(frozen=True)
class Case:
    name: str
    beta: tuple[float, float]
    """Beta(a, b) of a query's share of relevant chunks."""
    sens: float
    spec: float


CASES = (
    Case("leans up", (0.5, 2.0), 0.9, 0.55),
    Case("leans down", (2.0, 1.0), 0.5, 0.95),
    Case("agrees well", (0.5, 2.0), 0.95, 0.95),
)
LABELLED = (20, 50, 200)


def context_precision(verdicts: np.ndarray) -> np.ndarray:
    """RAGAS context precision@k of each row of 0/1 verdicts (0 without a useful one)."""
    ranks = np.arange(1, verdicts.shape[1] + 1)
    precision = np.cumsum(verdicts, axis=1) / ranks
    useful = verdicts.sum(axis=1)
    total = (precision * verdicts).sum(axis=1)
    return np.divide(total, useful, out=np.zeros_like(total), where=useful > 0)


def draw(case: Case, queries: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(Y, Ŷ, true chunk relevance, judge verdicts) for `queries` queries."""
    share = rng.beta(*case.beta, size=(queries, 1))
    truth = (rng.random((queries, CHUNKS)) < share).astype(np.float64)
    says_useful = np.where(truth == 1, case.sens, 1 - case.spec)
    judged = (rng.random((queries, CHUNKS)) < says_useful).astype(np.float64)
    return context_precision(truth), context_precision(judged), truth, judged


def normal_ppi(y: np.ndarray, y_hat: np.ndarray, others: np.ndarray) -> tuple[float, float]:
    """The paper's large-sample interval at 1 − 2·ALPHA."""
    z = NormalDist().inv_cdf(1 - ALPHA)
    estimate = others.mean() + (y - y_hat).mean()
    spread = math.sqrt(others.var(ddof=1) / others.size + (y - y_hat).var(ddof=1) / y.size)
    return estimate - z * spread, estimate + z * spread


def covers(low: float, high: float, theta: float) -> bool:
    return low <= theta <= high


def run_case(case: Case, labelled: int, sets: int, theta: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = {"raw": 0, "normal": 0, "llm-eval": 0, "labels": 0}
    widths = {"llm-eval": 0.0, "labels": 0.0}
    for _ in range(sets):
        y, y_hat, _, _ = draw(case, labelled, rng)
        _, others, _, _ = draw(case, UNLABELLED, rng)
        raw = mean_bounds(np.concatenate([y_hat, others]), ALPHA)
        ppi = prediction_powered(y, y_hat, others, ALPHA)
        alone = mean_bounds(y, ALPHA)
        hits["labels"] += covers(alone.low, alone.high, theta)
        widths["labels"] += alone.high - alone.low
        hits["raw"] += covers(raw.low, raw.high, theta)
        hits["normal"] += covers(*normal_ppi(y, y_hat, others), theta)
        hits["llm-eval"] += covers(ppi.low, ppi.high, theta)
        widths["llm-eval"] += ppi.high - ppi.low
    return {
        **{k: v / sets for k, v in hits.items()},
        **{f"width {k}": v / sets for k, v in widths.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=1000, help="gold sets per case")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.process_time()
    print(
        f"Nominal coverage {1 - 2 * ALPHA:.0%} (alpha {ALPHA} a side); N = {UNLABELLED} "
        f"queries judged only; {args.sets:,} gold sets a case.\n"
    )
    print(f"{'':<35}{'coverage':-^26}  {'width':-^13}")
    header = (
        f"{'judge':<11} {'n':>3} {'θ':>5} {'judge':>5} {'kappa':>5}  "
        f"{'raw':>5} {'normal':>6} {'PPI':>6} {'labels':>6}  {'PPI':>5} {'labels':>6}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(args.seed)
    for case in CASES:
        y, y_hat, truth, judged = draw(case, 200_000, rng)
        theta, judge = float(y.mean()), float(y_hat.mean())
        sample = zip(judged[:20_000].ravel(), truth[:20_000].ravel() == 1, strict=True)
        agreement = calibration([(int(j), bool(g)) for j, g in sample])
        kappa = agreement.kappa if agreement and agreement.kappa is not None else math.nan
        for labelled in LABELLED:
            got = run_case(case, labelled, args.sets, theta, args.seed + labelled)
            print(
                f"{case.name:<11} {labelled:>3} {theta:>5.3f} {judge:>5.3f} {kappa:>5.2f}  "
                f"{got['raw']:>5.0%} {got['normal']:>6.1%} {got['llm-eval']:>6.1%} "
                f"{got['labels']:>6.1%}  {got['width llm-eval']:>5.3f} {got['width labels']:>6.3f}"
            )
    print(f"\nCPU time {time.process_time() - started:.1f} s")


if __name__ == "__main__":
    main()
