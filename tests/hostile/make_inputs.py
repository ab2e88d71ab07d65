"""Inputs of the hostile corpus that are made at test time rather than committed.

Some are too large to commit (200,000 nested brackets, a 5 MB line); the rest are
the small project's own baseline.json and report.json with one value broken, made
from the files in `base/` so that they stay in step with them. `manifest.toml`
names them as `generate:<name>`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

BASE = Path(__file__).parent / "base"
DEPTH = 200_000
DIGITS = 5_000
"""More digits than Python converts from text (4,300 by default)."""


def deep_json() -> bytes:
    """200,000 opening brackets: Python's recursive parser would overflow its stack."""
    return b"[" * DEPTH


def deep_json_second_line() -> bytes:
    """A valid first line, then the deep nesting."""
    return b'{"_id": "sort", "text": "sort a list"}\n' + deep_json() + b"\n"


def deep_yaml() -> bytes:
    """A YAML flow list nested 200,000 deep: PyYAML composes it recursively."""
    return b"gold: " + b"[" * DEPTH + b"\n"


def huge_line() -> bytes:
    """A 5 MB line whose string never ends."""
    return b'{"query_id": "q1", "query": "' + b"x" * 5_000_000 + b"\n"


def huge_integer() -> bytes:
    """A grade of 5,000 digits."""
    grade = b"9" * DIGITS
    return b'{"query_id": "q1", "query": "sort", "relevant": {"sort": ' + grade + b"}}\n"


def huge_integer_array() -> bytes:
    """A search response whose score has 5,000 digits."""
    return b'[{"id": "sort", "score": ' + b"9" * DIGITS + b"}]"


def huge_integer_score() -> bytes:
    """A run whose first score has 400 digits: a valid integer, too large for a float."""
    rows = (BASE / "run.jsonl").read_text(encoding="utf-8").splitlines()
    rows[0] = rows[0].replace('"score": 2.0', '"score": 1' + "0" * 399, 1)
    return ("\n".join(rows) + "\n").encode()


def baseline_huge_integer() -> bytes:
    """A per-query score of 400 digits."""
    return _edited("baseline.json", lambda b: b["per_query"]["q1"].update({"mrr": 10**399}))


def report_huge_integer() -> bytes:
    """A gate value of 400 digits."""
    return _edited("report.json", lambda r: r["gates"][0].update({"value": 10**399}))


def _edited(name: str, edit: Callable[[dict[str, Any]], None]) -> bytes:
    data = json.loads((BASE / name).read_text(encoding="utf-8"))
    edit(data)
    return json.dumps(data, indent=1).encode()


def baseline_nan_score() -> bytes:
    """A per-query score of NaN (json writes it as `NaN`)."""
    return _edited("baseline.json", lambda b: b["per_query"]["q1"].update({"recall@5": math.nan}))


def baseline_without_n() -> bytes:
    """The overall aggregate without its query count."""
    return _edited("baseline.json", lambda b: b["aggregates"]["overall"].pop("n"))


def baseline_overall_number() -> bytes:
    """The overall aggregate as a number instead of an object."""
    return _edited("baseline.json", lambda b: b["aggregates"].update({"overall": 0.5}))


def baseline_string_rank() -> bytes:
    """A first relevant rank written as text."""
    return _edited("baseline.json", lambda b: b["first_relevant_rank"].update({"q1": "1"}))


def baseline_service_text() -> bytes:
    """A service row whose `error` is text."""
    return _edited("baseline.json", lambda b: b["service"]["q1"].update({"error": "no"}))


def baseline_surrogate_key() -> bytes:
    """A query id that is a lone surrogate (json escapes it as `\\ud800`)."""
    return _edited("baseline.json", lambda b: b["per_query"].update({"q\ud800": {}}))


def report_empty_gates() -> bytes:
    """A report without gates."""
    return _edited("report.json", lambda r: r.update({"gates": []}))


def report_empty_metrics() -> bytes:
    """A report without metrics."""
    return _edited("report.json", lambda r: r.update({"metrics": []}))


