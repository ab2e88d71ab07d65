"""A gold query's fingerprint: the text written out for id-labelled queries is the
canonical JSON the digest of its fields makes, to the byte, on any text."""

from __future__ import annotations

from conftest import gold_query
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval.digest import _CANONICAL, digest
from llm_eval.fingerprint import _fields, _usual_text, query_fingerprint, query_fingerprints
from llm_eval.gold import GoldReference, GoldSet, compact_labels

TEXT = st.text(min_size=1, max_size=12)  # any code point: quotes, controls, NUL, emoji
LABELS = st.lists(st.tuples(TEXT | st.sampled_from(["d", "e"]), st.integers(1, 100)), max_size=6)
"""(doc_id, grade) pairs, an id now and then twice (as a list of relevant ids gives)."""


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT, st.lists(TEXT, max_size=4, unique=True), LABELS, st.booleans())
def test_the_written_out_text_is_the_encoders(
    text: str, tier: str, tags: list[str], labels: list[tuple[str, int]], compact: bool
) -> None:
    pairs = tuple(labels)
    relevant = compact_labels(pairs) if compact else pairs
    query = gold_query("q", relevant, text=text, tier=tier, tags=tuple(tags))

    assert _usual_text(query) == _CANONICAL.encode(_fields(query))
    assert query_fingerprint(query) == digest(_fields(query))


def test_queries_with_other_labels_keep_the_digest_of_their_fields() -> None:
    queries = [
        gold_query("p", gold_references=(GoldReference("Manual.pdf", 3, 2),)),
        gold_query("t", reference_passages=("a passage",)),
        gold_query("n", (("d1", 1),), non_relevant=(("d2", 0),)),
        gold_query("m", (("d1", 1),), matching="id"),
        gold_query("r"),  # a rejection query: no labels at all
    ]
    assert [_usual_text(q) is None for q in queries] == [True, True, True, True, False]
    fingerprints = query_fingerprints(GoldSet(tuple(queries)))
    for query in queries:
        assert query_fingerprint(query) == digest(_fields(query))
        assert fingerprints[query.query_id] == digest(_fields(query))
