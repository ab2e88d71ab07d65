"""An OpenAI-compatible chat client: cached, retried, counted.

Every call is cached on disk under `<output>/cache/judge/`, keyed by a digest of the
endpoint, the model, the sampling settings, the prompt's name and version and the
messages; the key never holds the API key. A re-run of an unchanged gold set makes no
call. Retries, Retry-After and the breaker are the http retriever's
(`llm_eval.httpcall`). Tokens are counted from the endpoint's `usage` and priced with
the configured prices per 1,000 tokens.

Structured answers: a call that comes with a JSON schema asks for it in
`response_format`, first in OpenAI's shape (`{"type": "json_schema", ...}`: OpenAI,
vLLM, llama.cpp's llama-server, Ollama), then, when the endpoint refuses that, in
the older `{"type": "json_object", "schema": ...}` (llama-cpp-python's server), then
without it. A refusal is an error answer that names `response_format` or
`json_schema`; it is remembered per endpoint for the rest of the process, and a call
chooses its shape once it has its slot (`concurrency`), so each shape is refused at
most once per call on the wire at the time. The schema is in the cache key: answers
asked for with and without one are different answers.

Concurrency: each client lets at most its section's `concurrency` calls be on the
wire at once, however many threads ask; the cache is read and written outside that
limit. An embeddings client sends a list's batches that many at a time.

Embeddings: a server that answers a decoder model's vectors per token (llama.cpp
without pooling: a list of vectors for each input) has them mean-pooled into one
vector per input, as llama.cpp's `--pooling mean` would do on the server; the client
counts the texts it pooled so that the report can say so.

What an endpoint answers is checked here, once, for every caller: an embedding that is
not finite, all zeros, of another dimension than the model's other vectors (in this
answer, an earlier one or the cache), or an answer whose `index` values are not each
input's once fails its call (EndpointFailed: counted against max_error_rate, never a
score of 0). `usage` that is not a whole, non-negative, finite number of tokens is not
counted, with a note on stderr. An answer longer than `max_answer_bytes` fails without
being read to its end. The API key never leaves the client: every form of it that an
endpoint echoes back (as sent, JSON- or URL-escaped) is replaced by `***` in what the
callers see, and so in every message, report and cache entry.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import re
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import httpx

from llm_eval.digest import digest
from llm_eval.environment import expand_environment
from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.httpcall import ERROR_DETAIL, Breaker, CallFailed, RetryPolicy, post_json
from llm_eval.textio import load_json, write_atomic

_CACHE_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


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

    def cost(self, settings: Mapping[str, Any]) -> float:
        """The price of the tokens of the calls made (cached answers cost nothing)."""
        return price(settings, self.prompt_tokens, self.completion_tokens)


def price(settings: Mapping[str, Any], prompt_tokens: int, answer_tokens: int) -> float:
    """Tokens at an endpoint's prices per 1,000 (an embeddings endpoint prices no answer)."""
    return (
        prompt_tokens * settings["price_per_1k_input"]
        + answer_tokens * settings.get("price_per_1k_output", 0.0)
    ) / 1000


_noted: set[str] = set()
"""Endpoints whose odd usage has been noted on stderr (once per process)."""
_noted_lock = threading.Lock()


class EndpointFailed(Exception):
    """A call that failed for good, or an answer that is not what was asked for."""


def _in_flight(settings: Mapping[str, Any]) -> threading.BoundedSemaphore:
    """The limit of an endpoint section's requests in flight at once (`concurrency`),
    held only while a request is on the wire: a caller's threads may build prompts,
    read the cache and parse answers meanwhile."""
    return threading.BoundedSemaphore(int(settings.get("concurrency", 1)))


