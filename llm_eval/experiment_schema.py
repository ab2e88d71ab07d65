"""The schema of `experiment.json` as the dashboard reads it, checked before it renders.

`llm-eval dashboard --experiment FILE` may be given any file: JSON of another shape
(a list, a number where the variants belong) is an input error naming the file and
the key, never a crash in the page's renderer. Keys other than the ones read pass,
as a newer writer may add some.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.schema import Check, boolean, list_of, map_of, number, optional, record, text
from llm_eval.textio import read_json_file

_VARIANT = record(
    {
        "name": text,
        "values": map_of(optional(number)),
        "versus_reference": map_of(record({"delta": optional(number)})),
        "pareto_front": boolean,
    },
    frozenset({"name", "values", "versus_reference", "pareto_front"}),
)
EXPERIMENT: Check = record(
    {"quality": text, "recommendation": text, "variants": list_of(_VARIANT)},
    frozenset({"quality", "recommendation", "variants"}),
)
"""The keys the dashboard's experiment table reads."""


def read_experiment(path: Path) -> Mapping[str, Any]:
    """experiment.json, when it fits the schema; else an InputError naming the key."""
    document = read_json_file(path)

    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, key=key)

    EXPERIMENT(document, "", fail)
    return document
