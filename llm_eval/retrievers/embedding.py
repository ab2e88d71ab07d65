"""Dense retrieval: exact cosine top-k over the corpus's embeddings.

    retriever:
      kind: embedding
      base_url: http://127.0.0.1:8000/v1     # any OpenAI-compatible /embeddings endpoint
      model: text-embedding-3-small
      api_key: ${OPENAI_API_KEY}              # read from the environment, never shown
      query_prefix: "query: "                 # e5-style instructions, when the model wants them
      document_prefix: "passage: "

    retriever:
      kind: embedding
      model_path: models/all-MiniLM-L6-v2     # or a sentence-transformers model on disk

Every corpus document (its `fields`, joined by a space, after `document_prefix`) is
embedded once; the matrix is cached on disk under `<output>/cache/embedding/`, keyed
by the corpus's digest, the endpoint and model (or the digest of the model folder's
files) and how documents are written. Query vectors from an endpoint, which bills
them, are cached too, so a second run makes no call; a model on disk embeds each query
again, so that the latency gates measure the model and not the cache. Each query is
embedded and scored against every document (exact, no approximate index) in numpy;
equal cosines keep corpus order. A model on disk answers one query at a time
(`concurrency` applies to endpoints): it encodes one batch at a time anyway, and
waiting for another query's turn would count as latency. A query whose embedding
fails is recorded with the endpoint's error; a corpus that cannot be embedded stops
the run (exit 4).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval.corpus import check_fields, field_text, iter_corpus
from llm_eval.digest import digest
from llm_eval.endpoints.settings import EMBEDDING_SETTINGS, check_embedding_source
from llm_eval.errors import ExternalError, InputError
from llm_eval.retrievers import RetrieverContext, RetrieverKind
from llm_eval.retrievers.pool import (
    CACHE_KEY,
    Hits,
    PooledRetriever,
    QueryFailed,
    Search,
    resolved_cache_key,
)
from llm_eval.runs import RankedResult
from llm_eval.settings import Setting
from llm_eval.textio import file_digest, write_atomic

Matrix = npt.NDArray[np.float32]


def check_prefix(value: Any) -> str | None:
    """A string (may be empty)."""
    return None if isinstance(value, str) else f"must be a string, got {value!r}"


_ENDPOINT = {
    name: setting
    for name, setting in EMBEDDING_SETTINGS.items()
    # The retriever's own max_error_rate applies; a retriever has no price line.
    if name not in ("max_error_rate", "price_per_1k_input")
}

SETTINGS: Mapping[str, Setting] = {
    **_ENDPOINT,
    "fields": Setting(
        ["title", "text"], check_fields, "Corpus fields embedded, joined by a space."
    ),
    "query_prefix": Setting("", check_prefix, "Written before each query (e.g. 'query: ')."),
    "document_prefix": Setting("", check_prefix, "Written before each document."),
    "cache_key": CACHE_KEY,
}


def unit(matrix: npt.ArrayLike) -> Matrix:
    """Rows scaled to length 1, as float32 (an all-zero row stays zero)."""
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def top_k(query: Matrix, documents: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]:
    """Indices and cosines of the k nearest documents, best first; ties in corpus order."""
    scores = documents @ unit(query.reshape(1, -1))[0]
    k = min(k, len(scores))
    if k == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    candidates = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    # Everything tied with the k-th score is a candidate, so corpus order decides ties.
    threshold = scores[candidates].min()
    candidates = np.flatnonzero(scores >= threshold)
    order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
    return order.astype(np.int64), scores[order]


@dataclass(frozen=True, slots=True)
class EmbeddingSearcher:
    """Embeds one query and scores it against the corpus matrix."""

    client: Any
    """A `llm_eval.endpoints.client.Embedder`."""
    doc_ids: tuple[str, ...]
    texts: tuple[str, ...]
    matrix: Matrix = field(repr=False)
    query_prefix: str = ""

    @contextlib.contextmanager
    def session(self) -> Iterator[Search]:
        """Nothing to hold open: each query is one call of the embeddings client."""
        yield self.search

    def search(self, query: str, k: int) -> Hits:
        """The k documents nearest the query; QueryFailed when it cannot be embedded."""
        from llm_eval.endpoints.client import EndpointFailed

        started, spent = time.perf_counter(), time.process_time()
        try:
            vector = self.client.embed([self.query_prefix + query])[0]
        except EndpointFailed as failure:
            raise QueryFailed(str(failure)) from None
        if len(vector) != self.matrix.shape[1]:
            raise QueryFailed(
                f"malformed embeddings: {len(vector)} dimensions, the corpus has "
                f"{self.matrix.shape[1]}"
            )
        order, scores = top_k(np.asarray(vector, dtype=np.float32), self.matrix, k)
        results = tuple(
            RankedResult(self.doc_ids[i], float(s), self.texts[i])
            for i, s in zip(order.tolist(), scores.tolist(), strict=True)
        )
        wall = (time.perf_counter() - started) * 1000
        return Hits(results, wall, cpu_ms=(time.process_time() - spent) * 1000)


def corpus_matrix(client: Any, texts: list[str], folder: Path, key: Mapping[str, Any]) -> Matrix:
    """The documents' unit vectors, from the cache or embedded now and cached."""
    from llm_eval.endpoints.client import EndpointFailed

    path = folder / f"{digest(key)}.npy"
    with contextlib.suppress(OSError, ValueError):
        cached = np.load(path, allow_pickle=False)
        if cached.ndim == 2 and cached.shape[0] == len(texts):
            return np.asarray(cached, dtype=np.float32)
    try:
        vectors = client.embed(texts)
    except EndpointFailed as failure:
        raise ExternalError(f"embedding the corpus failed: {failure}") from None
    if len({len(v) for v in vectors}) > 1:
        raise ExternalError("embedding the corpus failed: vectors of different lengths")
    matrix = unit(vectors)
    buffer = io.BytesIO()
    np.save(buffer, matrix, allow_pickle=False)
    with contextlib.suppress(OSError):
        write_atomic(path, buffer.getvalue())
    return matrix


