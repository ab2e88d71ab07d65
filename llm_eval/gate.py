"""Gate decisions: pure functions over numbers, tested as tables.

Per gate two checks: the floor (`value >= threshold`, absolute) and the regression
check against the baseline. For lower-is-better metrics (latency, error rate) the
threshold is a ceiling and regression_max the largest increase, absolute or relative
to the baseline. A value that cannot be computed (NaN, or no query in the scope)
never passes.

The regression check has three outcomes, read off the paired test of the change
against the limit itself (`stats.margin_tests`): **fail** when the one-sided test
rejects "the drop is within regression_max", **pass** when it rejects "the drop is
beyond it", and **inconclusive** when the data cannot tell (including every scope with
fewer than `min_n` paired queries). A scope in which no query's score changed passes
as unchanged, whatever its size. A failed check makes an `error` gate `fail` and a
`warning` gate `warn`; an inconclusive one makes the gate `inconclusive`, which blocks
the merge when the gate's `on_inconclusive` is `fail`. With `significance: off` the
plain point estimate decides (pass or fail).

A judged gate whose metric the gold labels also give (context precision@k) checks its
floor on the value corrected by the human labels (`llm_eval.judged.correction`): it
misses the floor when the corrected interval lies wholly below it, meets it when the
interval lies wholly above, and cannot tell otherwise (inconclusive, as a regression
check that cannot tell).

Each gate and slice ends in one record: its status and the reason for it (`Reason`),
which every rendering reads and none decides again.

Per-tag slices (`per_tag`) apply the same test to each tag's queries, with the
slices' p-values Holm-corrected; a slice that cannot be judged is information only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from llm_eval.criteria import Gate
from llm_eval.judged.correction import Corrected
from llm_eval.metrics import parse_metric
from llm_eval.report_types import Status
from llm_eval.stats import MarginTest

T = TypeVar("T")
Decision = Literal["pass", "fail", "inconclusive"]
Reason = Literal[
    "floor",
    "regression",
    "both",
    "slice",
    "cannot_tell",
    "improved",
    "unchanged",
    "within",
    "no_data",
    "drift",
    "retriever_failed",
]
"""Why a gate or slice has its status: its floor missed, its regression limit exceeded,
both, one of its tag slices beyond the limit, the data cannot tell, or it passed:
improved, unchanged (no query's score moved), within its limits; `no_data`: no scored
query; `drift`: its own checks pass but its cumulative change since the reference
baseline is beyond `drift_max` or cannot be told; `retriever_failed`: not measured, the
retriever failed on more queries than `max_error_rate` allows."""
_RANK: dict[Status, int] = {"pass": 0, "warn": 1, "inconclusive": 2, "fail": 3}


def worst_status(statuses: Iterable[Status]) -> Status:
    """The most severe of the statuses (`pass` when there are none)."""
    return max(statuses, key=_RANK.__getitem__, default="pass")


# Means of many per-query values carry rounding error; a value this close to a limit
# is taken to be on it (0.85 computed as 0.8499999999999999 meets a 0.85 floor).
TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class SliceResult:
    """The regression check of a gate on one tag slice."""

    tag: str
    n: int
    value: float
    baseline: float | None
    margin: MarginTest | None
    """The test against the limit (None without a baseline)."""
    p_adjusted: float | None
    """`margin.p_beyond`, Holm-adjusted across the judged slices of the gate."""
    judged: bool
    """False when the slice has fewer than min_n queries (or no baseline)."""
    exceeded: bool
    """The drop is beyond regression_max."""
    status: Status
    reason: Reason = "within"
    level: float | None = None
    """One-sided level of the slice's interval, Holm-consistent with its decision."""

    @property
    def delta(self) -> float | None:
        """value - baseline, when both are known."""
        return None if self.baseline is None else self.value - self.baseline


@dataclass(frozen=True, slots=True)
class Power:
    """What a gated scope can tell (`power.scope_power`, the one model every surface
    prints)."""

    n: int
    """Queries in the scope."""
    limit: float
    """The move the gate allows, in metric units."""
    detectable_drop: float | None
    """The true drop that the gate fails 4 times in 5 at this size (None: no drop the
    metric can show is caught that often)."""
    target: float
    """The drop the queries needed are counted for: twice the limit unless asked."""
    queries_needed: int | None
    """About how many queries like these catch `target` 4 times in 5 (None: more than
    any size searched, or no target beyond a zero limit)."""
    assumption: str
    """What the figures assume about the other queries, as one clause."""
    builds: tuple[int, int] | None = None
    """The builds a side (baseline, now) the figures count, when there were several."""
    more_builds: tuple[int, float | None] | None = None
    """With several builds: a number of builds a side and the drop it catches 4 times
    in 5 with these queries (None: none)."""


@dataclass(frozen=True, slots=True)
class LabelCoverage:
    """`judged@k` over a gate's queries, shown beside a gate whose value moved: how much
    of the top k the gold labels speak for, now and at the baseline."""

    metric: str
    value: float
    baseline: float | None
    """None when the baseline has no judged@k for these queries (made before it)."""
    readable: bool = True
    """The labels of these queries judge some document not relevant. Without one
    (positive-only qrels, as BEIR and TREC often ship) judged@k is the share of
    relevant results: it falls with every drop in recall and shows no hole in the
    labels, so it is not read (one note says so, no gate warns)."""

    @property
    def fell(self) -> bool:
        """The labels cover less of the top k than at the baseline: part of the change
        may be holes in the labels, not a change in quality."""
        return (
            self.readable and self.baseline is not None and self.value < self.baseline - TOLERANCE
        )


@dataclass(frozen=True, slots=True)
class GateResult:
    """The verdict of one gate, with every number a report needs."""

    gate: Gate
    value: float
    """The metric now, over the gate's scope (NaN when it cannot be computed)."""
    n: int
    """Queries in the scope that were scored."""
    baseline: float | None
    """The baseline's value over the same queries, or None when there is none."""
    floor_ok: bool | None
    """None when the gate has no threshold."""
    regression_ok: bool | None
    """False when the drop is beyond regression_max; None when not checked."""
    status: Status
    slices: tuple[SliceResult, ...] = ()
    power: Power | None = None
    """What the scope can tell, when the change was tested against the limit."""
    margin: MarginTest | None = None
    """The test of the change against regression_max, when there is one."""
    decision: Decision | None = None
    """The regression check's outcome (None: no baseline or no regression_max)."""
    on_inconclusive: Literal["fail", "warn"] = "warn"
    """What an inconclusive regression check does to the gate."""
    reason: Reason = "within"
    corrected: Corrected | None = None
    """A judged metric corrected by the human labels over the gate's scope; its
    interval decided the floor."""
    coverage: LabelCoverage | None = None
    """judged@k over the same queries, when the gate's value moved."""
    drift: DriftResult | None = None
    """The check against the reference baseline, when the gate sets `drift_max`."""

    @property
    def blocking(self) -> bool:
        """Whether this gate blocks the merge."""
        if self.gate.severity != "error":
            return False
        own = self.decision == "inconclusive" and self.on_inconclusive == "fail"
        return self.status == "fail" or own or (self.drift is not None and self.drift.blocking)

    @property
    def delta(self) -> float | None:
        """value - baseline, when both are known."""
        if self.baseline is None or math.isnan(self.value):
            return None
        return self.value - self.baseline


@dataclass(frozen=True, slots=True)
class DriftResult:
    """The cumulative change of a gate's scope against its reference baseline, decided
    as the regression check is, against `drift_max` instead of `regression_max`."""

    label: str
    """`since v1.0`, `since 5 refreshes ago`."""
    commit: str
    """The commit of the reference baseline."""
    value: float
    """The metric now, over the queries paired with the reference."""
    reference: float | None
    """The reference baseline's value over the same queries (None: none paired)."""
    n: int
    margin: MarginTest | None
    decision: Decision
    status: Status
    on_inconclusive: Literal["fail", "warn"]
    severity: str

    @property
    def blocking(self) -> bool:
        """Whether the drift check alone blocks the merge (on an `error` gate)."""
        if self.severity != "error":
            return False
        return self.status == "fail" or (
            self.decision == "inconclusive" and self.on_inconclusive == "fail"
        )

    @property
    def delta(self) -> float | None:
        """value - reference, when both are known."""
        if self.reference is None or math.isnan(self.value):
            return None
        return self.value - self.reference


def decide_drift(
    gate: Gate,
    value: float,
    n: int,
    reference: float | None,
    margin: MarginTest | None,
    commit: str,
) -> DriftResult:
    """The drift check of a gate that sets `drift_max`: the same zones as the regression
    check (`_zone`), against the drift limit. No paired query: cannot tell."""
    drift = gate.drift
    assert drift is not None
    exceeded: bool | None = None
    if reference is not None and not math.isnan(reference):
        worsening = (
            value - reference if parse_metric(gate.metric).lower_is_better else reference - value
        )
        exceeded = math.isnan(value) or worsening > drift.limit + TOLERANCE
    decision: Decision = (
        "inconclusive" if n == 0 or exceeded is None else _zone(gate, exceeded, margin)
    )
    status: Status = _ZONE_STATUS[decision] if decision != "fail" else _by_severity(gate)
    return DriftResult(
        drift.label(),
        commit,
        value,
        reference,
        n,
        margin,
        decision,
        status,
        _on_inconclusive(gate, exceeded),
        gate.severity,
    )


def with_drift(result: GateResult, drift: DriftResult) -> GateResult:
    """The gate's verdict with its drift check folded in: the worse status wins, and a
    gate whose own checks pass takes the reason `drift` when the drift does not."""
    status = worst_status([result.status, drift.status])
    reason = result.reason
    if drift.status != "pass" and reason in ("improved", "unchanged", "within"):
        reason = "drift"
    return replace(result, status=status, reason=reason, drift=drift)


def _by_severity(gate: Gate) -> Status:
    return "fail" if gate.severity == "error" else "warn"


def allowed_change(gate: Gate, baseline: float) -> float:
    """The largest allowed move against the metric's direction, in metric units."""
    assert gate.regression_max is not None
    return gate.regression_max * baseline if gate.regression_relative else gate.regression_max


def worsening_pair(metric: str, before: T, after: T) -> tuple[T, T]:
    """(before, after) ordered so that `first - second` is the worsening: swapped for
    lower-is-better metrics, whose worsening is a rise."""
    return (after, before) if parse_metric(metric).lower_is_better else (before, after)


def delta_interval(metric: str, margin: MarginTest) -> tuple[float, float]:
    """The test's interval as bounds of `value - baseline` (it is kept as worsening)."""
    if parse_metric(metric).lower_is_better:
        return margin.low, margin.high
    return -margin.high, -margin.low


def _exceeded(gate: Gate, value: float, baseline: float | None) -> bool | None:
    if gate.regression_max is None or baseline is None or math.isnan(baseline):
        return None
    if math.isnan(value):
        return True
    worsening = value - baseline if parse_metric(gate.metric).lower_is_better else baseline - value
    return worsening > allowed_change(gate, baseline) + TOLERANCE


def _within_floor(gate: Gate, value: float) -> bool:
    """The floor, or for lower-is-better metrics the ceiling."""
    assert gate.threshold is not None
    if parse_metric(gate.metric).lower_is_better:
        return value <= gate.threshold + TOLERANCE
    return value >= gate.threshold - TOLERANCE


def _floor(gate: Gate, value: float, corrected: Corrected | None) -> bool | None:
    """Whether the floor holds: on the value, or with a correction on its interval
    (None: the interval straddles the floor, which cannot be told)."""
    if corrected is None:
        return _within_floor(gate, value)
    if _within_floor(gate, corrected.corrected.low):
        return True
    if not _within_floor(gate, corrected.corrected.high):
        return False
    return None


def _zone(gate: Gate, exceeded: bool | None, margin: MarginTest | None) -> Decision:
    """Where the change lies against the limit (see the module docstring)."""
    settings = gate.statistics
    if margin is not None and margin.changed == 0:
        return "pass"  # no query's score moved: nothing dropped, whatever the size
    if not settings.significance or margin is None:
        return "fail" if exceeded else "pass"  # the point estimate, as configured
    if margin.n < settings.min_n:
        return "inconclusive"
    if margin.p_beyond <= settings.alpha:
        return "fail"
    if margin.p_within <= settings.alpha:
        return "pass"
    return "inconclusive"


def _improved(gate: Gate, value: float, baseline: float | None) -> bool:
    if baseline is None or math.isnan(value) or math.isnan(baseline):
        return False
    gain = baseline - value if parse_metric(gate.metric).lower_is_better else value - baseline
    return gain > TOLERANCE


def _reason(
    gate: Gate,
    computable: bool,
    floor_ok: bool | None,
    decision: Decision | None,
    unchanged: bool,
    slices: Sequence[SliceResult],
    value: float,
    baseline: float | None,
) -> Reason:
    """The one reason behind the gate's status (see `Reason`)."""
    if not computable:
        return "no_data"
    if floor_ok is None and gate.threshold is not None:
        return "cannot_tell"  # the corrected interval straddles the floor
    if floor_ok is False:
        return "both" if decision == "fail" else "floor"
    if decision == "fail":
        return "regression"
    if decision == "inconclusive":
        return "cannot_tell"
    if any(s.status in ("warn", "fail") for s in slices):
        return "slice"
    if unchanged:
        return "unchanged"
    return "improved" if _improved(gate, value, baseline) else "within"


def _on_inconclusive(gate: Gate, exceeded: bool | None) -> Literal["fail", "warn"]:
    """The configured choice, else: block on an `error` gate whose estimate is beyond
    the limit (the data lean towards a regression), only report otherwise."""
    configured = gate.statistics.on_inconclusive
    if configured is not None:
        return configured
    return "fail" if gate.severity == "error" and exceeded else "warn"


def decide(
    gate: Gate,
    value: float,
    n: int,
    baseline: float | None,
    slices: Sequence[SliceResult] = (),
    power: Power | None = None,
    margin: MarginTest | None = None,
    corrected: Corrected | None = None,
) -> GateResult:
    """Check one gate's floor and regression limit (and fold in its slices).

    `margin` is the paired test of the change against the limit; without one (no
    paired test for the metric) the point estimate decides. With `corrected`, the
    floor is checked on the corrected interval (module docstring).
    """
    computable = n > 0 and not math.isnan(value)
    floor_ok = None
    if gate.threshold is not None:
        floor_ok = _floor(gate, value, corrected) if computable else False
    exceeded = _exceeded(gate, value, baseline)
    decision: Decision | None = None
    statuses: list[Status] = []
    if exceeded is not None and baseline is not None:
        decision = _zone(gate, exceeded, margin)
        statuses.append(_ZONE_STATUS[decision] if decision != "fail" else _by_severity(gate))
    missed = floor_ok is False or not computable
    if missed:
        # A missed floor is certain: it is not hidden behind "cannot tell" on the drop.
        statuses = [_by_severity(gate)]
    elif floor_ok is None and gate.threshold is not None:
        statuses.append("inconclusive")
    # A slice that cannot tell is information; only a slice beyond the limit counts.
    statuses += [s.status for s in slices if s.status in ("warn", "fail")]
    regression_ok = None if exceeded is None else not exceeded
    unchanged = margin is not None and margin.changed == 0
    reason = _reason(gate, computable, floor_ok, decision, unchanged, slices, value, baseline)
    return GateResult(
        gate,
        value,
        n,
        baseline,
        floor_ok,
        regression_ok,
        worst_status(statuses),
        tuple(slices),
        power,
        margin,
        decision,
        _on_inconclusive(gate, exceeded),
        reason,
        corrected,
    )


def unmeasured(gate: Gate) -> GateResult:
    """A gate left unmeasured because the retriever failed: it cannot tell, and blocks
    nothing itself (the failed retriever stops the run, exit 4)."""
    return GateResult(
        gate, math.nan, 0, None, None, None, "inconclusive", reason="retriever_failed"
    )


_ZONE_STATUS: dict[Decision, Status] = {"pass": "pass", "inconclusive": "inconclusive"}


@dataclass(frozen=True, slots=True)
class SliceInput:
    """The numbers of one tag slice, before the decision."""

    tag: str
    n: int
    value: float
    baseline: float | None
    margin: MarginTest | None
    """The test against the limit, with bounds at `level`."""
    p_adjusted: float | None = None
    """`margin.p_beyond`, Holm-adjusted across the gate's judged slices."""
    level: float | None = None
    """The one-sided level of the bounds (`stats.holm_levels`)."""


def decide_slices(gate: Gate, inputs: Sequence[SliceInput]) -> tuple[SliceResult, ...]:
    """Regression checks on tag slices: a slice fails when its test against the limit,
    Holm-corrected across the gate's judged slices, rejects "within the limit" at alpha,
    and passes when its interval at its Holm level lies within the limit. A slice in
    which nothing moved passes as unchanged; one too small, or whose result cannot
    tell, is information only."""
    return tuple(_slice_result(gate, piece) for piece in inputs)


def _slice_result(gate: Gate, piece: SliceInput) -> SliceResult:
    margin = piece.margin
    unchanged = margin is not None and margin.changed == 0
    tested = margin is not None or not gate.statistics.significance  # off: point estimate
    judged = piece.n >= gate.statistics.min_n and tested and piece.baseline is not None
    exceeded = bool(judged and _exceeded(gate, piece.value, piece.baseline))
    status: Status = "inconclusive"
    reason: Reason = "cannot_tell"
    if unchanged:
        status, reason = "pass", "unchanged"
    elif judged and piece.baseline is not None:
        status, reason = _slice_status(gate, exceeded, piece, piece.baseline)
    return SliceResult(
        piece.tag,
        piece.n,
        piece.value,
        piece.baseline,
        margin,
        piece.p_adjusted,
        judged or unchanged,
        exceeded,
        status,
        reason,
        piece.level,
    )


def _slice_status(
    gate: Gate, exceeded: bool, piece: SliceInput, baseline: float
) -> tuple[Status, Reason]:
    settings = gate.statistics
    margin = piece.margin
    if not settings.significance or margin is None:
        return (_by_severity(gate), "regression") if exceeded else ("pass", "within")
    if piece.p_adjusted is not None and piece.p_adjusted <= settings.alpha:
        return _by_severity(gate), "regression"
    level = settings.alpha if piece.level is None else piece.level
    if margin.p_within <= level:
        improved = _improved(gate, piece.value, baseline)
        return "pass", "improved" if improved else "within"
    return "inconclusive", "cannot_tell"


def verdict(results: Iterable[GateResult]) -> Status:
    """`fail` when any gate blocks the merge (exit 1), else the most severe status of
    the rest: `inconclusive`, then `warn`, then `pass`."""
    gates = list(results)
    if blocks(gates):
        return "fail"
    return worst_status(r.status for r in gates)


def blocks(results: Iterable[GateResult]) -> bool:
    """Whether any gate blocks the merge (the exit code 1)."""
    return any(r.blocking for r in results)
