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
embedded once: its vector is kept in the store under `<output>/cache/embedding/`
(`llm_eval.retrievers.vector_store`: a folder per model and way of writing documents,
a file per batch of vectors, written as each batch is embedded). Building the
retriever reads the corpus once for ids, texts and each text's key, and the store in
one pass; only when texts are missing does it read the corpus again, embedding those
texts a batch file at a time (shortest first within a batch, so the model pads
little), with progress in documents on stderr, headed by a line that says how many
documents it embeds and how many the store holds (a short run shows neither). A
killed run keeps the batches it finished; an edited document is the only one embedded
again. Query vectors from an endpoint, which bills them, are cached too (one file a
text, under `<output>/cache/embeddings/`), so a second run makes no call; a model on
disk embeds each query again, so that the latency gates measure the model and not the
cache. Each query is embedded and scored against every document (exact, no
approximate index) in numpy; equal cosines keep corpus order. A model on disk
answers one query at a time (`concurrency` applies to endpoints): it encodes one batch
at a time anyway, and waiting for another query's turn would count as latency. A query
whose embedding fails is recorded with the endpoint's error; a corpus that cannot be
embedded stops the run (exit 4).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval.corpus import Document, check_fields, field_text
from llm_eval.corpus_io import iter_corpus
from llm_eval.digest import digest
from llm_eval.endpoints.settings import (
    EMBEDDING_SETTINGS,
    EmbeddingSettings,
    check_embedding_source,
)
from llm_eval.errors import ExternalError, InputError
from llm_eval.progress import Progress
from llm_eval.retrievers import RetrieverContext, RetrieverKind
from llm_eval.retrievers.pool import (
    CACHE_KEY,
    Hits,
    PooledRetriever,
    QueryFailed,
    Search,
    resolved_cache_key,
)
from llm_eval.retrievers.vector_store import FORMAT as STORE_FORMAT
from llm_eval.retrievers.vector_store import Matrix, VectorStore, text_key
from llm_eval.runs import RankedResult
from llm_eval.settings import Setting


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


@dataclass(frozen=True, slots=True)
class EmbeddingRetrieverSettings:
    """The checked settings of the embedding kind (`SETTINGS` says what each one means)."""

    endpoint: EmbeddingSettings
    """The endpoint or the model on disk, as an `embeddings:` section holds it (the
    retriever's own max_error_rate applies to its queries; it has no price line)."""
    fields: tuple[str, ...]
    query_prefix: str
    document_prefix: str
    cache_key: str | None
    """As written: its `${ENV_VAR}` are read when the cache's key is made."""

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> EmbeddingRetrieverSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present)."""
        return cls(
            endpoint=EmbeddingSettings.create(
                {**values, "max_error_rate": 1.0, "price_per_1k_input": 0.0}
            ),
            fields=tuple(values["fields"]),
            query_prefix=values["query_prefix"],
            document_prefix=values["document_prefix"],
            cache_key=values["cache_key"],
        )


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


@dataclass(frozen=True, slots=True)
class Corpus:
    """The corpus as the searcher needs it, and the keys of the texts embedded."""

    doc_ids: tuple[str, ...]
    texts: tuple[str, ...]
    """Each document's `text`, returned with its results."""
    keys: tuple[bytes, ...]
    """The `text_key` of what is embedded for each document."""


def read_corpus(path: Path, written: Callable[[Document], str]) -> Corpus:
    """One pass over the corpus: ids, texts, and the keys of the texts to embed."""
    doc_ids, texts, keys = [], [], []
    for document in iter_corpus(path):
        doc_ids.append(document.doc_id)
        texts.append(document.text)
        keys.append(text_key(written(document)))
    return Corpus(tuple(doc_ids), tuple(texts), tuple(keys))


BATCH_FILE_ROWS = 256
"""Vectors a batch file of the store holds (the last one of a run may hold fewer): what
a killed run can lose, at most."""


