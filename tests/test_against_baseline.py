"""decide_gates on hand-made scores: pairing, batching and the baseline's file name."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from conftest import gold_query
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval.against_baseline import decide_gates
from llm_eval.baseline import Baseline
from llm_eval.criteria import Gate, Location, Scope, Statistics
from llm_eval.errors import ComparisonError
from llm_eval.gate_entries import gate_entry
from llm_eval.gold import GoldQuery
from llm_eval.report import coverage_notes
from llm_eval.score_columns import ScoreColumns
from llm_eval.slices import ScoreTable
from llm_eval.stats import MarginTest, margin_tests

HERE = Location("config/ship-criteria.yaml", 1, "gates[0]")


def queries(n: int, negatives: bool = False) -> list[GoldQuery]:
    """n queries labelled `d` relevant; with `negatives`, each also judges `x` not
    relevant (grade 0), as qrels with non-relevant judgments do."""
    judged = (("x", 0),) if negatives else ()
    return [
        gold_query(f"q{i}", (("d", 1),), tags=(f"t{i % 2}",), line=i + 1, non_relevant=judged)
        for i in range(n)
    ]


def baseline(per_query: dict[str, dict[str, float]], metrics: tuple[str, ...]) -> Baseline:
    return Baseline(
        "2026-01-01T00:00:00Z", None, "test", {}, {}, 1, 5, metrics, per_query, {}, {},
        source="gold/baseline.json",
    )  # fmt: skip


def gate(metric: str = "recall@5", per_tag: bool = False, min_n: int = 2) -> Gate:
    return Gate(
        f"g_{metric}", metric, None, 0.03, "error", Scope(), HERE, HERE,
        statistics=Statistics(min_n=min_n, resamples=200), per_tag=per_tag,
    )  # fmt: skip


def test_a_failed_query_leaves_both_sides_of_the_comparison() -> None:
    """Seventeen queries failed now (no score): they must not stay in the baseline's
    mean while leaving the current one, or identical rankings would look like a drop."""
    gold = queries(60)
    before = {q.query_id: {"recall@5": 1.0 if i < 40 else 0.0} for i, q in enumerate(gold)}
    now = {qid: scores for qid, scores in before.items() if qid not in {f"q{i}" for i in range(17)}}
    (result,) = decide_gates(gold, [gate()], ScoreTable(now), baseline(before, ("recall@5",)), None)
    assert result.n == 43
    assert result.value == result.baseline == pytest.approx(23 / 43)
    assert result.delta == 0.0


@pytest.mark.parametrize(
    ("per_query", "metrics", "message"),
    [
        (
            {"q0": {"mrr": 1.0}, "q1": {"mrr": 0.5}},
            ("mrr",),
            "gold/baseline.json: metrics: the baseline has no 'recall@5' (it was made with "
            "other ship criteria); refresh the baseline",
        ),
        (
            {"q0": {"recall@5": 1.0}},
            ("recall@5",),
            "gold/baseline.json: per_query: no 'recall@5' score for 1 query in scope (q1); "
            "refresh the baseline",
        ),
    ],
)
def test_a_baseline_that_cannot_be_paired_is_refused(
    per_query: dict[str, dict[str, float]], metrics: tuple[str, ...], message: str
) -> None:
    gold = queries(2)
    now = ScoreTable({"q0": {"recall@5": 1.0}, "q1": {"recall@5": 0.0}})
    with pytest.raises(ComparisonError) as raised:
        decide_gates(gold, [gate()], now, baseline(per_query, metrics), None)
    assert str(raised.value) == message


def test_each_scope_gets_the_test_it_gets_alone() -> None:
    """A gate's scope is tested at alpha; a judged slice at its Holm level."""
    gold = queries(80)
    grades = [(i * 7 % 11) / 10 for i in range(80)]
    before = {q.query_id: {"mrr": g, "ndcg@10": g / 2} for q, g in zip(gold, grades, strict=True)}
    after = {
        q.query_id: {"mrr": max(0.0, g - 0.05 * (i % 3)), "ndcg@10": g / 2}
        for i, (q, g) in enumerate(zip(gold, grades, strict=True))
    }
    gates = [gate("mrr", per_tag=True), gate("ndcg@10", per_tag=True)]
    results = decide_gates(
        gold, gates, ScoreTable(after), baseline(before, ("mrr", "ndcg@10")), None
    )
    ids = [q.query_id for q in gold]
    alone = margin_tests(
        [before[q]["mrr"] for q in ids], [after[q]["mrr"] for q in ids], [0.03],
        alpha=0.05, seed=0,
    )[0]  # fmt: skip
    assert same(results[0].margin, alone)
    tag = [q.query_id for q in gold if "t1" in q.tags]
    level = results[0].slices[1].level
    assert level is not None and level < 0.05  # one of several judged slices
    alone_tag = margin_tests(
        [before[q]["mrr"] for q in tag], [after[q]["mrr"] for q in tag], [0.03],
        alpha=0.05, seed=0, levels=[level],
    )[0]  # fmt: skip
    assert same(results[0].slices[1].margin, alone_tag)


