"""Hand-worked values for every metric, and the metric-name parser."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import llm_eval
from llm_eval.errors import InputError
from llm_eval.judgments import group_starts
from llm_eval.metrics import Family, families, parse_metric, register

LOG2 = math.log2
QRELS = {"q": {"d1": 3, "d2": 1, "d3": 2, "d4": 0}}
# Ranking: x, d1, y, d2, z. Relevant at ranks 2 (grade 3) and 4 (grade 1); d3 never retrieved.
RUN = {"q": ["x", "d1", "y", "d2", "z"]}

DCG5 = 3 / LOG2(3) + 1 / LOG2(5)
IDCG5 = 3 / LOG2(2) + 2 / LOG2(3) + 1 / LOG2(4)
EXP_DCG5 = 7 / LOG2(3) + 1 / LOG2(5)
EXP_IDCG5 = 7 / LOG2(2) + 3 / LOG2(3) + 1 / LOG2(4)


@pytest.mark.parametrize(
    ("metric", "level", "expected"),
    [
        ("recall@1", 1, 0.0),
        ("recall@2", 1, 1 / 3),
        ("recall@5", 1, 2 / 3),
        ("recall@100", 1, 2 / 3),
        ("recall@5", 2, 1 / 2),  # only d1 and d3 are relevant at level 2
        ("recall@4", 3, 1.0),  # only d1 is relevant at level 3
        ("precision@2", 1, 1 / 2),
        ("P@5", 1, 2 / 5),
        ("precision@10", 1, 2 / 10),  # divides by k although 5 were retrieved
        ("precision@5", 2, 1 / 5),
        ("hit_rate@1", 1, 0.0),
        ("hit_rate@2", 1, 1.0),
        ("success@3", 1, 1.0),
        ("mrr", 1, 1 / 2),
        ("mrr@1", 1, 0.0),
        ("mrr@2", 1, 1 / 2),
        ("mrr", 3, 1 / 2),
        ("map", 1, (1 / 2 + 2 / 4) / 3),
        ("map@2", 1, (1 / 2) / 3),
        ("map@3", 1, (1 / 2) / 3),
        ("map", 2, (1 / 2) / 2),
        ("ndcg@5", 1, DCG5 / IDCG5),
        ("ndcg@5", 2, DCG5 / IDCG5),  # nDCG uses the raw grades at every level
        ("ndcg@1", 1, 0.0),
        ("ndcg@2", 1, (3 / LOG2(3)) / (3 + 2 / LOG2(3))),
        ("ndcg", 1, DCG5 / IDCG5),
        ("ndcg_exp@5", 1, EXP_DCG5 / EXP_IDCG5),
        ("rprec", 1, 1 / 3),  # R = 3: of x, d1, y only d1 is relevant
        ("judged@1", 1, 0.0),  # x carries no label
        ("judged@2", 1, 1 / 2),
        ("judged@5", 3, 2 / 5),  # a label counts whatever the relevance level
        ("judged@10", 1, 2 / 10),  # divides by k although 5 were retrieved
        ("rprec", 2, 1 / 2),  # R = 2: of x, d1 only d1
        ("Rprec", 3, 0.0),  # R = 1: x is not relevant
    ],
)
def test_hand_worked_values(metric: str, level: int, expected: float) -> None:
    scores = llm_eval.evaluate(QRELS, RUN, [metric], relevance_level=level)
    assert scores.mean(metric) == pytest.approx(expected, abs=1e-12)


def test_a_repeated_document_is_credited_once() -> None:
    run = {"q": ["d1", "d1", "d2"]}
    scores = llm_eval.evaluate(QRELS, run, ["recall@2", "precision@2", "map"])
    assert scores.mean("recall@2") == pytest.approx(1 / 3)
    assert scores.mean("precision@2") == pytest.approx(1 / 2)
    assert scores.mean("map") == pytest.approx((1 / 1 + 2 / 3) / 3)


def test_judged_counts_a_label_of_grade_0_once_however_often_it_is_listed() -> None:
    run = {"q": ["d4", "d1", "d4", "x"]}  # d4 is labelled not relevant (grade 0)
    scores = llm_eval.evaluate(QRELS, run, ["judged@1", "judged@3", "judged@4"])
    assert scores.means() == {"judged@1": 1.0, "judged@3": 2 / 3, "judged@4": 2 / 4}


def test_recall_never_exceeds_one_with_repeats() -> None:
    scores = llm_eval.evaluate({"q": {"a": 1}}, {"q": ["a", "a", "a"]}, ["recall@3"])
    assert scores.mean("recall@3") == 1.0


def test_missing_queries_score_zero_and_are_listed() -> None:
    qrels = {"a": {"d": 1}, "b": {"d": 1}}
    scores = llm_eval.evaluate(qrels, {"a": ["d"]}, ["recall@5", "mrr"])
    assert scores.missing == ("b",)
    assert scores.per_query("mrr") == {"a": 1.0, "b": 0.0}
    assert scores.mean("recall@5") == 0.5


def test_rejection_queries_are_left_out_of_means() -> None:
    qrels = {"a": {"d": 1}, "r": {}, "low": {"d": 1}}
    scores = llm_eval.evaluate(qrels, {"a": ["d"], "r": ["x"]}, ["mrr"], relevance_level=2)
    assert scores.rejection == ("a", "r", "low")
    assert scores.query_ids == ()
    assert math.isnan(scores.mean("mrr"))
    scores = llm_eval.evaluate(qrels, {"a": ["d"], "r": ["x"]}, ["mrr"])
    assert scores.rejection == ("r",)
    assert scores.mean("mrr") == 0.5  # "low" is missing from the run and scores 0


def test_run_queries_not_in_gold_are_counted_and_ignored() -> None:
    scores = llm_eval.evaluate({"a": {"d": 1}}, {"a": ["d"], "x": ["d"], "y": []}, ["mrr"])
    assert scores.not_in_gold == 2
    assert scores.per_query("mrr") == {"a": 1.0}


def test_scored_runs_break_ties_by_doc_id_descending() -> None:
    run = {"q": {"d1": 1.0, "d2": 1.0, "zz": 1.0, "d3": 0.5}}
    scores = llm_eval.evaluate(QRELS, run, ["mrr", "ndcg@3"])
    # Order: zz, d2, d1, d3 -> first relevant (d2) at rank 2.
    assert scores.mean("mrr") == 0.5
    dcg = 1 / LOG2(3) + 3 / LOG2(4)
    assert scores.mean("ndcg@3") == pytest.approx(dcg / IDCG5)


def test_empty_ranking_scores_zero_without_being_missing() -> None:
    scores = llm_eval.evaluate(QRELS, {"q": []}, ["recall@5", "ndcg@5"])
    assert scores.missing == ()
    assert scores.means() == {"recall@5": 0.0, "ndcg@5": 0.0}


def test_scores_api_shapes() -> None:
    scores = llm_eval.evaluate(QRELS, RUN, ["P@5", "MRR"])
    assert scores.metric_names == ("precision@5", "mrr")
    assert scores.to_dict() == {"q": {"precision@5": 0.4, "mrr": 0.5}}
    assert scores.per_query("p@5") == {"q": 0.4}
    with pytest.raises(KeyError, match="was not computed"):
        scores.mean("map")


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("recall@5", "recall@5"),
        ("Recall@5", "recall@5"),
        ("P@10", "precision@10"),
        ("precision@3", "precision@3"),
        ("success@1", "hit_rate@1"),
        ("hit_rate@5", "hit_rate@5"),
        ("MRR", "mrr"),
        ("mrr@10", "mrr@10"),
        ("recip_rank", "mrr"),
        ("map", "map"),
        ("MAP@100", "map@100"),
        ("nDCG@10", "ndcg@10"),
        ("ndcg_exp@10", "ndcg_exp@10"),
        ("Rprec", "rprec"),
        ("r_precision", "rprec"),
        ("Latency_P95", "latency_p95"),
        ("stale_rate@3", "stale_rate@3"),
    ],
)
def test_parse_metric_names(name: str, canonical: str) -> None:
    assert parse_metric(name).name == canonical


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "recal@5",
            "unknown metric 'recal@5'; valid metrics: recall@k; precision@k (alias P@k); "
            "hit_rate@k (alias success@k); mrr, mrr@k (alias recip_rank); map, map@k; "
            "ndcg, ndcg@k; ndcg_exp, ndcg_exp@k; judged@k; rprec (alias r_precision); "
            "score_discrimination, score_discrimination@k; rank_correlation, rank_correlation@k; "
            "rejection_accuracy; false_confidence_rate; stale_rate@k; stale_query_rate@k; "
            "conflict_rate@k; context_precision@k; context_recall; context_sufficiency; "
            "faithfulness; answer_relevance; latency_p50; latency_p95; latency_p99; error_rate",
        ),
        ("recall", "metric 'recall' needs a cutoff, e.g. recall@5"),
        ("recall@0", "metric 'recall@0': the cutoff must be a whole number >= 1"),
        ("ndcg@ten", "metric 'ndcg@ten': the cutoff must be a whole number >= 1"),
    ],
)
def test_parse_metric_errors(name: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_metric(name)
    assert str(caught.value) == message


def test_duplicate_metric_names_are_computed_once() -> None:
    scores = llm_eval.evaluate(QRELS, RUN, ["P@5", "precision@5", "mrr"])
    assert scores.metric_names == ("precision@5", "mrr")


@pytest.mark.parametrize(
    ("name", "label", "percent", "lower_is_better", "pairable", "weight_key"),
    [
        ("recall@5", "recall@5", True, False, True, None),
        ("mrr", "MRR", False, False, True, None),
        ("ndcg_exp@10", "nDCG(exp)@10", False, False, True, None),
        ("rprec", "R-precision", True, False, True, None),
        ("hit_rate@3", "hit rate@3", True, False, True, None),
        ("false_confidence_rate", "false confidence rate", True, True, True, None),
        ("stale_rate@5", "stale rate@5", True, True, False, "positions@5"),
        ("latency_p95", "latency p95", False, True, False, None),
        ("error_rate", "error rate", True, True, False, None),
    ],
)
def test_each_metric_knows_its_facts(
    name: str,
    label: str,
    percent: bool,
    lower_is_better: bool,
    pairable: bool,
    weight_key: str | None,
) -> None:
    metric = parse_metric(name)
    assert (metric.label, metric.percent, metric.lower_is_better) == (
        label,
        percent,
        lower_is_better,
    )
    assert (metric.pairable, metric.weight_key) == (pairable, weight_key)


def test_a_family_computes_the_way_its_kind_says() -> None:
    for family in families():
        assert (family.kernel is not None) == (family.kind == "relevance"), family.name
        assert (family.aggregate is not None) == (family.kind == "service"), family.name


def test_a_spelling_cannot_be_registered_twice() -> None:
    with pytest.raises(ValueError, match="metric 'p' is already registered"):
        register(Family("p", "rejection", "none", "x", "x", "share"))


def test_a_registered_metric_is_known_to_config_wording_and_help(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Adding a metric is one register() call: config, wording and `llm-eval metrics`
    pick it up without another change."""
    from llm_eval import metrics
    from llm_eval.commands.metrics import metric_table
    from llm_eval.criteria_io import load_criteria
    from llm_eval.wording.gates import delta, value

    monkeypatch.setattr(metrics, "_REGISTRY", dict(metrics._REGISTRY))
    monkeypatch.setattr(metrics, "_SPELLINGS", dict(metrics._SPELLINGS))
    register(
        Family(
            "first_hit_rate",
            "relevance",
            "required",
            "1 when rank 1 is relevant",
            "first hit",
            "share",
            kernel=lambda j, k: (j.first_relevant_rank() == 1).astype(float),
        )
    )
    try:
        scores = llm_eval.evaluate(QRELS, {"q": ["d1", "x"]}, ["first_hit_rate@1"])
        assert scores.mean("first_hit_rate@1") == 1.0
        criteria = tmp_path / "criteria.yaml"
        criteria.write_text(
            "gates:\n  - name: g\n    metric: FIRST_HIT_RATE@1\n    threshold: 0.5\n"
        )
        assert load_criteria(criteria).gates[0].metric == "first_hit_rate@1"
        assert (value("first_hit_rate@1", 0.5), delta("first_hit_rate@1", -0.02)) == (
            "50.0%",
            "−2.0 pp",
        )
        assert "  first_hit_rate@k\n    1 when rank 1 is relevant; a percentage" in metric_table()
    finally:
        parse_metric.cache_clear()


