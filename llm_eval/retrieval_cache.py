"""Retrieval results cached on disk, so that an unchanged retriever is not asked twice.

Layout: `<output>/cache/retrieval/<retriever key>/<entry key>.jsonl`. The retriever
key is a digest of what the results depend on: the retriever's identity (its kind and
the settings that shape results, never a secret: an http retriever's headers count by
name only) and the corpus fingerprint when there is a corpus. The entry key is a
digest of the query text and top_k. An entry is one line of a JSONL run, so it is
read and checked by the run loader.

Only queries that succeeded are stored. Each entry is written atomically; an entry
that cannot be read is a miss, and is replaced when the query is answered again.
The cache is used only when asked for (`--cache`, `cache: true`). What its key cannot
see (a service redeployed behind the same URL, code outside a python retriever's
package) reaches it through the retriever's `cache_key` setting.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_eval.digest import digest
from llm_eval.errors import InputError
from llm_eval.retrievers.pool import Hits
from llm_eval.runs import QueryResults, Run
from llm_eval.runs_io import dump_jsonl, load_run
from llm_eval.textio import write_atomic

_FORMAT = 1
"""Bump when the entry format changes, so that old entries are not read."""


def retriever_key(identity: Mapping[str, Any], corpus_fingerprint: str | None) -> str:
    """The digest that names a retriever's folder of entries."""
    return digest({"retriever": identity, "corpus": corpus_fingerprint, "format": _FORMAT})


def entry_key(query: str, top_k: int) -> str:
    """The digest that names one query's entry."""
    return digest({"query": query, "top_k": top_k})


class RetrievalCache:
    """The entries of one retriever; safe to use from several threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._hits = 0

    @property
    def hits(self) -> int:
        """How many lookups found an entry."""
        return self._hits

    def get(self, query: str, top_k: int) -> Hits | None:
        """The stored results of this query, or None (missing or unreadable)."""
        key = entry_key(query, top_k)
        path = self.folder / f"{key}.jsonl"
        try:
            entry = load_run(path, "jsonl").queries.get(key)
        except (InputError, OSError):
            return None
        if entry is None or entry.error is not None or entry.latency_ms is None:
            return None
        with self._lock:
            self._hits += 1
        return Hits(tuple(entry.results), entry.latency_ms, entry.answer)

    def put(self, query: str, top_k: int, hits: Hits) -> None:
        """Store the results of a query that succeeded (a failed write is no error)."""
        key = entry_key(query, top_k)
        entry = Run({key: QueryResults(key, hits.results, hits.latency_ms, answer=hits.answer)})
        with contextlib.suppress(OSError):  # the cache only saves time; a full disk is no error
            write_atomic(self.folder / f"{key}.jsonl", dump_jsonl(entry))
