"""Knowledge gain of new documents: how new they are, and what they add to retrieval.

    novelty(d) = 1 − max over d's chunks c and the corpus's chunks c' of cos(c, c')
    gain = alpha · ΔRecall@k + beta · ΔContextRecall + gamma · mean novelty

A new document's chunks are runs of at most `chunk_words` words of its title and
text; each corpus document is one chunk (BEIR corpora are passages already). The
deltas compare the gold set's scores with the documents added to the corpus against
the scores without them. Pure: the vectors and the scores come in.
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


def novelty(document_chunks: Matrix, corpus_chunks: Matrix) -> float:
    """1 − the largest cosine between any chunk of the document and any corpus chunk."""
    if corpus_chunks.size == 0:
        return 1.0
    cosines = np.matmul(unit_rows(document_chunks), unit_rows(corpus_chunks).T)
    return float(1.0 - cosines.max())


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
    weights: Weights, delta_recall: float, delta_context_recall: float | None, novelty: float
) -> float:
    """alpha · ΔRecall@k + beta · ΔContextRecall + gamma · novelty; without a judge (no
    ΔContextRecall) its term is left out."""
    judged = 0.0 if delta_context_recall is None else weights.beta * delta_context_recall
    return weights.alpha * delta_recall + judged + weights.gamma * novelty
