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

The figures cost a simulation or exact sums, yet depend on few things: the scope's
scores before and after (for 0/1 scores only their number, how many changed and how
many score 1 on either side), the limit, the multiple, the test's settings and the
tool's version. `power_key` names them in one string, and `gate_power` takes a mapping
of figures already known by that key (`known`), where it finds them or adds the ones
it computes: the command layer keeps that mapping on disk (`power_io.py`), so a gate
whose baseline and results did not move computes nothing again.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from statistics import NormalDist

import numpy as np

from llm_eval import __version__
from llm_eval.builds import BuildSpread, satterthwaite, t_quantile
from llm_eval.criteria import Gate
from llm_eval.digest import digest
from llm_eval.gate import Power, worsening_pair
from llm_eval.judgments import FloatArray
from llm_eval.metrics import parse_metric
from llm_eval.stats import is_binary

CATCH = 2.0
"""The multiple of the limit whose queries needed every surface prints."""
NO_BASELINE = "assuming every query scores 1 now (no baseline to read) and nothing else changes"
"""The assumption without a baseline: 0/1 scores, every query found."""
POWER = 0.8
"""The catch rate the power statement speaks of (`detection.POWER`): 4 times in 5."""
POWER_Z = 0.8416212335729143
"""The standard normal's quantile at `POWER`."""
MOST_QUERIES = 10_000
"""The largest scope the queries needed are searched up to; beyond it they are open."""
KEY_FORMAT = 1
"""The layout of `power_key`'s inputs; a change makes the figures kept before unseen."""


def gate_power(
    gate: Gate,
    before: FloatArray,
    after: FloatArray,
    limit: float,
    catch: float = CATCH,
    known: MutableMapping[str, Power] | None = None,
    spread: BuildSpread | None = None,
) -> Power | None:
    """`scope_power` for a gate's scope: the per-query scores at the baseline and now
    (the baseline's twice when there is no run), oriented by the metric's direction,
    against `limit` (the absolute move allowed). None when the gate runs no paired test
    (no limit, `significance: off`, or a metric not tested query by query). `known`
    holds figures already computed, by `power_key`: they are taken from it, and the
    ones computed are added to it. With `spread` (the scores are means over several
    builds) it is `builds_power`, computed every time."""
    testable = parse_metric(gate.metric).testable
    if gate.regression_max is None or not gate.statistics.significance or not testable:
        return None
    if spread is not None:
        return builds_power(gate, before, after, limit, spread, catch)
    worse_before, worse_after = worsening_pair(gate.metric, before, after)
    if known is None:
        return scope_power(worse_before, worse_after, limit, gate, catch)
    key = power_key(worse_before, worse_after, limit, gate, catch)
    power = known.get(key)
    if power is None:
        power = scope_power(worse_before, worse_after, limit, gate, catch)
        known[key] = power
    return power


def power_key(
    before: FloatArray, after: FloatArray, limit: float, gate: Gate, catch: float = CATCH
) -> str:
    """A digest of everything `scope_power`'s figures depend on: for 0/1 scores, the
    number of queries, how many changed and how many score 1 on either side (the exact
    model reads nothing else); for graded ones, every score before and after, in order
    (the simulation draws queries by position); then the limit, the multiple, the
    metric's span, the test's settings, the tool's version and `KEY_FORMAT`."""
    if before.size and is_binary(before, after):
        changed = int(np.count_nonzero(before != after))
        either = int(np.count_nonzero(np.maximum(before, after)))
        scores = ["binary", before.size, changed, either]
    else:
        pair = np.stack([before, after]).astype(np.float64)
        scores = ["graded", before.size, hashlib.sha256(pair.tobytes()).hexdigest()]
    settings = gate.statistics
    return digest(
        [
            KEY_FORMAT,
            __version__,
            scores,
            float(limit).hex(),
            float(catch).hex(),
            float(parse_metric(gate.metric).span).hex(),
            float(settings.alpha).hex(),
            settings.seed,
            settings.resamples,
        ]
    )


