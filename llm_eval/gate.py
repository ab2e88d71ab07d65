"""Gate decisions: pure functions over numbers, tested as tables.

Per gate two checks: the floor (`value >= threshold`, absolute) and the regression
check (`value - baseline >= -regression_max`). For lower-is-better metrics (latency,
error rate) the threshold is a ceiling and regression_max the largest increase,
absolute or relative to the baseline. With significance on (the default),
a drop beyond regression_max fails only when the paired test against the baseline
is also significant at alpha; a large but insignificant drop warns. A failed check
makes an `error` gate `fail` and a `warning` gate `warn`. A value that cannot be
computed (NaN, or no query in the scope) never passes.

Per-tag slices (`per_tag`) apply the regression check to each tag's queries, with
the slices' p-values Holm-corrected and slices under `min_n` queries left unjudged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from llm_eval.config import Gate
from llm_eval.metrics import lower_is_better
from llm_eval.stats import PairedResult, holm

Status = Literal["pass", "warn", "fail"]
_RANK: dict[Status, int] = {"pass": 0, "warn": 1, "fail": 2}

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
    test: PairedResult | None
    p_adjusted: float | None
    """Holm-adjusted across the judged slices of the gate."""
    judged: bool
    """False when the slice has fewer than min_n queries (or no baseline)."""
    exceeded: bool
    """The drop is beyond regression_max."""
    status: Status

    @property
    def delta(self) -> float | None:
        """value - baseline, when both are known."""
        return None if self.baseline is None else self.value - self.baseline


@dataclass(frozen=True, slots=True)
class Power:
    """What the gate's scope can detect, from the baseline's per-query scores."""

    detectable_drop: float
    """Smallest drop detected with 80% power at alpha."""
    queries_needed: int
    """Queries needed for regression_max to be detectable."""


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
    test: PairedResult | None = None
    """The paired test against the baseline, when there is one."""
    slices: tuple[SliceResult, ...] = ()
    power: Power | None = None
    """Set when regression_max is below what the scope can detect."""

    @property
    def delta(self) -> float | None:
        """value - baseline, when both are known."""
        if self.baseline is None or math.isnan(self.value):
            return None
        return self.value - self.baseline

    @property
    def significant(self) -> bool | None:
        """Whether the paired test is significant at the gate's alpha (None: not tested)."""
        if self.test is None:
            return None
        return self.test.p_value < self.gate.statistics.alpha


def _by_severity(gate: Gate) -> Status:
    return "fail" if gate.severity == "error" else "warn"


def worst(statuses: Iterable[Status]) -> Status:
    """The most severe status (pass when there is none)."""
    return max(statuses, key=_RANK.__getitem__, default="pass")


def allowed_change(gate: Gate, baseline: float) -> float:
    """The largest allowed move against the metric's direction, in metric units."""
    assert gate.regression_max is not None
    return gate.regression_max * baseline if gate.regression_relative else gate.regression_max


def _exceeded(gate: Gate, value: float, baseline: float | None) -> bool | None:
    if gate.regression_max is None or baseline is None or math.isnan(baseline):
        return None
    if math.isnan(value):
        return True
    worsening = value - baseline if lower_is_better(gate.metric) else baseline - value
    return worsening > allowed_change(gate, baseline) + TOLERANCE


def _within_floor(gate: Gate, value: float) -> bool:
    """The floor, or for lower-is-better metrics the ceiling."""
    assert gate.threshold is not None
    if lower_is_better(gate.metric):
        return value <= gate.threshold + TOLERANCE
    return value >= gate.threshold - TOLERANCE


def _regression_status(gate: Gate, exceeded: bool | None, p_value: float | None) -> Status:
    """A drop beyond the limit counts when significant (or when significance is off)."""
    if not exceeded:
        return "pass"
    settings = gate.statistics
    if settings.significance and p_value is not None and p_value >= settings.alpha:
        return "warn"
    return _by_severity(gate)


def decide(
    gate: Gate,
    value: float,
    n: int,
    baseline: float | None,
    test: PairedResult | None = None,
    slices: Sequence[SliceResult] = (),
    power: Power | None = None,
) -> GateResult:
    """Check one gate's floor and regression limit (and fold in its slices)."""
    computable = n > 0 and not math.isnan(value)
    floor_ok = None
    if gate.threshold is not None:
        floor_ok = computable and _within_floor(gate, value)
    exceeded = _exceeded(gate, value, baseline)
    p_value = test.p_value if test is not None else None
    statuses: list[Status] = [_regression_status(gate, exceeded, p_value)]
    if floor_ok is False or not computable:
        statuses.append(_by_severity(gate))
    statuses += [s.status for s in slices]
    regression_ok = None if exceeded is None else not exceeded
    return GateResult(
        gate,
        value,
        n,
        baseline,
        floor_ok,
        regression_ok,
        worst(statuses),
        test,
        tuple(slices),
        power,
    )


@dataclass(frozen=True, slots=True)
class SliceInput:
    """The numbers of one tag slice, before the decision."""

    tag: str
    n: int
    value: float
    baseline: float | None
    test: PairedResult | None


def decide_slices(gate: Gate, inputs: Sequence[SliceInput]) -> tuple[SliceResult, ...]:
    """Regression checks on tag slices, Holm-correcting the p-values of the judged ones."""
    settings = gate.statistics
    judged = [
        s.n >= settings.min_n and s.baseline is not None and s.test is not None for s in inputs
    ]
    raw = [s.test.p_value for s, ok in zip(inputs, judged, strict=True) if ok and s.test]
    adjusted = iter(holm(raw))
    results = []
    for slice_input, ok in zip(inputs, judged, strict=True):
        p_adjusted = next(adjusted) if ok else None
        exceeded = bool(ok and _exceeded(gate, slice_input.value, slice_input.baseline))
        status = _regression_status(gate, exceeded, p_adjusted) if ok else "pass"
        results.append(
            SliceResult(
                slice_input.tag,
                slice_input.n,
                slice_input.value,
                slice_input.baseline,
                slice_input.test,
                p_adjusted,
                ok,
                exceeded,
                status,
            )
        )
    return tuple(results)


def verdict(results: Iterable[GateResult]) -> Status:
    """`fail` if any gate failed, else `warn` if any warned, else `pass`."""
    return worst(r.status for r in results)