@dataclass(frozen=True, slots=True)
class Embedding:
    """How the corpus's missing texts are embedded."""

    client: Any
    """A `llm_eval.endpoints.client.Embedder`, or a `LocalEmbeddingClient`."""
    step: int
    """Texts handed to the client at a time, the progress line moving once a step: a
    model on disk's batch; for an endpoint, a whole batch file (its client sends it
    `batch_size` texts a request, `concurrency` requests at once, over one pool of
    connections)."""
    model: str
    """The model's name, for the line that says what will be embedded."""
    progress: Progress | None = None

    def matrix(self, texts: Sequence[str]) -> Matrix:
        """The texts' vectors, as float32 rows; ExternalError when they cannot be had."""
        from llm_eval.endpoints.client import EndpointFailed
        from llm_eval.endpoints.local import LocalEmbeddingClient

        try:
            if isinstance(self.client, LocalEmbeddingClient):
                rows = self.client.encode(texts)
            else:
                rows = self.client.embed(texts)
            matrix = np.asarray(rows, dtype=np.float32)
        except EndpointFailed as failure:
            raise ExternalError(f"embedding the corpus failed: {failure}") from None
        except ValueError:
            raise ExternalError(
                "embedding the corpus failed: vectors of different lengths"
            ) from None
        if matrix.ndim != 2 or len(matrix) != len(texts) or not np.isfinite(matrix).all():
            raise ExternalError("embedding the corpus failed: malformed embeddings")
        return matrix


def corpus_matrix(
    path: Path,
    corpus: Corpus,
    embedding: Embedding,
    store: VectorStore,
    written: Callable[[Document], str],
) -> Matrix:
    """The documents' unit vectors: those of texts the store holds read from it, the
    others embedded now, a batch file at a time, and added to it."""
    embed_missing(path, corpus, embedding, store, written, corpus.keys)
    dimension = store.dimension
    assert dimension is not None or not corpus.keys
    matrix = np.empty((len(corpus.keys), dimension or 0), dtype=np.float32)
    for row, key in enumerate(corpus.keys):
        matrix[row] = store.vector(key)
    store.compact(corpus.keys, BATCH_FILE_ROWS)
    # Scaled in place: the store holds no all-zero vector, and a second n x d matrix
    # would double what a large corpus needs.
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def embed_missing(
    path: Path,
    corpus: Corpus,
    embedding: Embedding,
    store: VectorStore,
    written: Callable[[Document], str],
    keys: Sequence[bytes],
) -> None:
    """Of `keys` (texts of the corpus's documents, one a document), embed those the
    store lacks, in a second pass over the corpus, writing them to it a batch file at a
    time; InputError when the corpus changed since the first pass."""
    # Each text not stored, and how many documents have it (a text is embedded once).
    wanted = Counter(key for key in keys if key not in store)
    if not wanted:
        return
    count = sum(wanted.values())
    cached = len(keys) - count
    changed = InputError("the corpus changed while it was embedded; run again", path=path)
    if embedding.progress is not None:
        said = (
            f"embedding {count:,} of {len(keys):,} documents ({cached:,} cached) "
            f"with {embedding.model}"
        )
        embedding.progress.heading = _fitted(said, len(embedding.model))
        embedding.progress.update(0, count)  # the rate and the first line count from here
    pending: list[tuple[bytes, str, int]] = []
    done = 0
    for number, document in enumerate(iter_corpus(path)):
        if number >= len(corpus.keys) or document.doc_id != corpus.doc_ids[number]:
            raise changed
        key = corpus.keys[number]
        if key not in wanted:
            continue
        text = written(document)
        if text_key(text) != key:
            raise changed
        pending.append((key, text, wanted.pop(key)))
        if len(pending) == BATCH_FILE_ROWS:
            done = _embed_batch(pending, embedding, store, done, count)
            pending = []
    if pending:
        _embed_batch(pending, embedding, store, done, count)
    if wanted:
        raise changed


def _embed_batch(
    pending: list[tuple[bytes, str, int]],
    embedding: Embedding,
    store: VectorStore,
    done: int,
    count: int,
) -> int:
    """Embed one batch file's texts, step by step (shortest first, so that the model's
    batches hold texts of similar length), and add them to the store. `pending` holds
    each text's key, the text and the documents that have it; the documents done."""
    pending.sort(key=lambda item: len(item[1]))
    parts = []
    for start in range(0, len(pending), embedding.step):
        step = pending[start : start + embedding.step]
        parts.append(embedding.matrix([text for _, text, _ in step]))
        done += sum(documents for _, _, documents in step)
        if embedding.progress is not None:
            embedding.progress.update(done, count)
    if len({part.shape[1] for part in parts} | {store.dimension or parts[0].shape[1]}) > 1:
        raise ExternalError("embedding the corpus failed: vectors of different lengths")
    store.add([key for key, _, _ in pending], np.concatenate(parts))
    return done


_LINE = 79
"""Columns a line of its own may take (one less than the narrowest usual terminal)."""


