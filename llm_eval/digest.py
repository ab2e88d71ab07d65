"""Short content digests of JSON-able values (a file's: `llm_eval.textio.file_digest`).

The keys of every cache (retrieval, BM25 index, embeddings, judge calls) and the
baseline's fingerprints are built from these.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""`json.dumps` with these settings makes an encoder per call, which costs as much as
encoding a gold query's fields (one such digest a query, a million a gate)."""


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of a value (first 16 hex digits)."""
    return f"{digest_number(_CANONICAL.encode(value)):016x}"


def digest_number(text: str) -> int:
    """The digest of canonical JSON text already written out, as the integer of its 16
    hex digits (a gold query's fingerprint, a million of them a gate)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