@dataclass(frozen=True, slots=True)
class ChatClient:
    """Chat completions from one endpoint and model."""

    settings: Mapping[str, Any]
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)
    in_flight: threading.BoundedSemaphore = field(init=False, repr=False, compare=False)
    """At most `concurrency` requests on the wire, however many threads ask."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_flight", _in_flight(self.settings))

    @property
    def url(self) -> str:
        """The chat completions endpoint."""
        return str(self.settings["base_url"]).rstrip("/") + "/chat/completions"

    def schema(self, schema: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The schema this client asks for: none when `response_format: false`."""
        return schema if self.settings.get("response_format", True) else None

    def key(
        self,
        prompt: str,
        messages: Sequence[Message],
        repeat: int = 0,
        schema: Mapping[str, Any] | None = None,
    ) -> str:
        """The cache key: endpoint, model, sampling, the messages, the schema asked for
        and the repeat (no secret)."""
        sampling = {k: self.settings[k] for k in ("temperature", "seed", "max_tokens")}
        asked = self.schema(schema)
        return digest(
            {
                "url": self.url,
                "model": self.settings["model"],
                "sampling": sampling,
                "prompt": prompt,
                "messages": [[m.role, m.content] for m in messages],
                "format": _CACHE_FORMAT,
                **({"repeat": repeat} if repeat else {}),
                **({"schema": asked} if asked is not None else {}),
            }
        )

    def is_cached(
        self,
        prompt: str,
        messages: Sequence[Message],
        repeat: int = 0,
        schema: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether the call cache holds this call's answer."""
        path = _entry_path(self.cache_dir, self.key(prompt, messages, repeat, schema))
        return path is not None and path.is_file()

    def cached_answer(
        self,
        prompt: str,
        messages: Sequence[Message],
        repeat: int = 0,
        schema: Mapping[str, Any] | None = None,
    ) -> Answer | None:
        """This call's cached answer, with the tokens the endpoint counted for it."""
        key = self.key(prompt, messages, repeat, schema)
        return _answer(_read_entry(self.cache_dir, key))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A connection pool sized to the concurrency, with the key read from the environment."""
        with _http(self.settings) as http:
            breaker = Breaker(max(3, int(self.settings["concurrency"])))
            yield Session(self, http, breaker, secret_forms(_api_key(self.settings)))


@dataclass(frozen=True, slots=True)
class Session:
    """An open client: asks, or answers from the cache."""

    client: ChatClient
    http: httpx.Client
    breaker: Breaker
    secrets: tuple[str, ...] = ()
    """Every form of the API key an answer may echo (see `secret_forms`)."""

    def ask(
        self,
        prompt: str,
        messages: Sequence[Message],
        repeat: int = 0,
        schema: Mapping[str, Any] | None = None,
    ) -> Answer:
        """The model's answer (from the cache when it was asked before); EndpointFailed.
        Each `repeat` is a call of its own, to see how steady the model is. With a
        `schema`, the answer is asked for as JSON in that shape where the endpoint can."""
        schema = self.client.schema(schema)
        key = self.client.key(prompt, messages, repeat, schema)
        cached = self._cached(key)
        if cached is not None:
            self.client.usage.add(cached)
            return cached
        try:
            # The shape to ask in is read once the call has its slot, so that a call
            # waiting behind a refused one asks in the shape that one found.
            with self.client.in_flight:
                answer = self._call(messages, prompt, schema)
        except EndpointFailed:
            self.client.usage.add(None)
            raise
        self.client.usage.add(answer)
        self._store(key, answer)
        return answer

    def _call(
        self, messages: Sequence[Message], prompt: str, schema: Mapping[str, Any] | None
    ) -> Answer:
        settings = self.client.settings
        payload = {
            "model": settings["model"],
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": settings["temperature"],
            "seed": settings["seed"],
            "max_tokens": settings["max_tokens"],
        }
        shape = "none" if schema is None else _first_accepted(self.client.url)
        while True:
            asked = dict(payload)
            if shape != "none":
                assert schema is not None
                asked["response_format"] = response_format(shape, prompt, schema)
            try:
                response, _ = post_json(
                    self.http,
                    self.client.url,
                    asked,
                    _policy(settings),
                    self.breaker,
                    _refuses_format if shape != "none" else None,
                    int(settings.get("max_answer_bytes", MAX_CHAT_BYTES)),
                )
            except CallFailed as failure:
                if shape == "none" or not _FORMAT_WORDS.search(failure.detail):
                    raise EndpointFailed(scrub(str(failure), self.secrets)) from None
                shape = _refused(self.client.url, shape)
                continue
            answer = _parse_completion(response.content, self.secrets)
            tokens = _usage_tokens(answer.usage)
            if tokens is None:
                self.client.usage.ignore_usage(self.client.url, answer.usage)
                tokens = (0, 0)
            return replace(
                answer,
                prompt_tokens=tokens[0],
                completion_tokens=tokens[1],
                response_format=shape,
                usage=None,
            )

    def _cached(self, key: str) -> Answer | None:
        return _answer(_read_entry(self.client.cache_dir, key))

    def _store(self, key: str, answer: Answer) -> None:
        entry = {
            "content": answer.content,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "response_format": answer.response_format,
        }
        _write_entry(self.client.cache_dir, key, entry)


RESPONSE_FORMATS = ("json_schema", "json_object", "none")
"""The shapes a schema is asked for in, in the order they are tried."""

_FORMAT_WORDS = re.compile(r"response_format|json_schema", re.I)
_accepted: dict[str, str] = {}
"""Per chat endpoint URL, the first shape it has not refused (this process)."""
_accepted_lock = threading.Lock()


def response_format(shape: str, name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `response_format` field asking for JSON in `schema`, in the shape named."""
    if shape == "json_schema":
        label = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
        return {
            "type": "json_schema",
            "json_schema": {"name": label, "schema": dict(schema), "strict": True},
        }
    return {"type": "json_object", "schema": dict(schema)}


def _first_accepted(url: str) -> str:
    with _accepted_lock:
        return _accepted.get(url, RESPONSE_FORMATS[0])


def _refused(url: str, shape: str) -> str:
    """Remember that the endpoint refused `shape`; the next shape to try."""
    following = RESPONSE_FORMATS[RESPONSE_FORMATS.index(shape) + 1]
    with _accepted_lock:
        known = _accepted.get(url, RESPONSE_FORMATS[0])
        if RESPONSE_FORMATS.index(following) > RESPONSE_FORMATS.index(known):
            _accepted[url] = following
    return following


def _refuses_format(response: httpx.Response) -> bool:
    """An error answer about the response_format field: asking again will not help."""
    return bool(_FORMAT_WORDS.search(response.text[:ERROR_DETAIL]))


MAX_CHAT_BYTES = 1 << 20
"""The longest chat answer read by default (`max_answer_bytes`)."""
MAX_EMBEDDING_BYTES = 64 << 20
"""The longest embeddings answer read by default (a batch of per-token vectors is large)."""


def _api_key(settings: Mapping[str, Any]) -> str | None:
    api_key = settings.get("api_key")
    if not api_key:
        return None
    return expand_environment(api_key, os.environ, "the api_key setting", "api_key")


def secret_forms(key: str | None) -> tuple[str, ...]:
    """The forms in which an answer may echo the key: as sent, JSON-, URL- and
    HTML-escaped, as a repr; longest first. None for a key too short to tell apart
    from ordinary text (under 4 characters)."""
    if key is None or len(key.strip()) < 4:
        return ()
    forms = {
        key,
        key.strip(),
        f"Bearer {key}",
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key, safe=""),
        html.escape(key),
        repr(key)[1:-1],
    }
    return tuple(sorted(forms - {""}, key=len, reverse=True))


