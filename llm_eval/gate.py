"""Gate decisions: a pure function over numbers, tested as a table.

Per gate two checks: the floor (`value >= threshold`) and the regression check
(`value - baseline >= -regression_max`). A failed check makes the gate `fail` when
its severity is `error` and `warn` when it is `warning`. A value that cannot be
computed (NaN, or no query in the scope) never passes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from llm_eval.config import Gate

Status = Literal["pass", "warn", "fail"]

# Means of many per-query values carry rounding error; a value this close to a limit
# is taken to be on it (0.85 computed as 0.8499999999999999 meets a 0.85 floor).
TOLERANCE = 1e-9


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
    """None when the gate has no regression_max or there is no baseline value."""
    status: Status

    @property
    def delta(self) -> float | None:
        """value - baseline, when both are known."""
        if self.baseline is None or math.isnan(self.value):
            return None
        return self.value - self.baseline


def decide(gate: Gate, value: float, n: int, baseline: float | None) -> GateResult:
    """Check one gate's floor and regression limit."""
    computable = n > 0 and not math.isnan(value)
    floor_ok = None
    if gate.threshold is not None:
        floor_ok = computable and value >= gate.threshold - TOLERANCE
    regression_ok = None
    if gate.regression_max is not None and baseline is not None and not math.isnan(baseline):
        regression_ok = computable and value - baseline >= -gate.regression_max - TOLERANCE
    failed = floor_ok is False or regression_ok is False or not computable
    status: Status = "pass"
    if failed:
        status = "fail" if gate.severity == "error" else "warn"
    return GateResult(gate, value, n, baseline, floor_ok, regression_ok, status)


def verdict(results: Iterable[GateResult]) -> Status:
    """`fail` if any gate failed, else `warn` if any warned, else `pass`."""
    statuses = {r.status for r in results}
    if "fail" in statuses:
        return "fail"
    return "warn" if "warn" in statuses else "pass"
