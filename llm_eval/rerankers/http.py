"""An http reranker: a rerank service, one POST per query with its candidates' texts.

    reranker:
      type: http
      url: http://127.0.0.1:8080/v1/rerank     # llama.cpp's server, Cohere, Jina, vLLM
      model: bge-reranker-v2-m3                # optional: sent as `model` when given

The request and answer are those most rerank services speak:
`{"query": …, "documents": [texts], "top_n": n}` in, `{"results": [{"index": i,
"relevance_score": s}, …]}` out. Other names are mapped by `fields`, as the http
retriever's are; text-embeddings-inference's `/rerank`, which takes `texts` and
answers a bare list of `{index, score}`, is

    fields: {documents: texts, top_n: null, relevance_score: score}

(`top_n: null` leaves it out of the request; `results` is a dot path, and a bare list
answer is read as the results). A candidate the answer gives no finite score fails
(`malformed response: no score for document 3`); retries and errors are the http
retriever's. Each score's cost is the request's wall time shared by its documents.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.httpcall import Breaker, CallFailed, RetryPolicy, post_json
from llm_eval.rerankers import RerankerType, Scored, ScorePairs
from llm_eval.retrievers import http as http_kind
from llm_eval.retrievers.pool import QueryFailed
from llm_eval.settings import Setting
from llm_eval.textio import load_json

FIELDS: Mapping[str, str | None] = {
    "query": "query",
    "documents": "documents",
    "top_n": "top_n",
    "results": "results",
    "index": "index",
    "relevance_score": "relevance_score",
}
"""Each name's default; `top_n` may be null (not sent)."""


def check_fields(value: Any) -> str | None:
    """Known names, each mapped to a key (a dot path in the answer); `top_n` may be null."""
    if not isinstance(value, dict):
        return f"must be a mapping like {{documents: texts, relevance_score: score}}, got {value!r}"
    for name, path in value.items():
        if name not in FIELDS:
            return f"unknown field {name!r} (valid: {', '.join(FIELDS)})"
        if path is None and name == "top_n":
            continue
        if not isinstance(path, str) or not all(path.split(".")):
            return f"{name} must be a key or keys joined by dots, got {path!r}"
    return None


def _optional_text(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return None
    return f"must be text, got {value!r}"


SETTINGS: Mapping[str, Setting] = {
    "url": http_kind.SETTINGS["url"],
    "model": Setting(None, _optional_text, "Sent as `model` when given."),
    "fields": Setting(
        {},
        check_fields,
        "Other names for query, documents, top_n, results, index, relevance_score.",
    ),
    "timeout_s": http_kind.SETTINGS["timeout_s"],
    "retries": http_kind.SETTINGS["retries"],
    "backoff_s": http_kind.SETTINGS["backoff_s"],
    "max_backoff_s": http_kind.SETTINGS["max_backoff_s"],
}


@dataclass(frozen=True, slots=True)
class HttpRerankSettings:
    """The checked settings of the http reranker."""

    url: str
    model: str | None
    fields: Mapping[str, str | None]
    """Every name of FIELDS, the configured ones over the defaults."""
    timeout_s: float
    retries: int
    backoff_s: float
    max_backoff_s: float

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> HttpRerankSettings:
        """The record of checked settings."""
        return cls(
            url=values["url"],
            model=values["model"],
            fields={**FIELDS, **values["fields"]},
            timeout_s=float(values["timeout_s"]),
            retries=values["retries"],
            backoff_s=float(values["backoff_s"]),
            max_backoff_s=float(values["max_backoff_s"]),
        )


@dataclass(frozen=True, slots=True)
class HttpReranker:
    """Scores a query's documents with one request."""

    settings: HttpRerankSettings

    @property
    def identity(self) -> Mapping[str, Any]:
        """The service and the names it speaks."""
        settings = self.settings
        return {
            "type": "http",
            "url": settings.url,
            "model": settings.model,
            "fields": settings.fields,
        }

    @contextmanager
    def session(self) -> Iterator[ScorePairs]:
        """One connection pool and breaker for the run."""
        breaker = Breaker(3)
        with httpx.Client(timeout=self.settings.timeout_s) as client:
            yield lambda query, texts: self.score(client, breaker, query, texts)

    def score(
        self, client: httpx.Client, breaker: Breaker, query: str, texts: Sequence[str]
    ) -> list[Scored]:
        """Every text's score, or each its failure."""
        if not texts:
            return []
        settings = self.settings
        policy = RetryPolicy(settings.retries, settings.backoff_s, settings.max_backoff_s)
        try:
            response, latency_ms = post_json(
                client, settings.url, self.body(query, texts), policy, breaker
            )
            scores = self.scores(response.content, len(texts))
        except CallFailed as failure:
            return [Scored(None, 0.0, str(failure))] * len(texts)
        except QueryFailed as failure:
            return [Scored(None, 0.0, str(failure))] * len(texts)
        share = latency_ms / len(texts)
        return [Scored(s, share) for s in scores]

    def body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        """The request: the query, the texts, top_n (all of them) and the model."""
        fields = self.settings.fields
        body: dict[str, Any] = {str(fields["query"]): query, str(fields["documents"]): list(texts)}
        if fields["top_n"] is not None:
            body[fields["top_n"]] = len(texts)
        if self.settings.model is not None:
            body["model"] = self.settings.model
        return body

    def scores(self, content: bytes, count: int) -> list[float]:
        """Each document's score from the answer, in the request's order; QueryFailed
        naming the first document without one."""
        fields = self.settings.fields
        payload = _decoded(content)
        path = fields["results"]
        results = http_kind.hit_list(payload, None if path == FIELDS["results"] else path)
        found: dict[int, float] = {}
        for number, result in enumerate(results):
            index = (
                http_kind.dig(result, str(fields["index"])) if isinstance(result, dict) else None
            )
            score = (
                http_kind.dig(result, str(fields["relevance_score"]))
                if isinstance(result, dict)
                else None
            )
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise QueryFailed(
                    f"malformed response: results[{number}] has no index from 0 to {count - 1}"
                )
            if not is_finite_number(score):
                raise QueryFailed(f"malformed response: results[{number}] has no finite score")
            found[index] = float(score)
        missing = [i for i in range(count) if i not in found]
        if missing:
            raise QueryFailed(f"malformed response: no score for document {missing[0]}")
        return [found[i] for i in range(count)]


def _decoded(content: bytes) -> Any:
    try:
        return load_json(content.decode("utf-8"), "the response")
    except UnicodeDecodeError:
        raise QueryFailed("malformed JSON: not UTF-8") from None
    except InputError as exc:
        raise QueryFailed(f"malformed JSON: {exc.reason}") from None


def build(settings: HttpRerankSettings, cache_dir: Path) -> HttpReranker:
    """The reranker (it keeps nothing of its own on disk)."""
    return HttpReranker(settings)


TYPE = RerankerType(
    name="http",
    description="A rerank service over HTTP (query and documents in; index and score out).",
    record=HttpRerankSettings.from_checked,
    build=build,
    settings=SETTINGS,
)
