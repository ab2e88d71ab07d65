"""A search service over HTTP: one POST a query, JSON results back.

    retriever:
      kind: http
      url: https://search.internal/v1/search
      body: {q: "${query}", size: "${top_k}"}       # default {query: …, top_k: …}
      headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
      results_path: data.hits                       # default: the top-level list, or `results`
      fields: {doc_id: id, score: _score, text: _source.text}
      answer_path: data.answer                      # default: the response's `answer`

The body's string values may hold `${query}` and `${top_k}`; a value that is exactly
`${top_k}` becomes a number. Header values may hold `${ENV_VAR}`, read from the
environment when the retriever is built, so secrets stay out of config files. Header
values are never shown: not in errors, reports or logs, and the cache key uses the
header names only.

Queries run `concurrency` at a time over one connection pool. A connection error, a
timeout, 429 or a 5xx answer is retried up to `retries` times, after a wait drawn
uniformly from zero to `backoff_s * 2**attempt` ("full jitter"), or as long as the
server's `Retry-After` asks; both capped by `max_backoff_s`. Other answers are not
retried. A query that still fails is recorded with its error (`timeout`, `http 503`,
`connection refused`, `malformed JSON: …`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from llm_eval.environment import expand_environment, line_break
from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.httpcall import Breaker, CallFailed, RetryPolicy, post_json
from llm_eval.retrievers import RetrieverContext, RetrieverKind
from llm_eval.retrievers.pool import (
    CACHE_KEY,
    RESULT_FIELDS,
    Hits,
    PooledRetriever,
    QueryFailed,
    Search,
    check_concurrency,
    ranked_result,
    resolved_cache_key,
)
from llm_eval.runs import RankedResult
from llm_eval.settings import Setting, whole_check
from llm_eval.textio import load_json

PLACEHOLDERS = ("query", "top_k")
DEFAULT_BODY: Mapping[str, Any] = {"query": "${query}", "top_k": "${top_k}"}
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP token (RFC 9110)."""


# --- settings -------------------------------------------------------------------------


def check_url(value: Any) -> str | None:
    """An http:// or https:// URL, on one line."""
    if not isinstance(value, str) or not re.match(r"https?://[^/\s]", value):
        return f"must be an http:// or https:// URL, got {value!r}"
    return line_break(value)


def check_body(value: Any) -> str | None:
    """A JSON object whose strings use only the known placeholders."""
    if not isinstance(value, dict):
        return f"must be a mapping (the JSON object sent), got {value!r}"
    for text in _strings(value):
        for name in _PLACEHOLDER.findall(text):
            if name not in PLACEHOLDERS:
                return f"unknown placeholder ${{{name}}} (valid: ${{query}}, ${{top_k}})"
    return None


def check_headers(value: Any) -> str | None:
    """Header names to string values, which may name environment variables as ${NAME}."""
    if not isinstance(value, dict):
        return f"must be a mapping of header names to values, got {value!r}"
    for name, text in value.items():
        if not _HEADER_NAME.fullmatch(name):
            return f"{name!r} is not a valid header name"
        if not isinstance(text, str):
            return f"the value of {name} must be a string"  # the value itself is not shown
        if any(not _ENV_NAME.fullmatch(ref) for ref in _PLACEHOLDER.findall(text)):
            return f"the value of {name} may only use ${{ENV_VAR}} names (letters, digits, _)"
        if problem := line_break(text):
            return f"the value of {name} {problem}"
    return None


def check_results_path(value: Any) -> str | None:
    """null, or keys joined by dots."""
    if value is None or (isinstance(value, str) and all(value.split("."))):
        return None
    return f"must be null or keys joined by dots (e.g. data.hits), got {value!r}"


def check_fields(value: Any) -> str | None:
    """Where each result field is in a hit: a key or a dot path."""
    if not isinstance(value, dict):
        return f"must be a mapping like {{doc_id: id, score: _score}}, got {value!r}"
    for name, path in value.items():
        if name not in RESULT_FIELDS:
            return f"unknown field {name!r} (valid: {', '.join(RESULT_FIELDS)})"
        if check_results_path(path) is not None or path is None:
            return f"{name} must be a key or keys joined by dots, got {path!r}"
    return None


def _check_seconds(value: Any, positive: bool) -> str | None:
    if not is_finite_number(value) or value < 0 or (positive and value == 0):
        return f"must be a number of seconds {'> 0' if positive else '>= 0'}, got {value!r}"
    return None


def check_timeout(value: Any) -> str | None:
    """Seconds > 0."""
    return _check_seconds(value, positive=True)


