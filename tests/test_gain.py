"""`llm-eval gain`: novelty against the corpus and the change in recall, end to end with
the real BM25 retriever and the local OpenAI-compatible stub for embeddings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Cli, script

from llm_eval.gain import Weights, chunks, gain, novelty, pieces

stub = script("stub_openai")

CORPUS = [
    {"_id": "c1", "title": "sockets", "text": "open a tcp socket and connect to a server port"},
    {"_id": "c2", "title": "files", "text": "read a text file line by line with open"},
    {"_id": "c3", "title": "json", "text": "parse json text into python objects with loads"},
]
NEW = [
    {
        "_id": "n1",
        "title": "sorting",
        "text": "sort a list of dicts by key with sorted and itemgetter",
    },
    {"_id": "n2", "title": "files again", "text": "read a text file line by line with open"},
]
GOLD = [
    {"query_id": "q1", "query": "sort list of dicts by key", "relevant": {"n1": 1}},
    {"query_id": "q2", "query": "read a file line by line", "relevant": {"c2": 1}},
]


def project(root: Path, url: str, retriever: dict[str, Any] | None = None) -> Path:
    def jsonl(rows: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r) + "\n" for r in rows)

    (root / "corpus.jsonl").write_text(jsonl(CORPUS))
    (root / "new.jsonl").write_text(jsonl(NEW))
    (root / "gold.jsonl").write_text(jsonl(GOLD))
    config = {
        "gold": ["gold.jsonl"],
        "corpus": "corpus.jsonl",
        "retriever": retriever or {"kind": "bm25"},
        "metrics": ["recall@1"],
        "top_k": 3,
        "output": "out",
        "embeddings": {"base_url": url, "model": "stub-embed"},
        "gain": {"alpha": 2.0, "gamma": 0.5, "k": 1, "chunk_words": 4},
    }
    (root / "llm-eval.yaml").write_text(json.dumps(config))
    (root / "criteria.yaml").write_text(
        "gates:\n  - name: r\n    metric: recall@1\n    threshold: 0\n"
    )
    return root


def run_gain(
    cli: Cli, root: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    """`llm-eval gain new.jsonl` in `root`: (exit code, stdout, stderr)."""
    monkeypatch.chdir(root)
    return cli(
        "gain", "new.jsonl", "--config", "llm-eval.yaml", "--criteria", "criteria.yaml", *args
    )


def test_the_arithmetic() -> None:
    assert chunks("a b c d e", 2) == ["a b", "c d", "e"]
    assert chunks("", 3) == [""]
    corpus = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert novelty(np.array([[3.0, 0.0]]), corpus) == pytest.approx(0.0)
    assert novelty(np.array([[1.0, 1.0]]), corpus) == pytest.approx(1 - 2**-0.5)
    assert novelty(np.array([[1.0, 1.0]]), np.zeros((0, 2))) == 1.0
    weights = Weights(alpha=2.0, beta=3.0, gamma=0.5)
    assert gain(weights, 0.1, 0.2, 0.4) == pytest.approx(0.2 + 0.6 + 0.2)
    assert gain(weights, 0.1, None, 0.4) == pytest.approx(0.2 + 0.2)
    assert gain(weights, 0.1, None, None) == pytest.approx(0.2)
    assert pieces("a b c d e", 2) == ["a b", "c d", "e", "a b c d e"]
    assert pieces("a b", 2) == ["a b"]  # one chunk: the document itself
    assert pieces("a  b", 2) == ["a b", "a  b"]  # spacing kept, as the corpus is embedded


def test_gain_reindexes_bm25_and_measures_novelty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    with stub.serve() as server:
        code, out, _ = run_gain(cli, project(tmp_path, server.url), monkeypatch)
        assert code == 0
    result = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())
    # n1 is the only document relevant to q1: with it added, q1 is found at rank 1.
    assert result["before"]["recall@1"] == 0.5
    assert result["after"]["recall@1"] == 1.0
    corpus = np.array([stub.embed(f"{d['title']} {d['text']}") for d in CORPUS])
    for document in NEW:
        parts = pieces(f"{document['title']} {document['text']}", 4)
        vectors = np.array([stub.embed(p) for p in parts])
        expected = 1 - (vectors @ corpus.T).max()  # stub vectors are unit length
        assert result["novelty"][document["_id"]] == pytest.approx(expected)
    assert result["gain"] == pytest.approx(2.0 * 0.5 + 0.5 * result["mean_novelty"])
    assert out.startswith("llm-eval gain: 2 new documents, gain ")
    assert "no judge, so no Δcontext recall" in out


def test_a_retriever_that_cannot_index_needs_a_run_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    (tmp_path / "run.jsonl").write_text(
        '{"query_id": "q1", "results": [{"doc_id": "c1"}]}\n'
        '{"query_id": "q2", "results": [{"doc_id": "c2"}]}\n'
    )
    (tmp_path / "after.jsonl").write_text(
        '{"query_id": "q1", "results": [{"doc_id": "n1"}]}\n'
        '{"query_id": "q2", "results": [{"doc_id": "c2"}]}\n'
    )
    with stub.serve() as server:
        root = project(tmp_path, server.url, {"kind": "run", "path": "run.jsonl"})
        code, _, err = run_gain(cli, root, monkeypatch)
        assert code == 3
        assert err == (
            "llm-eval: error: the run retriever cannot index new documents itself; pass "
            "--run-after RUN, a run made with them added\n"
        )
        assert run_gain(cli, root, monkeypatch, "--run-after", "after.jsonl")[0] == 0
    result = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())
    assert result["delta"]["recall@1"] == 0.5


def test_a_document_already_in_the_corpus_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    root = project(tmp_path, "http://127.0.0.1:9/v1")
    (root / "new.jsonl").write_text(json.dumps(CORPUS[0]) + "\n")
    code, _, err = run_gain(cli, root, monkeypatch)
    assert code == 3
    assert err == ("llm-eval: error: new.jsonl: document 'c1' is already in the corpus\n")


def test_an_exact_copy_of_a_corpus_document_is_not_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    copy = {**CORPUS[1], "_id": "copy-of-c2"}  # longer than chunk_words: several chunks
    with stub.serve() as server:
        root = project(tmp_path, server.url)
        (root / "new.jsonl").write_text(json.dumps(copy) + "\n")
        assert run_gain(cli, root, monkeypatch)[0] == 0
    result = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())
    assert result["novelty"] == {"copy-of-c2": 0.0}


def test_without_embeddings_gain_measures_recall_and_leaves_novelty_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    root = project(tmp_path, "")
    config = json.loads((root / "llm-eval.yaml").read_text())
    del config["embeddings"]
    (root / "llm-eval.yaml").write_text(json.dumps(config))
    code, out, _ = run_gain(cli, root, monkeypatch)
    assert code == 0
    result = json.loads((tmp_path / "out" / "gain" / "gain.json").read_text())
    assert (result["novelty"], result["mean_novelty"]) == (None, None)
    assert result["delta"]["recall@1"] == 0.5
    assert result["gain"] == 2.0 * 0.5
    assert "Gain = 2·Δrecall@1; no judge, so no Δcontext recall; no `embeddings:`, so no" in (
        " ".join(out.split())
    )
