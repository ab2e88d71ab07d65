"""The gate decision as a table: floors, regression limits, severities, NaN, scopes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from llm_eval.criteria import Gate, Location, Scope, Statistics
from llm_eval.gate import Power, SliceInput, decide, decide_slices, verdict
from llm_eval.stats import MarginTest, holm, holm_levels
from llm_eval.wording.gates import more_queries, power_sentence, sentence, slice_sentence

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
            "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp): more than the 3.0 pp allowed",
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
            "recall@5 (tag howto) is 80.0%, below the floor 85.0%, and dropped from 90.0% to "
            "80.0% (−10.0 pp): more than the 3.0 pp allowed",
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


def against_limit(
    low: float, high: float, n: int = 100, p_beyond: float | None = None, limit: float = 0.03
) -> MarginTest:
    """A test of the worsening (baseline - value) with one-sided bounds low and high, and
    the p-values that go with them: a bound beyond the limit rejects that side."""
    return MarginTest(
        n=n,
        worsening=(low + high) / 2,
        low=low,
        high=high,
        confidence=0.9,
        p_beyond=p_beyond if p_beyond is not None else (0.01 if low > limit else 0.5),
        p_within=0.01 if high <= limit else 0.5,
        spread=0.3,
        method="betting",
        changed=n,
    )


@pytest.mark.parametrize(
    ("severity", "low", "high", "n", "value", "on_inconclusive", "status", "blocking"),
    [
        # the whole interval beyond the 3 pp limit: fail; within it: pass
        ("error", 0.04, 0.08, 100, 0.81, None, "fail", True),
        ("error", -0.01, 0.029, 100, 0.86, None, "pass", False),
        ("error", -0.01, 0.03, 100, 0.86, None, "pass", False),  # an upper bound on the limit
        # straddling the limit: cannot tell; by default it blocks only when the estimate
        # is beyond the limit
        ("error", 0.01, 0.08, 100, 0.82, None, "inconclusive", True),
        ("error", 0.0, 0.05, 100, 0.85, None, "inconclusive", False),
        ("error", 0.01, 0.08, 100, 0.82, "warn", "inconclusive", False),
        ("error", 0.0, 0.05, 100, 0.85, "fail", "inconclusive", True),
        # fewer than min_n paired queries never decide, however clear the interval
        ("error", 0.5, 0.9, 5, 0.20, None, "inconclusive", True),
        ("error", -0.01, 0.0, 5, 0.87, None, "inconclusive", False),
        # warning gates never block
        ("warning", 0.04, 0.08, 100, 0.81, None, "warn", False),
        ("warning", 0.01, 0.08, 100, 0.82, "fail", "inconclusive", False),
    ],
)
def test_three_zones(
    severity: str,
    low: float,
    high: float,
    n: int,
    value: float,
    on_inconclusive: str | None,
    status: str,
    blocking: bool,
) -> None:
    gate = replace(
        make_gate(threshold=None, severity=severity),
        statistics=Statistics(on_inconclusive=on_inconclusive),  # type: ignore[arg-type]
    )
    result = decide(gate, value, n, 0.87, margin=against_limit(low, high, n))
    assert (result.status, result.blocking) == (status, blocking)
    assert result.decision == {"fail": "fail", "warn": "fail"}.get(status, status)


def test_significance_off_keeps_the_point_estimate_rule() -> None:
    gate = replace(make_gate(threshold=None), statistics=Statistics(significance=False))
    unsure = against_limit(0.0, 0.2, n=5)
    assert decide(gate, 0.81, 5, 0.87, margin=unsure).status == "fail"
    assert decide(gate, 0.86, 5, 0.87, margin=unsure).status == "pass"


def test_slices_are_holm_corrected_and_small_ones_not_judged() -> None:
    gate = replace(make_gate(threshold=None), per_tag=True, statistics=Statistics(min_n=30))
    inputs = [
        SliceInput("a", 50, 0.80, 0.90, against_limit(0.05, 0.15, 50, 0.01)),
        SliceInput("b", 50, 0.80, 0.90, against_limit(0.04, 0.16, 50, 0.02)),
        SliceInput("c", 50, 0.89, 0.90, against_limit(-0.02, 0.01, 50, 0.9)),
        SliceInput("e", 50, 0.86, 0.90, against_limit(0.0, 0.08, 50, 0.3)),
        SliceInput("d", 12, 0.10, 0.90, against_limit(0.7, 0.9, 12, 0.0001)),
    ]
    raw = [0.01, 0.02, 0.9, 0.3]
    adjusted, levels = holm(raw), holm_levels(raw, 0.05)
    inputs = [
        replace(piece, p_adjusted=p, level=level)
        for piece, p, level in zip(inputs, [*adjusted, None], [*levels, None], strict=True)
    ]
    a, b, c, e, d = decide_slices(gate, inputs)
    # Holm over four judged slices: 0.01 * 4, max(0.04, 0.02 * 3), ...
    assert [a.p_adjusted, b.p_adjusted] == pytest.approx([0.04, 0.06])
    assert (a.status, b.status, c.status, e.status) == (
        "fail",
        "inconclusive",
        "pass",
        "inconclusive",
    )
    assert (d.judged, d.status, d.p_adjusted) == (False, "inconclusive", None)
    # a slice that cannot tell is information: the gate itself passes
    calm = decide(
        gate,
        0.90,
        200,
        0.90,
        decide_slices(gate, inputs[1:]),
        margin=against_limit(-0.02, 0.02, 200),
    )
    assert calm.status == "pass"
    result = decide(
        gate,
        0.90,
        200,
        0.90,
        decide_slices(gate, inputs),
        margin=against_limit(-0.02, 0.02, 200),
    )
    assert result.status == "fail"
    assert sentence(result) is None  # the scope itself is fine; the slices say why
    assert slice_sentence(result, result.slices[4]) == (
        "recall@5 (tag d): too few queries (n=12) to judge"
    )
    assert slice_sentence(result, result.slices[1]).endswith(  # type: ignore[union-attr]
        "whether it dropped by more than the 3.0 pp allowed cannot be told"
    )
    assert slice_sentence(result, result.slices[0]) == (
        "recall@5 (tag a) dropped from 90.0% to 80.0% (−10.0 pp; 90% CI −15.0 to −5.0 pp, "
        "Holm-adjusted p ≤ 0.040): more than the 3.0 pp allowed"  # a betting test: a bound
    )


def test_the_sentence_carries_the_interval_of_the_decision() -> None:
    gate = make_gate(threshold=None, scope=Scope(tier="A"))
    failed = decide(gate, 0.81, 100, 0.87, margin=against_limit(0.04, 0.08))
    assert sentence(failed) == (
        "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp; 90% CI −8.0 to −4.0 pp): "
        "more than the 3.0 pp allowed"
    )
    power = Power(24, 0.03, 0.2, 0.06, 140, "assuming no other query's score changes")
    unsure = decide(gate, 0.81, 24, 0.87, power=power, margin=against_limit(0.01, 0.11, 24))
    # a blocking "cannot tell" leads with the fact that it blocks, and why
    assert sentence(unsure) == (
        "Blocks the merge: whether recall@5 (tier A) dropped by more than the 3.0 pp allowed "
        "cannot be told, because 24 queries are fewer than the 30 needed to judge, and about "
        "140 catch a drop of 6.0 pp 4 times in 5 (llm-eval gold plan lists where to add "
        "them); it dropped from 87.0% to 81.0% (−6.0 pp; 90% CI −11.0 to −1.0 pp)"
    )
    assert more_queries(unsure) == 140 - 24
    settled = replace(unsure, margin=against_limit(0.01, 0.11, n=60), status="inconclusive")
    moved = "; it dropped from 87.0% to 81.0% (−6.0 pp; 90% CI −11.0 to −1.0 pp)"
    assert sentence(settled) == (
        "Blocks the merge: whether recall@5 (tier A) dropped by more than the 3.0 pp allowed "
        "cannot be told, because 60 queries are too few: about 140 catch a drop of 6.0 pp 4 "
        "times in 5 (llm-eval gold plan lists where to add them)" + moved
    )
    close = replace(settled, power=replace(power, queries_needed=50))
    assert sentence(close) == (
        "Blocks the merge: whether recall@5 (tier A) dropped by more than the 3.0 pp allowed "
        "cannot be told, because the change is too close to the limit for 60 queries to "
        "tell" + moved
    )
    hopeless = replace(settled, power=replace(power, queries_needed=None))
    assert sentence(hopeless) == (
        "Blocks the merge: whether recall@5 (tier A) dropped by more than the 3.0 pp allowed "
        "cannot be told, because 60 queries are too few: not even 10,000 queries catch a "
        "drop of 6.0 pp 4 times in 5" + moved
    )
    # not blocking, the drop leads and the sentence says it does not block
    reported = replace(unsure, on_inconclusive="warn")
    assert sentence(reported) == (
        "recall@5 (tier A) dropped from 87.0% to 81.0% (−6.0 pp; 90% CI −11.0 to −1.0 pp); "
        "whether it dropped by more than the 3.0 pp allowed cannot be told: 24 queries are "
        "fewer than the 30 needed to judge, and about 140 catch a drop of 6.0 pp 4 times in 5 "
        "(llm-eval gold plan lists where to add them) (reported, not blocking)"
    )


def test_power_sentence_says_what_the_scope_catches() -> None:
    gate = make_gate(threshold=None, scope=Scope(tier="A"))
    result = decide(
        gate,
        0.87,
        176,
        0.87,
        power=Power(176, 0.03, 0.076, 0.06, 1_313, "assuming the churn seen"),
        margin=against_limit(-0.02, 0.02, 176),
    )
    assert power_sentence(result) == (
        "recall@5 (tier A): with 176 queries, a drop of 7.6 pp is caught 4 times in 5; "
        "about 1,313 queries catch one of 6.0 pp (twice the 3.0 pp limit), assuming the "
        "churn seen"
    )
    assert result.power is not None
    open_ended = replace(result, power=replace(result.power, detectable_drop=None, target=0.045))
    assert power_sentence(open_ended) == (
        "recall@5 (tier A): 176 queries are too few to catch any drop 4 times in 5; "
        "about 1,313 queries catch one of 4.5 pp (1.5× the 3.0 pp limit), assuming the "
        "churn seen"
    )
    zero = replace(result, power=replace(result.power, limit=0.0, target=0.0))
    assert power_sentence(zero) == (  # no multiple of a zero limit to count queries for
        "recall@5 (tier A): with 176 queries, a drop of 7.6 pp is caught 4 times in 5, "
        "assuming the churn seen"
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
            "latency p95 rose from 100.0 ms to 130.0 ms (+30.0 ms): more than the +20% "
            "(+20.0 ms) allowed",
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


def _unchanged(n: int) -> MarginTest:
    return replace(against_limit(-0.1, 0.1, n), changed=0, worsening=0.0)


@pytest.mark.parametrize(
    ("value", "baseline", "threshold", "margin", "status", "reason"),
    [
        # no query's score moved: a plain pass, whatever the size (24 < min_n)
        (0.9, 0.9, 0.85, _unchanged(24), "pass", "unchanged"),
        (0.95, 0.9, 0.85, against_limit(-0.1, -0.01, 100), "pass", "improved"),
        (0.89, 0.9, 0.85, against_limit(-0.02, 0.02, 100), "pass", "within"),
        (0.84, 0.86, 0.85, against_limit(-0.02, 0.02, 100), "fail", "floor"),
        (0.80, 0.86, 0.85, against_limit(0.04, 0.08, 100), "fail", "both"),
        (0.88, 0.94, 0.85, against_limit(0.04, 0.08, 100), "fail", "regression"),
        (0.88, 0.94, 0.85, against_limit(0.01, 0.08, 100), "inconclusive", "cannot_tell"),
        (0.84, 0.86, 0.85, against_limit(0.01, 0.08, 100), "fail", "floor"),
        (float("nan"), 0.9, 0.85, None, "fail", "no_data"),
    ],
)
def test_one_reason_per_gate(
    value: float,
    baseline: float,
    threshold: float,
    margin: MarginTest | None,
    status: str,
    reason: str,
) -> None:
    n = 0 if math.isnan(value) else (margin.n if margin else 50)
    result = decide(make_gate(threshold=threshold), value, n, baseline, margin=margin)
    assert (result.status, result.reason) == (status, reason)
    said = sentence(result)
    assert (said is None) == (reason in ("unchanged", "improved", "within"))
    if reason == "floor" and result.decision == "inconclusive":
        assert said is not None and "cannot be told" in said and "below the floor" in said


def test_an_improvement_is_never_called_a_drop() -> None:
    gate = make_gate(threshold=None)
    unsure = decide(gate, 0.924, 40, 0.889, margin=against_limit(-0.12, 0.05, 40))
    assert unsure.reason == "cannot_tell"
    assert "rose from 88.9% to 92.4% (+3.5 pp" in str(sentence(unsure))
    assert "dropped from" not in str(sentence(unsure))


def test_a_missed_floor_is_not_hidden_behind_cannot_tell() -> None:
    """A warning gate below its floor warns even when its drop cannot be told."""
    gate = make_gate(threshold=0.5, severity="warning", metric="mrr", regression_max=0.05)
    result = decide(gate, 0.45, 100, 0.52, margin=against_limit(0.01, 0.12, 100, limit=0.05))
    assert (result.decision, result.status, result.reason) == ("inconclusive", "warn", "floor")
