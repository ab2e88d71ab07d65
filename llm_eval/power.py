"""What a gated scope can tell: the one power model every surface prints (pure).

`llm-eval gate`, its report (terminal, Markdown, PR comment), `gold stats`, `gold
validate` and `gold plan` all ask `scope_power` and print its numbers through one
sentence (`wording.power_statement`), so the same scope gets the same figures.

The model (`detection.detectable_worsening`, `detection.queries_to_catch`): a regression makes
queries that did not change lose their whole score, while the changed ones keep the
change seen against the baseline in either direction at random (churn with no trend,
at the rate seen); the gate's own test (exact for 0/1 scores, the graded test
otherwise) must find the drop beyond the limit 4 times in 5, counting the noise of the
churn seen (the truth's churn may be higher or lower). The gate has the paired run, so
it uses the churn it sees; the gold commands have only the baseline's per-query
scores, so they assume none (the run equals the baseline). docs/power-statement.md
shows how often the drop named is really caught where the truth is known. A drop of
exactly the limit is never caught more often than alpha (it is the test's null), so
the queries needed are those that catch `catch` times the limit, twice by default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from llm_eval.builds import BuildSpread, builds_bound
from llm_eval.criteria import Gate
from llm_eval.detection import detectable_worsening, queries_to_catch
from llm_eval.gate import Power, worsening_pair
from llm_eval.judgments import FloatArray
from llm_eval.metrics import parse_metric
from llm_eval.wording.english import plural

CATCH = 2.0
"""The multiple of the limit whose queries needed every surface prints."""
NO_BASELINE = "assuming every query scores 1 now (no baseline to read) and nothing else changes"
"""The assumption without a baseline: 0/1 scores, every query found."""
POWER_Z = 0.8416212335729143
"""The standard normal's quantile at `detection.POWER` (4 times in 5)."""
MOST_QUERIES = 10_000
"""The largest scope the queries needed are searched up to; beyond it they are open."""


def gate_power(
    gate: Gate,
    before: FloatArray,
    after: FloatArray,
    limit: float,
    catch: float = CATCH,
    spread: BuildSpread | None = None,
) -> Power | None:
    """`scope_power` for a gate's scope: the per-query scores at the baseline and now
    (the baseline's twice when there is no run), oriented by the metric's direction,
    against `limit` (the absolute move allowed); `builds_power` when the scores are
    means over several builds (`spread`). None when the gate runs no paired test (no
    limit, `significance: off`, or a metric not tested query by query)."""
    testable = parse_metric(gate.metric).testable
    if gate.regression_max is None or not gate.statistics.significance or not testable:
        return None
    if spread is not None:
        return builds_power(gate, before, after, limit, spread, catch)
    worse_before, worse_after = worsening_pair(gate.metric, before, after)
    return scope_power(worse_before, worse_after, limit, gate, catch)


def baseline_power(
    gate: Gate,
    scores: Sequence[float] | None,
    n: int,
    catch: float = CATCH,
    spread: BuildSpread | None = None,
) -> Power | None:
    """`gate_power` before any run (`gold stats`, `gold plan`): the baseline's per-query
    scores of the scope on both sides, no churn, as `llm-eval gate` sees them while the
    run equals the baseline. Without a baseline, n queries that all score 1 (0/1
    scores, the exact test), said so in the assumption. None: no paired test or no
    absolute limit to test against (a relative one without a baseline). `spread`: the
    baseline's builds on both sides, when it holds several."""
    if not gate.regression_max or (scores is not None and not scores):
        return None
    known = np.ones(n) if scores is None else np.asarray(scores, dtype=np.float64)
    limit = gate.regression_max
    if gate.regression_relative:
        if scores is None:
            return None
        limit *= float(known.mean())
    power = gate_power(gate, known, known, limit, catch, spread)
    if power is None or scores is not None:
        return power
    return replace(power, assumption=NO_BASELINE)


