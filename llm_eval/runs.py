"""Runs: the ranked results a retriever returned for each query.

Two file formats:
- JSONL, one query a line: `{"query_id": …, "results": [{"doc_id": …, "score": …,
  "text": …}], "latency_ms": …}`. The list order is the ranking (what the model
  is shown); other keys are ignored.
- TREC: `query_id Q0 doc_id rank score tag`, extra trailing columns tolerated. As in
  trec_eval the rank column is ignored: score descending (compared in single
  precision, as trec_eval stores scores), ties broken by doc id in descending byte
  order; a document listed twice for one query is an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from llm_eval.errors import InputError
from llm_eval.textio import iter_lines, parse_json_object

RunFormat = Literal["auto", "jsonl", "trec"]


@dataclass(frozen=True, slots=True)
class RankedResult:
    """One retrieved document at one rank."""

    doc_id: str
    score: float | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class QueryResults:
    """The ranked results for one query, best first."""

    query_id: str
    results: tuple[RankedResult, ...]
    latency_ms: float | None = None

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Document ids in rank order."""
        return tuple(r.doc_id for r in self.results)


@dataclass(frozen=True, slots=True)
class Run:
    """Results per query id."""

    queries: Mapping[str, QueryResults]

    def ranked(self) -> dict[str, tuple[str, ...]]:
        """`{query_id: (doc_id, ...)}` in rank order, the input of `judge_ranked`."""
        return {qid: q.doc_ids for qid, q in self.queries.items()}


def detect_format(path: str | Path) -> Literal["jsonl", "trec"]:
    """`jsonl` when the first non-blank line looks like JSON, else `trec`."""
    for _, text in iter_lines(path):
        return "jsonl" if text.lstrip()[:1] in ("{", "[") else "trec"
    return "jsonl"


def load_run(path: str | Path, run_format: RunFormat = "auto") -> Run:
    """Read a run file (JSONL or TREC) into ranked results."""
    fmt = detect_format(path) if run_format == "auto" else run_format
    if fmt == "jsonl":
        return Run(_load_jsonl(path))
    scored = load_trec_scores(path)
    return Run({qid: _rank_scored(qid, docs) for qid, docs in scored.items()})


def _rank_scored(query_id: str, scored: Mapping[str, float]) -> QueryResults:
    ordered = sorted(scored.items(), key=lambda item: (np.float32(item[1]), item[0]), reverse=True)
    return QueryResults(query_id, tuple(RankedResult(doc, score) for doc, score in ordered))


def _load_jsonl(path: str | Path) -> dict[str, QueryResults]:
    queries: dict[str, QueryResults] = {}
    first_line: dict[str, int] = {}
    for line, text in iter_lines(path):
        query = _parse_jsonl_line(parse_json_object(text, path, line), path, line)
        if query.query_id in queries:
            raise InputError(
                f"duplicate query_id {query.query_id!r} (first at line "
                f"{first_line[query.query_id]})",
                path=path,
                line=line,
                key="query_id",
            )
        queries[query.query_id] = query
        first_line[query.query_id] = line
    return queries


def _parse_jsonl_line(record: Mapping[str, Any], path: str | Path, line: int) -> QueryResults:
    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    query_id = record.get("query_id")
    if not isinstance(query_id, str) or not query_id:
        raise fail("query_id", "missing or not a non-empty string")
    results = record.get("results")
    if not isinstance(results, list):
        raise fail("results", "missing or not a list")
    parsed = tuple(_parse_result(item, f"results[{i}]", fail) for i, item in enumerate(results))
    latency = record.get("latency_ms")
    if latency is not None and not _is_number(latency):
        raise fail("latency_ms", f"must be a number, got {json.dumps(latency)}")
    return QueryResults(query_id, parsed, None if latency is None else float(latency))


def _parse_result(item: Any, key: str, fail: Any) -> RankedResult:
    if isinstance(item, str):
        if not item:
            raise fail(key, "a doc id must be a non-empty string")
        return RankedResult(item)
    if not isinstance(item, dict):
        raise fail(key, "must be an object with a doc_id, or a doc id string")
    doc_id = item.get("doc_id")
    if not isinstance(doc_id, str) or not doc_id:
        raise fail(f"{key}.doc_id", "missing or not a non-empty string")
    score = item.get("score")
    if score is not None and not _is_number(score):
        raise fail(f"{key}.score", f"must be a number, got {json.dumps(score)}")
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise fail(f"{key}.text", "must be a string")
    return RankedResult(doc_id, None if score is None else float(score), text)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def load_trec_scores(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file as `{query_id: {doc_id: score}}` (pytrec_eval's shape)."""
    run: dict[str, dict[str, float]] = {}
    for line, query_id, doc_id, score in _iter_trec(path):
        scored = run.get(query_id)
        if scored is None:
            scored = run[query_id] = {}
        elif doc_id in scored:
            raise InputError(
                f"document {doc_id!r} is listed twice for query {query_id!r}",
                path=path,
                line=line,
            )
        scored[doc_id] = score
    return run


def _iter_trec(path: str | Path) -> Iterator[tuple[int, str, str, float]]:
    for line, text in iter_lines(path):
        fields = text.split()
        if len(fields) < 6:
            raise InputError(
                f"expected 6 columns `query_id Q0 doc_id rank score tag`, got {len(fields)}",
                path=path,
                line=line,
            )
        try:
            score = float(fields[4])
        except ValueError:
            raise InputError(
                f"score must be a number, got {fields[4]!r}", path=path, line=line
            ) from None
        if math.isnan(score):
            raise InputError("score must be a number, got NaN", path=path, line=line)
        yield line, fields[0], fields[2], score


def dump_jsonl(run: Run) -> str:
    """The run as JSONL text, one query a line, in the format `load_run` reads."""
    lines = []
    for query in run.queries.values():
        record: dict[str, Any] = {
            "query_id": query.query_id,
            "results": [
                {
                    key: item
                    for key, item in (("doc_id", r.doc_id), ("score", r.score), ("text", r.text))
                    if item is not None
                }
                for r in query.results
            ],
        }
        if query.latency_ms is not None:
            record["latency_ms"] = round(query.latency_ms, 3)
        lines.append(json.dumps(record, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)
