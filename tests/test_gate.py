"""The gate decision as a table: floors, regression limits, severities, NaN, scopes."""

from __future__ import annotations

import math

import pytest

from llm_eval.config import Gate, Location, Scope
from llm_eval.gate import decide, verdict
from llm_eval.wording import sentence

HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")


def make_gate(
    threshold: float | None = 0.85,
    regression_max: float | None = 0.03,
    severity: str = "error",
    metric: str = "recall@5",
    scope: Scope | None = None,
) -> Gate:
    scope = scope or Scope()
    return Gate("g", metric, threshold, regression_max, severity, scope, HERE, HERE)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("gate", "value", "baseline", "status", "floor_ok", "regression_ok"),
    [
        # exactly at the floor passes; just below fails
        (make_gate(), 0.85, None, "pass", True, None),
        (make_gate(), 17 / 20, None, "pass", True, None),
        (make_gate(), 0.8499, None, "fail", False, None),
        # a mean that lands a rounding error below the floor is on it
        (make_gate(), 0.85 - 1e-12, None, "pass", True, None),
        # regression: a drop of exactly regression_max passes, a larger one fails
        (make_gate(threshold=None), 0.87, 0.90, "pass", None, True),
        (make_gate(threshold=None), 0.8699, 0.90, "fail", None, False),
        (make_gate(threshold=None), 0.95, 0.90, "pass", None, True),
        # both checks
        (make_gate(), 0.86, 0.90, "fail", True, False),
        (make_gate(), 0.84, 0.85, "fail", False, True),
        # warning severity never fails
        (make_gate(severity="warning"), 0.80, 0.90, "warn", False, False),
        (make_gate(severity="warning"), 0.90, 0.90, "pass", True, True),
        # NaN or no query never passes
        (make_gate(), math.nan, 0.9, "fail", False, False),
        (make_gate(severity="warning"), math.nan, None, "warn", False, None),
        # metric missing from the baseline: the regression check is skipped
        (make_gate(), 0.90, None, "pass", True, None),
        (make_gate(threshold=None), 0.10, None, "pass", None, None),
        # a NaN baseline cannot be compared with
        (make_gate(threshold=None), 0.5, math.nan, "pass", None, None),
        # a regression_max of zero allows no drop at all
        (make_gate(threshold=None, regression_max=0.0), 0.8999, 0.9, "fail", None, False),
    ],
)
def test_decide(
    gate: Gate,
    value: float,
    baseline: float | None,
    status: str,
    floor_ok: bool | None,
    regression_ok: bool | None,
) -> None:
    n = 0 if math.isnan(value) else 100
    result = decide(gate, value, n, baseline)
    assert (result.status, result.floor_ok, result.regression_ok) == (
        status,
        floor_ok,
        regression_ok,
    )


def test_an_empty_scope_fails_even_with_a_value() -> None:
    assert decide(make_gate(), 0.9, 0, None).status == "fail"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [((), "pass"), (("pass",), "pass"), (("pass", "warn"), "warn"), (("warn", "fail"), "fail")],
)
def test_verdict(statuses: tuple[str, ...], expected: str) -> None:
    gates = {
        "pass": (make_gate(), 0.9, None),
        "warn": (make_gate(severity="warning"), 0.1, None),
        "fail": (make_gate(), 0.1, None),
    }
    results = [decide(gate, value, 10, base) for gate, value, base in map(gates.get, statuses)]
    assert verdict(results) == expected


@pytest.mark.parametrize(
    ("gate", "value", "baseline", "text"),
    [
        (
            make_gate(threshold=None, scope=Scope(tier="A")),
            0.81,
            0.87,
            "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp); at most −3.0 pp is allowed",
        ),
        (
            make_gate(threshold=0.62, regression_max=None, severity="warning", metric="mrr"),
            0.58,
            None,
            "MRR is 0.580, below the floor 0.620 (warning)",
        ),
        (
            make_gate(threshold=0.85, scope=Scope(tags=("howto",))),
            0.80,
            0.90,
            "recall@5 (tag howto) dropped from 90.0% to 80.0% (−10.0 pp); "
            "at most −3.0 pp is allowed, and is 80.0%, below the floor 85.0%",
        ),
        (
            make_gate(metric="ndcg@10", threshold=0.5, regression_max=None),
            math.nan,
            None,
            "nDCG@10 could not be computed: no scored query in its scope",
        ),
    ],
)
def test_plain_words(gate: Gate, value: float, baseline: float | None, text: str) -> None:
    n = 0 if math.isnan(value) else 50
    assert sentence(decide(gate, value, n, baseline)) == text
