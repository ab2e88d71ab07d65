"""What the chat and embeddings clients share: a section's HTTP client and retry
policy, the limit of its calls in flight, and the counting of calls, tokens and cost.

Each client lets at most its section's `concurrency` calls be on the wire at once,
however many threads ask; the cache is read and written outside that limit. Tokens are
counted from the endpoint's `usage` and priced with the configured prices per 1,000
tokens: `usage` that is not a whole, non-negative, finite number of tokens is not
counted, with a note on stderr. An answer longer than `max_answer_bytes` fails without
being read to its end.

The clients are `llm_eval.endpoints.chat` and `llm_eval.endpoints.embeddings` (and
`llm_eval.endpoints.local`, a model on disk); `llm_eval.endpoints.cache` keeps their
answers on disk, `llm_eval.endpoints.secret` keeps the API key out of them.
"""

from __future__ import annotations

import functools
import ssl
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from llm_eval.endpoints.secret import api_key
from llm_eval.endpoints.settings import ChatSettings, EmbeddingSettings
from llm_eval.finite import is_finite_number
from llm_eval.httpcall import RetryPolicy

Section = ChatSettings | EmbeddingSettings
"""An endpoint section's checked settings: the judge's or the embeddings'."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the model said, and what it cost."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    response_format: str = "none"
    """How the answer was asked for: `json_schema`, `json_object` (with the schema) or
    `none` (the prompt alone)."""
    usage: Any = None
    """The endpoint's `usage` as it came, until the client has checked it."""


@dataclass
class Usage:
    """Calls, cache hits and tokens of a run (thread-safe counters)."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    pooled: int = 0
    """Texts whose embedding came back one vector per token and was mean-pooled."""
    ignored_usage: int = 0
    """Answers whose `usage` was not a whole, non-negative, finite number of tokens."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ignore_usage(self, url: str, value: Any) -> None:
        """Count an answer whose usage is not counted; a note on stderr the first time an
        endpoint answers such usage in this process."""
        with self._lock:
            self.ignored_usage += 1
        with _noted_lock:
            first = url not in _noted
            _noted.add(url)
        if first:
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            print(
                f"note: {url} answered usage {shown}, not a whole number of tokens; "
                "such answers' tokens are not counted",
                file=sys.stderr,
            )

    def add_pooled(self, texts: int) -> None:
        """Count texts whose per-token vectors were mean-pooled."""
        with self._lock:
            self.pooled += texts

    def add(self, answer: Answer | None) -> None:
        """Count one answer (None: a call that failed)."""
        with self._lock:
            if answer is None:
                self.failed += 1
            elif answer.cached:
                self.cached += 1
            else:
                self.calls += 1
                self.prompt_tokens += answer.prompt_tokens
                self.completion_tokens += answer.completion_tokens

    def cost(self, settings: Section) -> float:
        """The price of the tokens of the calls made (cached answers cost nothing)."""
        return price(settings, self.prompt_tokens, self.completion_tokens)


def price(settings: Section, prompt_tokens: int, answer_tokens: int) -> float:
    """Tokens at an endpoint's prices per 1,000 (an embeddings endpoint prices no answer)."""
    return (
        prompt_tokens * settings.price_per_1k_input + answer_tokens * settings.price_per_1k_output
    ) / 1000


_noted: set[str] = set()
"""Endpoints whose odd usage has been noted on stderr (once per process)."""
_noted_lock = threading.Lock()


class EndpointFailed(Exception):
    """A call that failed for good, or an answer that is not what was asked for."""


def in_flight_limit(settings: Section) -> threading.BoundedSemaphore:
    """The limit of an endpoint section's requests in flight at once (`concurrency`),
    held only while a request is on the wire: a caller's threads may build prompts,
    read the cache and parse answers meanwhile."""
    return threading.BoundedSemaphore(settings.concurrency)


def usage_tokens(usage: Any) -> tuple[int, int] | None:
    """Prompt and completion tokens of an answer's `usage`; (0, 0) without one; None
    when a count is there but not a whole, non-negative, finite number."""
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        return None
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        if value is None:
            counts.append(0)
        elif _whole_count(value):
            counts.append(int(value))
        else:
            return None
    return counts[0], counts[1]


def _whole_count(value: Any) -> bool:
    """A finite, whole, non-negative number below 2**53 (not a bool, not text)."""
    return is_finite_number(value) and 0 <= value < 2**53 and value == int(value)


@contextmanager
def http_client(settings: Section) -> Iterator[httpx.Client]:
    """An HTTP client for an endpoint's settings, its API key read from the environment."""
    headers = {}
    token = api_key(settings)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    concurrency = settings.concurrency
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(
        timeout=float(settings.timeout_s), limits=limits, headers=headers, verify=_tls()
    ) as h:
        yield h


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context httpx makes for a client (certifi's authorities, or those of
    `SSL_CERT_FILE` / `SSL_CERT_DIR`), made once: loading the authorities is most of the
    cost of a client, and a retriever that embeds each query opens one per query."""
    return httpx.create_ssl_context()


def retry_policy(settings: Section) -> RetryPolicy:
    """Retries and waits after a timeout, 429 or 5xx (`llm_eval.httpcall`)."""
    return RetryPolicy(settings.retries, settings.backoff_s, settings.max_backoff_s)
