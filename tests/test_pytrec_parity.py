"""Every metric equals pytrec_eval's value (trec_eval's semantics) to 1e-12.

Random qrels and runs with tied scores, graded labels 0-3, lists shorter than k,
k larger than the list, queries missing from the run, relevance levels 1 and 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llm_eval

pytrec_eval = pytest.importorskip("pytrec_eval")

# Ids chosen so that byte order matters when scores tie (upper case, digits, non-ASCII).
DOC_IDS = ["a", "b", "B", "c10", "c2", "d", "e", "é", "z", "Z9", "中", "x-1"]
SCORES = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0]), st.floats(-5, 5))
CUTOFFS = [1, 2, 3, 5, 10, 20]

# Our name -> pytrec_eval's name, per cutoff.
PARITY = {
    "recall@{k}": "recall_{k}",
    "precision@{k}": "P_{k}",
    "hit_rate@{k}": "success_{k}",
    "map@{k}": "map_cut_{k}",
    "ndcg@{k}": "ndcg_cut_{k}",
}
NO_CUTOFF = {"mrr": "recip_rank", "map": "map", "ndcg": "ndcg", "rprec": "Rprec"}
# The same measures in trec_eval's own `name.k1,k2` form, which pytrec_eval takes as
# it is rather than matching each `name_k` against every measure it knows.
MEASURES = {
    *(f"{theirs.removesuffix('_{k}')}.{','.join(map(str, CUTOFFS))}" for theirs in PARITY.values()),
    *NO_CUTOFF.values(),
}


# Built once: building a strategy inside `draw` costs more than drawing from it.
QUERY_COUNTS = st.integers(1, 6)
JUDGED_DOCS = st.lists(st.sampled_from(DOC_IDS), min_size=1, max_size=8, unique=True)
GRADES = st.integers(0, 3)
COINS = st.booleans()
RANKED_DOCS = st.lists(st.sampled_from(DOC_IDS), min_size=0, max_size=12, unique=True)


@st.composite
def qrels_and_runs(draw: st.DrawFn) -> tuple[dict, dict]:
    query_ids = [f"q{i}" for i in range(draw(QUERY_COUNTS))]
    qrels = {}
    for qid in query_ids:
        docs = draw(JUDGED_DOCS)
        qrels[qid] = {d: draw(GRADES) for d in docs}
    run = {}
    for qid in [*query_ids, "not-judged"]:
        if draw(COINS) and draw(COINS):
            continue  # this query is missing from the run
        docs = draw(RANKED_DOCS)
        run[qid] = {d: draw(SCORES) for d in docs}
    return qrels, run


def trec_order(scored: dict[str, float]) -> list[str]:
    """trec_eval's ranking: score descending (as C floats), ties by doc id descending."""
    ordered = sorted(scored.items(), key=lambda i: (np.float32(i[1]), i[0]), reverse=True)
    return [d for d, _ in ordered]


def reference(qrels: dict, run: dict, level: int, measures: set[str]) -> dict:
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level)
    return evaluator.evaluate(run)


def has_relevant(judged: dict[str, int], level: int) -> bool:
    return any(g >= level for g in judged.values())


def assert_parity(qrels: dict, run: dict, level: int, ours: llm_eval.Scores) -> None:
    expected = reference(qrels, run, level, MEASURES)
    values = ours.to_dict()
    for qid, judged in qrels.items():
        if not has_relevant(judged, level):
            assert qid not in values
            assert qid in ours.rejection
            continue
        if qid not in run:
            assert qid in ours.missing
            assert all(v == 0.0 for v in values[qid].values())
            continue
        for ours_name, theirs in NO_CUTOFF.items():
            assert values[qid][ours_name] == pytest.approx(expected[qid][theirs], abs=1e-12)
        for pattern, theirs in PARITY.items():
            for k in CUTOFFS:
                got = values[qid][pattern.format(k=k)]
                assert got == pytest.approx(expected[qid][theirs.format(k=k)], abs=1e-12), (
                    qid,
                    pattern.format(k=k),
                )


def all_metrics() -> list[str]:
    return [p.format(k=k) for p in PARITY for k in CUTOFFS] + list(NO_CUTOFF)


@settings(max_examples=300, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]))
def test_scored_runs_match_pytrec_eval(data: tuple[dict, dict], level: int) -> None:
    qrels, run = data
    scores = llm_eval.evaluate(qrels, run, all_metrics(), relevance_level=level)
    assert_parity(qrels, run, level, scores)


@settings(max_examples=200, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]))
def test_ranked_lists_match_pytrec_eval(data: tuple[dict, dict], level: int) -> None:
    """The same run given as lists in trec_eval's order scores the same."""
    qrels, run = data
    ranked = {qid: trec_order(scored) for qid, scored in run.items()}
    scores = llm_eval.evaluate(qrels, ranked, all_metrics(), relevance_level=level)
    assert_parity(qrels, run, level, scores)


