"""Each retriever kind's settings as a typed record, and what the kinds make of them:
the cache identity of a built retriever is pinned to its value before the records."""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_eval.digest import digest
from llm_eval.endpoints.settings import EmbeddingSettings
from llm_eval.errors import InputError
from llm_eval.retrievers import RetrieverContext, retriever_kind, retriever_kinds
from llm_eval.retrievers.bm25 import BM25Config
from llm_eval.retrievers.fusion import FusionSettings
from llm_eval.retrievers.http import HttpSettings
from llm_eval.retrievers.mcp import McpSettings
from llm_eval.retrievers.python import PythonSettings

SEARCH_MODULE = "pinned_identity_search"

IDENTITY_SETTINGS: dict[str, dict[str, Any]] = {
    "http": {
        "url": "http://127.0.0.1:9/search",
        "body": {"q": "${query}", "size": "${top_k}"},
        "headers": {"X-Team": "search"},
        "results_path": "data.hits",
        "answer_path": "data.answer",
        "fields": {"doc_id": "id", "score": "_score"},
        "concurrency": 2,
        "cache_key": "v1",
    },
    "python": {
        "target": f"{SEARCH_MODULE}:Search",
        "init": {"index": "main"},
        "python_path": ["src"],
        "concurrency": 3,
        "cache_key": "v2",
    },
    "mcp": {
        "command": ["python", "server.py"],
        "tool": "find",
        "arguments": {"q": "${query}"},
        "results_path": "hits",
        "fields": {"doc_id": "id"},
    },
    "fusion": {
        "method": "weighted",
        "weights": {"a": 2, "b": 1},
        "depth": 20,
        "retrievers": {
            "a": {"kind": "http", "url": "http://127.0.0.1:9/a"},
            "b": {"kind": "mcp", "url": "http://127.0.0.1:9/mcp"},
        },
    },
}
"""Settings of each kind whose retriever is cached."""

PINNED_IDENTITIES = {
    "http": "8c3319015a7dbe63",
    "python": "8c8f890e5b451e56",
    "mcp": "9521356fd88ba375",
    "fusion": "24b3cedd76968dcc",
}
"""`digest(retriever.cache_identity)` of each, computed before the kinds' settings became
typed records: the retrieval cache filled before then is still found."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory with a python retriever's module under `src/`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / f"{SEARCH_MODULE}.py").write_text(
        "class Search:\n"
        "    def __init__(self, index):\n"
        "        self.index = index\n\n"
        "    def retrieve(self, query, top_k):\n"
        "        return []\n"
    )
    saved = list(sys.path)
    yield tmp_path
    sys.path[:] = saved
    sys.modules.pop(SEARCH_MODULE, None)


@pytest.mark.parametrize("kind", IDENTITY_SETTINGS)
def test_the_cache_identity_of_each_cached_kind_is_pinned(project: Path, kind: str) -> None:
    retriever = retriever_kind(kind).create(
        IDENTITY_SETTINGS[kind], RetrieverContext(None, project / "cache")
    )
    assert retriever.cache_identity is not None
    assert digest(retriever.cache_identity) == PINNED_IDENTITIES[kind]


MINIMAL: dict[str, dict[str, Any]] = {
    "bm25": {},
    "run": {"path": "run.jsonl"},
    "http": {"url": "http://127.0.0.1:9/search"},
    "python": {"target": "app:search"},
    "fusion": {"retrievers": {"a": {"kind": "bm25"}, "b": {"kind": "run", "path": "r.jsonl"}}},
    "embedding": {"base_url": "http://127.0.0.1:9/v1", "model": "e5"},
    "mcp": {"url": "http://127.0.0.1:9/mcp"},
    "rerank": {
        "first": {"kind": "bm25"},
        "reranker": {"type": "http", "url": "http://127.0.0.1:9/"},
    },
}
"""The fewest settings each kind takes."""


def _hints(annotation: Any) -> Iterator[Any]:
    """The annotation and every type inside it."""
    yield annotation
    for argument in typing.get_args(annotation):
        yield from _hints(argument)


def test_every_kind_is_covered() -> None:
    assert set(MINIMAL) == {kind.name for kind in retriever_kinds()}


@pytest.mark.parametrize("name", MINIMAL)
def test_each_kind_reads_its_settings_into_a_frozen_typed_record(name: str) -> None:
    kind = retriever_kind(name)
    record = kind.record(kind.checked(MINIMAL[name]))
    assert dataclasses.is_dataclass(record) and not hasattr(record, "__dict__")
    field = dataclasses.fields(record)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, None)
    hints = typing.get_type_hints(type(record))
    untyped = [f for f, hint in hints.items() if Any in _hints(hint)]
    assert untyped == []


def test_the_readers_give_each_setting_its_type() -> None:
    http = retriever_kind("http")
    found = http.record(http.checked({**MINIMAL["http"], "timeout_s": 5, "backoff_s": 0}))
    assert isinstance(found, HttpSettings)
    assert (found.timeout_s, found.backoff_s, found.retries) == (5.0, 0.0, 3)
    assert type(found.timeout_s) is float and type(found.backoff_s) is float
    mcp = retriever_kind("mcp")
    server = mcp.record(mcp.checked({"command": ["python", "server.py"], "cwd": "tools"}))
    assert isinstance(server, McpSettings)
    assert (server.command, server.url, server.cwd) == (("python", "server.py"), None, "tools")
    python = retriever_kind("python")
    target = python.record(python.checked({"target": "app:search", "python_path": ["src"]}))
    assert isinstance(target, PythonSettings) and target.python_path == ("src",)
    embedding = retriever_kind("embedding")
    dense = embedding.record(embedding.checked({**MINIMAL["embedding"], "fields": ["text"]}))
    assert isinstance(dense.endpoint, EmbeddingSettings) and dense.fields == ("text",)
    # The retriever's own max_error_rate applies to its queries, not the endpoint's.
    assert (dense.endpoint.model, dense.endpoint.max_error_rate) == ("e5", 1.0)


def test_a_fusion_reads_each_component_with_its_own_kind() -> None:
    fusion = retriever_kind("fusion")
    settings = {
        "retrievers": {"lex": {"kind": "bm25", "k1": 1}, "api": MINIMAL["http"] | {"kind": "http"}},
        "weights": {"lex": 1, "api": 0.5},
        "rrf_k": 10,
    }
    found = fusion.record(fusion.checked(settings))
    assert isinstance(found, FusionSettings)
    assert [(c.name, c.kind.name) for c in found.components] == [("lex", "bm25"), ("api", "http")]
    lex, api = (c.settings for c in found.components)
    assert isinstance(lex, BM25Config) and lex.k1 == 1.0 and lex.b == 0.4
    assert isinstance(api, HttpSettings) and api.concurrency == 8
    assert found.weights == {"lex": 1.0, "api": 0.5} and found.rrf_k == 10.0


def test_a_fusion_component_whose_variable_is_gone_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A component's `${VAR}` is read when the fusion's record is; an error then names
    the component, as the config's check does."""
    fusion = retriever_kind("fusion")
    monkeypatch.setenv("SEARCH_URL", "http://127.0.0.1:9/search")
    entry = {"kind": "http", "url": "${SEARCH_URL}"}
    checked = fusion.checked({"retrievers": {"lex": {"kind": "bm25"}, "api": entry}})
    monkeypatch.delenv("SEARCH_URL")
    with pytest.raises(InputError) as raised:
        fusion.record(checked)
    assert raised.value.key == "retrievers.api.url"
    assert raised.value.reason == (
        "environment variable SEARCH_URL is not set (used by the url setting)"
    )
