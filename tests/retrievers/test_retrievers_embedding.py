"""The embedding kind against a real OpenAI-compatible server on 127.0.0.1
(scripts/stub_openai.py: hashed bag-of-words vectors): exact cosine top-k equal to a
numpy reference, the corpus matrix cached on disk, failures per query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Cli, gold_query, script
from servers import write_project

from llm_eval.errors import ExternalError
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.retrievers.embedding import top_k

stub = script("stub_openai")

DOCS = [
    {"_id": "sort", "title": "Sorting", "text": "sorted returns a new sorted list"},
    {"_id": "dict", "title": "Dictionaries", "text": "a dict maps keys to values"},
    {"_id": "files", "title": "Files", "text": "open a file and read its lines"},
    {"_id": "sort2", "title": "Sorting", "text": "list sort sorts in place"},
    {"_id": "empty", "title": "", "text": "zzz"},
]


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def build(url: str, tmp_path: Path, **settings: Any) -> Any:
    values = {"base_url": url, "model": "stub-embed", "retries": 0, **settings}
    context = RetrieverContext(corpus(tmp_path), tmp_path / "cache")
    return retriever_kind("embedding").create(values, context)


def reference(text: str, k: int) -> list[tuple[str, float]]:
    docs = np.array([stub.embed(f"{d['title']} {d['text']}".strip()) for d in DOCS])
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    q = np.array(stub.embed(text))
    scores = docs @ (q / np.linalg.norm(q))
    order = sorted(range(len(DOCS)), key=lambda i: (-scores[i], i))[:k]
    return [(DOCS[i]["_id"], float(scores[i])) for i in order]


QUERIES = [
    gold_query("q1", text="how to sort a list"),
    gold_query("q2", text="read lines of a file"),
]


def test_results_are_the_exact_cosine_top_k(tmp_path: Path) -> None:
    with stub.serve() as server:
        run = build(server.url, tmp_path).retrieve(QUERIES, 3)
    for q in QUERIES:
        answer = run.queries[q.query_id]
        expected = reference(q.query, 3)
        assert answer.doc_ids == tuple(d for d, _ in expected)
        assert [r.score for r in answer.results] == pytest.approx(
            [s for _, s in expected], abs=1e-6
        )
        assert answer.latency_ms is not None and answer.latency_ms > 0


def test_the_corpus_is_embedded_once_and_queries_are_cached(tmp_path: Path) -> None:
    with stub.serve() as server:
        build(server.url, tmp_path, batch_size=2).retrieve(QUERIES, 2)
        corpus_calls = [r for r in server.requests if r["input"] != [q.query for q in QUERIES]]
        assert len(server.requests) == 3 + 2  # 5 documents in batches of 2, then 2 queries
        assert sum(len(r["input"]) for r in corpus_calls[:3]) == len(DOCS)
        server.requests.clear()
        again = build(server.url, tmp_path, batch_size=2).retrieve(QUERIES, 2)
        assert server.requests == []  # the matrix and the query vectors come from disk
    assert again.queries["q1"].doc_ids == tuple(d for d, _ in reference("how to sort a list", 2))
    assert list((tmp_path / "cache" / "embedding").glob("*/batch-*.npz"))


def test_an_edited_document_is_the_only_text_sent_again(tmp_path: Path) -> None:
    with stub.serve() as server:
        build(server.url, tmp_path).retrieve(QUERIES, 2)
        edited = [dict(d) for d in DOCS]
        edited[2]["text"] = "open a file and write lines to it"
        (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in edited))
        server.requests.clear()
        values = {"base_url": server.url, "model": "stub-embed", "retries": 0}
        context = RetrieverContext(tmp_path / "corpus.jsonl", tmp_path / "cache")
        retriever_kind("embedding").create(values, context)
    assert [r["input"] for r in server.requests] == [["Files open a file and write lines to it"]]


def test_prefixes_change_what_is_embedded(tmp_path: Path) -> None:
    with stub.serve() as server:
        build(server.url, tmp_path, query_prefix="query: ", document_prefix="passage: ").retrieve(
            QUERIES[:1], 1
        )
        inputs = [t for r in server.requests for t in r["input"]]
    assert "query: how to sort a list" in inputs
    assert "passage: Sorting sorted returns a new sorted list" in inputs


def test_a_failed_query_embedding_fails_that_query_only(tmp_path: Path) -> None:
    with stub.serve() as server:
        retriever = build(server.url, tmp_path)
        server.faults.append(stub.Fault(status=500))
        run = retriever.retrieve(QUERIES, 2)
    errors = [run.queries[q.query_id].error for q in QUERIES]
    assert sorted(e is None for e in errors) == [False, True]
    assert any(e is not None and "500" in e for e in errors)


def test_a_corpus_that_cannot_be_embedded_stops_the_run(tmp_path: Path) -> None:
    with stub.serve() as server:
        server.faults.append(stub.Fault(status=503))
        with pytest.raises(ExternalError, match="embedding the corpus failed"):
            build(server.url, tmp_path)


def test_ties_keep_corpus_order() -> None:
    documents = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], dtype=np.float32)
    order, scores = top_k(np.array([1, 0], dtype=np.float32), documents, 2)
    assert order.tolist() == [0, 2]
    assert scores.tolist() == [1.0, 1.0]
    order, _ = top_k(np.array([1, 0], dtype=np.float32), documents, 10)
    assert order.tolist() == [0, 2, 3, 1]


def test_the_gate_runs_on_the_demo_corpus(tmp_path: Path, cli: Cli) -> None:
    with stub.serve() as server:
        project = write_project(
            tmp_path, {"kind": "embedding", "base_url": server.url, "model": "m"}, queries=5
        )
        args = ["gate", "--config", str(project.config), "--criteria", str(project.criteria)]
        code, out, _ = cli(*args, "--format", "json")
    assert code in (0, 1)
    report = json.loads(out)
    assert report["queries"]["failed"] == {}
    assert report["slices"][0]["metrics"]["recall@5"]["n"] == 5