def check_wait(value: Any) -> str | None:
    """Seconds >= 0."""
    return _check_seconds(value, positive=False)


check_retries = whole_check(0, 10)
"""A whole number from 0 to 10."""


SETTINGS: Mapping[str, Setting] = {
    "url": Setting(
        None,
        check_url,
        "The search endpoint; each query is POSTed to it (${VAR:-default} reads the environment).",
        True,
    ),
    "body": Setting(
        dict(DEFAULT_BODY),
        check_body,
        "The JSON object sent; strings may hold ${query} and ${top_k}.",
        environ=False,
    ),
    "headers": Setting(
        {},
        check_headers,
        "Request headers; values may hold ${ENV_VAR} (read at run time).",
        environ=False,
    ),
    "results_path": Setting(
        None,
        check_results_path,
        "Dot path to the list of hits; default: the answer itself when it is a list, "
        "else its `results`.",
    ),
    "answer_path": Setting(
        None,
        check_results_path,
        "Dot path to the answer the RAG system generated (for faithfulness and answer "
        "relevance); default: the response's `answer`, when it is an object that has one.",
    ),
    "fields": Setting(
        {},
        check_fields,
        "Where doc_id, score, text, document and page are in a hit (default: those keys).",
    ),
    "concurrency": Setting(8, check_concurrency, "Queries in flight at once."),
    "timeout_s": Setting(30.0, check_timeout, "Seconds to connect, and to wait for each read."),
    "retries": Setting(3, check_retries, "Retries after a connection error, timeout, 429 or 5xx."),
    "backoff_s": Setting(0.5, check_wait, "The first retry waits up to this long; doubles."),
    "max_backoff_s": Setting(30.0, check_wait, "The longest wait, also for Retry-After."),
    "cache_key": CACHE_KEY,
}


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The checked settings of the http kind (`SETTINGS` says what each one means)."""

    url: str
    body: Mapping[str, object]
    """The JSON object sent, its `${query}` and `${top_k}` not filled in yet."""
    headers: Mapping[str, str] = field(repr=False)
    """Header values as written: their `${ENV_VAR}` are read when the retriever is built."""
    results_path: str | None
    answer_path: str | None
    fields: Mapping[str, str]
    concurrency: int
    timeout_s: float
    retries: int
    backoff_s: float
    max_backoff_s: float
    cache_key: str | None
    """As written: its `${ENV_VAR}` are read when the cache's key is made."""

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> HttpSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present)."""
        return cls(
            url=values["url"],
            body=values["body"],
            headers=values["headers"],
            results_path=values["results_path"],
            answer_path=values["answer_path"],
            fields=values["fields"],
            concurrency=values["concurrency"],
            timeout_s=float(values["timeout_s"]),
            retries=values["retries"],
            backoff_s=float(values["backoff_s"]),
            max_backoff_s=float(values["max_backoff_s"]),
            cache_key=values["cache_key"],
        )


# --- requests and answers (pure) ------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def render_body(template: Any, query: str, top_k: int) -> Any:
    """The template with `${query}` and `${top_k}` filled in; a bare `${top_k}` is a number."""
    if isinstance(template, dict):
        return {key: render_body(item, query, top_k) for key, item in template.items()}
    if isinstance(template, list):
        return [render_body(item, query, top_k) for item in template]
    if not isinstance(template, str):
        return template
    if template == "${top_k}":
        return top_k
    filled = {"query": query, "top_k": str(top_k)}
    return _PLACEHOLDER.sub(lambda m: filled[m.group(1)], template)


def resolve_headers(templates: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Header values with `${NAME}` replaced from the environment.

    A variable that is not set, or a value that is not one line (a line break would
    add a header of its own), raises InputError naming the header and the variable
    (never the value).
    """
    values = {}
    for name, template in templates.items():
        value = expand_environment(template, environ, f"the {name} header", "headers")
        if problem := line_break(value):
            raise InputError(f"the value of {name} {problem}", key="headers")
        values[name] = value
    return values


def dig(value: Any, path: str) -> Any:
    """The value at a dot path in nested objects, or None when a key is missing."""
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def hit_list(payload: Any, results_path: str | None) -> list[Any]:
    """The list of hits in a decoded answer; QueryFailed when it is not there."""
    if results_path is None:
        hits = payload if isinstance(payload, list) else dig(payload, "results")
        where = "a list or an object with `results`"
    else:
        hits = dig(payload, results_path)
        where = f"a list at `{results_path}`"
    if not isinstance(hits, list):
        raise QueryFailed(f"malformed response: expected {where}")
    return hits


