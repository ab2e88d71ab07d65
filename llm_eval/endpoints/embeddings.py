"""Embeddings from one OpenAI-compatible endpoint, each text's vector cached on disk.

A server that answers a decoder model's vectors per token (llama.cpp without pooling:
a list of vectors for each input) has them mean-pooled into one vector per input, as
llama.cpp's `--pooling mean` would do on the server; the client counts the texts it
pooled so that the report can say so.

What an endpoint answers is checked here, once, for every caller: an embedding that is
not finite, all zeros, of another dimension than the model's other vectors (in this
answer, an earlier one or the cache), or an answer whose `index` values are not each
input's once fails its call (EndpointFailed: counted against max_error_rate, never a
score of 0). A list's batches go `concurrency` at a time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from llm_eval.digest import digest
from llm_eval.endpoints.cache import CACHE_FORMAT, read_entry, write_entry
from llm_eval.endpoints.client import (
    Answer,
    EndpointFailed,
    Usage,
    http_client,
    in_flight_limit,
    retry_policy,
    usage_tokens,
)
from llm_eval.endpoints.secret import api_key, scrub, secret_forms
from llm_eval.endpoints.settings import EmbeddingSettings
from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.httpcall import Breaker, CallFailed, post_json
from llm_eval.textio import load_json


@dataclass(frozen=True, slots=True)
class EmbeddingClient:
    """Embeddings from one endpoint and model, each text's vector cached on disk."""

    settings: EmbeddingSettings
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)
    dimension: Dimension = field(default_factory=lambda: Dimension())
    in_flight: threading.BoundedSemaphore = field(init=False, repr=False, compare=False)
    """At most `concurrency` batches on the wire, however many threads embed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_flight", in_flight_limit(self.settings))

    @property
    def url(self) -> str:
        """The embeddings endpoint."""
        return str(self.settings.base_url).rstrip("/") + "/embeddings"

    def key(self, text: str) -> str:
        """The cache key of one text's vector."""
        return digest(
            {
                "url": self.url,
                "model": self.settings.model,
                "text": text,
                "format": CACHE_FORMAT,
            }
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; EndpointFailed when the endpoint fails. The
        texts not cached go in batches of `batch_size`, `concurrency` at a time."""
        vectors: dict[str, list[float]] = {}
        for text in dict.fromkeys(texts):
            cached = self._cached(text)
            if cached is not None:
                vectors[text] = cached
                self.usage.add(Answer("", 0, 0, cached=True))
        missing = [t for t in dict.fromkeys(texts) if t not in vectors]
        size = self.settings.batch_size
        batches = [missing[start : start + size] for start in range(0, len(missing), size)]
        if batches:
            workers = min(len(batches), self.settings.concurrency)
            with (
                http_client(self.settings) as http,
                ThreadPoolExecutor(workers, thread_name_prefix="llm-eval-embed") as pool,
            ):
                breaker = Breaker(max(3, workers))
                secrets = secret_forms(api_key(self.settings))
                found = pool.map(lambda b: self._call(http, breaker, b, secrets), batches)
                for batch, got in zip(batches, found, strict=True):
                    vectors.update(zip(batch, got, strict=True))
        for text in texts:
            self.dimension.check(len(vectors[text]))
        return [vectors[t] for t in texts]

    def _call(
        self, http: httpx.Client, breaker: Breaker, batch: list[str], secrets: Sequence[str]
    ) -> list[list[float]]:
        payload = {"model": self.settings.model, "input": batch}
        cap = self.settings.max_answer_bytes
        try:
            with self.in_flight:
                response, _ = post_json(
                    http, self.url, payload, retry_policy(self.settings), breaker, None, cap
                )
        except CallFailed as failure:
            self.usage.add(None)
            raise EndpointFailed(scrub(str(failure), secrets)) from None
        try:
            body = load_json(response.content.decode("utf-8", errors="replace"), "embeddings")
            shaped = [one_vector(row["embedding"]) for row in _rows(body["data"], len(batch))]
            usage = body.get("usage")
        except (InputError, LookupError, TypeError, ValueError, AttributeError) as exc:
            self.usage.add(None)
            raise EndpointFailed(f"malformed embeddings: {type(exc).__name__}") from None
        except EndpointFailed:
            self.usage.add(None)
            raise
        found = [vector for vector, _ in shaped]
        try:
            for vector in found:
                check_vector(vector)
                self.dimension.check(len(vector))
        except EndpointFailed:
            self.usage.add(None)
            raise
        counted = usage_tokens(
            {"prompt_tokens": usage.get("prompt_tokens")} if isinstance(usage, dict) else usage
        )
        if counted is None:
            self.usage.ignore_usage(self.url, usage)
        self.usage.add_pooled(sum(1 for _, pooled in shaped if pooled))
        self.usage.add(Answer("", counted[0] if counted else 0, 0))
        for text, vector in zip(batch, found, strict=True):
            self._store(text, vector)
        return found

    def _cached(self, text: str) -> list[float] | None:
        """The cached vector; None when missing or not a sound vector (asked again)."""
        return cached_vector(read_entry(self.cache_dir, self.key(text)))

    def _store(self, text: str, vector: list[float]) -> None:
        write_entry(self.cache_dir, self.key(text), vector)


@dataclass
class Dimension:
    """The dimension of a model's vectors, set by the first one seen (thread-safe)."""

    size: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self, size: int) -> None:
        """EndpointFailed when `size` is not the dimension seen before."""
        with self._lock:
            if self.size is None:
                self.size = size
            elif size != self.size:
                raise EndpointFailed(
                    f"malformed embeddings: a vector of {size} dimensions from a model whose "
                    f"vectors have {self.size}"
                )


