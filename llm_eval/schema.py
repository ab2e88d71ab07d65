"""Checks of parsed JSON documents against their schema, with the key path of a bad value.

A check is a function `(value, key, fail)` that returns nothing or raises the
`fail(key, reason)` error; the combinators below build a document's checks from
small ones. The baseline and the report are checked whole this way when they are
read, so nothing downstream meets a value of the wrong type. Each check built here
also has its JSON Schema (`json_schema`), from which the published schema of
`report.json` is made: one declaration for the reader and for editors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.textio import json_type

Fail = Callable[[str, str], InputError]
Check = Callable[[Any, str, Fail], None]

_JSON_SCHEMAS: dict[Check, dict[str, Any]] = {}
_PASSES: dict[Check, Callable[[Any], bool]] = {}
"""For the checks a large document repeats per query: a test of the value alone that
is true exactly when the check passes. A map of them is tested whole, and walked key
by key (to name the bad one) only when it fails: a baseline of a million queries
holds millions of such values."""


def _described(check: Check, schema: dict[str, Any]) -> Check:
    _JSON_SCHEMAS[check] = schema
    return check


def json_schema(check: Check) -> dict[str, Any]:
    """The JSON Schema (draft-07) of a check: for one built here, what the check accepts
    (strict JSON holds no NaN or infinity to tell apart); for any other, `{}`, which
    accepts every value."""
    return _JSON_SCHEMAS.get(check, {})


def shown(value: Any) -> str:
    """A short JSON rendering of a value for a message (its type when long)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else json_type(value)


def whole(minimum: int) -> Check:
    """A whole number (not a boolean) of at least `minimum`."""

    def passes(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

    def check(value: Any, key: str, fail: Fail) -> None:
        if not passes(value):
            raise fail(key, f"expected a whole number >= {minimum}, got {shown(value)}")

    _PASSES[check] = passes
    return _described(check, {"type": "integer", "minimum": minimum})


def text(value: Any, key: str, fail: Fail) -> None:
    """A string."""
    if not isinstance(value, str):
        raise fail(key, f"expected a string, got {json_type(value)}")


def number(value: Any, key: str, fail: Fail) -> None:
    """A finite number (not a boolean)."""
    if not is_finite_number(value):
        too_large = type(value) is int  # beyond a float's range: 309 digits or more
        got = f"an integer of {len(str(abs(value)))} digits" if too_large else shown(value)
        raise fail(key, f"expected a finite number, got {got}")


def boolean(value: Any, key: str, fail: Fail) -> None:
    """true or false."""
    if not isinstance(value, bool):
        raise fail(key, f"expected true or false, got {shown(value)}")


def optional(check: Check) -> Check:
    """`check`, or null."""

    def checked(value: Any, key: str, fail: Fail) -> None:
        if value is not None:
            check(value, key, fail)

    passes = _PASSES.get(check)
    if passes is not None:
        _PASSES[checked] = lambda value: value is None or passes(value)

    return _described(checked, {"anyOf": [json_schema(check), {"type": "null"}]})


def one_of(*allowed: str | int) -> Check:
    """One of the given strings or numbers (a boolean is never a number here)."""

    def check(value: Any, key: str, fail: Fail) -> None:
        if isinstance(value, bool) or value not in allowed:
            choices = ", ".join(json.dumps(a) for a in allowed)
            raise fail(key, f"expected one of {choices}, got {shown(value)}")

    return _described(check, {"enum": list(allowed)})


def list_of(item: Check, *, non_empty: bool = False) -> Check:
    """A list whose every element passes `item`."""

    def check(value: Any, key: str, fail: Fail) -> None:
        if not isinstance(value, list):
            raise fail(key, f"expected a list, got {json_type(value)}")
        if non_empty and not value:
            raise fail(key, "expected a non-empty list")
        for index, element in enumerate(value):
            item(element, f"{key}[{index}]", fail)

    schema = {"type": "array", "items": json_schema(item)}
    return _described(check, schema | ({"minItems": 1} if non_empty else {}))


def map_of(item: Check) -> Check:
    """An object whose every value passes `item`."""

    passes = _PASSES.get(item)

    def check(value: Any, key: str, fail: Fail) -> None:
        if not isinstance(value, dict):
            raise fail(key, f"expected an object, got {json_type(value)}")
        if passes is not None and all(map(passes, value.values())):
            return
        for name, element in value.items():
            item(element, f"{key}.{name}" if key else name, fail)

    if passes is not None:
        _PASSES[check] = lambda value: isinstance(value, dict) and all(map(passes, value.values()))
    return _described(check, {"type": "object", "additionalProperties": json_schema(item)})


def record(fields: Mapping[str, Check], required: frozenset[str] = frozenset()) -> Check:
    """An object with the `required` keys, whose given keys pass their checks.

    Other keys pass: a newer writer may add fields, as the report's contract allows.
    """

    def check(value: Any, key: str, fail: Fail) -> None:
        if not isinstance(value, dict):
            raise fail(key or "(top level)", f"expected an object, got {json_type(value)}")
        for name in sorted(required - value.keys()):
            raise fail(f"{key}.{name}" if key else name, "missing required key")
        for name, element in value.items():
            if name in fields:
                fields[name](element, f"{key}.{name}" if key else name, fail)

    each = {name: _PASSES.get(field) for name, field in fields.items()}
    if all(passes is not None for passes in each.values()):
        _PASSES[check] = lambda value: (
            isinstance(value, dict)
            and required <= value.keys()
            and all(each[n](e) for n, e in value.items() if n in each)  # type: ignore[misc]
        )
    properties = {name: json_schema(field) for name, field in fields.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    return _described(check, schema | ({"required": sorted(required)} if required else {}))


_described(text, {"type": "string"})
_described(number, {"type": "number"})
_PASSES[text] = lambda value: isinstance(value, str)
_PASSES[number] = is_finite_number
_PASSES[boolean] = lambda value: isinstance(value, bool)
_described(boolean, {"type": "boolean"})