@pytest.mark.parametrize(
    ("metric", "hint"),
    [
        ("rank_correlation@5", "needs the run's scores or rejection queries: "
         "`llm-eval evaluate --gold` computes it"),
        ("stale_rate@5", "is computed by `llm-eval gate`, which reads the config"),
    ],
)  # fmt: skip
def test_the_api_points_to_where_other_metrics_are_computed(metric: str, hint: str) -> None:
    with pytest.raises(InputError) as raised:
        llm_eval.evaluate({"q": {"d": 1}}, {"q": ["d"]}, [metric])
    assert str(raised.value) == f"llm_eval.evaluate computes relevance metrics; {metric} {hint}"


def _plain_average_precision(j: Any, k: int | None) -> Any:
    """MAP as the kernel computed it before its temporaries were made in place."""
    relevant = j.hit_relevant
    queries, ranks = j.hit_query[relevant], j.hit_rank[relevant]
    starts = group_starts(queries)
    group_start = np.repeat(starts, np.diff(np.append(starts, queries.size)))
    precision_at_hit = (np.arange(queries.size) - group_start + 1) / ranks
    keep = slice(None) if k is None else ranks <= k
    total = np.bincount(queries[keep], precision_at_hit[keep], minlength=len(j.query_ids))
    return total / j.num_relevant


