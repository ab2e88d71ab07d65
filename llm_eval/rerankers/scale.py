"""The scales an llm reranker answers on, and reading its answers (pure).

| scale | the model answers | normalised score |
|---|---|---|
| `0-100` | `{"score": n}`, n a whole number from 0 to 100 | n / 100 |
| `1-5` | `{"score": n}`, n a whole number from 1 to 5 | (n − 1) / 4 |
| `binary` | `{"relevant": true/false, "confidence": c}`, c from 0 to 1 | 0.5 ± c / 2 |

A binary answer is relevant above 0.5 and not below it, and its confidence moves it
away from 0.5: a sure "no" scores 0, an unsure one just under 0.5. An answer that is
not JSON in the scale's shape raises `Unreadable` with the reason; it is never read as
a score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from llm_eval.finite import is_finite_number

SCALES = ("0-100", "1-5", "binary")


class Unreadable(Exception):
    """An answer that is not a score on the scale; the message says why."""


@dataclass(frozen=True, slots=True)
class Scale:
    """One answer scale."""

    name: str
    schema: dict[str, Any]
    """The JSON schema of an answer, asked for in `response_format`."""
    instruction: str
    """How to answer, in the prompt's `{scale}` (or after it)."""

    def normalised(self, content: str) -> float:
        """The answer's score in [0, 1]; Unreadable naming what is wrong."""
        answer = _json_object(content)
        if self.name == "binary":
            return _binary(answer)
        low, high = (0, 100) if self.name == "0-100" else (1, 5)
        value = answer.get("score")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise Unreadable(f"score must be a whole number from {low} to {high}, got {value!r}")
        return (value - low) / (high - low)


def _score_schema(low: int, high: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": low, "maximum": high}},
        "required": ["score"],
        "additionalProperties": False,
    }


_BINARY_SCHEMA = {
    "type": "object",
    "properties": {
        "relevant": {"type": "boolean"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["relevant", "confidence"],
    "additionalProperties": False,
}

_SCALES = {
    "0-100": Scale(
        "0-100",
        _score_schema(0, 100),
        'Reply with JSON only: {"score": n}, n a whole number from 0 (unrelated) to 100 '
        "(answers the query).",
    ),
    "1-5": Scale(
        "1-5",
        _score_schema(1, 5),
        'Reply with JSON only: {"score": n}, n a whole number from 1 (unrelated) to 5 '
        "(answers the query).",
    ),
    "binary": Scale(
        "binary",
        _BINARY_SCHEMA,
        'Reply with JSON only: {"relevant": true or false, "confidence": c}, c from 0 '
        "(a guess) to 1 (certain).",
    ),
}


def scale(name: str) -> Scale:
    """The scale of that name (one of SCALES)."""
    return _SCALES[name]


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _json_object(content: str) -> dict[str, Any]:
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        answer = json.loads(text)
    except ValueError:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise Unreadable(f"not JSON: {shown!r}") from None
    if not isinstance(answer, dict):
        raise Unreadable(f"not a JSON object: {type(answer).__name__}")
    return answer


def _binary(answer: dict[str, Any]) -> float:
    relevant, confidence = answer.get("relevant"), answer.get("confidence")
    if not isinstance(relevant, bool):
        raise Unreadable(f"relevant must be true or false, got {relevant!r}")
    if not is_finite_number(confidence) or not 0 <= confidence <= 1:
        raise Unreadable(f"confidence must be a number from 0 to 1, got {confidence!r}")
    share = float(confidence)
    return 0.5 + share / 2 if relevant else 0.5 - share / 2