def scope_power(
    before: FloatArray, after: FloatArray, limit: float, gate: Gate, catch: float = CATCH
) -> Power:
    """The drop the scope catches 4 times in 5, and about how many queries like these
    catch `catch` times `limit`; both None when open (no size reaches them)."""
    settings = gate.statistics
    span = parse_metric(gate.metric).span
    target = min(catch * limit, 0.99 * span)
    alpha, seed, simulations = settings.alpha, settings.seed, settings.resamples
    drop = math.inf
    if before.size >= 2:
        drop = detectable_worsening(
            before, after, limit, alpha, seed=seed, span=span, simulations=simulations
        )
    needed = None
    if target > limit:
        needed = queries_to_catch(
            before,
            after,
            target,
            limit,
            alpha,
            seed=seed,
            span=span,
            simulations=simulations,
            most=MOST_QUERIES,
        )
    return Power(
        n=before.size,
        limit=limit,
        detectable_drop=drop if math.isfinite(drop) else None,
        target=target,
        queries_needed=needed,
        assumption=assumption(before, after),
    )


def assumption(before: FloatArray, after: FloatArray) -> str:
    """What the figures assume about the queries the drop does not take, in one clause."""
    changed = int(np.count_nonzero(before != after))
    if changed == 0:
        return "assuming no other query's score changes"
    return (
        f"assuming the churn seen against the baseline "
        f"({changed:,} of {plural(before.size, 'query', 'queries')} changed)"
    )


def builds_power(
    gate: Gate,
    before: FloatArray,
    after: FloatArray,
    limit: float,
    spread: BuildSpread,
    catch: float = CATCH,
) -> Power:
    """`scope_power` for a scope measured on several builds (`llm_eval.builds`): the
    queries' test at alpha / 2 against the limit moved by the builds' bound, and the
    builds' own error added to the drop's noise (the spread seen taken as the truth's).
    With `more_builds`: the drop caught with two more builds a side, the queries as they
    are, so that a team can weigh more queries against more builds."""
    settings = gate.statistics
    half = settings.alpha / 2
    span = parse_metric(gate.metric).span
    worse_before, worse_after = worsening_pair(gate.metric, before, after)
    target = min(catch * limit, 0.99 * span)
    n = worse_before.size
    queries_sd = float(np.std(worse_before - worse_after, ddof=1)) / math.sqrt(n) if n > 1 else 0.0

    def caught(degrees: int, scale: float) -> tuple[float, float, float]:
        """(the drop caught 4 times in 5, the limit the queries' test meets, the builds'
        share of the drop) with builds of these degrees of freedom and scale."""
        margin = min(limit + builds_bound(spread.sd, degrees, scale, half), 0.99 * span)
        builds_sd = spread.sd * scale
        extra = POWER_Z * (math.hypot(queries_sd, builds_sd) - queries_sd)
        drop = math.inf
        if n >= 2:
            drop = detectable_worsening(
                worse_before,
                worse_after,
                margin,
                half,
                seed=settings.seed,
                span=span,
                simulations=settings.resamples,
            )
        return drop + extra, margin, extra

    drop, margin, extra = caught(spread.degrees, spread.scale)
    needed = None
    if target - extra > margin:
        needed = queries_to_catch(
            worse_before,
            worse_after,
            target - extra,
            margin,
            half,
            seed=settings.seed,
            span=span,
            simulations=settings.resamples,
            most=MOST_QUERIES,
        )
    more = max(len(spread.before), len(spread.after)) + 2
    more_drop, _, _ = caught(2 * (more - 1), math.sqrt(2 / more))
    return Power(
        n=n,
        limit=limit,
        detectable_drop=drop if math.isfinite(drop) else None,
        target=target,
        queries_needed=needed,
        assumption=assumption(before, after),
        builds=(len(spread.before), len(spread.after)),
        more_builds=(more, more_drop if math.isfinite(more_drop) else None),
    )