def baseline_power(
    gate: Gate,
    scores: Sequence[float] | None,
    n: int,
    catch: float = CATCH,
    spread: BuildSpread | None = None,
    known: MutableMapping[str, Power] | None = None,
) -> Power | None:
    """`gate_power` before any run (`gold stats`, `gold plan`): the baseline's per-query
    scores of the scope on both sides, no churn, as `llm-eval gate` sees them while the
    run equals the baseline. Without a baseline, n queries that all score 1 (0/1
    scores, the exact test), said so in the assumption. None: no paired test or no
    absolute limit to test against (a relative one without a baseline). `spread`: the
    baseline's builds on both sides, when it holds several. `known`: as `gate_power`'s,
    so the figures a gate kept for the same scores are read, not computed again."""
    if not gate.regression_max or (scores is not None and not scores):
        return None
    scored = np.ones(n) if scores is None else np.asarray(scores, dtype=np.float64)
    limit = gate.regression_max
    if gate.regression_relative:
        if scores is None:
            return None
        limit *= float(scored.mean())
    power = gate_power(gate, scored, scored, limit, catch, known, spread)
    if power is None or scores is not None:
        return power
    return replace(power, assumption=NO_BASELINE)


def scope_power(
    before: FloatArray, after: FloatArray, limit: float, gate: Gate, catch: float = CATCH
) -> Power:
    """The drop the scope catches 4 times in 5, and about how many queries like these
    catch `catch` times `limit`; both None when open (no size reaches them)."""
    # Imported here: a gate whose figures are known (`gate_power`'s `known`) never
    # loads the simulation and the exact sums.
    from llm_eval.detection import detectable_worsening, queries_to_catch

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
        f"({changed:,} of {before.size:,} {'query' if before.size == 1 else 'queries'} changed)"
    )


def builds_power(
    gate: Gate,
    before: FloatArray,
    after: FloatArray,
    limit: float,
    spread: BuildSpread,
    catch: float = CATCH,
) -> Power:
    """`scope_power` for a scope measured on several builds (`llm_eval.builds`), whose
    test rejects where both its parts do: the drop caught 4 times in 5 is the larger of
    the two parts' (the queries' test, with the builds' shifts added to the drop's
    noise; the builds' t, its variance the queries' plus the shifts'), the spread seen
    taken as the truth's. With `more_builds`: the drop caught with two more builds a
    side, the queries as they are, so that a team can weigh more queries against more
    builds."""
    from llm_eval.detection import detectable_worsening, queries_to_catch

    settings = gate.statistics
    alpha = settings.alpha
    span = parse_metric(gate.metric).span
    worse_before, worse_after = worsening_pair(gate.metric, before, after)
    target = min(catch * limit, 0.99 * span)
    n = worse_before.size
    worsening = worse_before - worse_after
    variance = float(np.var(worsening, ddof=1)) if n > 1 else 0.0
    queries_sd = math.sqrt(variance / n) if n > 1 else 0.0
    seed, simulations = settings.seed, settings.resamples

    inner_drop = math.inf
    if n >= 2:
        inner_drop = detectable_worsening(
            worse_before, worse_after, limit, alpha, seed=seed, span=span, simulations=simulations
        )

    def caught(shift_variance: float, shift_degrees: float) -> float:
        """The drop both parts catch 4 times in 5 with builds whose shifts add this
        variance to the mean worsening."""
        extra = POWER_Z * (math.sqrt(queries_sd**2 + shift_variance) - queries_sd)
        return max(inner_drop + extra, t_drop(shift_variance, shift_degrees, n))

    def t_drop(shift_variance: float, shift_degrees: float, size: int) -> float:
        """The drop the builds' t catches 4 times in 5 with `size` queries: the drop D
        with D = limit + (t(1 - alpha) + t(0.8)) x se(D), where a drop of D moves a
        share D / span of the queries by the span, adding to their variance."""
        if size < 2:
            return math.inf
        drop = limit
        for _ in range(8):
            moved = variance + max(drop * span - drop * drop, 0.0)
            se, degrees = _satterthwaite(moved / size, size - 1, shift_variance, shift_degrees)
            drop = limit + _distance_seen(t_quantile(1.0 - alpha, degrees), degrees) * se
        return drop

    shift_variance, shift_degrees = spread.shift_variance()
    drop = caught(shift_variance, shift_degrees)
    if not drop <= 0.99 * span:
        drop = math.inf
    needed = None
    extra = POWER_Z * (math.sqrt(queries_sd**2 + shift_variance) - queries_sd)
    if target - extra > limit:
        inner_needed = queries_to_catch(
            worse_before,
            worse_after,
            target - extra,
            limit,
            alpha,
            seed=seed,
            span=span,
            simulations=simulations,
            most=MOST_QUERIES,
        )
        t_needed = _queries_for_t(target, limit, variance, span, shift_variance)
        if inner_needed is not None and t_needed is not None and t_needed <= MOST_QUERIES:
            needed = max(inner_needed, t_needed)
    more = max(len(spread.before), len(spread.after)) + 2
    more_drop = caught(*_scaled(spread, more))
    return Power(
        n=n,
        limit=limit,
        detectable_drop=drop if math.isfinite(drop) else None,
        target=target,
        queries_needed=needed,
        assumption=assumption(before, after),
        builds=(len(spread.before), len(spread.after)),
        more_builds=(more, more_drop if more_drop <= 0.99 * span else None),
    )