def _plain_dcg(queries: Any, ranks: Any, gains: Any, k: int | None, size: int) -> Any:
    keep = slice(None) if k is None else ranks <= k
    discounted = gains[keep] / np.log2(ranks[keep] + 1.0)
    return np.bincount(queries[keep], discounted, minlength=size).astype(np.float64)


@pytest.mark.parametrize("seed", range(6))
def test_map_and_dcg_made_in_place_are_the_plain_formulas_to_the_bit(seed: int) -> None:
    """Graded labels, a relevance level of 2, lists longer and shorter than k, queries
    with no hit: MAP and DCG keep their every bit."""
    from llm_eval import metrics
    from llm_eval.judgments import judge_ranked

    rng = np.random.default_rng(seed)
    qrels = {
        f"q{i}": {f"d{d}": int(rng.integers(0, 4)) for d in rng.choice(30, 6, replace=False)}
        for i in range(300)
    }
    run = {q: [f"d{d}" for d in rng.choice(30, int(rng.integers(0, 25)))] for q in qrels}
    for level in (1, 2):
        j = judge_ranked(qrels, run, level)
        size = len(j.query_ids)
        for k in (None, 1, 5, 10):
            fast = metrics._average_precision(j, k)
            assert fast.tobytes() == _plain_average_precision(j, k).tobytes()
            gains = j.hit_grade.astype(np.float64)
            plain = _plain_dcg(j.hit_query, j.hit_rank, gains, k, size)
            assert (
                metrics._dcg(j.hit_query, j.hit_rank, gains, k, size).tobytes() == plain.tobytes()
            )
