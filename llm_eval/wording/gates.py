"""Numbers and sentences a reviewer who is not an ML engineer can read.

A metric's unit and label come from its registry entry (`llm_eval.metrics`):
shares are shown as percentages with deltas in percentage points, rank-based
scores (MRR, MAP, nDCG) as decimals, latencies in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from llm_eval.criteria import Gate
from llm_eval.gate import GateResult, Power, SliceResult, allowed_change, delta_interval
from llm_eval.metrics import parse_metric
from llm_eval.power import MOST_QUERIES
from llm_eval.stats import MarginTest, format_p
from llm_eval.wording.english import plural

MINUS = "−"


def value(metric: str, number: float | None) -> str:
    """`87.0%`, `0.583` or `41.2 ms`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    parsed = parse_metric(metric)
    if parsed.family.unit == "ms":
        return f"{number:.1f} ms"
    return f"{number * 100:.1f}%" if parsed.percent else f"{number:.3f}"


def delta(metric: str, number: float | None) -> str:
    """`+1.5 pp`, `−6.0 pp`, `−0.040` or `+3.2 ms`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    sign = "+" if number >= 0 else MINUS
    parsed = parse_metric(metric)
    if parsed.family.unit == "ms":
        return f"{sign}{abs(number):.1f} ms"
    if parsed.percent:
        return f"{sign}{abs(number) * 100:.1f} pp"
    return f"{sign}{abs(number):.3f}"


def drop_size(metric: str, value: float) -> str:
    """The size of a drop in the metric's units, unsigned: "n/a" when unknown (nan), "none"
    when no number of questions reaches it (inf)."""
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "none"
    return delta(metric, value).lstrip("+")


def limit(metric: str, number: float, relative: bool = False) -> str:
    """A regression limit as the move it allows: `−3.0 pp`, `−0.050`, `+20.0 ms`, `+20%`."""
    if relative:
        return f"+{number * 100:g}%"
    if parse_metric(metric).lower_is_better:
        return delta(metric, number)
    return delta(metric, -number).replace("+", MINUS) if number == 0 else delta(metric, -number)


def gold_change_counts(added: int, removed: int, changed: int) -> str:
    """`12 queries added, 14 queries removed`: the kinds of change to a gold set that
    have any."""
    kinds = (("added", added), ("removed", removed), ("changed", changed))
    return ", ".join(f"{plural(n, 'query', 'queries')} {kind}" for kind, n in kinds if n)


def gold_change_sentence(described: str, accept: tuple[str, str]) -> str:
    """Why a changed gold set is not compared, `described` in brackets (ids or counts),
    and the two commands in `accept`: a new baseline, or the unchanged queries only."""
    return (
        f"The gold set differs from the baseline's ({described}), so the gate cannot "
        f"compare honestly: accept the change with {accept[0]} (a new baseline), or "
        f"compare on the unchanged queries with {accept[1]}."
    )


def subject(metric: str, scope_label: str) -> str:
    """`recall@5 (tier A)`; no parentheses for all queries."""
    name = parse_metric(metric).label
    return name if scope_label == "all queries" else f"{name} ({scope_label})"


def ci_range(metric: str, low: float | None, high: float | None) -> str:
    """`−8.1 to −3.9 pp` or `−0.150 to −0.100`; `n/a` when unknown."""
    if low is None or high is None:
        return "n/a"
    unit = " pp" if parse_metric(metric).percent else ""
    return f"{delta(metric, low).removesuffix(unit)} to {delta(metric, high)}"


def corrected_phrase(
    metric: str, estimate: float, low: float, high: float, confidence: float, judge: float
) -> str:
    """`context precision@5 0.312 (90% CI 0.250 to 0.371; the judge alone says 0.649)`."""
    return (
        f"{parse_metric(metric).label} {value(metric, estimate)} ({confidence * 100:.3g}% CI "
        f"{value(metric, low)} to {value(metric, high)}; the judge alone says "
        f"{value(metric, judge)})"
    )


def limits_text(
    metric: str,
    threshold: float | None,
    regression_max: float | None,
    relative: bool = False,
    drift: Mapping[str, Any] | None = None,
) -> str:
    """`≥ 38.0%, Δ ≥ −3.0 pp` (or `≤ 200.0 ms, Δ ≤ +20%`), with a drift limit from a
    report's gate entry `since v1.0 Δ ≥ −11.0 pp`; empty when none is set."""
    compare = "≤" if parse_metric(metric).lower_is_better else "≥"
    parts = []
    if threshold is not None:
        parts.append(f"{compare} {value(metric, threshold)}")
    if regression_max is not None:
        parts.append(f"Δ {compare} {limit(metric, regression_max, relative)}")
    if drift is not None:
        parts.append(f"{drift['label']} Δ {compare} {limit(metric, drift['drift_max'])}")
    return ", ".join(parts)


