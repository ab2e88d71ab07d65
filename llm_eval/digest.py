"""Short content digests: of a JSON-able value, and of a file's bytes.

The keys of every cache (retrieval, BM25 index, embeddings, judge calls) and the
baseline's fingerprints are built from these.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from llm_eval.textio import require_file


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of a value (first 16 hex digits)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (first 16 hex digits)."""
    with require_file(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()[:16]