def build(values: Mapping[str, Any], context: RetrieverContext) -> PooledRetriever:
    """Embed the corpus (or read its cached matrix) and the searcher over it."""
    from llm_eval.endpoints.embedders import embedder
    from llm_eval.endpoints.local import LocalEmbeddingClient

    if context.corpus_path is None:
        raise InputError("the embedding retriever needs a `corpus` file in the config")
    endpoint = {**values, "max_error_rate": 1.0, "price_per_1k_input": 0.0}
    documents = list(iter_corpus(context.corpus_path))
    fields = list(values["fields"])
    texts = [values["document_prefix"] + field_text(d, fields) for d in documents]
    # A model on disk embeds each query afresh: a vector from the cache would take no
    # time, and the latency gates would measure the cache instead of the model.
    local = values["model_path"] is not None
    queries = embedder(endpoint, None if local else context.cache_dir / "embeddings")
    model = (
        queries.identity()
        if isinstance(queries, LocalEmbeddingClient)
        else {"url": str(values["base_url"]).rstrip("/"), "model": values["model"]}
    )
    identity = {
        "kind": "embedding",
        **model,
        "fields": fields,
        "query_prefix": values["query_prefix"],
        "document_prefix": values["document_prefix"],
        "cache_key": resolved_cache_key(values["cache_key"], os.environ),
    }
    key = {**identity, "corpus": file_digest(context.corpus_path), "format": 1}
    documents_client = embedder(endpoint, None)
    matrix = corpus_matrix(documents_client, texts, context.cache_dir / "embedding", key)
    searcher = EmbeddingSearcher(
        queries,
        tuple(d.doc_id for d in documents),
        tuple(d.text for d in documents),
        matrix,
        values["query_prefix"],
    )
    concurrency = 1 if local else int(values["concurrency"])
    return PooledRetriever(searcher, concurrency, identity)


KIND = RetrieverKind(
    name="embedding",
    description="Dense: exact cosine top-k over embeddings (an endpoint or a model on disk).",
    build=build,
    settings=SETTINGS,
    needs_corpus=True,
    check_together=check_embedding_source,
)
