"""`iter_indented` writes what `json.dumps(indent=1)` writes, byte for byte."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from llm_eval.json_indented import iter_indented
from llm_eval.score_columns import ScoreColumns

DOCUMENTS: list[dict[str, Any]] = [
    {},
    {"empty": {}, "list": [], "nested": {"x": {}}, "none": None},
    {"rows": {"q, ": {'m"': 1.0, "nan": math.nan}, "é\n": {"inf": -math.inf, "t": True}}},
    {"rows": {"q": {"f": None, "s": "text", "i": 3, "b": False, "big": 1e300}}},
    {"fingerprints": {"q1": "abc", "q2": ""}, "ranks": {"q1": 3, "q2": 0}},
    {"deeper": {"q": {"a": [1]}}, "keys": {1: 2}, "list": [1, {"a": 2}, [], {}]},
    {"rows": {f"q{i}": {"a": i / 7, "b": i} for i in range(10_000)}},
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_same_text_as_json_dumps(document: dict[str, Any]) -> None:
    assert "".join(iter_indented(document)) == json.dumps(document, indent=1)


def test_score_columns_as_their_rows() -> None:
    rng = np.random.default_rng(0)
    values, present = rng.random((3, 5000)), rng.random((3, 5000)) > 0.3
    table = ScoreColumns([f"q{i}" for i in range(5000)], ["m1", "m2", "m3"], values, present)
    rows = {query_id: dict(row) for query_id, row in table.items()}
    text = "".join(iter_indented({"n": 1, "per_query": table}))
    assert text == json.dumps({"n": 1, "per_query": rows}, indent=1)