def parse_response(
    content: bytes,
    results_path: str | None,
    fields: Mapping[str, str],
    answer_path: str | None = None,
    latency_ms: float = 0.0,
) -> Hits:
    """The ranked results and the generated answer in a response body; QueryFailed when
    they are not as configured (an answer must be text; absent, there is none)."""
    payload = _decoded(content)
    answer = dig(payload, answer_path or "answer")
    if answer is not None and not isinstance(answer, str):
        where = answer_path or "answer"
        raise QueryFailed(f"malformed response: `{where}` must be the answer as text")
    return Hits(_hits(payload, results_path, fields), latency_ms, answer)


def _decoded(content: bytes) -> Any:
    try:
        return load_json(content.decode("utf-8"), "the response")
    except UnicodeDecodeError:
        raise QueryFailed("malformed JSON: not UTF-8") from None
    except InputError as exc:  # invalid, nested too deeply, a lone surrogate
        raise QueryFailed(f"malformed JSON: {exc.reason.removeprefix('invalid JSON: ')}") from None


def _hits(
    payload: Any, results_path: str | None, fields: Mapping[str, str]
) -> tuple[RankedResult, ...]:
    results = []
    for index, hit in enumerate(hit_list(payload, results_path)):
        if not isinstance(hit, dict):
            raise QueryFailed(f"malformed result: hits[{index}] is not an object")
        results.append(ranked_result(hit_getter(hit, fields), f"hits[{index}]", list(hit)))
    return tuple(results)


def hit_getter(hit: Mapping[str, Any], fields: Mapping[str, str]) -> Callable[[str], Any]:
    return lambda name: dig(hit, fields.get(name, name))


@dataclass(frozen=True, slots=True)
class HttpSearcher:
    """POSTs one query to the service, with retries."""

    url: str
    body: Mapping[str, object]
    headers: Mapping[str, str] = field(repr=False)
    """Resolved values, which may be secrets: never shown."""
    results_path: str | None
    fields: Mapping[str, str]
    answer_path: str | None
    concurrency: int
    timeout_s: float
    retries: int
    backoff_s: float
    max_backoff_s: float

    @contextmanager
    def session(self) -> Iterator[Search]:
        """One connection pool, sized to the concurrency, shared by the threads."""
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        breaker = Breaker(max(3, self.concurrency))
        with httpx.Client(timeout=self.timeout_s, limits=limits, headers=self.headers) as client:
            yield lambda query, top_k: self.search(client, query, top_k, breaker)

    def search(self, client: httpx.Client, query: str, top_k: int, breaker: Breaker) -> Hits:
        """The service's results for one query, retrying what may pass; QueryFailed if not."""
        policy = RetryPolicy(self.retries, self.backoff_s, self.max_backoff_s)
        try:
            response, latency_ms = post_json(
                client, self.url, render_body(self.body, query, top_k), policy, breaker
            )
        except CallFailed as failure:
            raise QueryFailed(str(failure)) from None
        return parse_response(
            response.content, self.results_path, self.fields, self.answer_path, latency_ms
        )


# --- the kind -------------------------------------------------------------------------


def build(settings: HttpSettings, context: RetrieverContext) -> PooledRetriever:
    """The retriever for these settings, with header secrets read from the environment."""
    headers = resolve_headers(settings.headers, os.environ)
    searcher = HttpSearcher(
        url=settings.url,
        body=settings.body,
        headers=headers,
        results_path=settings.results_path,
        fields=settings.fields,
        answer_path=settings.answer_path,
        concurrency=settings.concurrency,
        timeout_s=settings.timeout_s,
        retries=settings.retries,
        backoff_s=settings.backoff_s,
        max_backoff_s=settings.max_backoff_s,
    )
    identity = {
        "kind": "http",
        "url": settings.url,
        "body": settings.body,
        "headers": sorted(headers),  # names only: the values may be secrets
        "results_path": settings.results_path,
        "fields": settings.fields,
        **({"answer_path": settings.answer_path} if settings.answer_path else {}),
        # What the service's URL and settings cannot show (a new index behind the same
        # URL) reaches the cache through the user's cache_key.
        "cache_key": resolved_cache_key(settings.cache_key, os.environ),
    }
    return PooledRetriever(searcher, settings.concurrency, identity)


KIND = RetrieverKind(
    name="http",
    description="A search service over HTTP (POST a query, JSON results back).",
    record=HttpSettings.from_checked,
    build=build,
    settings=SETTINGS,
)