def interval(
    metric: str, margin: MarginTest, p_label: str = "", p_value: float | None = None
) -> str:
    """`90% CI −8.1 to −3.9 pp` from the test against the limit (with a p-value when
    given, e.g. Holm's)."""
    low, high = delta_interval(metric, margin)
    text = f"{margin.confidence * 100:.3g}% CI {ci_range(metric, low, high)}"
    text += builds_clause(metric, margin)
    return text if p_value is None else f"{text}, {p_label}{format_p(p_value, margin.method)}"


def builds_clause(metric: str, margin: MarginTest) -> str:
    """` over 3 and 3 builds, a build's mean ±1.2 pp`: empty for one build a side."""
    before, after = margin.builds
    if before == 1 and after == 1:
        return ""
    counts = f"{before} builds each" if before == after else f"{before} and {after} builds"
    return f" over {counts}, a build's mean ±{drop_size(metric, margin.build_sd)}"


def _allowed(gate: Gate, before: float | None) -> str:
    """`3.0 pp` (with the absolute move when relative: `+20% (+4.1 ms)`)."""
    assert gate.regression_max is not None
    allowed = limit(gate.metric, gate.regression_max, gate.regression_relative)
    if gate.regression_relative and before is not None:
        allowed += f" ({delta(gate.metric, allowed_change(gate, before))})"
    return allowed.lstrip(f"{MINUS}+") if not gate.regression_relative else allowed


STATUS_WORDS = {"pass": "pass", "warn": "warning", "fail": "fail", "inconclusive": "cannot tell"}
"""The one word for each status, on every surface (the terminal prints it in capitals)."""


def _worsened(metric: str) -> str:
    """The verb for a move the wrong way: `rose` for latency, `dropped` for recall."""
    return "rose" if parse_metric(metric).lower_is_better else "dropped"


def _moved(gate: Gate, before: float | None, after: float, details: str) -> str:
    """`dropped from 41.1% to 33.1% (−8.1 pp; 90% CI …)`, with the verb the change
    really took: a gain reads `rose` (or `fell` for latency), no change `stayed at`."""
    metric = gate.metric
    extra = f"; {details}" if details else ""
    aside = f" ({details})" if details else ""
    if before is None:
        return f"is {value(metric, after)}{aside}"
    change = after - before
    if abs(change) <= 1e-12:
        return f"stayed at {value(metric, after)}{aside}"
    lower = parse_metric(metric).lower_is_better
    verb = "rose" if change > 0 else ("fell" if lower else "dropped")
    return (
        f"{verb} from {value(metric, before)} to {value(metric, after)} "
        f"({delta(metric, change)}{extra})"
    )


def on_the_limit(margin: MarginTest, limit: float) -> bool:
    """Whether the change sits on the limit: its estimate lies within the interval's
    half-width of it (`limit`, the worsening allowed). An open end of the interval says
    only that the data cannot bound that side, not how wide the data spread, so with one
    end open the closed end's distance from the estimate stands for the half-width; with
    both open nothing is on the limit."""
    estimate = margin.worsening
    if margin.low_open and margin.high_open:
        return False
    if margin.high_open:
        half = estimate - margin.low
    elif margin.low_open:
        half = margin.high - estimate
    else:
        half = (margin.high - margin.low) / 2.0
    return abs(estimate - limit) <= half + 1e-12


def _queries_needed(result: GateResult) -> float | None:
    """The power model's queries needed to catch a drop of twice the limit 4 times in 5
    (`power.scope_power`, `power_statement`'s figure): None when the gate has no such
    figure (no paired test, or no drop beyond a zero limit to count them for), inf when
    no size searched is enough."""
    power = result.power
    if power is None or not power.target > power.limit:
        return None
    return math.inf if power.queries_needed is None else power.queries_needed


def _too_few(result: GateResult) -> bool:
    """The power model says the scope holds too few queries to catch a drop of twice
    the limit 4 times in 5."""
    needed = _queries_needed(result)
    return needed is not None and needed > _paired(result)


def _paired(result: GateResult) -> int:
    return 0 if result.margin is None else result.margin.n


