"""Score discrimination and rank correlation: checked against numpy and scipy, through
`score_run`, and left unscored (never 0) where they are undefined."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import gold_query
from scipy.stats import spearmanr

from llm_eval.gold import GoldSet
from llm_eval.metrics import parse_metric
from llm_eval.ranking import coefficient_of_variation, spearman_with_grades
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run
from llm_eval.slices import ScoreTable, value_over


def results(*pairs: tuple[str, float | None]) -> tuple[RankedResult, ...]:
    return tuple(RankedResult(doc, score) for doc, score in pairs)


@pytest.mark.parametrize("seed", range(5))
def test_rank_correlation_is_scipys_spearman_with_average_ranks(seed: int) -> None:
    rng = random.Random(seed)
    checked = 0
    for _ in range(400):
        units = [rng.choice("abcdefgh") for _ in range(rng.randint(2, 9))]
        labels = {u: rng.randint(0, 3) for u in "abcde" if rng.random() < 0.7}
        rho = spearman_with_grades(units, labels)
        first: set[str] = set()
        grades = []
        for unit in units:  # a repeated unit counts at its first rank only
            grades.append(labels.get(unit, 0) if unit not in first else 0)
            first.add(unit)
        if len(set(grades)) < 2:
            assert rho is None
            continue
        expected = spearmanr(-np.arange(len(units)), grades).statistic
        assert rho == pytest.approx(expected, abs=1e-12)
        checked += 1
    assert checked > 200


def test_rank_correlation_hand_worked() -> None:
    # Grades in list order 3, 0, 1: positions ranked 3,2,1; grades ranked 3,1,2.
    # rho = 1 - 6 * (0 + 1 + 1) / (3 * 8) = 0.5
    assert spearman_with_grades(["a", "x", "b"], {"a": 3, "b": 1}) == pytest.approx(0.5)
    assert spearman_with_grades(["a", "b"], {"a": 2, "b": 1}) == pytest.approx(1.0)
    assert spearman_with_grades(["b", "a"], {"a": 2, "b": 1}) == pytest.approx(-1.0)
    assert spearman_with_grades(["x", "y"], {"a": 2}) is None  # all grades 0
    assert spearman_with_grades(["a"], {"a": 2}) is None  # one result


def test_coefficient_of_variation() -> None:
    scores = [12.0, 9.5, 9.0, 3.25]
    expected = np.std(scores) / np.mean(scores)
    assert coefficient_of_variation(scores) == pytest.approx(expected)
    assert coefficient_of_variation([-2.0, -1.0]) == pytest.approx(0.5 / 1.5)
    assert coefficient_of_variation([1.0, 1.0]) == 0.0
    assert coefficient_of_variation([1.0]) is None
    assert coefficient_of_variation([1.0, None]) is None
    assert coefficient_of_variation([1.0, -1.0]) is None  # mean 0


def test_score_run_scores_ranking_metrics_and_leaves_undefined_queries_out() -> None:
    gold = GoldSet(
        (
            gold_query("graded", (("a", 2), ("b", 1))),
            gold_query("unscored", (("a", 1),)),
            gold_query("nothing-relevant", (("z", 1),)),
            gold_query("reject"),
            gold_query("failed", (("a", 1),)),
        )
    )
    run = Run(
        {
            "graded": QueryResults("graded", results(("b", 5.0), ("a", 3.0), ("x", 1.0))),
            "unscored": QueryResults("unscored", results(("a", None), ("x", None))),
            "nothing-relevant": QueryResults("nothing-relevant", results(("x", 2.0), ("y", 2.0))),
            "reject": QueryResults("reject", results(("x", 4.0), ("y", 1.0))),
            "failed": QueryResults("failed", (), error="timeout"),
        }
    )
    names = ["score_discrimination", "rank_correlation@3", "rank_correlation@1"]
    m = score_run(gold, run, names, 1)
    graded = m.per_query["graded"]
    assert graded["score_discrimination"] == pytest.approx(np.std([5, 3, 1]) / 3)
    assert graded["rank_correlation@3"] == pytest.approx(spearmanr([3, 2, 1], [1, 2, 0]).statistic)
    assert "rank_correlation@1" not in graded  # one result: undefined
    assert "score_discrimination" not in m.per_query["unscored"]  # no scores
    assert m.per_query["unscored"]["rank_correlation@3"] == pytest.approx(1.0)
    assert m.per_query["nothing-relevant"] == {"score_discrimination": 0.0}
    assert m.per_query["reject"]["score_discrimination"] == pytest.approx(0.6)
    assert "rank_correlation@3" not in m.per_query["reject"]
    assert "failed" not in m.per_query
    # The mean is over the queries with a value, not over every query.
    table = ScoreTable(m.per_query, m.service)
    ids = [q.query_id for q in gold.queries]
    rho = value_over(table, ids, "rank_correlation@3")
    assert rho.n == 2
    assert rho.value == pytest.approx(np.mean([graded["rank_correlation@3"], 1.0]))


def test_registry_entries() -> None:
    assert parse_metric("rank_correlation@10").label == "rank correlation@10"
    assert not parse_metric("score_discrimination").percent
    assert parse_metric("score_discrimination@5").kind == "ranking"
