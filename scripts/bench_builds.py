"""The gate's false-fail rate at the limit, and its power at twice the limit, when the
retriever is not the same twice: every build moves all its queries' scores at once
(a shift of the build's mean) and some queries flip from build to build.

    python scripts/bench_builds.py [--reps 400] [--seed 1]

Each cell draws `--reps` pairs of sides (the baseline's builds and the change's) on
the same queries whose true mean worsening is the limit (3 points), and counts how
often the gate's decision is "fail" (beyond the limit). Printed per cell:

- today: the single-build test on the per-query means, as the gate decided before
  builds were known (exactly the gate's decision at one build a side);
- builds: the gate's test now (`llm_eval.builds`: the queries' test joined with the
  builds' t bound);
- t (builds): a paired t-test whose variance adds the builds' pooled variance
  (Satterthwaite's degrees of freedom): the textbook large-sample answer, for scale.

K = "2/1" is a baseline refreshed with the default noise check (two builds) and a
gate at one build. The last columns are the catch rates at twice the limit.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_eval.builds import BuildSpread, t_cdf
from llm_eval.stats import column_test

ALPHA = 0.05
LIMIT = 0.03
BASE = 0.6


def side(
    rng: np.random.Generator, u: np.ndarray, mean: float, builds: int, tau: float, flip: float
) -> np.ndarray:
    """(builds, queries, labels) 0/1 scores: each build shifts the mean by N(0, tau^2);
    a query keeps its difficulty u across builds unless it flips (share `flip`), when its
    outcome is drawn afresh at the build's mean."""
    shift = rng.normal(0.0, tau, size=(builds, 1, 1))
    p = np.clip(mean + shift, 0.0, 1.0)
    stable = (u[None] < p).astype(np.float64)
    fresh = (rng.random((builds, *u.shape)) < p).astype(np.float64)
    flips = rng.random((builds, *u.shape)) < flip
    return np.where(flips, fresh, stable)


def decisions(before: np.ndarray, after: np.ndarray, limit: float) -> tuple[bool, bool, bool]:
    """(today, builds, t) fail decisions for per-build per-query scores (builds, n)."""
    xb, xa = before.mean(axis=0), after.mean(axis=0)
    today = column_test(xb, xa, ALPHA).p_beyond(limit) <= ALPHA
    spread = BuildSpread(tuple(before.mean(axis=1)), tuple(after.mean(axis=1)))
    if spread.degrees == 0:
        builds = today
    else:  # the gate's decision: `WithBuilds.p_beyond(limit) <= alpha`, in one step
        h = spread.half_width(ALPHA / 2)
        queries = column_test(xb, xa, ALPHA / 2)
        builds = queries.p_beyond(min(limit + h, 1 - 1e-9)) <= ALPHA / 2
    d = xb - xa
    n = d.size
    var_q = d.var(ddof=1) / n
    var_b = spread.sd**2 * spread.scale**2
    se = math.sqrt(var_q + var_b)
    if se == 0.0:
        t_fail = d.mean() > limit
    else:
        df_parts = [(var_q, n - 1)] + ([(var_b, spread.degrees)] if spread.degrees else [])
        df = (var_q + var_b) ** 2 / sum(v * v / f for v, f in df_parts if f > 0)
        t_fail = 1.0 - t_cdf((d.mean() - limit) / se, df) <= ALPHA
    return today, builds, bool(t_fail)