@functools.lru_cache(maxsize=256)
def _distance_seen(critical: float, degrees: float) -> float:
    """The distance from the limit, in standard errors as estimated, at which Student's
    t with these degrees of freedom exceeds `critical` 4 times in 5, on average over
    the law of the test's own estimate of its variance (the noncentral t's power) and
    over that of the estimate the distance is counted in (the spread seen is one
    sample of the builds', as the test's own estimate on a fresh run is another).
    Taking the estimate as the truth promises too much where the degrees of freedom
    are few: an estimate below the truth names a drop the gate catches rarely, one
    above it a drop caught nearly always, and the first loses more than the second
    gains. Both estimates are scaled chi-square with `degrees` degrees of freedom
    (Satterthwaite's approximation); the catch rate is their double integral on a grid."""
    if degrees > 1000 or math.isinf(degrees):
        return critical + POWER_Z
    grid, weights = _chi_square_grid(degrees, 120)
    root = np.sqrt(grid / degrees)
    # rows: the promise's estimate (distance x root), columns: the test's (critical x root)
    pair = np.outer(weights, weights)

    def caught(distance: float) -> float:
        return float(
            np.sum(pair * _upper_normal(critical * root[None, :] - distance * root[:, None]))
        )

    low, high = 0.0, 4.0 * (critical + POWER_Z) + 10.0
    for _ in range(32):
        middle = (low + high) / 2.0
        low, high = (low, middle) if caught(middle) >= POWER else (middle, high)
    return high


def _chi_square_grid(degrees: float, points: int) -> tuple[FloatArray, FloatArray]:
    """Points of the chi-square law with `degrees` degrees of freedom and their weights
    (summing to 1), spread over all but a negligible tail of it."""
    # Evenly spaced in log(W), where the density (times W, the change of variable's
    # factor) is smooth even below 2 degrees of freedom, whose density is unbounded at 0.
    top = degrees + 12.0 * math.sqrt(2.0 * degrees) + 20.0
    # The low end: where the density is e^-30 of its peak's (at W = degrees).
    bottom = math.log(degrees) - (60.0 + degrees) / degrees
    grid = np.exp(np.linspace(bottom, math.log(top), points))
    log_weights = (degrees / 2.0) * np.log(grid) - grid / 2.0
    weights = np.exp(log_weights - log_weights.max())
    return grid, weights / weights.sum()


def _upper_normal(x: FloatArray) -> FloatArray:
    """1 - Phi(x), elementwise (Abramowitz and Stegun 7.1.26 for erfc: absolute error
    below 1.5e-7)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    tail = 0.5 * poly * np.exp(-z * z)
    return np.where(x >= 0.0, tail, 1.0 - tail)


def _satterthwaite(
    queries: float, queries_degrees: float, shifts: float, shifts_degrees: float
) -> tuple[float, float]:
    """(the standard error of the mean worsening, its Satterthwaite degrees of freedom)
    from the queries' and the builds' shifts' variances of it."""
    parts = [(queries, queries_degrees), (shifts, shifts_degrees)]
    return math.sqrt(queries + shifts), satterthwaite(parts)


def _scaled(spread: BuildSpread, builds: int) -> tuple[float, float]:
    """`BuildSpread.shift_variance` with `builds` builds a side whose means spread as
    these do: (the shifts' variance in the mean worsening, its degrees of freedom)."""
    scale = 2.0 / builds
    shifts, noise = spread.shift_sd**2 * scale, spread.within * scale
    if not shifts:
        return 0.0, math.inf
    return shifts, shifts**2 / ((shifts + noise) ** 2 / (2 * (builds - 1)))


def _queries_for_t(
    target: float, limit: float, variance: float, span: float, shift_variance: float
) -> int | None:
    """About how many queries the builds' t needs to catch `target` 4 times in 5 (the
    large-sample quantiles); None when the builds' shifts alone hide it at any size."""
    room = ((target - limit) / (NormalDist().inv_cdf(0.95) + POWER_Z)) ** 2 - shift_variance
    if room <= 0.0:
        return None
    moved = variance + max(target * span - target * target, 0.0)
    return max(math.ceil(moved / room), 2)
