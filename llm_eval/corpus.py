"""The document corpus, in BEIR's JSONL shape: `{"_id", "title", "text", "metadata"}`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.textio import iter_unique_records


@dataclass(frozen=True, slots=True)
class Document:
    """One passage of the corpus."""

    doc_id: str
    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


FIELDS = ("title", "text")
"""The fields of a document a retriever may read."""


def check_fields(value: Any) -> str | None:
    """A non-empty list of distinct corpus fields (a retriever's `fields` setting)."""
    if (
        not isinstance(value, list | tuple)
        or not value
        or any(f not in FIELDS for f in value)
        or len(set(value)) != len(value)
    ):
        return f"must be a non-empty list of distinct fields from 'title', 'text', got {value!r}"
    return None


def field_text(document: Document, fields: Sequence[str]) -> str:
    """The document's fields joined by a space (empty ones left out)."""
    return " ".join(text for text in (getattr(document, f) for f in fields) if text)


def iter_corpus(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a BEIR corpus file; ids must be unique."""
    return iter_unique_records(path, _parse_document, lambda d: d.doc_id, "_id")


def count_documents(path: str | Path) -> int:
    """The documents of a corpus file, counted without parsing them (its non-blank
    lines): the total of a progress line."""
    with Path(path).open("rb") as lines:
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