def _fitted(line: str, tail: int) -> str:
    """The line cut to `_LINE` columns in its last `tail` characters (a model's path:
    its end names it), else at its end."""
    if len(line) <= _LINE:
        return line
    cut = len(line) - _LINE + 3
    if cut <= tail - 3:
        start = len(line) - tail
        return line[:start] + "..." + line[start + cut :]
    return line[: _LINE - 3] + "..."


@dataclass(frozen=True, slots=True)
class CorpusVectors:
    """The corpus read once, the store its vectors are kept in, and how a text missing
    from the store is embedded."""

    path: Path
    corpus: Corpus
    store: VectorStore
    written: Callable[[Document], str]
    """What is embedded for a document."""
    endpoint: EmbeddingSettings
    model: Mapping[str, Any]
    """What the vectors depend on: the model's files, or the endpoint and model name."""
    written_as: Mapping[str, Any]
    """The fields, the document prefix and the cache key."""

    def embedding(self, progress: Progress | None) -> Embedding:
        """How missing texts are embedded: a model on disk's batch at a time, or a batch
        file at a time for an endpoint."""
        from llm_eval.endpoints.embedders import embedder

        local = self.endpoint.model_path is not None
        name = str(self.endpoint.model_path if local else self.endpoint.model)
        step = self.endpoint.batch_size if local else BATCH_FILE_ROWS
        return Embedding(embedder(self.endpoint, None), step, name, progress)


def corpus_vectors(
    settings: EmbeddingRetrieverSettings, context: RetrieverContext
) -> CorpusVectors:
    """The corpus (ids, texts, keys) and its store under the cache folder, the folder
    named by a digest of what a vector depends on besides its text."""
    from llm_eval.endpoints.embedders import embedder
    from llm_eval.endpoints.local import LocalEmbeddingClient

    if context.corpus_path is None:
        raise InputError("the embedding retriever needs a `corpus` file in the config")
    endpoint = settings.endpoint
    fields = list(settings.fields)
    prefix = settings.document_prefix

    def written(document: Document) -> str:
        return prefix + field_text(document, fields)

    corpus = read_corpus(context.corpus_path, written)
    client = embedder(endpoint, None)
    model = (
        client.identity()
        if isinstance(client, LocalEmbeddingClient)
        else {"url": str(endpoint.base_url).rstrip("/"), "model": endpoint.model}
    )
    cache_key = resolved_cache_key(settings.cache_key, os.environ)
    written_as = {"fields": fields, "document_prefix": prefix, "cache_key": cache_key}
    store_key = {**model, **written_as, "format": STORE_FORMAT}
    store = VectorStore.open(context.cache_dir / "embedding" / digest(store_key))
    return CorpusVectors(context.corpus_path, corpus, store, written, endpoint, model, written_as)


def build(settings: EmbeddingRetrieverSettings, context: RetrieverContext) -> PooledRetriever:
    """Embed the corpus (the texts not in the store) and the searcher over it."""
    from llm_eval.endpoints.embedders import embedder

    source = corpus_vectors(settings, context)
    endpoint = source.endpoint
    # A model on disk embeds each query afresh: a vector from the cache would take no
    # time, and the latency gates would measure the cache instead of the model.
    local = endpoint.model_path is not None
    queries = embedder(endpoint, None if local else context.cache_dir / "embeddings")
    concurrency = 1 if local else endpoint.concurrency
    with Progress(unit="documents") as progress:
        matrix = corpus_matrix(
            source.path, source.corpus, source.embedding(progress), source.store, source.written
        )
    identity = {
        "kind": "embedding",
        **source.model,
        **source.written_as,
        "query_prefix": settings.query_prefix,
    }
    searcher = EmbeddingSearcher(
        queries, source.corpus.doc_ids, source.corpus.texts, matrix, settings.query_prefix
    )
    return PooledRetriever(searcher, concurrency, identity)


KIND = RetrieverKind(
    name="embedding",
    description="Dense: exact cosine top-k over embeddings (an endpoint or a model on disk).",
    record=EmbeddingRetrieverSettings.from_checked,
    build=build,
    settings=SETTINGS,
    needs_corpus=True,
    check_together=lambda settings: check_embedding_source(settings.endpoint),
    deterministic=lambda settings: True,  # exact search over vectors kept on disk
    elsewhere=lambda settings: (
        None
        if settings.endpoint.model_path is not None
        else "an embedding endpoint, whose work happens in another process"
    ),
)
