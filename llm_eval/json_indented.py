"""JSON text as `json.dumps(value, indent=1)` writes it, produced in pieces and fast.

With an indent, the standard library encodes in Python, a generator per value, and
joins the whole text in memory: a baseline of a million queries is ten million values
and a text of several hundred megabytes. Its large sections are maps of flat rows
(`{query_id: {metric: value}}`) or of scalars (`{query_id: rank}`); here each row is
one join of its items, the rows are handed out a few thousand at a time, and every
other value is left to `json.dumps`. The text is the same, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from json.encoder import encode_basestring_ascii
from typing import Any

from llm_eval.score_columns import ScoreColumns

_ROWS_PER_PIECE = 4096


def iter_indented(document: Mapping[str, Any]) -> Iterator[str]:
    """The pieces of `json.dumps(document, indent=1)` for an object of str keys whose
    values are JSON values or mappings (a `ScoreColumns`, a view): joined, the same text."""
    if not document:
        yield "{}"
        return
    separator = "{\n "
    for key, value in document.items():
        yield f"{separator}{_key(key)}: "
        yield from _value(value)
        separator = ",\n "
    yield "\n}"


def _value(value: Any) -> Iterator[str]:
    """One top-level value, at the first level of indentation."""
    if isinstance(value, Mapping) and value:
        rows = _flat_rows(value)
        if rows is not None:
            yield from _rows_text(rows)
            return
    yield json.dumps(plain(value), indent=1).replace("\n", "\n ")


def _flat_rows(value: Mapping[Any, Any]) -> Iterable[tuple[str, str | None]] | None:
    """`(key, text of the value at the second level)` of a map whose keys are strings
    and whose values are scalars or flat objects of them, made as they are read; None
    for any other map."""
    if isinstance(value, ScoreColumns):
        return ((key, _object(items)) for key, items in value.row_items())
    if not all(type(key) is str and _flat(item) for key, item in value.items()):
        return None
    return ((key, _scalar(item) or _object(item.items())) for key, item in value.items())


def _flat(value: Any) -> bool:
    """A scalar, or an object of str keys and scalar values."""
    if _scalar(value) is not None:
        return True
    if not isinstance(value, Mapping):
        return False
    return all(type(key) is str and _scalar(item) is not None for key, item in value.items())


def _rows_text(rows: Iterable[tuple[str, str | None]]) -> Iterator[str]:
    pieces: list[str] = []
    opening = "{"
    for key, text in rows:
        pieces.append(f"\n  {_key(key)}: {text}")
        if len(pieces) == _ROWS_PER_PIECE:
            yield opening + ",".join(pieces)
            pieces, opening = [], ","
    yield opening + ",".join(pieces) + "\n }"


def _object(items: Iterable[tuple[str, Any]]) -> str | None:
    """A flat object's text at the second level; None when a value is not a scalar."""
    lines = []
    for key, item in items:
        text = _scalar(item)
        if text is None:
            return None
        lines.append(f"\n   {_key(key)}: {text}")
    return "{" + ",".join(lines) + "\n  }" if lines else "{}"


def _key(key: str) -> str:
    return encode_basestring_ascii(key)


def _scalar(value: Any) -> str | None:
    """A scalar as the encoder writes it; None for anything else."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _float(value: float) -> str:
    """As `json.dumps` writes a float (NaN and the infinities as JavaScript names them)."""
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


def plain(value: Any) -> Any:
    """Mappings (views, columns) as dicts, at every depth, for `json.dumps`."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value