def more_queries(result: GateResult) -> int | None:
    """About how many more queries like these would let a regression check that cannot
    tell decide, when it cannot tell for want of queries: up to `min_n`, or up to the
    power model's queries needed (`Power.queries_needed`) when that is more. None when
    it can tell, when the queries are not what is missing (the change sits on the limit,
    or the data give no evidence either way), or when no size searched is enough."""
    if result.decision != "inconclusive":
        return None
    n, needed = _paired(result), _queries_needed(result)
    sized = 0 if needed is None or math.isinf(needed) else int(needed)
    if n < result.gate.statistics.min_n:
        return max(result.gate.statistics.min_n, sized) - n
    if _too_few(result) and sized:
        return sized - n
    return None


def _cannot_tell_reason(result: GateResult) -> str:
    """Why the data cannot tell: too few queries to judge at all, too few to catch a
    drop of twice the limit (`power_statement`'s figure), a change on the limit
    (`on_the_limit`), or else no evidence either way."""
    gate, margin, power = result.gate, result.margin, result.power
    n, needed = _paired(result), _queries_needed(result)
    target = (
        "" if power is None else f"a drop of {drop_size(gate.metric, power.target)} 4 times in 5"
    )
    add_them = "(llm-eval gold plan lists where to add them)"
    if n < gate.statistics.min_n:
        fewer = f"{n} queries are fewer than the {gate.statistics.min_n} needed to judge"
        if needed is None or math.isinf(needed) or needed <= gate.statistics.min_n:
            return fewer
        return f"{fewer}, and about {int(needed):,} catch {target} {add_them}"
    if not _too_few(result):
        baseline = result.baseline
        limit = None if baseline is None else allowed_change(gate, baseline)
        if margin is not None and limit is not None and on_the_limit(margin, limit):
            return f"the change is too close to the limit for {_queries(n)} to tell"
        return f"{_queries(n)} {'gives' if n == 1 else 'give'} no evidence either way"
    assert needed is not None
    if math.isinf(needed):
        return f"{_queries(n)} are too few: not even {_queries(MOST_QUERIES)} catch {target}"
    return f"{_queries(n)} are too few: about {int(needed):,} catch {target} {add_them}"


def _regression_clause(result: GateResult) -> str | None:
    """What the regression check found, in words; None when it passed."""
    gate = result.gate
    decision, margin = result.decision, result.margin
    if decision is None or decision == "pass":
        return None
    allowed = _allowed(gate, result.baseline)
    details = "" if margin is None else interval(gate.metric, margin)
    moved = _moved(gate, result.baseline, result.value, details)
    if decision == "fail":
        return f"{moved}: more than the {allowed} allowed"
    return f"{moved}; {_cannot_be_told(gate, result.baseline)}: {_cannot_tell_reason(result)}"


def _cannot_be_told(gate: Gate, before: float | None) -> str:
    """`whether it dropped by more than the 3.0 pp allowed cannot be told`."""
    allowed = _allowed(gate, before)
    return f"whether it {_worsened(gate.metric)} by more than the {allowed} allowed cannot be told"


def main_check_failed(result: GateResult) -> bool:
    """Whether the gate's own scope (not its tag slices) misses a limit or cannot tell."""
    return result.reason in (
        "floor",
        "regression",
        "both",
        "cannot_tell",
        "no_data",
        "retriever_failed",
    )


def sentence(result: GateResult) -> str | None:
    """One plain sentence for a gate whose own scope misses a limit or cannot tell, or
    whose drift since its reference baseline does, built from its decision record
    (`GateResult.reason`, `GateResult.drift`)."""
    own = _own_sentence(result) if main_check_failed(result) else None
    drift = drift_sentence(result)
    if own is None or drift is None:
        return own or drift
    return f"{own}; {drift}"


def drift_sentence(result: GateResult) -> str | None:
    """`recall@5 (tier A) since v1.0 dropped from 50.0% to 38.0% (−12.0 pp; 90% CI …):
    more than the 11.0 pp drift allowed`; None when the drift check passed or is not set."""
    drift, gate = result.drift, result.gate
    if drift is None or gate.drift is None or drift.status == "pass":
        return None
    metric = gate.metric
    name = f"{subject(metric, gate.scope.label())} {drift.label}"
    allowed = delta(metric, gate.drift.limit).lstrip("+")
    suffix = _drift_suffix(result)
    if drift.reference is None:
        return (
            f"{name}: no query pairs with the reference baseline, so its drift cannot be "
            f"told{suffix}"
        )
    details = "" if drift.margin is None else interval(metric, drift.margin)
    moved = _moved(gate, drift.reference, drift.value, details)
    if drift.decision == "fail":
        return f"{name} {moved}: more than the {allowed} drift allowed{suffix}"
    return (
        f"{name} {moved}; whether it {_worsened(metric)} by more than the {allowed} drift "
        f"allowed cannot be told: {plural(drift.n, 'query', 'queries')} paired{suffix}"
    )


