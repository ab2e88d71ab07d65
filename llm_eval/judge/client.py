"""An OpenAI-compatible chat client: cached, retried, counted.

Every call is cached on disk under `<output>/cache/judge/`, keyed by a digest of the
endpoint, the model, the sampling settings, the prompt's name and version and the
messages; the key never holds the API key. A re-run of an unchanged gold set makes no
call. Retries, Retry-After and the breaker are the http retriever's
(`llm_eval.httpcall`). Tokens are counted from the endpoint's `usage` and priced with
the configured prices per 1,000 tokens.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from llm_eval.errors import InputError
from llm_eval.fingerprint import digest
from llm_eval.httpcall import Breaker, CallFailed, RetryPolicy, post_json
from llm_eval.retrievers.pool import expand_environment
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


@dataclass
class Usage:
    """Calls, cache hits and tokens of a run (thread-safe counters)."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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

    def cost(self, price_in: float, price_out: float) -> float:
        """The price of the tokens of the calls made (cached answers cost nothing)."""
        return (self.prompt_tokens * price_in + self.completion_tokens * price_out) / 1000


class JudgeFailed(Exception):
    """A call that failed for good, or an answer that is not what was asked for."""


@dataclass(frozen=True, slots=True)
class ChatClient:
    """Chat completions from one endpoint and model."""

    settings: Mapping[str, Any]
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)

    @property
    def url(self) -> str:
        """The chat completions endpoint."""
        return str(self.settings["base_url"]).rstrip("/") + "/chat/completions"

    def key(self, prompt: str, messages: Sequence[Message], repeat: int = 0) -> str:
        """The cache key: endpoint, model, sampling, the messages and the repeat (no secret)."""
        sampling = {k: self.settings[k] for k in ("temperature", "seed", "max_tokens")}
        return digest(
            {
                "url": self.url,
                "model": self.settings["model"],
                "sampling": sampling,
                "prompt": prompt,
                "messages": [[m.role, m.content] for m in messages],
                "format": _CACHE_FORMAT,
                **({"repeat": repeat} if repeat else {}),
            }
        )

    def is_cached(self, prompt: str, messages: Sequence[Message], repeat: int = 0) -> bool:
        """Whether the call cache holds this call's answer."""
        path = _entry_path(self.cache_dir, self.key(prompt, messages, repeat))
        return path is not None and path.is_file()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A connection pool sized to the concurrency, with the key read from the environment."""
        headers = {}
        api_key = self.settings.get("api_key")
        if api_key:
            token = expand_environment(api_key, os.environ, "the judge's api_key", "api_key")
            headers["Authorization"] = f"Bearer {token}"
        concurrency = int(self.settings["concurrency"])
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        timeout = float(self.settings["timeout_s"])
        with httpx.Client(timeout=timeout, limits=limits, headers=headers) as http:
            yield Session(self, http, Breaker(max(3, concurrency)))


@dataclass(frozen=True, slots=True)
class Session:
    """An open client: asks, or answers from the cache."""

    client: ChatClient
    http: httpx.Client
    breaker: Breaker

    def ask(self, prompt: str, messages: Sequence[Message], repeat: int = 0) -> Answer:
        """The model's answer (from the cache when it was asked before); JudgeFailed.
        Each `repeat` is a call of its own, to see how steady the model is."""
        key = self.client.key(prompt, messages, repeat)
        cached = self._cached(key)
        if cached is not None:
            self.client.usage.add(cached)
            return cached
        try:
            answer = self._call(messages)
        except JudgeFailed:
            self.client.usage.add(None)
            raise
        self.client.usage.add(answer)
        self._store(key, answer)
        return answer

    def _call(self, messages: Sequence[Message]) -> Answer:
        settings = self.client.settings
        payload = {
            "model": settings["model"],
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": settings["temperature"],
            "seed": settings["seed"],
            "max_tokens": settings["max_tokens"],
        }
        policy = RetryPolicy(settings["retries"], settings["backoff_s"], settings["max_backoff_s"])
        try:
            response, _ = post_json(self.http, self.client.url, payload, policy, self.breaker)
        except CallFailed as failure:
            raise JudgeFailed(str(failure)) from None
        return _parse_completion(response.content)

    def _path(self, key: str) -> Path | None:
        return _entry_path(self.client.cache_dir, key)

    def _cached(self, key: str) -> Answer | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return Answer(
                str(entry["content"]),
                int(entry["prompt_tokens"]),
                int(entry["completion_tokens"]),
                cached=True,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or damaged: asked again, and rewritten

    def _store(self, key: str, answer: Answer) -> None:
        path = self._path(key)
        if path is None:
            return
        entry = {
            "content": answer.content,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
        }
        with contextlib.suppress(OSError):  # the cache only saves money; a full disk is no error
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(entry, ensure_ascii=False))


def _entry_path(folder: Path | None, key: str) -> Path | None:
    return None if folder is None else folder / key[:2] / f"{key}.json"


def _parse_completion(content: bytes) -> Answer:
    """The first choice's text and the usage of an OpenAI chat completion."""
    try:
        payload = load_json(content.decode("utf-8", errors="replace"), "the judge's answer")
        text = payload["choices"][0]["message"]["content"]
        usage = payload.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
    except (InputError, LookupError, TypeError, ValueError, AttributeError) as exc:
        raise JudgeFailed(f"malformed answer: {type(exc).__name__}") from None
    if not isinstance(text, str):
        raise JudgeFailed("malformed answer: no message content")
    return Answer(text, prompt_tokens, completion_tokens)
