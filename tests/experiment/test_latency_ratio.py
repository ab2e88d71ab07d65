"""Latencies compared query by query: the paired ratio's interval and its words, on
fixed arrays (nothing here is timed)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import gold_query

from llm_eval.experiment.latency_ratio import Ratio, paired_ratio, ratio_cell, ratio_words
from llm_eval.experiment.variants import Measured, compare_variants, recommendation
from llm_eval.gold import GoldSet
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run
from llm_eval.stats import quantile_interval

BASE = np.random.default_rng(11).lognormal(0.0, 0.5, 300)
"""One retriever's latencies over 300 queries: skewed, as latencies are."""


def test_a_retriever_twice_as_slow_on_every_query_is_said_so() -> None:
    ratio = paired_ratio(BASE * 2, BASE, 0.95, seed=0)
    assert ratio is not None
    # Every query twice as slow: every resample's ratio is exactly 2.
    assert (ratio.ratio, ratio.low, ratio.high) == pytest.approx((2.0, 2.0, 2.0))
    assert not ratio.tied and not ratio.faster
    assert ratio_words(ratio, "bm25") == "2.00–2.00× slower than `bm25` at p95"
    faster = paired_ratio(BASE / 2, BASE, 0.5, seed=0)
    assert faster is not None and faster.faster
    assert ratio_cell(faster) == "2.00–2.00× faster"
    assert ratio_words(faster, "bm25") == "2.00–2.00× faster than `bm25` at p50"


def test_the_same_latencies_reordered_are_as_fast() -> None:
    # The same distribution, queries shuffled: the ratio's interval covers 1.
    shuffled = np.random.default_rng(3).permutation(BASE)
    ratio = paired_ratio(shuffled, BASE, 0.95, seed=0)
    assert ratio is not None
    assert ratio.low < 1.0 < ratio.high
    assert ratio.tied
    words = ratio_words(ratio, "bm25")
    assert words.startswith("as fast as `bm25` at p95 within noise (")
    assert ratio_cell(ratio) == "as fast"


def test_a_small_steady_slowdown_is_found_where_the_noise_is_wide() -> None:
    # 5% slower on every query (give or take 2%), where latencies spread over queries
    # far wider than 5%: the two p95s' own intervals overlap, but paired, the ratio's
    # interval lies above 1.
    noise = np.random.default_rng(5).uniform(0.98, 1.02, 300)
    slower = BASE * 1.05 * noise
    mine, theirs = quantile_interval(slower, 0.95, 0.05), quantile_interval(BASE, 0.95, 0.05)
    assert not mine.below(theirs) and not theirs.below(mine)
    ratio = paired_ratio(slower, BASE, 0.95, seed=0)
    assert ratio is not None
    assert 1.0 < ratio.low < 1.05 < ratio.high < 1.1
    assert ratio_words(ratio, "a").endswith("× slower than `a` at p95")


def test_the_interval_is_fixed_by_the_seed_and_covers_the_point() -> None:
    other = BASE * np.random.default_rng(9).uniform(0.5, 2.0, 300)
    first = paired_ratio(other, BASE, 0.95, seed=4)
    assert first == paired_ratio(other, BASE, 0.95, seed=4)
    assert first is not None and first.low <= first.ratio <= first.high
    assert first != paired_ratio(other, BASE, 0.95, seed=5)
    assert first.n == 300
    assert first.ratio == pytest.approx(np.percentile(other, 95) / np.percentile(BASE, 95))


def test_too_few_queries_or_a_zero_base_give_no_ratio() -> None:
    assert paired_ratio([1.0], [1.0], 0.95) is None
    assert paired_ratio([1.0, 2.0], [0.0, 0.0], 0.95) is None
    assert ratio_words(None, "a") == "at a latency that cannot be compared with `a`'s"
    with pytest.raises(ValueError):
        paired_ratio([1.0, 2.0], [1.0], 0.95)


def test_words_keep_the_decimals_of_the_larger_end() -> None:
    ratio = Ratio(0.95, 3.0, 1.34, 14.4, 100)
    assert ratio_cell(ratio) == "1.3–14.4× slower"
    assert ratio_cell(Ratio(0.95, 1.0, 0.9, 1.1, 100)) == "as fast"
    assert ratio_cell(Ratio(0.95, 1.0, 1.0, 1.1, 100)) == "as fast"  # 1 is inside
    # Just clear of 1: not written as 1.00, which would read as a tie.
    assert ratio_cell(Ratio(0.95, 1.5, 1.004, 2.9, 100)) == "1.004–2.90× slower"
    assert ratio_cell(Ratio(0.95, 0.7, 0.345, 0.996, 100)) == "1.004–2.90× faster"


def _measured(name: str, gold: GoldSet, latencies: np.ndarray) -> Measured:
    run = Run(
        {
            q.query_id: QueryResults(q.query_id, (RankedResult(f"d{i}"),), float(latencies[i]))
            for i, q in enumerate(gold.queries)
        }
    )
    return Measured(name, score_run(gold, run, ["mrr"], 1), 1)


def test_the_experiment_says_each_variants_latency_against_the_reference() -> None:
    gold = GoldSet(tuple(gold_query(f"q{i}", ((f"d{i}", 1),)) for i in range(300)))
    variants = [
        _measured("ref", gold, BASE),
        _measured("same", gold, np.random.default_rng(3).permutation(BASE)),
        _measured("slow", gold, BASE * 3),
    ]
    result = compare_variants(gold, variants, ["mrr"], "ref", "mrr")
    assert result.row("ref").latency_ratios == {}
    assert result.row("same").latency_ratios["p95"].tied
    assert result.row("same").latency_ratios["p50"].tied
    slow = result.row("slow").latency_ratios["p95"]
    assert slow.ratio == pytest.approx(3.0) and not slow.tied
    # Same quality, so the front is decided by latency: the slow one is off it, the
    # two within noise of each other are on it, tied.
    assert [r.on_front for r in result.rows] == [True, True, False]
    assert result.row("ref").ties == ("same",)
    words = recommendation(result)
    assert "`ref` and `same`" in words