def cached_vector(entry: Any) -> list[float] | None:
    """A vector read from the cache; None when missing or not a sound vector (the text
    is embedded again)."""
    if not isinstance(entry, list) or not entry:
        return None
    try:
        found = _floats(entry)
        check_vector(found)
    except EndpointFailed:
        return None
    return found


def check_vector(vector: Sequence[float]) -> None:
    """EndpointFailed for a vector that is empty, not finite or all zeros."""
    if not vector:
        raise EndpointFailed("malformed embeddings: an empty vector")
    if not all(map(is_finite_number, vector)):
        raise EndpointFailed("malformed embeddings: a vector holds NaN or Infinity")
    if not any(vector):
        raise EndpointFailed("malformed embeddings: an all-zero vector")


def _rows(data: Any, expected: int) -> list[dict[str, Any]]:
    """The answer's rows in input order: each `index` from 0 to `expected` - 1 once."""
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise EndpointFailed("malformed embeddings: `data` is not a list of objects")
    indices = [row.get("index") for row in data]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise EndpointFailed("malformed embeddings: an `index` is not a whole number")
    if sorted(indices) != list(range(expected)):
        duplicated = len(set(indices)) != len(indices)
        raise EndpointFailed(
            f"malformed embeddings: {'duplicate' if duplicated else 'missing'} `index` values "
            f"({len(data)} rows for {expected} texts)"
        )
    return sorted(data, key=lambda row: row["index"])


class Embedder(Protocol):
    """What the embedding retriever, answer relevance and novelty use: an endpoint's
    client or a model on disk (`llm_eval.endpoints.local`)."""

    @property
    def settings(self) -> EmbeddingSettings:
        """The checked `embeddings:` settings."""
        ...

    @property
    def usage(self) -> Usage:
        """Calls, cache hits and tokens so far."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; EndpointFailed when an endpoint fails."""
        ...


def one_vector(value: Any) -> tuple[list[float], bool]:
    """One input's embedding, and whether it was pooled: a list of numbers as it is; a
    list of per-token vectors (llama.cpp serving a decoder model without pooling) as
    their mean. EndpointFailed for any other shape."""
    if isinstance(value, list) and value and all(isinstance(t, list) for t in value):
        sizes = {len(t) for t in value}
        if len(sizes) != 1 or 0 in sizes:
            raise EndpointFailed(
                "malformed embeddings: per-token vectors of different lengths for one text"
            )
        tokens = [_floats(t) for t in value]
        return [sum(column) / len(tokens) for column in zip(*tokens, strict=True)], True
    if not isinstance(value, list):
        raise EndpointFailed(_NOT_A_VECTOR)
    return _floats(value), False


_NOT_A_VECTOR = (
    "malformed embeddings: an embedding is neither a list of numbers nor a list of "
    "per-token vectors"
)


def _floats(values: list[Any]) -> list[float]:
    """A vector's numbers as floats, any that is not finite (NaN, or an integer beyond
    a float's range) as NaN for `check_vector` to refuse; EndpointFailed for anything
    that is not a number (text, null, true, a list)."""
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
        raise EndpointFailed(_NOT_A_VECTOR)
    return [float(x) if is_finite_number(x) else math.nan for x in values]
