"""The document corpus, in BEIR's JSONL shape: `{"_id", "title", "text", "metadata"}`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


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
