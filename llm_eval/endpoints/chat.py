"""Chat completions from one OpenAI-compatible endpoint: cached, retried, counted.

Every call is cached on disk (`llm_eval.endpoints.cache`) under `<output>/cache/judge/`.
Retries, Retry-After and the breaker are the http retriever's (`llm_eval.httpcall`).

Structured answers: a call that comes with a JSON schema asks for it in
`response_format`, first in OpenAI's shape (`{"type": "json_schema", ...}`: OpenAI,
vLLM, llama.cpp's llama-server, Ollama), then, when the endpoint refuses that, in
the older `{"type": "json_object", "schema": ...}` (llama-cpp-python's server), then
without it. A refusal is an error answer that names `response_format` or
`json_schema`; it is remembered per endpoint for the rest of the process, and a call
chooses its shape once it has its slot (`concurrency`), so each shape is refused at
most once per call on the wire at the time. The schema is in the cache key: answers
asked for with and without one are different answers.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from llm_eval.digest import digest
from llm_eval.endpoints.cache import CACHE_FORMAT, entry_path, read_entry, write_entry
from llm_eval.endpoints.client import (
    Answer,
    EndpointFailed,
    Usage,
    http_client,
    in_flight_limit,
    retry_policy,
    usage_tokens,
)
from llm_eval.endpoints.secret import api_key, scrub, scrub_content, secret_forms
from llm_eval.endpoints.settings import ChatSettings
from llm_eval.errors import InputError
from llm_eval.httpcall import ERROR_DETAIL, Breaker, CallFailed, post_json
from llm_eval.textio import load_json


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class ChatClient:
    """Chat completions from one endpoint and model."""

    settings: ChatSettings
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)
    in_flight: threading.BoundedSemaphore = field(init=False, repr=False, compare=False)
    """At most `concurrency` requests on the wire, however many threads ask."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_flight", in_flight_limit(self.settings))

    @property
    def url(self) -> str:
        """The chat completions endpoint."""
        return self.settings.base_url.rstrip("/") + "/chat/completions"

    def schema(self, schema: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The schema this client asks for: none when `response_format: false`."""
        return schema if self.settings.response_format else None

    def key(
        self,
        prompt: str,
        messages: Sequence[Message],
        repeat: int = 0,
        schema: Mapping[str, Any] | None = None,
    ) -> str:
        """The cache key: endpoint, model, sampling, the messages, the schema asked for
        and the repeat (no secret)."""
        settings = self.settings
        sampling = {
            "temperature": settings.temperature,
            "seed": settings.seed,
            "max_tokens": settings.max_tokens,
        }
        asked = self.schema(schema)
        return digest(
            {
                "url": self.url,
                "model": settings.model,
                "sampling": sampling,
                "prompt": prompt,
                "messages": [[m.role, m.content] for m in messages],
                "format": CACHE_FORMAT,
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
        path = entry_path(self.cache_dir, self.key(prompt, messages, repeat, schema))
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
        return _answer(read_entry(self.cache_dir, key))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A connection pool sized to the concurrency, with the key read from the environment."""
        with http_client(self.settings) as http:
            breaker = Breaker(max(3, self.settings.concurrency))
            yield Session(self, http, breaker, secret_forms(api_key(self.settings)))


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
            "model": settings.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": settings.temperature,
            "seed": settings.seed,
            "max_tokens": settings.max_tokens,
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
                    retry_policy(settings),
                    self.breaker,
                    _refuses_format if shape != "none" else None,
                    settings.max_answer_bytes,
                )
            except CallFailed as failure:
                if shape == "none" or not _FORMAT_WORDS.search(failure.detail):
                    raise EndpointFailed(scrub(str(failure), self.secrets)) from None
                shape = _refused(self.client.url, shape)
                continue
            answer = _parse_completion(response.content, self.secrets)
            tokens = usage_tokens(answer.usage)
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
        return _answer(read_entry(self.client.cache_dir, key))

    def _store(self, key: str, answer: Answer) -> None:
        entry = {
            "content": answer.content,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "response_format": answer.response_format,
        }
        write_entry(self.client.cache_dir, key, entry)


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
    return Answer(scrub_content(text, secrets), 0, 0, usage=usage)
