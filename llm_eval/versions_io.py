"""Reading the corpus-versions sidecar (JSONL) into `Versions`, every line checked."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.textio import iter_unique_records, json_type
from llm_eval.versions import VersionRecord, Versions, build_versions

_KEYS = ("doc_id", "version_key", "effective_timestamp", "superseded_by")


def load_versions(path: str | Path) -> Versions:
    """Read the sidecar; a bad line is an error naming the file, the line and the key."""
    records = iter_unique_records(path, _parse, lambda r: r.doc_id, "doc_id", strict=True)
    return build_versions(list(records))


def _parse(item: Mapping[str, Any], path: str | Path, line: int) -> VersionRecord:
    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    unknown = sorted(set(item) - set(_KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown key (valid keys: {', '.join(sorted(_KEYS))})")
    if "doc_id" not in item:
        raise fail("doc_id", "missing required key")
    for key in ("doc_id", "version_key", "superseded_by"):
        value = item.get(key)
        if key in item and value is not None and (not isinstance(value, str) or not value):
            raise fail(key, f"must be a non-empty string, got {json_type(value)}")
    doc_id = item["doc_id"]
    if doc_id is None:
        raise fail("doc_id", "must be a non-empty string, got null")
    if item.get("superseded_by") == doc_id:
        raise fail("superseded_by", "a document cannot supersede itself")
    effective = _timestamp(item.get("effective_timestamp"), fail)
    return VersionRecord(doc_id, item.get("version_key"), effective, item.get("superseded_by"))


def _timestamp(value: Any, fail: Callable[[str, str], InputError]) -> datetime | None:
    if value is None:
        return None
    reason = f"must be an ISO 8601 date or time, got {json.dumps(value)}"
    if not isinstance(value, str):
        raise fail("effective_timestamp", reason)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise fail("effective_timestamp", reason) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
