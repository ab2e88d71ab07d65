"""The retrieval cache: on disk under the output folder, asked before the retriever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from servers import CORPUS, Reply, Scripted, SearchService, always, gold_texts, serve, write_project

from llm_eval.retrieval_cache import RetrievalCache, entry_key, retriever_key
from llm_eval.retrievers import Hits
from llm_eval.runs import RankedResult
from llm_eval.runs_io import load_run


@pytest.fixture(scope="module")
def service() -> SearchService:
    return SearchService(CORPUS)


def retrieve(cli: Cli, root: Path, settings: dict[str, Any], *args: str) -> tuple[str, str]:
    """`llm-eval retrieve --cache ARGS` on a project of 8 queries: (run file, stdout)."""
    project = write_project(root, settings, queries=8)
    out = root / "run.jsonl"
    code, printed, _ = cli("retrieve", "--config", project.config, "--out", out, "--cache", *args)
    assert code == 0
    return out.read_text(encoding="utf-8"), printed


def test_a_second_run_asks_the_service_nothing(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    with serve(service) as server:
        settings = {"kind": "http", "url": server.url}
        first, _ = retrieve(cli, tmp_path, settings)
        assert len(server.requests) == 8
        second, printed = retrieve(cli, tmp_path, settings)
        assert len(server.requests) == 8
        assert "8 of 8 queries answered from the retrieval cache" in printed
        retrieve(cli, tmp_path, settings, "--no-cache")
        assert len(server.requests) == 16
        retrieve(cli, tmp_path, {**settings, "concurrency": 2, "timeout_s": 5})  # same results
        assert len(server.requests) == 16
        body = {"query": "${query}", "top_k": "${top_k}", "x": 1}
        retrieve(cli, tmp_path, {**settings, "body": body})
        assert len(server.requests) == 24
        retrieve(cli, tmp_path, {**settings, "headers": {"X-Index": "v2"}})
        assert len(server.requests) == 32
    assert first == second  # the cached run is the same run, latencies included


def test_failed_queries_are_not_cached(tmp_path: Path, service: SearchService, cli: Cli) -> None:
    failing = gold_texts(8)[2]
    with serve(Scripted(service, {failing: always(Reply(503))})) as server:
        settings = {"kind": "http", "url": server.url, "retries": 0, "max_error_rate": 0.5}
        retrieve(cli, tmp_path, settings)
        assert len(server.requests) == 8
        _, printed = retrieve(cli, tmp_path, settings)
        assert [r.query for r in server.requests[8:]] == [failing]
    assert "7 of 8 queries answered from the retrieval cache" in printed


def test_a_corrupt_entry_is_asked_again_and_rewritten(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    with serve(service) as server:
        settings = {"kind": "http", "url": server.url}
        retrieve(cli, tmp_path, settings)
        first = load_run(tmp_path / "run.jsonl").ranked()
        entries = write_project(tmp_path, settings, queries=8).cache_entries()
        assert len(entries) == 8
        entries[0].write_text('{"query_id": "x", "results": [', encoding="utf-8")
        entries[1].write_bytes(b"\xff\xfe")
        _, printed = retrieve(cli, tmp_path, settings)
        assert load_run(tmp_path / "run.jsonl").ranked() == first
        assert len(server.requests) == 10
        assert "6 of 8 queries" in printed
        retrieve(cli, tmp_path, settings)
        assert len(server.requests) == 10  # both were rewritten


def test_entries_round_trip_and_are_keyed_by_query_and_top_k(tmp_path: Path) -> None:
    cache = RetrievalCache(tmp_path / "cache")
    hits = Hits((RankedResult("d1", 2.5, "text", "a.pdf", 3), RankedResult("d2")), 12.25)
    assert cache.get("q", 10) is None
    cache.put("q", 10, hits)
    assert cache.get("q", 10) == hits
    assert cache.get("q", 5) is None
    assert cache.get("Q", 10) is None
    assert cache.hits == 1
    assert entry_key("q", 10) != entry_key("q", 5)


def test_the_retriever_key_covers_identity_and_corpus() -> None:
    identity = {"kind": "http", "url": "http://h", "headers": ["Authorization"]}
    keys = {
        retriever_key(identity, None),
        retriever_key(identity, "abc"),
        retriever_key({**identity, "url": "http://g"}, None),
    }
    assert len(keys) == 3
    assert retriever_key(dict(reversed(identity.items())), None) == retriever_key(identity, None)


def test_the_run_file_keeps_latencies_of_cached_answers(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    with serve(service) as server:
        settings = {"kind": "http", "url": server.url}
        retrieve(cli, tmp_path, settings)
        asked = load_run(tmp_path / "run.jsonl")
        retrieve(cli, tmp_path, settings)  # every answer from the cache this time
        assert len(server.requests) == 8
        cached = load_run(tmp_path / "run.jsonl")
    latencies = {q: answer.latency_ms for q, answer in cached.queries.items()}
    assert latencies == {q: answer.latency_ms for q, answer in asked.queries.items()}
    assert None not in latencies.values()