def cell(
    rng: np.random.Generator,
    n: int,
    labels: int,
    tau: float,
    flip: float,
    k: tuple[int, int],
    drop: float,
    reps: int,
) -> np.ndarray:
    counts = np.zeros(3)
    for _ in range(reps):
        u = rng.random((n, labels))
        before = side(rng, u, BASE, k[0], tau, flip).mean(axis=2)
        after = side(rng, u, BASE - drop, k[1], tau, flip).mean(axis=2)
        counts += decisions(before, after, LIMIT)
    return counts / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default="30,300,2000")
    parser.add_argument(
        "--promise", action="store_true", help="Check the power statement's promise instead."
    )
    args = parser.parse_args()
    if args.promise:
        promises(args.reps, args.seed)
        return
    rng = np.random.default_rng(args.seed)
    sizes = [int(s) for s in args.sizes.split(",")]
    configs = [(1, 1), (2, 1), (2, 2), (3, 3), (5, 5)]
    bound = ALPHA + 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    print(
        f"false fails at the limit (alpha {ALPHA}; with {args.reps} draws a rate above "
        f"{bound:.3f} is beyond alpha at 99%); catch rates at twice the limit"
    )
    print(
        f"{'scores':7} {'n':>5} {'tau':>5} {'flip':>5} {'K':>4} | {'today':>6} "
        f"{'builds':>6} {'t':>6} | {'today':>6} {'builds':>6} {'t':>6}"
    )
    worst = 0.0
    for labels, name in ((1, "0/1"), (4, "graded")):
        for n in sizes:
            for tau in (0.0, 0.02):
                for flip in (0.05, 0.3):
                    for k in configs:
                        null = cell(rng, n, labels, tau, flip, k, LIMIT, args.reps)
                        alt = cell(rng, n, labels, tau, flip, k, 2 * LIMIT, args.reps)
                        if k != (1, 1) or tau == 0.0:
                            worst = max(worst, null[1])
                        print(
                            f"{name:7} {n:>5} {tau:>5} {flip:>5} {k[0]}/{k[1]:<2} | "
                            + " ".join(f"{v:6.3f}" for v in null)
                            + " | "
                            + " ".join(f"{v:6.3f}" for v in alt),
                            flush=True,
                        )
    print(f"largest false-fail rate of the gate's test where it claims validity: {worst:.3f}")


if __name__ == "__main__":
    main()


def promised(
    rng: np.random.Generator, n: int, labels: int, k: int, tau: float, flip: float, reps: int
) -> tuple[float, float]:
    """(the drop the gate's power statement promises to catch 4 times in 5 from one
    no-change draw, the share of `reps` draws at that true drop the gate fails)."""
    from llm_eval.builds import build_spread
    from llm_eval.criteria import Gate, Location, Scope
    from llm_eval.power import gate_power

    u = rng.random((n, labels))
    before = side(rng, u, BASE, k, tau, flip).mean(axis=2)
    after = side(rng, u, BASE, k, tau, flip).mean(axis=2)
    ids = [str(q) for q in range(n)]
    spread = build_spread(
        [dict(zip(ids, ({"recall@5": v} for v in b), strict=True)) for b in before],
        [dict(zip(ids, ({"recall@5": v} for v in a), strict=True)) for a in after],
        ids,
        "recall@5",
    )
    here = Location("bench", 1, "gates[0]")
    gate = Gate("g", "recall@5", None, LIMIT, "error", Scope(), here, here)
    power = gate_power(gate, before.mean(axis=0), after.mean(axis=0), LIMIT, spread=spread)
    assert power is not None and power.detectable_drop is not None
    drop = power.detectable_drop
    caught = sum(
        decisions(
            side(rng, uu := rng.random((n, labels)), BASE, k, tau, flip).mean(axis=2),
            side(rng, uu, BASE - drop, k, tau, flip).mean(axis=2),
            LIMIT,
        )[1]
        for _ in range(reps)
    )
    return drop, caught / reps


def promises(reps: int, seed: int) -> None:
    """How often the drop each power statement promises (4 times in 5) is caught."""
    rng = np.random.default_rng(seed)
    print(
        "the drop the power statement promises from one no-change draw, and how often "
        f"the gate catches it ({reps} draws; promised: 0.8)"
    )
    for n, labels, k, tau, flip in [
        (300, 1, 3, 0.02, 0.1),
        (300, 4, 3, 0.02, 0.1),
        (1000, 1, 3, 0.01, 0.1),
        (2000, 1, 3, 0.02, 0.05),
        (300, 1, 5, 0.02, 0.1),
    ]:
        drop, caught = promised(rng, n, labels, k, tau, flip, reps)
        print(
            f"n {n:>5} labels {labels} builds {k} tau {tau} flip {flip}: promised "
            f"{drop * 100:5.1f} pp, caught {caught:.2f}",
            flush=True,
        )
