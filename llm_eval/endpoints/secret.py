"""The API key of an endpoint section: read from the environment when a call is made,
and kept out of everything an endpoint answers.

Every form of the key that an endpoint echoes back (as sent, JSON-, URL- or
HTML-escaped, as a repr, or escaped inside a JSON answer as `\\u0073k-...`) is replaced
by `***` in what the callers see, and so in every message, report and cache entry.
"""

from __future__ import annotations

import html
import json
import os
import urllib.parse
from collections.abc import Sequence
from typing import Any

from llm_eval.endpoints.settings import ChatSettings, EmbeddingSettings
from llm_eval.environment import expand_environment


def api_key(settings: ChatSettings | EmbeddingSettings) -> str | None:
    """The key the section's `api_key` names, read from the environment; None without one."""
    if not settings.api_key:
        return None
    return expand_environment(settings.api_key, os.environ, "the api_key setting", "api_key")


def secret_forms(key: str | None) -> tuple[str, ...]:
    """The forms in which an answer may echo the key: as sent, JSON-, URL- and
    HTML-escaped, as a repr; longest first. None for a key too short to tell apart
    from ordinary text (under 4 characters)."""
    if key is None or len(key.strip()) < 4:
        return ()
    forms = {
        key,
        key.strip(),
        f"Bearer {key}",
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key, safe=""),
        html.escape(key),
        repr(key)[1:-1],
    }
    return tuple(sorted(forms - {""}, key=len, reverse=True))


def scrub(text: str, secrets: Sequence[str]) -> str:
    """The text with every form of the key replaced by `***`."""
    for form in secrets:
        text = text.replace(form, "***")
    return text


def scrub_content(text: str, secrets: Sequence[str]) -> str:
    """The content without the key: its written forms replaced, and, when the content is
    JSON whose strings hold the key once decoded (escaped as `\\u0073k-...`), the JSON
    written again with the key replaced."""
    text = scrub(text, secrets)
    if not secrets or "\\" not in text:
        return text
    try:
        value = json.loads(text)
        cleaned = _scrub_value(value, secrets)
    except (ValueError, RecursionError):
        return text
    return text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def _scrub_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, list):
        return [_scrub_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secrets): _scrub_value(v, secrets) for k, v in value.items()}
    return value
