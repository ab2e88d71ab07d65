"""Reading a corpus file (`llm_eval.corpus` holds the record): BEIR's JSONL, one
document per line, ids unique."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_eval.corpus import Document
from llm_eval.errors import InputError
from llm_eval.textio import iter_unique_records, open_regular


def iter_corpus(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a BEIR corpus file; ids must be unique."""
    return iter_unique_records(path, _parse_document, lambda d: d.doc_id, "_id")


def corpus_ids(path: str | Path) -> frozenset[str]:
    """The ids of a corpus file's documents, read once (what gold labels may name)."""
    return frozenset(document.doc_id for document in iter_corpus(path))


def count_documents(path: str | Path) -> int:
    """The documents of a corpus file, counted without parsing them (its non-blank
    lines): the total of a progress line."""
    with open_regular(path) as lines:
        return sum(1 for line in lines if line.strip())


def _parse_document(record: Mapping[str, Any], path: str | Path, line: int) -> Document:
    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    doc_id = record.get("_id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id:
        raise fail("_id", "missing or not a non-empty string")
    values = {}
    for key in ("title", "text"):
        value = record.get(key, "")
        if not isinstance(value, str):
            raise fail(key, "must be a string")
        values[key] = value
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise fail("metadata", "must be an object")
    return Document(doc_id, values["title"], values["text"], metadata)