def _drift_suffix(result: GateResult) -> str:
    drift = result.drift
    assert drift is not None
    if result.gate.severity == "warning":
        return " (warning)"
    if drift.decision == "inconclusive":
        return " (blocks the merge)" if drift.blocking else " (reported, not blocking)"
    return ""


def _own_sentence(result: GateResult) -> str:
    gate = result.gate
    metric = gate.metric
    if result.reason == "retriever_failed":  # the failure, not the gate, stops the run
        return f"{subject(metric, gate.scope.label())} was not measured: the retriever failed"
    if _blocks_unsure(result):
        return _blocking_cannot_tell(result)
    if result.reason == "no_data":
        clauses = ["could not be computed: no scored query in its scope"]

    else:
        clauses = []
        clauses += _floor_clause(result)
        regression = _regression_clause(result)
        if regression is not None:
            clauses.append(regression if not clauses else f"and {regression}")
    return f"{subject(metric, gate.scope.label())} {', '.join(clauses)}{_suffix(result)}"


def _blocks_unsure(result: GateResult) -> bool:
    """The gate blocks the merge because its regression check cannot tell (the floor
    is met): the sentence leads with that, and why."""
    return (
        result.status == "inconclusive"
        and result.blocking
        and result.decision == "inconclusive"
        and not _floor_clause(result)
    )


def _blocking_cannot_tell(result: GateResult) -> str:
    """`Blocks the merge: whether recall@5 (tier A) dropped by more than the 3.0 pp
    allowed cannot be told, because 27 queries are fewer than the 30 needed to judge;
    it dropped from 87.0% to 57.4% (−29.6 pp; 90% CI …)`."""
    gate, margin = result.gate, result.margin
    name = subject(gate.metric, gate.scope.label())
    allowed = _allowed(gate, result.baseline)
    details = "" if margin is None else interval(gate.metric, margin)
    moved = _moved(gate, result.baseline, result.value, details)
    return (
        f"Blocks the merge: whether {name} {_worsened(gate.metric)} by more than the "
        f"{allowed} allowed cannot be told, because {_cannot_tell_reason(result)}; it {moved}"
    )


def _floor_clause(result: GateResult) -> list[str]:
    """`is 61.0%, below the floor 65.0%`; for a judged value corrected by the labels,
    that value and its interval, and whether the floor is met when it cannot be told."""
    gate, metric = result.gate, result.gate.metric
    if gate.threshold is None or result.floor_ok is True:
        return []
    where = "above the ceiling" if parse_metric(metric).lower_is_better else "below the floor"
    floor = value(metric, gate.threshold)
    fixed = result.corrected
    if fixed is None:
        return (
            [f"is {value(metric, result.value)}, {where} {floor}"]
            if result.floor_ok is False
            else []
        )
    now = corrected_phrase(
        metric,
        fixed.corrected.mean,
        fixed.corrected.low,
        fixed.corrected.high,
        1.0 - 2.0 * fixed.alpha,
        fixed.raw.mean,
    ).removeprefix(parse_metric(metric).label + " ")
    if result.floor_ok is False:
        return [f"corrected by your labels is {now}, {where} {floor}"]
    return [f"corrected by your labels is {now}; whether it is {where} {floor} cannot be told"]


def _suffix(result: GateResult) -> str:
    if result.gate.severity == "warning":
        return " (warning)"
    if result.status == "inconclusive":
        return " (blocks the merge)" if result.blocking else " (reported, not blocking)"
    return ""


def slice_sentence(result: GateResult, piece: SliceResult) -> str | None:
    """A sentence for a tag slice too small to judge, or whose drop is beyond the limit."""
    gate = result.gate
    metric = gate.metric
    name = subject(metric, f"tag {piece.tag}")
    if not piece.judged:
        return f"{name}: too few queries (n={piece.n}) to judge"
    if piece.status not in ("fail", "warn", "inconclusive"):
        return None
    details = (
        ""  # significance off: the point estimate decided, there is no interval
        if piece.margin is None
        else interval(metric, piece.margin, "Holm-adjusted ", piece.p_adjusted)
    )
    clause = _moved(gate, piece.baseline, piece.value, details)
    if piece.status == "inconclusive":
        return f"{name} {clause}; {_cannot_be_told(gate, piece.baseline)}"
    suffix = " (warning)" if gate.severity == "warning" else ""
    return f"{name} {clause}: more than the {_allowed(gate, piece.baseline)} allowed{suffix}"