def same(batched: MarginTest | None, alone: MarginTest) -> bool:
    """Equal but for the last bits that summing columns in another order moves."""
    assert batched is not None
    for field in fields(MarginTest):
        a, b = getattr(batched, field.name), getattr(alone, field.name)
        if a != (pytest.approx(b, rel=1e-12) if isinstance(b, float) else b):
            return False
    return True


def with_judged(recall: list[float], judged: list[float]) -> dict[str, dict[str, float]]:
    return {
        f"q{i}": {"recall@5": r, "judged@5": j}
        for i, (r, j) in enumerate(zip(recall, judged, strict=True))
    }


@pytest.mark.parametrize(
    ("now_judged", "before_has", "expected"),
    [
        ([0.4] * 4, True, (0.4, 0.8, True)),  # the labels cover less of the top 5: a warning
        ([0.8] * 4, True, (0.8, 0.8, False)),  # as covered as before: information
        ([0.4] * 4, False, (0.4, None, False)),  # a baseline made before judged@k: no warning
    ],
)
def test_judged_at_k_is_shown_beside_a_gate_whose_value_moved(
    now_judged: list[float], before_has: bool, expected: tuple[float, float | None, bool]
) -> None:
    gold = queries(4, negatives=True)
    before = with_judged([1.0, 1.0, 1.0, 1.0], [0.8] * 4)
    if not before_has:
        before = {q: {"recall@5": row["recall@5"]} for q, row in before.items()}
    now = with_judged([1.0, 0.0, 1.0, 0.0], now_judged)
    (result,) = decide_gates(gold, [gate()], ScoreTable(now), baseline(before, ("recall@5",)), None)
    assert result.coverage is not None
    coverage = result.coverage
    assert (coverage.metric, coverage.value, coverage.baseline, coverage.fell) == (
        "judged@5",
        *expected,
    )


def test_judged_at_k_is_not_shown_when_nothing_moved_or_without_a_baseline() -> None:
    gold = queries(4)
    rows = with_judged([1.0, 0.0, 1.0, 0.0], [0.8] * 4)
    (same,) = decide_gates(gold, [gate()], ScoreTable(rows), baseline(rows, ("recall@5",)), None)
    (alone,) = decide_gates(gold, [gate()], ScoreTable(rows), None, None)
    assert same.coverage is None and alone.coverage is None


def test_positive_only_labels_give_one_note_and_no_warning_per_drop() -> None:
    """Labels that list only relevant documents (BEIR and TREC qrels often do) make
    judged@5 the share of relevant results: it fell with recall on both gates, which
    says nothing about holes in the labels. No gate warns; one note says why."""
    gold = queries(4)
    before = with_judged([1.0] * 4, [0.8] * 4)
    now = with_judged([1.0, 0.0, 1.0, 0.0], [0.4] * 4)
    results = decide_gates(
        gold,
        [gate(), gate(min_n=3)],
        ScoreTable(now),
        baseline(before, ("recall@5",)),
        None,
    )
    assert all(r.coverage is not None and not r.coverage.readable for r in results)
    assert not any(r.coverage is not None and r.coverage.fell for r in results)
    assert all(gate_entry(r)["label_coverage"] is None for r in results)
    (note,) = coverage_notes(results)
    assert "judged@5 counts the relevant results and cannot show holes in the labels" in note


