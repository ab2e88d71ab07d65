"""The call cache on disk: one JSON file per answer, under the section's cache folder.

A chat answer is keyed by a digest of the endpoint, the model, the sampling settings,
the prompt's name and version, the messages and the schema asked for; an embedding by
the endpoint (or the model's files), the model and the text. No key holds the API key.
A re-run of an unchanged gold set makes no call. An entry that is missing or damaged
is asked for again and rewritten; a full disk only costs the saving.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from llm_eval.textio import open_regular, write_atomic

CACHE_FORMAT = 1
"""Part of every key: a new format of the entries leaves the old ones unread."""


def entry_path(folder: Path | None, key: str) -> Path | None:
    """Where the entry of `key` lies (None: no cache folder, nothing is kept)."""
    return None if folder is None else folder / key[:2] / f"{key}.json"


def read_entry(folder: Path | None, key: str) -> Any:
    """A cached entry, or None when it is missing or not JSON."""
    path = entry_path(folder, key)
    if path is None or not path.exists():
        return None
    try:
        with open_regular(path) as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None


def write_entry(folder: Path | None, key: str, entry: Any) -> None:
    """Store an entry atomically; the cache only saves money, so a full disk is no error."""
    path = entry_path(folder, key)
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(entry, ensure_ascii=False))
