"""The gate decision as a table: floors, regression limits, severities, NaN, scopes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from llm_eval.config import Gate, Location, Scope, Statistics
from llm_eval.gate import Power, SliceInput, decide, decide_slices, verdict
from llm_eval.stats import PairedResult
from llm_eval.wording import power_sentence, sentence, slice_sentence

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


def paired(p_value: float, delta: float = -0.06) -> PairedResult:
    return PairedResult(
        100, 0.87, 0.87 + delta, delta, delta - 0.02, delta + 0.02, p_value, "sign-flip", None, None
    )


@pytest.mark.parametrize(
    ("severity", "significance", "p_value", "status"),
    [
        ("error", True, 0.0001, "fail"),  # a large, significant drop fails
        ("error", True, 0.2, "warn"),  # large but insignificant: warns, does not block
        ("error", True, 0.05, "warn"),  # p must be below alpha
        ("error", False, 0.2, "fail"),  # significance off: the limit alone decides
        ("warning", True, 0.0001, "warn"),
    ],
)
def test_regressions_fail_only_when_significant(
    severity: str, significance: bool, p_value: float, status: str
) -> None:
    gate = replace(
        make_gate(threshold=None, severity=severity),
        statistics=Statistics(significance=significance),
    )
    result = decide(gate, 0.81, 100, 0.87, paired(p_value))
    assert result.status == status
    assert result.regression_ok is False


def test_a_small_drop_passes_whatever_its_p_value() -> None:
    result = decide(make_gate(threshold=None), 0.86, 100, 0.87, paired(0.0001, -0.01))
    assert (result.status, result.regression_ok) == ("pass", True)


def test_slices_are_holm_corrected_and_small_ones_not_judged() -> None:
    gate = replace(make_gate(threshold=None), per_tag=True, statistics=Statistics(min_n=30))
    inputs = [
        SliceInput("a", 50, 0.80, 0.90, paired(0.01, -0.10)),  # Holm: 0.01 * 3 = 0.03
        SliceInput("b", 50, 0.80, 0.90, paired(0.02, -0.10)),  # Holm: max(0.03, 0.04) = 0.04
        SliceInput("c", 50, 0.89, 0.90, paired(0.03, -0.01)),  # within the limit
        SliceInput("d", 12, 0.10, 0.90, paired(0.0001, -0.80)),  # too few queries
    ]
    a, b, c, d = decide_slices(gate, inputs)
    assert [a.p_adjusted, b.p_adjusted, c.p_adjusted] == pytest.approx([0.03, 0.04, 0.04])
    assert (a.status, b.status, c.status) == ("fail", "fail", "pass")
    assert (d.judged, d.status, d.p_adjusted) == (False, "pass", None)
    strict = replace(gate, statistics=Statistics(alpha=0.035, min_n=30))
    assert [s.status for s in decide_slices(strict, inputs)] == ["fail", "warn", "pass", "pass"]
    result = decide(gate, 0.90, 200, 0.90, paired(0.9, 0.0), decide_slices(gate, inputs))
    assert result.status == "fail"
    assert sentence(result) is None  # the scope itself is fine; the slices say why
    assert slice_sentence(result, result.slices[3]) == (
        "recall@5 (tag d): too few queries (n=12) to judge"
    )
    assert slice_sentence(result, result.slices[0]) == (
        "recall@5 (tag a) dropped from 90.0% to 80.0% (−10.0 pp, 95% CI −12.0 to −8.0 pp, "
        "Holm-adjusted p = 0.030): significant; at most −3.0 pp is allowed"
    )


def test_the_sentence_carries_the_interval_and_p_value() -> None:
    gate = make_gate(threshold=None, scope=Scope(tier="A"))
    assert sentence(decide(gate, 0.81, 100, 0.87, paired(0.0002))) == (
        "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp, 95% CI −8.0 to −4.0 pp, "
        "p < 0.001): significant; at most −3.0 pp is allowed"
    )
    assert sentence(decide(gate, 0.81, 100, 0.87, paired(0.21))) == (
        "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp, 95% CI −8.0 to −4.0 pp, "
        "p = 0.210): not significant at alpha 0.05, so it only warns; at most −3.0 pp is allowed"
    )


def test_power_warning_names_the_queries_needed() -> None:
    gate = make_gate(threshold=None, scope=Scope(tier="A"))
    result = decide(gate, 0.87, 176, 0.87, paired(1.0, 0.0), power=Power(0.076, 1122))
    assert power_sentence(result) == (
        "recall@5 (tier A): with 176 queries, drops smaller than 7.6 pp are not reliably "
        "detected (80% power, alpha 0.05), but regression_max is 3.0 pp; about 946 more "
        "queries would be needed"
    )


@pytest.mark.parametrize(
    ("metric", "threshold", "regression_max", "relative", "value", "baseline", "status", "text"),
    [
        ("latency_p95", 200.0, None, False, 200.0, None, "pass", None),
        (
            "latency_p95",
            200.0,
            None,
            False,
            250.0,
            None,
            "fail",
            "latency p95 is 250.0 ms, above the ceiling 200.0 ms",
        ),
        ("latency_p95", None, 0.2, True, 119.0, 100.0, "pass", None),
        (
            "latency_p95",
            None,
            0.2,
            True,
            130.0,
            100.0,
            "fail",
            "latency p95 rose from 100.0 ms to 130.0 ms (+30.0 ms); at most +20% (+20.0 ms) "
            "is allowed",
        ),
        ("latency_p50", None, 25.0, False, 60.0, 40.0, "pass", None),
        ("error_rate", 0.0, None, False, 0.0, None, "pass", None),
        (
            "error_rate",
            0.0,
            None,
            False,
            0.02,
            0.0,
            "fail",
            "error rate is 2.0%, above the ceiling 0.0%",
        ),
        # getting faster is never a regression
        ("latency_p99", None, 5.0, False, 10.0, 200.0, "pass", None),
    ],
)
def test_lower_is_better_metrics(
    metric: str,
    threshold: float | None,
    regression_max: float | None,
    relative: bool,
    value: float,
    baseline: float | None,
    status: str,
    text: str | None,
) -> None:
    gate = replace(
        make_gate(threshold=threshold, regression_max=regression_max, metric=metric),
        regression_relative=relative,
    )
    result = decide(gate, value, 100, baseline)
    assert result.status == status
    assert sentence(result) == text