def test_labels_with_negatives_still_warn_when_coverage_fell() -> None:
    gold = queries(4, negatives=True)
    before = with_judged([1.0] * 4, [0.8] * 4)
    now = with_judged([1.0, 0.0, 1.0, 0.0], [0.4] * 4)
    (result,) = decide_gates(gold, [gate()], ScoreTable(now), baseline(before, ("recall@5",)), None)
    assert result.coverage is not None and result.coverage.fell
    entry = gate_entry(result)["label_coverage"]
    assert entry is not None and entry["fell"]
    assert "label them before trusting it" in entry["sentence"]
    assert coverage_notes([result]) == []


def test_one_query_with_a_negative_judgment_makes_judged_at_k_readable() -> None:
    gold = [*queries(3), *queries(4, negatives=True)[3:]]
    before = with_judged([1.0] * 4, [0.8] * 4)
    now = with_judged([1.0, 0.0, 1.0, 0.0], [0.4] * 4)
    (result,) = decide_gates(gold, [gate()], ScoreTable(now), baseline(before, ("recall@5",)), None)
    assert result.coverage is not None and result.coverage.readable


def test_columns_and_dicts_of_the_same_scores_decide_alike() -> None:
    """The comparison reads columns in one pass where they are columns and row by row
    where they are dicts: the same scores must give the same results, bit for bit
    (values, intervals, slices and judged@k), queries failed now and in `only` alike."""
    gold = [
        gold_query(f"q{i}", (("d", 1),), tags=(f"t{i % 3}",), line=i + 1, non_relevant=(("x", 0),))
        for i in range(150)
    ]
    metrics = ("recall@5", "mrr", "judged@5")
    before = {
        q.query_id: {m: ((i * (j + 3)) % 7) / 6 for j, m in enumerate(metrics)}
        for i, q in enumerate(gold)
    }
    now = {
        qid: {m: (v if i % 9 else 1.0 - v) for m, v in row.items()}
        for i, (qid, row) in enumerate(before.items())
        if i % 31  # failed now: no row
    }
    gates = [gate("recall@5", per_tag=True, min_n=10), gate("mrr", per_tag=True, min_n=10)]
    only = frozenset(f"q{i}" for i in range(150) if i % 13)
    as_dicts = decide_gates(gold, gates, ScoreTable(now), baseline(before, metrics), only)
    columns_baseline = replace(baseline(before, metrics), per_query=ScoreColumns.from_rows(before))
    as_columns = decide_gates(
        gold, gates, ScoreTable(ScoreColumns.from_rows(now)), columns_baseline, only
    )
    assert as_dicts == as_columns
    assert all(result.coverage is not None for result in as_dicts)


@settings(max_examples=300, deadline=None)
@given(
    before=st.dictionaries(st.sampled_from([f"q{i}" for i in range(12)]), st.integers(0, 12)),
    after=st.dictionaries(st.sampled_from([f"q{i}" for i in range(12)]), st.integers(0, 12)),
    k=st.integers(1, 10),
    only=st.none() | st.frozensets(st.sampled_from([f"q{i}" for i in range(12)])),
    shared=st.booleans(),
)
def test_rank_changes_from_columns_are_those_of_the_rows(
    before: dict[str, int],
    after: dict[str, int],
    k: int,
    only: frozenset[str] | None,
    shared: bool,
) -> None:
    """Ranks as columns (of the same queries, or of others in another order) give the
    lost and gained queries the rows give, in the same order."""
    import numpy as np

    from llm_eval.against_baseline import rank_changes
    from llm_eval.score_columns import Column

    if shared:  # the same queries in the same order: one dict of places serves both
        before = {q: before.get(q, 0) for q in after}
    columns = [
        Column(list(ranks), np.array(list(ranks.values()), dtype=np.int64), int)
        for ranks in (dict(reversed(before.items())), after)
    ]
    if shared:
        columns[0] = Column(list(after), np.array(list(before.values()), dtype=np.int64), int)
        assert columns[0].places is columns[1].places
    assert rank_changes(*columns, k, only) == rank_changes(before, after, k, only)