def scrub(text: str, secrets: Sequence[str]) -> str:
    """The text with every form of the key replaced by `***`."""
    for form in secrets:
        text = text.replace(form, "***")
    return text


def _usage_tokens(usage: Any) -> tuple[int, int] | None:
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
def _http(settings: Mapping[str, Any]) -> Iterator[httpx.Client]:
    """An HTTP client for an endpoint's settings, its API key read from the environment."""
    headers = {}
    token = _api_key(settings)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    concurrency = int(settings["concurrency"])
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(timeout=float(settings["timeout_s"]), limits=limits, headers=headers) as h:
        yield h


def _policy(settings: Mapping[str, Any]) -> RetryPolicy:
    return RetryPolicy(settings["retries"], settings["backoff_s"], settings["max_backoff_s"])


@dataclass(frozen=True, slots=True)
class EmbeddingClient:
    """Embeddings from one endpoint and model, each text's vector cached on disk."""

    settings: Mapping[str, Any]
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)
    dimension: Dimension = field(default_factory=lambda: Dimension())
    in_flight: threading.BoundedSemaphore = field(init=False, repr=False, compare=False)
    """At most `concurrency` batches on the wire, however many threads embed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_flight", _in_flight(self.settings))

    @property
    def url(self) -> str:
        """The embeddings endpoint."""
        return str(self.settings["base_url"]).rstrip("/") + "/embeddings"

    def key(self, text: str) -> str:
        """The cache key of one text's vector."""
        return digest(
            {
                "url": self.url,
                "model": self.settings["model"],
                "text": text,
                "format": _CACHE_FORMAT,
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
        size = int(self.settings["batch_size"])
        batches = [missing[start : start + size] for start in range(0, len(missing), size)]
        if batches:
            workers = min(len(batches), int(self.settings["concurrency"]))
            with (
                _http(self.settings) as http,
                ThreadPoolExecutor(workers, thread_name_prefix="llm-eval-embed") as pool,
            ):
                breaker = Breaker(max(3, workers))
                secrets = secret_forms(_api_key(self.settings))
                found = pool.map(lambda b: self._call(http, breaker, b, secrets), batches)
                for batch, got in zip(batches, found, strict=True):
                    vectors.update(zip(batch, got, strict=True))
        for text in texts:
            self.dimension.check(len(vectors[text]))
        return [vectors[t] for t in texts]

    def _call(
        self, http: httpx.Client, breaker: Breaker, batch: list[str], secrets: Sequence[str]
    ) -> list[list[float]]:
        payload = {"model": self.settings["model"], "input": batch}
        cap = int(self.settings.get("max_answer_bytes", MAX_EMBEDDING_BYTES))
        try:
            with self.in_flight:
                response, _ = post_json(
                    http, self.url, payload, _policy(self.settings), breaker, None, cap
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
        counted = _usage_tokens(
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
        return cached_vector(_read_entry(self.cache_dir, self.key(text)))

    def _store(self, text: str, vector: list[float]) -> None:
        _write_entry(self.cache_dir, self.key(text), vector)


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
    def settings(self) -> Mapping[str, Any]:
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


def _entry_path(folder: Path | None, key: str) -> Path | None:
    return None if folder is None else folder / key[:2] / f"{key}.json"


def _answer(entry: Any) -> Answer | None:
    """A cached entry as an answer; None when missing or damaged (asked again, rewritten)."""
    try:
        return Answer(
            str(entry["content"]),
            int(entry["prompt_tokens"]),
            int(entry["completion_tokens"]),
            cached=True,
            response_format=str(entry.get("response_format", "none")),
        )
    except (LookupError, ValueError, TypeError, AttributeError):
        return None


def _read_entry(folder: Path | None, key: str) -> Any:
    """A cached entry, or None when it is missing or not JSON."""
    path = _entry_path(folder, key)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_entry(folder: Path | None, key: str, entry: Any) -> None:
    """Store an entry atomically; the cache only saves money, so a full disk is no error."""
    path = _entry_path(folder, key)
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(entry, ensure_ascii=False))


def _parse_completion(content: bytes, secrets: Sequence[str] = ()) -> Answer:
    """The first choice's text (every form of the key scrubbed) and the usage (as it
    came) of an OpenAI chat completion."""
    try:
        payload = load_json(content.decode("utf-8", errors="replace"), "the judge's answer")
        text = payload["choices"][0]["message"]["content"]
        usage = payload.get("usage")
    except (InputError, LookupError, TypeError, ValueError, AttributeError) as exc:
        raise EndpointFailed(f"malformed answer: {type(exc).__name__}") from None
    if not isinstance(text, str):
        raise EndpointFailed("malformed answer: no message content")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EndpointFailed(
            "malformed answer: the content holds a lone UTF-16 surrogate"
        ) from None
    return Answer(_scrub_content(text, secrets), 0, 0, usage=usage)


def _scrub_content(text: str, secrets: Sequence[str]) -> str:
    """The content without the key: its written forms replaced, and, when the content is
    JSON whose strings hold the key once decoded (escaped as `\\u0073k-...`), the JSON
    written again with the key replaced."""
    text = scrub(text, secrets)
    if not secrets or "\\" not in text:
        return text
    try:
        value = json.loads(text)
        cleaned = _scrub_value(value, secrets)
    except (ValueError, RecursionError):
        return text
    return text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def _scrub_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, list):
        return [_scrub_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secrets): _scrub_value(v, secrets) for k, v in value.items()}
    return value