def report_infinite_age() -> bytes:
    """A baseline age of Infinity (json writes it as `Infinity`)."""
    return _edited(
        "report.json", lambda r: r["provenance"]["baseline"].update({"age_days": math.inf})
    )


def report_value_text() -> bytes:
    """A gate value written as text."""
    return _edited("report.json", lambda r: r["gates"][0].update({"value": "high"}))


def report_nan_timing() -> bytes:
    """A NaN where the schema leaves numbers unchecked but finite."""
    return _edited("report.json", lambda r: r["timings"].update({"total_s": math.nan}))


def report_commit_markup() -> bytes:
    """A report whose commit is markup, which `history --record` must not keep."""
    return _edited("report.json", lambda r: r["provenance"].update({"head_commit": "<!--<script>"}))


def report_commit_sound() -> bytes:
    """The report with a commit id, which `history --record` keeps."""
    return _edited("report.json", lambda r: r["provenance"].update({"head_commit": "0a1b2c3"}))


GENERATORS: dict[str, Callable[[], bytes]] = {
    name: function
    for name, function in dict(globals()).items()
    if callable(function) and not name.startswith("_") and function.__module__ == __name__
}
"""`generate:<name>` of the manifest → the function that makes the content."""


# --- answers of a misbehaving OpenAI-compatible endpoint (`endpoint = NAME`) -----------

ENDPOINT_KEY = "sk-hostile/echo+key&0123456789"
"""The API key the endpoint cases run with; the `secret` cases check it is shown nowhere."""


def _rows(change: Callable[[list[dict[str, Any]]], None]) -> Callable[[str, Any], bytes]:
    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        if path.endswith("/embeddings"):
            change(answer["data"])
        return json.dumps(answer).encode()

    return rewrite


def _set_first(value: float) -> Callable[[list[dict[str, Any]]], None]:
    def change(rows: list[dict[str, Any]]) -> None:
        rows[0]["embedding"][0] = value

    return change


def _zero(rows: list[dict[str, Any]]) -> None:
    rows[0]["embedding"] = [0.0] * len(rows[0]["embedding"])


def _query_dimension(rows: list[dict[str, Any]]) -> None:
    if len(rows) == 1:  # a query's vector; the corpus batch keeps the model's size
        rows[0]["embedding"] = rows[0]["embedding"][:32]


def _usage(raw: bytes) -> Callable[[str, Any], bytes]:
    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        answer["usage"] = {"prompt_tokens": "@", "completion_tokens": "@"}
        return json.dumps(answer).encode().replace(b'"@"', raw)

    return rewrite


def _content(text: str) -> Callable[[str, Any], bytes]:
    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        if path.endswith("/chat/completions"):
            answer["choices"][0]["message"]["content"] = text
        return json.dumps(answer).encode()

    return rewrite


def _padded(path: str, answer: dict[str, Any]) -> bytes:
    return json.dumps({**answer, "padding": "x" * 4096}).encode()


ENDPOINT_ANSWERS: dict[str, Callable[[str, Any], bytes]] = {
    "nan": _rows(_set_first(float("nan"))),
    "infinity": _rows(_set_first(float("inf"))),
    "zero": _rows(_zero),
    "duplicate-index": _rows(lambda rows: rows.append(dict(rows[0]))),
    "missing-index": _rows(lambda rows: rows.pop()),
    "query-dimension": _rows(_query_dimension),
    "usage-huge": _usage(b"1e400"),
    "usage-huge-integer": _usage(b"1" + b"0" * 399),
    "integer-beyond-float": _rows(_set_first(10**399)),
    "usage-negative": _usage(b"-100000000"),
    "usage-text": _usage(b'"12"'),
    "oversized": _padded,
    "key-echo": _content(
        json.dumps({"verdict": f"you sent {ENDPOINT_KEY} ({json.dumps(ENDPOINT_KEY)})"})
    ),
    "question-surrogate": _content('{"question": "what is \\ud800 here?"}'),
}
"""Case `endpoint` name → how the fake endpoint rewrites each sound answer."""