@settings(max_examples=200, deadline=None)
@given(data=qrels_and_runs(), k=st.sampled_from(CUTOFFS), level=st.sampled_from([1, 2]))
def test_mrr_at_k_is_recip_rank_of_the_top_k(data: tuple[dict, dict], k: int, level: int) -> None:
    qrels, run = data
    top_k = {qid: {d: scored[d] for d in trec_order(scored)[:k]} for qid, scored in run.items()}
    expected = reference(qrels, top_k, level, {"recip_rank"})
    got = llm_eval.evaluate(qrels, run, [f"mrr@{k}"], relevance_level=level).per_query(f"mrr@{k}")
    for qid, value in got.items():
        if qid in expected:
            assert value == pytest.approx(expected[qid]["recip_rank"], abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    data=qrels_and_runs(),
    where=st.integers(0, 20),
    level=st.sampled_from([1, 2]),
)
def test_a_repeated_id_counts_at_its_first_rank_only(
    data: tuple[dict, dict], where: int, level: int
) -> None:
    """A later copy of a document scores exactly as a non-relevant filler would."""
    qrels, run = data
    ranked = {qid: trec_order(scored) for qid, scored in run.items()}
    with_copy, with_filler = {}, {}
    for qid, docs in ranked.items():
        if docs:
            pos = min(where, len(docs))
            with_copy[qid] = [*docs[:pos], docs[0], *docs[pos:]] if pos > 0 else docs
            with_filler[qid] = [*docs[:pos], "filler", *docs[pos:]] if pos > 0 else docs
        else:
            with_copy[qid] = with_filler[qid] = docs
    metrics = all_metrics()
    a = llm_eval.evaluate(qrels, with_copy, metrics, relevance_level=level).to_dict()
    b = llm_eval.evaluate(qrels, with_filler, metrics, relevance_level=level).to_dict()
    assert a == b
    for row in a.values():
        assert all(0.0 <= v <= 1.0 for v in row.values())


def exponential_gains(qrels: dict) -> dict:
    """The qrels with each grade g replaced by 2^g - 1: trec_eval's linear-gain nDCG over
    these grades is nDCG with exponential gain over the originals."""
    return {qid: {d: 2**g - 1 for d, g in judged.items()} for qid, judged in qrels.items()}


@settings(max_examples=300, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]))
def test_ndcg_exp_matches_pytrec_eval_over_exponential_gains(
    data: tuple[dict, dict], level: int
) -> None:
    qrels, run = data
    names = ["ndcg_exp", *(f"ndcg_exp@{k}" for k in CUTOFFS)]
    ours = llm_eval.evaluate(qrels, run, names, relevance_level=level).to_dict()
    measures = {"ndcg", f"ndcg_cut.{','.join(map(str, CUTOFFS))}"}
    # The level only decides which queries are evaluated (those with a relevant document);
    # nDCG itself uses every grade, so the reference runs at level 1 on the mapped grades.
    expected = reference(exponential_gains(qrels), run, 1, measures)
    for qid, row in ours.items():
        if qid not in run:
            continue
        assert row["ndcg_exp"] == pytest.approx(expected[qid]["ndcg"], abs=1e-12)
        for k in CUTOFFS:
            got = row[f"ndcg_exp@{k}"]
            assert got == pytest.approx(expected[qid][f"ndcg_cut_{k}"], abs=1e-12), (qid, k)


NEGATIVE_GRADES = st.integers(-2, 3)


@settings(max_examples=300, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]), signs=st.data())
def test_judged_at_k_is_precision_counting_every_label(
    data: tuple[dict, dict], level: int, signs: st.DataObject
) -> None:
    """judged@k (ir_measures' Judged@k) is trec_eval's P@k with every qrels entry, whatever
    its grade (0 and negative too), counted relevant: pytrec_eval (which takes only
    positive levels) on the grades shifted to 1 and up. Ties, short lists, k beyond the
    list and missing queries come from the strategy."""
    qrels, run = data
    qrels = {q: {d: signs.draw(NEGATIVE_GRADES) for d in judged} for q, judged in qrels.items()}
    metrics = [f"judged@{k}" for k in CUTOFFS]
    ours = llm_eval.evaluate(qrels, run, metrics, relevance_level=level).to_dict()
    every_label = {q: {d: g + 3 for d, g in judged.items()} for q, judged in qrels.items()}
    expected = reference(every_label, run, 1, {f"P.{','.join(map(str, CUTOFFS))}"})
    for qid, judged in qrels.items():
        if not has_relevant(judged, level):
            assert qid not in ours  # a rejection query: no relevance metric
            continue
        for k in CUTOFFS:
            want = expected[qid][f"P_{k}"] if qid in run else 0.0
            assert ours[qid][f"judged@{k}"] == pytest.approx(want, abs=1e-12), (qid, k)
