"""report.json itself: the complete record every other format is rendered from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

from llm_eval.formats import RenderOptions

_INDENT = 2
_FLAT_ROWS = 1000
"""Rows from which a map of text to text is written by `_flat_text` (fewer are left
to `json.dumps`, whose indented encoding runs in Python, a call per value)."""


class Json:
    """The report as JSON (`docs/report-json.md`), indented, UTF-8 kept as is."""

    name = "json"
    description = "report.json: everything, for scripts (docs/report-json.md)"
    filename = "report.json"

    def render(self, report: Mapping[str, Any], options: RenderOptions) -> str:
        """Indented JSON ending in a newline: `json.dumps(report, indent=2,
        ensure_ascii=False, allow_nan=False)`, to the byte. A map of a query per row
        (`matching.matched_by`: a million rows for a million queries) is written a row
        per join and put in the place of a stand-in string."""
        flat: dict[str, str] = {}
        token = _token()
        swapped = _swapped(report, 1, flat, token)
        text = json.dumps(swapped, indent=_INDENT, ensure_ascii=False, allow_nan=False)
        for stand_in, rows in flat.items():
            quoted = json.dumps(stand_in)
            if text.count(quoted) != 1:  # the report holds the stand-in's text: no splice
                text = json.dumps(report, indent=_INDENT, ensure_ascii=False, allow_nan=False)
                break
            text = text.replace(quoted, rows)
        return text + "\n"


def _token() -> str:
    """A random name for the stand-ins (`os.urandom`: `secrets` costs 9 ms to import)."""
    return os.urandom(8).hex()


def _swapped(value: Any, depth: int, flat: dict[str, str], token: str) -> Any:
    """`value` with each large map of text to text (at `depth`) a stand-in string
    whose text `flat` holds."""
    if isinstance(value, Mapping):
        if len(value) >= _FLAT_ROWS and _text_to_text(value):
            stand_in = f"{token}-{len(flat)}"
            flat[stand_in] = _flat_text(value, depth)
            return stand_in
        return {key: _swapped(item, depth + 1, flat, token) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_swapped(item, depth + 1, flat, token) for item in value]
    return value


def _text_to_text(value: Mapping[Any, Any]) -> bool:
    return _STR.issuperset(map(type, value)) and _STR.issuperset(map(type, value.values()))


_STR = frozenset({str})


def _flat_text(rows: Mapping[str, str], depth: int) -> str:
    """A non-empty map of text to text as `json.dumps(..., indent=2,
    ensure_ascii=False)` writes it at `depth`."""
    inner = " " * (_INDENT * depth)
    body = ",\n".join(
        [f"{inner}{encode_basestring(key)}: {encode_basestring(row)}" for key, row in rows.items()]
    )
    return f"{{\n{body}\n{' ' * (_INDENT * (depth - 1))}}}"


FORMAT = Json()
