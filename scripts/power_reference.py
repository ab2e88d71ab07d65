"""Write tests/data/power_reference.json: the 0/1 power statement's figures on a grid of
scopes, as the code checked out computes them, so that a faster computation can be
checked against the one it replaced (tests/test_power.py reads the file).

Each case is a 0/1 scope of n queries, 60% of them scoring 1 at the baseline, a share
of them changed (flipped) in the run, drawn with a fixed seed; recorded per case: the
drop it catches 4 times in 5 against a 3 pp limit, the queries needed to catch 6 pp,
and the catch rate of the exact test at a few sizes and drops.

Usage:
    python scripts/power_reference.py [--out tests/data/power_reference.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from llm_eval import detection, exact_power

SIZES = (176, 500, 1_000, 5_000, 20_000)
CHURN = (0.0, 0.02, 0.07, 0.2)
LIMIT, ALPHA = 0.03, 0.05
RATE_SIZES = (60, 176, 400, 777, 999)
DROPS = (0.04, 0.06, 0.09)


def scope(n: int, churn: float) -> tuple[np.ndarray, np.ndarray]:
    """A 0/1 scope of n queries, a share `churn` of them flipped in the run."""
    rng = np.random.default_rng(n)
    before = (rng.random(n) < 0.6).astype(np.float64)
    after = before.copy()
    flipped = rng.random(n) < churn
    after[flipped] = 1.0 - after[flipped]
    return before, after


def figures() -> dict[str, list[dict[str, object]]]:
    cases = []
    for n in SIZES:
        for churn in CHURN:
            before, after = scope(n, churn)
            drop = detection.detectable_worsening(before, after, LIMIT, ALPHA)
            needed = detection.queries_to_catch(before, after, 2 * LIMIT, LIMIT, ALPHA)
            cases.append({"n": n, "churn": churn, "detectable": drop, "needed": needed})
    rates = []
    for size in RATE_SIZES:
        for churn in CHURN:
            for drop in DROPS:
                rate = exact_power.exact_catch_rate(size, churn / 2 + drop, churn / 2, LIMIT, ALPHA)
                rates.append({"n": size, "churn": churn, "drop": drop, "rate": rate})
    return {"cases": cases, "rates": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/power_reference.json"))
    args = parser.parse_args()
    args.out.write_text(json.dumps(figures(), indent=1) + "\n")


if __name__ == "__main__":
    main()
