"""The BM25 index and ranking, in memory (pure: no file is read or written).

Scoring is bm25s's "lucene" method, Lucene's formula (Lucene >= 8, which dropped the
constant factor k1 + 1 from the numerator):
idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
score = sum over query terms of idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)).
Lucene stores document lengths in one byte (exact below 40 terms, rounded above);
bm25s uses exact lengths, so long documents score slightly differently. On the
demo gold set this changes 16% of top-10 lists a little (98% of top-10 documents
shared with Lucene 8.7); with Lucene's rounding emulated every ranking was identical.

Retrieval scores one query at a time from bm25s's precomputed score matrix (so that
each query's latency is its own); ranking is exact and deterministic: score
descending, equal scores by doc id descending (trec_eval's order), only documents
that share a term with the query and score above zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval.retrievers.bm25.analyzer import Analyzer
from llm_eval.retrievers.bm25.settings import BM25Config

IntArray = npt.NDArray[np.int64]
ScoreArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The index terms and their ids, grown document by document."""

    analyzer: Analyzer
    ids: dict[str, int] = field(default_factory=dict)
    """term -> id, numbered in order of first appearance."""
    _token_ids: dict[str, int] = field(default_factory=dict, repr=False)
    """token -> id of its term, -1 when the token is dropped."""

    def add(self, text: str) -> list[int]:
        """The term ids of a document, in order, adding its new terms."""
        tokens = self.analyzer.tokens(text)
        token_ids = self._token_ids
        for token in sorted(set(tokens).difference(token_ids)):
            term = self.analyzer.term(token)
            token_ids[token] = self.ids.setdefault(term, len(self.ids)) if term else -1
        # Each token is analysed once per corpus; the rest runs in C (this is the hot loop).
        return list(filter(_KEPT, map(token_ids.__getitem__, tokens)))


_KEPT = (-1).__ne__


@dataclass(frozen=True, slots=True, eq=False)
class SavedModel:
    """What ranking reads of a `bm25s.BM25`, as read back from the files it saved."""

    scores: Mapping[str, Any]
    """The score matrix: `data`, `indices`, `indptr` (CSC, one column a term), `num_docs`."""
    vocab_dict: Mapping[str, int]
    nonoccurrence_array: ScoreArray | None
    """BM25L and BM25+: each term's score in a document without it."""


@dataclass(frozen=True, slots=True, eq=False)
class Index:
    """A bm25s index and the corpus ids of its documents, in index order."""

    model: Any
    """A `bm25s.BM25` with its score matrix (one column of per-document scores a term),
    or the `SavedModel` read from the cache."""
    doc_ids: tuple[str, ...]
    id_rank: IntArray
    """Each document's position in byte order of the ids (the tie-break)."""

    @classmethod
    def of(cls, model: Any, doc_ids: Sequence[str]) -> Index:
        """Wrap a model and its ids, ranking the ids for tie-breaks."""
        order = sorted(range(len(doc_ids)), key=doc_ids.__getitem__)
        id_rank = np.empty(len(doc_ids), dtype=np.int64)
        id_rank[order] = np.arange(len(doc_ids))
        return cls(model, tuple(doc_ids), id_rank)

    def term_ids(self, terms: Sequence[str]) -> IntArray:
        """Vocabulary ids of the terms the index knows (repeats kept, unknown terms dropped)."""
        vocab: Mapping[str, int] = self.model.vocab_dict
        return np.array([vocab[t] for t in terms if t in vocab], dtype=np.int64)


def build_model(documents: Sequence[Sequence[int]], vocab_size: int, config: BM25Config) -> Any:
    """A bm25s model over documents given as term ids 0..vocab_size-1."""
    import bm25s  # only to index: it imports numba and scipy where they are installed

    model = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
    vocab = {i: i for i in range(vocab_size)}
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus without a single term
        model.index((list(documents), vocab), create_empty_token=False, show_progress=False)
    return model


def rank(index: Index, terms: IntArray, top_k: int) -> tuple[IntArray, ScoreArray]:
    """One query's (term ids) best documents (positions in the index) and scores.

    The arrays returned are the query's own (at most `top_k` long), so that the results
    of many queries hold no scratch memory: what ranking needs at a time grows with the
    corpus, never with the number of queries ranked before.
    """
    docs, score = _score(index, terms)
    candidates = np.flatnonzero(score > 0)
    if len(candidates) > top_k:
        # Only documents scoring at least the k-th best score can rank in the top k;
        # ties at that score are all kept, so that the tie-break below decides.
        kth = np.partition(score[candidates], len(candidates) - top_k)[len(candidates) - top_k]
        candidates = candidates[score[candidates] >= kth]
    order = np.lexsort((-index.id_rank[docs[candidates]], -score[candidates]))[:top_k]
    chosen = candidates[order]
    return docs[chosen].copy(), score[chosen].copy()


def _score(index: Index, terms: IntArray) -> tuple[IntArray, ScoreArray]:
    """(document, score) for every document sharing a term with the query.

    Sums the score-matrix columns of the query's terms per document; a term repeated
    in a query counts again, as Pyserini's bag-of-words query weights it by its count.
    Small queries are summed over their postings alone, large ones into one score a
    document of the corpus, whichever touches less memory.
    """
    matrix = index.model.scores
    num_docs = int(matrix["num_docs"])
    starts = matrix["indptr"][terms].astype(np.int64)
    counts = matrix["indptr"][terms + 1].astype(np.int64) - starts
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    postings = matrix["indices"][offsets]
    weights = matrix["data"][offsets]
    if len(postings) * _SPARSE_FACTOR < num_docs:
        docs, inverse = np.unique(postings, return_inverse=True)
        # float even when no term is known (an empty bincount is of integers), so that
        # BM25L and BM25+ can add their base scores below
        sums = np.bincount(inverse, weights=weights, minlength=len(docs)).astype(np.float64)
    else:
        touched = np.zeros(num_docs, dtype=bool)
        touched[postings] = True
        docs = np.flatnonzero(touched)
        sums = np.bincount(postings, weights=weights, minlength=num_docs)[docs].astype(np.float64)
    nonoccurrence = index.model.nonoccurrence_array
    if nonoccurrence is not None:  # BM25L and BM25+ give every document a base score a term
        sums += nonoccurrence[terms].sum(dtype=np.float64)
    # Scores are compared in single precision, as Lucene computes and trec_eval stores them.
    return docs.astype(np.int64), sums.astype(np.float32)


_SPARSE_FACTOR = 16
"""Queries with fewer postings than the corpus's documents / this are summed sparsely."""
