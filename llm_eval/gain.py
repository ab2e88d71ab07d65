"""Knowledge gain of new documents: how new they are, and what they add to retrieval.

    novelty(d) = 1 − max over d's pieces c and the corpus's documents c' of cos(c, c')
    gain = alpha · ΔRecall@k + beta · ΔContextRecall + gamma · mean novelty

A new document's pieces are the runs of at most `chunk_words` words of its title and
text, and the whole of it, so that an exact copy of a corpus document is never new;
each corpus document is one piece (BEIR corpora are passages already). The deltas
compare the gold set's scores with the documents added to the corpus against the
scores without them. Without an embeddings model there is no novelty, and gain leaves
its term out. Pure: the vectors and the scores come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]


def chunks(text: str, chunk_words: int) -> list[str]:
    """`text` in runs of at most `chunk_words` words (one empty chunk for an empty text)."""
    words = text.split()
    return [" ".join(words[i : i + chunk_words]) for i in range(0, len(words), chunk_words)] or [""]


def unit_rows(vectors: Sequence[Sequence[float]] | Matrix) -> Matrix:
    """The vectors as rows of unit length (an all-zero row stays zero)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def pieces(text: str, chunk_words: int) -> list[str]:
    """What a new document is compared by: its chunks, and its text as the corpus's
    documents are embedded (whole, spacing kept) when that is not its one chunk."""
    parts = chunks(text, chunk_words)
    return parts if parts == [text] else [*parts, text]


def novelty(document_chunks: Matrix, corpus_chunks: Matrix) -> float:
    """1 − the largest cosine between any piece of the document and any corpus chunk
    (clipped at 0: the rounding of identical unit vectors can put a cosine above 1)."""
    if corpus_chunks.size == 0:
        return 1.0
    cosines = np.matmul(unit_rows(document_chunks), unit_rows(corpus_chunks).T)
    return max(0.0, float(1.0 - cosines.max()))


@dataclass(frozen=True, slots=True)
class Weights:
    """The `gain:` section of llm-eval.yaml."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    k: int = 5
    """The cutoff of ΔRecall@k."""
    chunk_words: int = 200


def gain(
    weights: Weights,
    delta_recall: float,
    delta_context_recall: float | None,
    novelty: float | None,
) -> float:
    """alpha · ΔRecall@k + beta · ΔContextRecall + gamma · novelty; without a judge (no
    ΔContextRecall) or without embeddings (no novelty) that term is left out."""
    judged = 0.0 if delta_context_recall is None else weights.beta * delta_context_recall
    new = 0.0 if novelty is None else weights.gamma * novelty
    return weights.alpha * delta_recall + judged + new