def coverage_sentence(result: GateResult) -> str | None:
    """judged@k beside a gate whose value moved: `judged@5 (tier A) fell from 92.0% to
    85.0% (−7.0 pp): …` when the labels cover less of the top k than at the baseline."""
    coverage = result.coverage
    if coverage is None:
        return None
    metric = coverage.metric
    name = subject(metric, result.gate.scope.label())
    now = value(metric, coverage.value)
    if coverage.baseline is None:
        return f"{name} is {now} (the baseline has no {parse_metric(metric).label} to compare)"
    before = value(metric, coverage.baseline)
    if not coverage.fell:
        return (
            f"{name} is {now} (baseline {before}) beside {parse_metric(result.gate.metric).label}"
        )
    k = parse_metric(metric).k
    change = delta(metric, coverage.value - coverage.baseline)
    return (
        f"{name} fell from {before} to {now} ({change}): "
        f"the top {k} holds more results nobody labelled, so part of the "
        f"{parse_metric(result.gate.metric).label} change may be holes in the labels; label "
        "them before trusting it"
    )


def power_sentence(result: GateResult) -> str | None:
    """What the scope can tell (`power_statement`), when the gate's test has a power."""
    if result.power is None:
        return None
    return power_statement(result.gate, result.gate.scope.label(), result.power, result.baseline)


def power_statement(
    gate: Gate, scope_label: str, power: Power, baseline: float | None = None
) -> str:
    """The one sentence for `power.scope_power`'s figures, on every surface: `recall@5
    (tier A): with 176 queries, a drop of 7.9 pp is caught 4 times in 5; about 348
    queries catch one of 6.0 pp (twice the 3.0 pp limit), assuming no other query's
    score changes`; when no drop the metric can show is caught at this size, `recall@5:
    12 queries are too few to catch any drop 4 times in 5; about 348 queries catch …`."""
    metric = gate.metric
    name = subject(metric, scope_label)
    if power.detectable_drop is None:  # what would be needed is the news, not "no drop"
        are = "is" if power.n == 1 else "are"
        said = f"{name}: {_queries(power.n)} {are} too few to catch any drop 4 times in 5"
    else:
        caught = drop_size(metric, power.detectable_drop)
        said = f"{name}: with {_built(power)}, a drop of {caught} is caught 4 times in 5"
    if power.more_builds is not None:
        more, drop = power.more_builds
        said += (
            f"; with {more} builds a side, {'none' if drop is None else drop_size(metric, drop)}"
        )
    if not power.target > power.limit:  # a zero limit: no multiple of it to size for
        return f"{said}, {power.assumption}"
    return f"{said}; {_needed_clause(gate, power, baseline)}, {power.assumption}"


def _needed_clause(gate: Gate, power: Power, baseline: float | None) -> str:
    """`about 348 queries catch one of 6.0 pp (twice the 3.0 pp limit)`."""
    ratio = power.target / power.limit
    times = "twice" if math.isclose(ratio, 2.0) else f"{ratio:.3g}×"
    target = drop_size(gate.metric, power.target)
    one = f"one of {target} ({times} the {_allowed(gate, baseline)} limit)"
    if power.queries_needed is None:
        return f"not even {_queries(MOST_QUERIES)} catch {one}"
    return f"about {_queries(power.queries_needed)} catch {one}"


def _built(power: Power) -> str:
    """`176 queries`, or `3 builds of 176 queries` when measured on several builds."""
    if power.builds is None:
        return _queries(power.n)
    before, after = power.builds
    builds = f"{before} builds" if before == after else f"{before} and {after} builds"
    return f"{builds} of {_queries(power.n)}"


def _queries(n: int) -> str:
    """`176 queries`, `1,400 queries`, `1 query`."""
    return f"{n:,} {'query' if n == 1 else 'queries'}"


def gold_set_sight(gate: Gate, power: Power) -> str:
    """What a new gold set can see, in one line for `init` and the first `baseline
    refresh`: `12 gated questions catch a drop of 41.7 pp in recall@5 (tier A) 4 times
    in 5; `llm-eval gold plan` says how many see its 5.0 pp limit`."""
    name = subject(gate.metric, gate.scope.label())
    gated = f"{power.n:,} gated {'question' if power.n == 1 else 'questions'}"
    if power.detectable_drop is None:
        seen = f"{gated} {'is' if power.n == 1 else 'are'} too few to catch any drop in {name}"
    else:
        seen = f"{gated} catch a drop of {drop_size(gate.metric, power.detectable_drop)} in {name}"
    allowed = drop_size(gate.metric, power.limit)
    return f"{seen} 4 times in 5; `llm-eval gold plan` says how many see its {allowed} limit"
