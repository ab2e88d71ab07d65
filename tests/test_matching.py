"""Matching beyond ids: pages and passages, worked by hand; ids stay the identity."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import gold_query
from hypothesis import given, settings
from hypothesis import strategies as st

import llm_eval
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.gold import GoldReference, GoldSet, GoldSource, compact_labels
from llm_eval.gold_io import load_gold
from llm_eval.matching import (
    Ambiguity,
    MatchedQuery,
    MatchSettings,
    _credited_ids,
    match_ids,
    match_pages,
    match_passages,
    match_run,
    matcher_for,
    needs_matching,
    normalise_document,
    token_f1,
    tokens,
)
from llm_eval.runs import IdResults, QueryResults, RankedResult, Run
from llm_eval.scoring import score_run


def page(document: str, number: int, doc_id: str = "d") -> RankedResult:
    return RankedResult(doc_id, document=document, page=number)


def chunk(text: str | None, doc_id: str = "d") -> RankedResult:
    return RankedResult(doc_id, text=text)


MANUAL_45 = (GoldReference("Manual.pdf", 45),)


# --- pages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tolerance", "result_page", "matches"),
    [
        (1, 43, False),
        (1, 44, True),
        (1, 45, True),
        (1, 46, True),
        (1, 47, False),
        (0, 44, False),
        (0, 45, True),
        (2, 47, True),
        (2, 48, False),
    ],
)
def test_a_page_matches_within_the_tolerance(
    tolerance: int, result_page: int, matches: bool
) -> None:
    matched = match_pages(
        gold_query(gold_references=MANUAL_45),
        [page("Manual.pdf", result_page)],
        MatchSettings(tolerance),
    )
    assert matched.ranked == (("ref:0",) if matches else ("unmatched:1",))
    assert matched.grades == (("ref:0", 1),)


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("Manual.pdf", "manual"),
        ("  MANUAL.PDF ", "manual"),
        ("manual", "manual"),
        ("Manual.docx", "manual"),
        ("guide v1.2", "guide v1.2"),
        ("archive.tar.gz", "archive.tar"),
        ("Report 2024.pdf", "report 2024"),
    ],
)
def test_document_names_are_normalised(name: str, normalised: str) -> None:
    assert normalise_document(name) == normalised


@pytest.mark.parametrize(
    ("document", "matches"),
    [
        ("Manual.pdf", True),
        (" manual.PDF", True),
        ("manual", True),
        ("Manual-v2.pdf", False),
        ("Other.pdf", False),
    ],
)
def test_documents_match_by_normalised_name(document: str, matches: bool) -> None:
    matched = match_pages(
        gold_query(gold_references=MANUAL_45), [page(document, 45)], MatchSettings()
    )
    assert matched.ranked == (("ref:0",) if matches else ("unmatched:1",))


def test_a_reference_is_credited_once_to_the_first_result_in_rank_order() -> None:
    results = [page("Other.pdf", 45), page("manual.pdf", 46), page("Manual.pdf", 45)]
    matched = match_pages(gold_query(gold_references=MANUAL_45), results, MatchSettings())
    assert matched.ranked == ("unmatched:1", "ref:0", "unmatched:3")
    assert matched.credited == 1


def test_results_without_document_or_page_match_nothing() -> None:
    results = [RankedResult("d", page=45), RankedResult("d", document="Manual.pdf")]
    matched = match_pages(gold_query(gold_references=MANUAL_45), results, MatchSettings())
    assert matched.ranked == ("unmatched:1", "unmatched:2")


def test_a_result_near_two_references_takes_the_nearest_and_is_listed_as_ambiguous() -> None:
    # References: 0 = p10, 1 = p12, 2 = p13. Tolerance 1.
    # rank 1, p12: near 1 (distance 0) and 2 (distance 1): takes 1, ambiguous.
    # rank 2, p11: near 0 and 1 (both distance 1; 1 is taken): takes 0, ambiguous.
    # rank 3, p11: near 0 and 1, both taken: credited to nothing, still ambiguous.
    # rank 4, p14: near 2 only: takes 2.
    references = tuple(GoldReference("m.pdf", p) for p in (10, 12, 13))
    results = [page("m.pdf", 12), page("m.pdf", 11), page("m.pdf", 11), page("m.pdf", 14)]
    matched = match_pages(gold_query(gold_references=references), results, MatchSettings(1))
    assert matched.ranked == ("ref:1", "ref:0", "unmatched:3", "ref:2")
    assert matched.ambiguous == (
        Ambiguity("q1", 1, "m.pdf", 12, (1, 2), 1),
        Ambiguity("q1", 2, "m.pdf", 11, (0, 1), 0),
        Ambiguity("q1", 3, "m.pdf", 11, (0, 1), None),
    )


def test_equally_near_references_go_in_gold_order() -> None:
    references = (GoldReference("m.pdf", 12), GoldReference("m.pdf", 10))
    matched = match_pages(
        gold_query(gold_references=references), [page("m.pdf", 11)], MatchSettings(1)
    )
    assert matched.ranked == ("ref:0",)
    assert matched.ambiguous == (Ambiguity("q1", 1, "m.pdf", 11, (0, 1), 0),)


def test_references_of_other_documents_are_not_candidates() -> None:
    references = (GoldReference("a.pdf", 5), GoldReference("b.pdf", 5), GoldReference("a.pdf", 50))
    matched = match_pages(
        gold_query(gold_references=references), [page("B.pdf", 6)], MatchSettings(1)
    )
    assert matched.ranked == ("ref:1",)
    assert matched.ambiguous == ()


# --- text --------------------------------------------------------------------------


PARIS = "Paris is the capital of France."
PARIS_LONG = "Paris is the capital and most populous city of France…"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PARIS, ["paris", "is", "the", "capital", "of", "france"]),
        ("Don't PANIC!", ["dont", "panic"]),
        ("  « Quoted » — and… dashed ", ["quoted", "and", "dashed"]),
        ("", []),
    ],
)
def test_tokens_are_lowercased_words_without_punctuation(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


@pytest.mark.parametrize(
    ("a", "b", "f1"),
    [
        # {paris is the capital of france} vs the same plus {and most populous city}:
        # 6 shared of 6 and 10 tokens: 2·6 / 16.
        (PARIS, PARIS_LONG, 0.75),
        ("a b c", "a b c", 1.0),
        ("a b c", "d e", 0.0),
        # {a b c d} vs {c d e}: 2·2 / 7.
        ("a b c d", "c d e", 4 / 7),
        # Sets: the repeated word counts once. {the cat} vs {the cat sat}: 2·2 / 5.
        ("the the cat", "the cat sat", 0.8),
        ("", "", 0.0),
    ],
)
def test_token_set_f1(a: str, b: str, f1: float) -> None:
    assert token_f1(frozenset(tokens(a)), frozenset(tokens(b))) == pytest.approx(f1, abs=1e-15)


@pytest.mark.parametrize(
    ("reference", "text", "threshold", "matches"),
    [
        # F1 0.75, and neither text holds the other: matched by F1 alone.
        (PARIS, PARIS_LONG, 0.3, True),
        (PARIS, PARIS_LONG, 0.75, True),
        (PARIS, PARIS_LONG, 0.76, False),
        # "capital of france" inside a long chunk: F1 2·3/16 = 0.375, matched by substring.
        (
            "Capital of France",
            "Paris is the capital of France and its largest city with many museums",
            0.9,
            True,
        ),
        # The reverse: the chunk's words inside the reference (F1 2·4/10 = 0.8).
        (PARIS, "the capital, of France", 0.9, True),
        # Substrings count at word boundaries only: "cat" is not in "concatenate".
        ("cat", "concatenate the strings", 0.9, False),
        # {lyon lies on the rhône} vs {paris is the capital of france}: 2·1/11.
        (PARIS, "Lyon lies on the Rhône.", 0.3, False),
        (PARIS, "", 0.3, False),
        (PARIS, None, 0.3, False),
    ],
)
def test_a_chunk_matches_a_passage_by_f1_or_substring(
    reference: str, text: str | None, threshold: float, matches: bool
) -> None:
    matched = match_passages(
        gold_query(reference_passages=(reference,)),
        [chunk(text)],
        MatchSettings(f1_threshold=threshold),
    )
    assert matched.ranked == (("ref:0",) if matches else ("unmatched:1",))


def test_a_chunk_takes_the_unmatched_passage_with_the_best_f1() -> None:
    # Passages: 0 = {alpha beta epsilon zeta}, 1 = {alpha beta gamma delta}.
    # Each chunk {alpha beta gamma delta} scores F1 0.5 with 0 and 1.0 with 1.
    passages = ("alpha beta epsilon zeta", "alpha beta gamma delta")
    results = [chunk("Alpha beta gamma delta.")] * 3
    matched = match_passages(gold_query(reference_passages=passages), results, MatchSettings())
    assert matched.ranked == ("ref:1", "ref:0", "unmatched:3")
    assert matched.grades == (("ref:0", 1), ("ref:1", 1))
    assert matched.credited == 2


# --- choosing the matcher -----------------------------------------------------------


REF = (GoldReference("m.pdf", 1),)


@pytest.mark.parametrize(
    ("labels", "matching", "expected"),
    [
        (
            {"relevant": (("d1", 1),), "gold_references": REF, "reference_passages": ("x",)},
            "auto",
            "id",
        ),
        ({"gold_references": REF, "reference_passages": ("x",)}, "auto", "page"),
        ({"reference_passages": ("x",)}, "auto", "text"),
        ({}, "auto", None),
        ({"relevant": (("d1", 1),), "gold_references": REF}, "page", "page"),
        ({"gold_references": REF, "reference_passages": ("x",)}, "text", "text"),
        ({}, "text", None),
    ],
)
def test_the_matcher_of_a_query(labels: dict, matching: str, expected: str | None) -> None:
    assert matcher_for(gold_query(matching=matching, **labels)) == expected


def test_match_run_keeps_unknown_run_queries_and_leaves_out_failed_ones() -> None:
    gold = GoldSet(
        (
            gold_query("q1", gold_references=MANUAL_45),
            gold_query("q2", relevant=(("d1", 1),)),
            gold_query("q3"),
            gold_query("q4", reference_passages=(PARIS,)),
        )
    )
    run = Run(
        {
            "q1": QueryResults("q1", (page("manual.pdf", 44, "x"),)),
            "q2": QueryResults("q2", (RankedResult("d9"), RankedResult("d1"))),
            "q4": QueryResults("q4", (), error="timeout"),
            "zz": QueryResults("zz", (RankedResult("d1"),)),
        }
    )
    matched = match_run(gold, run)
    assert matched.qrels == {
        "q1": {"ref:0": 1},
        "q2": {"d1": 1},
        "q3": {},
        "q4": {"ref:0": 1},
    }
    assert matched.ranked == {"q1": ("ref:0",), "q2": ("d9", "d1"), "zz": ("d1",)}
    assert matched.matched_by == {"q1": "page", "q2": "id", "q4": "text"}
    assert matched.credited == {"q1": 1, "q2": 1}
    assert needs_matching(gold)
    assert not needs_matching(GoldSet((gold_query("q2", relevant=(("d1", 1),)), gold_query("q3"))))


def test_page_units_feed_every_relevance_metric() -> None:
    # References: 0 = m.pdf p45 (grade 2), 1 = m.pdf p80 (grade 1).
    # Ranks: 1 p46 → ref:0; 2 x.pdf → nothing; 3 p47 → nothing (2 pages off); 4 p79 → ref:1.
    references = (GoldReference("m.pdf", 45, 2), GoldReference("m.pdf", 80))
    results = (page("m.pdf", 46), page("x.pdf", 45), page("m.pdf", 47), page("m.pdf", 79))
    gold = GoldSet((gold_query("q1", gold_references=references),))
    run = Run({"q1": QueryResults("q1", results)})
    metrics = ["recall@2", "recall@4", "precision@4", "mrr", "ndcg@4", "map"]
    row = score_run(gold, run, metrics, 1).per_query["q1"]
    # nDCG@4: DCG 2/log2(2) + 1/log2(5); ideal 2/log2(2) + 1/log2(3).
    ndcg = (2 + 1 / math.log2(5)) / (2 + 1 / math.log2(3))
    # AP: (1/1 + 2/4) / 2.
    assert row == pytest.approx(
        {
            "recall@2": 0.5,
            "recall@4": 1.0,
            "precision@4": 0.5,
            "mrr": 1.0,
            "ndcg@4": ndcg,
            "map": 0.75,
        },
        abs=1e-12,
    )


DOCS = ["a", "b", "c", "d", "e"]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["q1", "q2", "q3"]),
        st.tuples(
            st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=4),
            st.lists(st.sampled_from(DOCS), max_size=6),
        ),
        min_size=1,
    )
)
def test_ids_are_the_identity(cases: dict) -> None:
    """score_run over id-labelled gold equals the engine on the qrels and rankings."""
    gold = GoldSet(
        tuple(
            gold_query(qid, relevant=tuple((d, g) for d, g in grades.items() if g > 0))
            for qid, (grades, _) in cases.items()
        )
    )
    ranked = {qid: ranking for qid, (_, ranking) in cases.items()}
    run = Run(
        {q: QueryResults(q, tuple(RankedResult(d) for d in ids)) for q, ids in ranked.items()}
    )
    metrics = ["recall@3", "precision@2", "mrr", "ndcg@5", "map"]
    expected = llm_eval.evaluate(gold.qrels(), ranked, metrics).to_dict() if ranked else {}
    assert score_run(gold, run, metrics, 1).per_query == expected


def test_a_document_judged_not_relevant_is_labelled_but_never_a_hit() -> None:
    """judged@5 counts the grade-0 label; recall, precision and the credit do not."""
    query = gold_query("q1", (("good", 1),), non_relevant=(("bad", 0),))
    run = Run({"q1": QueryResults("q1", tuple(RankedResult(d) for d in ("bad", "x", "good")))})
    row = score_run(GoldSet((query,)), run, ["judged@5", "recall@5", "precision@5"], 1)
    assert row.per_query["q1"] == pytest.approx(
        {"judged@5": 2 / 5, "recall@5": 1.0, "precision@5": 1 / 5}
    )
    assert MatchedQuery(query.relevant + query.non_relevant, ("bad", "good")).credited == 1


# --- gold labels and config -----------------------------------------------------------


def write_gold(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_gold_references_and_passages_load(tmp_path: Path) -> None:
    path = write_gold(
        tmp_path / "g.jsonl",
        {
            "query_id": "q1",
            "query": "x",
            "gold_references": [
                {"document": "Manual.pdf", "page": 45, "relevance": 2},
                {"document": "Manual.pdf", "page": 0},
            ],
        },
        {"query_id": "q2", "query": "y", "reference_passages": [PARIS, PARIS]},
        {"query_id": "q3", "query": "z", "gold_references": [], "reference_passages": []},
    )
    q1, q2, q3 = load_gold([path]).queries
    assert q1.gold_references == (
        GoldReference("Manual.pdf", 45, 2),
        GoldReference("Manual.pdf", 0),
    )
    assert (q1.is_rejection, q1.relevant, q1.matching) == (False, (), "auto")
    assert (q2.reference_passages, q2.is_rejection) == ((PARIS,), False)
    assert q3.is_rejection


LINE = {"query_id": "q1", "query": "x"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"gold_references": {"document": "m.pdf", "page": 1}},
            "gold_references: must be a list of {document, page, relevance} objects, got an object",
        ),
        (
            {"gold_references": ["m.pdf"]},
            "gold_references[0]: must be an object {document, page, relevance}, got a string",
        ),
        (
            {"gold_references": [{"document": "m.pdf", "page": 1}, {"document": "m.pdf"}]},
            "gold_references[1].page: missing required key",
        ),
        ({"gold_references": [{"page": 1}]}, "gold_references[0].document: missing required key"),
        (
            {"gold_references": [{"document": " ", "page": 1}]},
            "gold_references[0].document: must be a non-empty string",
        ),
        (
            {"gold_references": [{"document": "m.pdf", "page": "45"}]},
            'gold_references[0].page: must be a whole number >= 0, got "45"',
        ),
        (
            {"gold_references": [{"document": "m.pdf", "page": -1}]},
            "gold_references[0].page: must be a whole number >= 0, got -1",
        ),
        (
            {"gold_references": [{"document": "m.pdf", "page": 4.5}]},
            "gold_references[0].page: must be a whole number >= 0, got 4.5",
        ),
        (
            {"gold_references": [{"document": "m.pdf", "page": 1, "relevance": 0}]},
            "gold_references[0].relevance: must be a whole number from 1 to 100, got 0",
        ),
        (
            {"gold_references": [{"document": "m.pdf", "pages": 1}]},
            "gold_references[0].pages: unknown key (valid keys: document, page, relevance)",
        ),
        ({"reference_passages": "text"}, "reference_passages: must be a list of non-empty strings"),
        (
            {"reference_passages": ["a", " "]},
            "reference_passages: must be a list of non-empty strings",
        ),
        (
            {"is_rejection": True, "gold_references": [{"document": "m.pdf", "page": 1}]},
            "is_rejection: is true but `gold_references` lists 1 reference",
        ),
        (
            {"is_rejection": True, "reference_passages": ["a", "b"]},
            "is_rejection: is true but `reference_passages` lists 2 passages",
        ),
    ],
)
def test_bad_gold_fields(tmp_path: Path, extra: dict, message: str) -> None:
    path = write_gold(tmp_path / "g.jsonl", LINE, {**LINE, "query_id": "q2", **extra})
    with pytest.raises(InputError) as caught:
        load_gold([path])
    assert str(caught.value) == f"{path}:2: {message}"


@pytest.mark.parametrize(
    ("matching", "labels", "message"),
    [
        (
            "page",
            {"relevant": ["d1"]},
            "gold_references: missing: the config matches this file by page",
        ),
        (
            "text",
            {"relevant": ["d1"]},
            "reference_passages: missing: the config matches this file by text",
        ),
        (
            "id",
            {"reference_passages": ["a"]},
            "relevant: missing: the config matches this file by id",
        ),
    ],
)
def test_a_file_matched_by_one_kind_needs_that_label(
    tmp_path: Path, matching: str, labels: dict, message: str
) -> None:
    path = write_gold(tmp_path / "g.jsonl", {**LINE, **labels})
    with pytest.raises(InputError) as caught:
        load_gold([GoldSource(str(path), None, matching)])
    assert str(caught.value) == f"{path}:1: {message}"


def test_rejection_queries_fit_any_matcher(tmp_path: Path) -> None:
    path = write_gold(tmp_path / "g.jsonl", LINE)
    (only,) = load_gold([GoldSource(str(path), None, "page")]).queries
    assert (only.is_rejection, only.matching, matcher_for(only)) == (True, "page", None)


def test_an_unknown_matching_from_the_api_is_an_error(tmp_path: Path) -> None:
    path = write_gold(tmp_path / "g.jsonl", LINE)
    with pytest.raises(InputError) as caught:
        load_gold([GoldSource(str(path), None, "pages")])
    assert (
        str(caught.value) == f"{path}: matching: expected one of auto, id, page, text, got 'pages'"
    )


def config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_config(path)
    return str(caught.value).replace(str(path), "FILE")


def test_matching_settings_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "gold:\n  - {path: a.jsonl, matching: page}\n  - b.jsonl\n"
        "page_tolerance: 0\nf1_threshold: 0.5\n"
    )
    config = load_config(path)
    assert config.gold == (GoldSource("a.jsonl", None, "page"), GoldSource("b.jsonl"))
    assert config.matching == MatchSettings(0, 0.5)
    path.write_text("gold: [a.jsonl]\n")
    assert load_config(path).matching == MatchSettings(1, 0.3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "gold:\n  - {path: a.jsonl, matching: pages}\n",
            "FILE:2: gold[0].matching: expected one of auto, id, page, text, got 'pages'",
        ),
        (
            "gold: [a.jsonl]\npage_tolerance: -1\n",
            "FILE:2: page_tolerance: must be a whole number >= 0, got -1",
        ),
        (
            "gold: [a.jsonl]\nf1_threshold: 1.5\n",
            "FILE:2: f1_threshold: must be a number between 0 and 1, got 1.5",
        ),
        (
            "gold: [a.jsonl]\nf1_threshold: 0\n",
            "FILE:2: f1_threshold: must be above 0 (every chunk would match), got 0",
        ),
    ],
)
def test_matching_config_errors(tmp_path: Path, text: str, message: str) -> None:
    assert config_error(tmp_path, text) == message


def test_matched_query_credits_count_distinct_units() -> None:
    matched = MatchedQuery((("d1", 1), ("d2", 2)), ("d1", "d9", "d1", "d2"))
    assert matched.credited == 2


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdefg"), st.integers(1, 3), min_size=1, max_size=5),
    st.lists(st.sampled_from("abcdefgxyz"), max_size=8),
    st.lists(st.sampled_from("abcxyz"), max_size=2, unique=True),
    st.booleans(),
)
def test_credited_ids_count_what_the_matched_query_counts(
    labels: dict[str, int], ranked: list[str], judged_out: list[str], compact: bool
) -> None:
    """The id matcher's count, taken without its matched query, is the matched query's:
    repeated results counted once, documents judged not relevant never."""
    pairs = tuple(labels.items())
    non_relevant = tuple((doc, 0) for doc in judged_out if doc not in labels)
    relevant = compact_labels(pairs) if compact else pairs
    query = gold_query("q", relevant, non_relevant=non_relevant)
    for results in (IdResults(ranked), tuple(RankedResult(doc) for doc in ranked)):
        expected = match_ids(query, results, MatchSettings()).credited
        assert _credited_ids(query, results) == expected


def test_matchers_counted_from_columns_are_those_counted_by_query() -> None:
    """The report's `by_matcher` read from the matcher and credit columns equals the
    count query by query, in the order the matchers first come."""
    from llm_eval.report import _by_matcher
    from llm_eval.score_columns import Column

    ids = [f"q{i}" for i in range(40)]
    rng = np.random.default_rng(4)
    codes = rng.choice([2, 0, 1], size=40).astype(np.uint8)
    credits = rng.integers(0, 4, size=40)
    names = ("id", "page", "text")
    matched_by = Column(ids, codes, names.__getitem__)
    credited = Column(ids, credits, int)
    expected = _by_matcher(dict(matched_by.items()), dict(credited.items()))
    assert next(iter(expected)) == names[codes[0]]
    assert _by_matcher(matched_by, credited) == expected
    assert list(_by_matcher(matched_by, credited)) == list(expected)


_IDS = st.sampled_from(["d1", "d2", "d3", "x:y", "é"])


@st.composite
def _qrels_queries(draw: Any) -> list[Any]:
    """Queries labelled every way a gold set may be: compact labels, pairs that repeat
    an id (kept as a tuple), labels judged not relevant, pages, rejections."""
    queries = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["compact", "repeated", "negative", "page", "none"]))
        pairs = tuple(draw(st.lists(st.tuples(_IDS, st.integers(1, 3)), min_size=1, max_size=4)))
        if kind == "compact":
            queries.append(gold_query(f"q{i}", compact_labels(tuple(dict(pairs).items()))))
        elif kind == "repeated":
            queries.append(gold_query(f"q{i}", compact_labels(pairs + pairs[:1])))
        elif kind == "negative":
            unique = compact_labels(tuple(dict(pairs).items()))
            queries.append(gold_query(f"q{i}", unique, non_relevant=(("n1", 0),)))
        elif kind == "page":
            pages = (GoldReference("Manual.pdf", 3, 2),)
            queries.append(gold_query(f"q{i}", gold_references=pages, matching="page"))
        else:
            queries.append(gold_query(f"q{i}"))
    return queries


@settings(max_examples=300, deadline=None)
@given(queries=_qrels_queries(), retrieved=st.lists(_IDS | st.just("n1"), max_size=5))
def test_gold_rows_read_without_their_dicts_are_the_rows(
    queries: list[Any], retrieved: list[str]
) -> None:
    """A gold set's qrels give their rows' lengths, grades and units from compact
    labels as the rows themselves give them, and judging through them is judging the
    rows as plain dicts."""
    import dataclasses

    from llm_eval.judgments import _flatten_qrels, judge_ranked

    results = [RankedResult(d, document="Manual.pdf", page=3) for d in retrieved]
    run = Run({q.query_id: QueryResults(q.query_id, tuple(results)) for q in queries[::2]})
    matched = match_run(GoldSet(tuple(queries)), run)
    qrels = matched.qrels
    sizes, grades, _ = _flatten_qrels(qrels.values(), keep_docs=False)
    read_sizes, read_grades = qrels.sizes_and_grades()
    assert read_sizes.tolist() == sizes.tolist() and read_grades.tolist() == grades.tolist()
    assert [list(units) for units in qrels.unit_rows()] == [list(row) for row in qrels.values()]
    plain = {query_id: dict(row) for query_id, row in qrels.items()}
    through, alone = judge_ranked(qrels, matched.ranked), judge_ranked(plain, matched.ranked)
    for field in dataclasses.fields(through):
        ours, theirs = getattr(through, field.name), getattr(alone, field.name)
        if isinstance(ours, np.ndarray):
            assert np.array_equal(ours, theirs), field.name
        else:
            assert ours == theirs, field.name
