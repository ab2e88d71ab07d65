"""Short content digests of JSON-able values (a file's: `llm_eval.textio.file_digest`).

The keys of every cache (retrieval, BM25 index, embeddings, judge calls) and the
baseline's fingerprints are built from these.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of a value (first 16 hex digits)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
