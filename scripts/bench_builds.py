"""The gate's false-fail rate at the limit, and its power at twice the limit, when the
retriever is not the same twice: every build moves all its queries' scores at once
(a shift of the build's mean) and some queries flip from build to build.

    python scripts/bench_builds.py [--reps 400] [--seed 1]

Each cell draws `--reps` pairs of sides (the baseline's builds and the change's) on
the same queries whose true mean worsening is the limit (3 points), and counts how
often the gate's decision is "fail" (beyond the limit). Printed per cell:

- today: the single-build test (exact or betting) on the per-query means, blind to the
  builds (exactly the gate's decision at one build a side);
- gate: the gate's test with builds (`llm_eval.builds`: the queries' test and the
  builds' t, both at alpha, both rejecting);
- t: the builds' t alone (the mean worsening, its variance the queries' plus the
  builds' shifts', Satterthwaite's degrees of freedom): the textbook answer;
- bonf: the join the gate used before, the queries' test at alpha / 2 against the
  limit moved by Student's bound on the builds' gross spread at alpha / 2;
- pass: the gate's false passes at the limit (confidently within it), the other side
  of its three-zone verdict.

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

from llm_eval.builds import BuildsT, builds_bound, joined_test, spread_of
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


def decisions(before: np.ndarray, after: np.ndarray, limit: float) -> tuple[bool, ...]:
    """(today, gate, t, Bonferroni) fail decisions for per-build per-query scores
    (builds, n), and whether the gate's test passes confidently."""
    xb, xa = before.mean(axis=0), after.mean(axis=0)
    queries = column_test(xb, xa, ALPHA)
    today = queries.p_beyond(limit) <= ALPHA
    spread = spread_of(before, after)
    if spread.degrees == 0:
        return today, today, today, today, queries.p_within(limit) <= ALPHA
    joined = joined_test(queries, spread, xb - xa)
    gate = joined.p_beyond(limit) <= ALPHA
    t_alone = BuildsT(xb - xa, spread).p_beyond(limit) <= ALPHA
    # The join before this one: the queries' test at alpha / 2 against the limit moved
    # by Student's bound on the builds' gross spread at alpha / 2.
    h = builds_bound(spread.sd, spread.degrees, spread.scale, ALPHA / 2)
    halved = column_test(xb, xa, ALPHA / 2)
    bonferroni = halved.p_beyond(min(limit + h, 1 - 1e-9)) <= ALPHA / 2
    return today, gate, t_alone, bonferroni, joined.p_within(limit) <= ALPHA


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
    counts = np.zeros(5)
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
    parser.add_argument(
        "--cells", default="", help="with --promise: the cells to try, by position (0-5), in turn"
    )
    args = parser.parse_args()
    if args.promise:
        promises(args.reps, args.seed, args.cells)
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
        f"{'scores':7} {'n':>5} {'tau':>5} {'flip':>5} {'K':>4} | "
        + " ".join(f"{c:>6}" for c in ("today", "gate", "t", "bonf", "pass"))
        + " | "
        + " ".join(f"{c:>6}" for c in ("today", "gate", "t", "bonf"))
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
                            worst = max(worst, null[1], null[4])
                        print(
                            f"{name:7} {n:>5} {tau:>5} {flip:>5} {k[0]}/{k[1]:<2} | "
                            + " ".join(f"{v:6.3f}" for v in null)
                            + " | "
                            + " ".join(f"{v:6.3f}" for v in alt[:4]),
                            flush=True,
                        )
    print(
        "largest false-fail or false-pass rate of the gate's test where it claims "
        f"validity: {worst:.3f}"
    )


def promised(
    rng: np.random.Generator, n: int, labels: int, k: int, tau: float, flip: float
) -> tuple[float, bool]:
    """(the drop the gate's power statement promises to catch 4 times in 5 from one
    no-change draw, whether the gate fails one fresh draw whose true drop is that)."""
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
    fresh = rng.random((n, labels))
    caught = decisions(
        side(rng, fresh, BASE, k, tau, flip).mean(axis=2),
        side(rng, fresh, BASE - drop, k, tau, flip).mean(axis=2),
        LIMIT,
    )[1]
    return drop, bool(caught)


PROMISE_CELLS = [
    (300, 1, 3, 0.02, 0.1),
    (300, 4, 3, 0.02, 0.1),
    (1000, 1, 3, 0.01, 0.1),
    (2000, 1, 3, 0.02, 0.05),
    (300, 1, 5, 0.02, 0.1),
    (300, 1, 3, 0.0, 0.1),
]
"""(queries, labels, builds a side, shift sd, share flipping) of each promise cell."""


def promises(reps: int, seed: int, cells: str = "") -> None:
    """How often the drop the power statement promises (4 times in 5) is caught: each
    draw states a promise from a no-change draw of its own and tries it on a fresh
    draw whose true drop is the promised one, so the rate is the catch rate a team
    reading one statement meets."""
    rng = np.random.default_rng(seed)
    print(
        f"the drops power statements promise ({reps} no-change draws: median and 10-90% "
        "range), and how often the gate catches a true drop of the promised size "
        "(promised: 0.80)"
    )
    chosen = [int(c) for c in cells.split(",")] if cells else range(len(PROMISE_CELLS))
    for n, labels, k, tau, flip in (PROMISE_CELLS[c] for c in chosen):
        drops, caught = zip(
            *(promised(rng, n, labels, k, tau, flip) for _ in range(reps)), strict=True
        )
        low, middle, high = np.percentile(np.asarray(drops) * 100, [10, 50, 90])
        print(
            f"n {n:>5} labels {labels} builds {k} tau {tau:<4} flip {flip:<4}: promised "
            f"{middle:5.1f} pp ({low:.1f} to {high:.1f}), caught {np.mean(caught):.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
