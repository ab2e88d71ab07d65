"""Local services the rerank tests talk to, on 127.0.0.1 (`servers.serve`): a chat
endpoint that scores a pair by the words its query and document share, and a rerank
service that does the same in the shape of llama.cpp's `/v1/rerank` (or of
text-embeddings-inference's `/rerank`).

The chat endpoint reads the pair from a prompt of the form `Query: …` / `Document: …`
(`PROMPT`); a document that holds `UNREADABLE` is answered with text that is no JSON,
one that holds `CHATTY` with a score wrapped in words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from servers import Received, Reply, terms

PROMPT = "Query: {query}\nDocument: {document}\n{scale}\n"
_PAIR = re.compile(r"Query: (.*)\nDocument: (.*)\n", re.S)


def overlap_score(query: str, document: str) -> int:
    """0 to 100: ten points for each word the two share."""
    return min(100, 10 * len(terms(query) & terms(document)))


def write_prompt(folder: Path, text: str = PROMPT, name: str = "prompt.txt") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


class OverlapChat:
    """An OpenAI-compatible chat endpoint that answers `{"score": n}` by word overlap;
    with `noisy`, plus up to 40 points that depend on the request's seed and the
    document (a model sampling at a temperature, drawn again with each seed)."""

    def __init__(self, noisy: bool = False) -> None:
        self.noisy = noisy

    def __call__(self, request: Received) -> Reply:
        messages = request.body["messages"]
        pair = _PAIR.search(messages[-1]["content"])
        assert pair is not None, messages
        query, document = pair.group(1), pair.group(2)
        if "UNREADABLE" in document:
            content = "I think this passage is quite relevant."
        elif "CHATTY" in document:
            content = 'Sure! {"score": 40}'
        else:
            content = json.dumps(self.answer(request.body, query, document))
        usage = {"prompt_tokens": 30, "completion_tokens": 5}
        return Reply(payload={"choices": [{"message": {"content": content}}], "usage": usage})

    def answer(self, body: dict[str, Any], query: str, document: str) -> dict[str, Any]:
        schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
        score = overlap_score(query, document)
        if self.noisy:
            score = min(100, score + 10 * ((body["seed"] * 7 + len(document)) % 5))
        if "relevant" in schema.get("properties", {}):
            return {"relevant": score >= 20, "confidence": 0.8}
        if schema.get("properties", {}).get("score", {}).get("maximum") == 5:
            return {"score": 1 + min(4, score // 20)}
        return {"score": score}


class OverlapRerank:
    """A rerank service scoring by word overlap: llama.cpp's shape, or TEI's with `tei`."""

    def __init__(self, tei: bool = False) -> None:
        self.tei = tei

    def __call__(self, request: Received) -> Reply:
        body = request.body
        texts = body["texts" if self.tei else "documents"]
        scores = [overlap_score(body["query"], text) / 100 for text in texts]
        if self.tei:
            ranked = sorted(range(len(texts)), key=lambda i: -scores[i])
            return Reply(payload=[{"index": i, "score": scores[i]} for i in ranked])
        top = sorted(range(len(texts)), key=lambda i: -scores[i])[: body["top_n"]]
        results = [{"index": i, "relevance_score": scores[i]} for i in top]
        return Reply(payload={"model": "overlap", "results": results})


def root_of(url: str) -> str:
    """The server's root URL (`servers.serve` names its URL …/search)."""
    return url.rsplit("/", 1)[0]
