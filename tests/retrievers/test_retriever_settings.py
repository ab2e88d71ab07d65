"""Each retriever kind's settings as a typed record, and what the kinds make of them:
the cache identity of a built retriever is pinned to its value before the records."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_eval.digest import digest
from llm_eval.retrievers import RetrieverContext, retriever_kind

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
