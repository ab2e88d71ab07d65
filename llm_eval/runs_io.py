"""Run files: reading and writing the ranked results of a retriever.

Two file formats:
- JSONL, one query a line: `{"query_id": …, "results": [{"doc_id": …, "score": …,
  "text": …, "document": …, "page": …}], "latency_ms": …}`. The list order is the
  ranking (what the model is shown). A query the retriever failed on has
  `"error": "why"` and no results; `"abstain": true` marks a deliberate non-answer;
  `"answer"` is the text the RAG system generated from the results (judged for
  faithfulness and answer relevance).
  Other keys are ignored.
- TREC: `query_id Q0 doc_id rank score tag`, extra trailing columns tolerated. As in
  trec_eval the rank column is ignored: score descending (compared in single
  precision, as trec_eval stores scores), ties broken by doc id in descending byte
  order; a document listed twice for one query is an error.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.runs import IdResults, QueryResults, RankedResult, Run, RunFormat
from llm_eval.shards import parse_shard
from llm_eval.slotted import positional
from llm_eval.textio import (
    iter_lines,
    iter_text_blocks,
    load_json,
    unique_records,
)


def detect_format(path: str | Path) -> Literal["jsonl", "trec"]:
    """`jsonl` when the first non-blank line looks like JSON, else `trec`."""
    for _, text in iter_lines(path):
        return "jsonl" if text.lstrip()[:1] in ("{", "[") else "trec"
    return "jsonl"


PART_KEY = "shard"
"""The key of a part's header: the first line of a run file that `retrieve --shard`
wrote, an object with this key and no `query_id` (read by `llm_eval.shards_io`)."""


def part_header(path: str | Path) -> tuple[int, dict[str, Any]] | None:
    """The line number and object of the file's first line when it is a part's header;
    None otherwise (any other first line, a TREC file, an empty file)."""
    for line, text in iter_lines(path):
        try:  # a line that is not JSON is said to be so where the run is read
            record = load_json(text, path, line)
        except InputError:
            return None
        if isinstance(record, dict) and PART_KEY in record and "query_id" not in record:
            return line, record
        return None
    return None


def load_run(
    path: str | Path,
    run_format: RunFormat = "auto",
    *,
    part: bool = False,
    query_ids: Iterable[str] = (),
) -> Run:
    """Read a run file (JSONL or TREC) into ranked results; a part of a sharded run
    only when `part` says so (alone, it is not the run), its header left out. A JSONL
    run's queries among `query_ids` (the gold set's) keep those strings rather than a
    copy each: at a million queries, 50 MB."""
    fmt = detect_format(path) if run_format == "auto" else run_format
    if fmt == "jsonl":
        header = part_header(path)
        if header is not None and not part:
            raise InputError(
                f"is {_shard_named(header[1][PART_KEY])} of a run in parts, not a whole run: "
                "give every part to gate, baseline refresh or evaluate (--run once each, or a "
                "glob)",
                path=path,
                line=header[0],
            )
        after = header[0] if header is not None else 0
        run = Run(_load_jsonl(path, after, {query_id: query_id for query_id in query_ids}))
    else:
        scored = load_trec_scores(path)
        run = Run({qid: _rank_scored(qid, docs) for qid, docs in scored.items()})
    # A retriever that answered nothing wrote its queries, unanswered; a part may hold
    # none when its shard does.
    if not run.queries and not part:
        raise InputError("the run file has no queries", path=path)
    return run


def _shard_named(value: Any) -> str:
    """`shard 2/3`, or `a part` when the header's shard is not one."""
    try:
        return f"shard {parse_shard(value)}" if isinstance(value, str) else "a part"
    except ValueError:
        return "a part"


def _rank_scored(query_id: str, scored: Mapping[str, float]) -> QueryResults:
    ordered = sorted(scored.items(), key=lambda item: (np.float32(item[1]), item[0]), reverse=True)
    return QueryResults(query_id, tuple(RankedResult(doc, score) for doc, score in ordered))


def _load_jsonl(path: str | Path, after: int, shared: dict[str, str]) -> dict[str, QueryResults]:
    def parse(record: dict[str, Any], path: str | Path, line: int) -> QueryResults:
        query_id, results = record.get("query_id"), record.get("results")
        if type(query_id) is str and type(results) is list and query_id:
            query_id = shared.get(query_id, query_id)  # an equal string, the gold's
            usual = _usual_line(record, query_id, results)
            if usual is not None:
                return usual
            record["query_id"] = query_id
        return _parse_jsonl_line(record, path, line)

    return unique_records(path, parse, _query_id_of, "query_id", after=after)


_query_id_of = operator.attrgetter("query_id")


_USUAL_KEYS = frozenset({"query_id", "results", "latency_ms"})
"""The keys of most run lines, which `_usual_line` reads."""
_STR = frozenset({str})
_QUERY_RESULTS = positional(QueryResults)


def _usual_line(record: dict[str, Any], query_id: str, results: list[Any]) -> QueryResults | None:
    """The answer of a line of the usual shape (its id, ids alone as results, a float
    latency or none), as `_parse_jsonl_line` reads it; None for any other line, which
    that reads (and names what is wrong with): a million lines feel its checks."""
    latency = record.get("latency_ms")
    if latency is not None and (type(latency) is not float or not math.isfinite(latency)):
        return None
    if not _USUAL_KEYS.issuperset(record) or not _STR.issuperset(map(type, results)):
        return None
    if "" in results:
        return None
    return _QUERY_RESULTS(query_id, IdResults(results), latency)


def _parse_jsonl_line(record: Mapping[str, Any], path: str | Path, line: int) -> QueryResults:
    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    query_id = record.get("query_id")
    if not isinstance(query_id, str) or not query_id:
        raise fail("query_id", "missing or not a non-empty string")
    results = record.get("results")
    if not isinstance(results, list):
        raise fail("results", "missing or not a list")
    parsed = _parse_results(results, fail)
    latency = record.get("latency_ms")
    if latency is not None and not is_finite_number(latency):
        raise fail("latency_ms", f"must be a number, got {json.dumps(latency)}")
    error = record.get("error")
    if error is not None and (not isinstance(error, str) or not error):
        raise fail("error", "must be a non-empty string saying why the query failed")
    if error is not None and parsed:
        raise fail("error", "a failed query cannot also have results")
    abstained = record.get("abstain", False)
    if not isinstance(abstained, bool):
        raise fail("abstain", "must be true or false")
    answer = record.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise fail("answer", f"must be the generated answer as text, got {json.dumps(answer)}")
    return QueryResults(
        query_id, parsed, None if latency is None else float(latency), error, abstained, answer
    )


def _parse_results(results: list[Any], fail: Any) -> Sequence[RankedResult]:
    if all(type(item) is str and item for item in results):  # ids alone: nothing to check
        return IdResults(results)
    return tuple(_parse_result(item, f"results[{i}]", fail) for i, item in enumerate(results))


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
    if score is not None and not is_finite_number(score):
        raise fail(f"{key}.score", f"must be a number, got {json.dumps(score)}")
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise fail(f"{key}.text", "must be a string")
    document = item.get("document")
    if document is not None and not isinstance(document, str):
        raise fail(f"{key}.document", "must be a string")
    page = item.get("page")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int)):
        raise fail(f"{key}.page", f"must be a whole number, got {json.dumps(page)}")
    return RankedResult(doc_id, None if score is None else float(score), text, document, page)


def load_trec_scores(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file as `{query_id: {doc_id: score}}` (pytrec_eval's shape)."""
    run: dict[str, dict[str, float]] = {}
    for chunk in iter_trec_scores(path):
        run.update(chunk)
    return run


def iter_trec_scores(path: str | Path) -> Iterator[dict[str, dict[str, float]]]:
    """Read a TREC run file as chunks of whole queries, `{query_id: {doc_id: score}}` each.

    Only a small block of the file and one chunk are held at a time, so a run of any
    size reads in little memory when each query's lines are together (the usual
    layout). When a query's lines are apart, the file is read again and such queries
    are held until the end: a chunk may then repeat a query of an earlier one, and
    replaces it (as `dict.update` would), so the run is the union of the chunks.
    """
    try:
        yield from _TrecReader(path, frozenset()).chunks()
    except _NotContiguous:
        # Read again, now knowing which queries to hold (found by a quick pass).
        yield from _TrecReader(path, _scattered_queries(path)).chunks()


# Documents per chunk handed out: blocks of text are small (see `iter_text_blocks`),
# but judging a chunk has a fixed cost, so chunks gather many blocks' queries.
_CHUNK_DOCS = 100_000


class _NotContiguous(Exception):
    """A query's lines resumed after other queries' lines."""


class _TrecReader:
    """Groups a TREC run's lines into whole queries, a block of text at a time.

    Most blocks are parsed by `take_block` with a few calls that each run over the
    whole block in C; a block with anything unusual in it (a line that is blank,
    malformed or has extra columns, a duplicate, a query that resumes) is read again
    line by line by `take_lines`, which raises the same errors, at the same lines,
    as reading line by line from the start would.
    """

    def __init__(self, path: str | Path, scattered: frozenset[str]) -> None:
        self.path = path
        self.scattered = scattered
        """Queries whose lines are apart: collected in `held` until the end."""
        self.held: dict[str, dict[str, float]] = {}
        self.done: dict[str, dict[str, float]] = {}
        """Complete queries not yet handed out."""
        self.done_size = 0
        """Documents in `done`."""
        self.seen: set[str] = set()
        """Every query that was complete once."""
        self.open_id: str | None = None
        self.open: dict[str, float] = {}
        """The query being read: more of its lines may follow in the next block."""

    def chunks(self) -> Iterator[dict[str, dict[str, float]]]:
        """The complete queries, about `_CHUNK_DOCS` documents at a time; held queries last."""
        for first, text in iter_text_blocks(self.path):
            if not self.take_block(text):
                self.take_lines(first, text)
            if self.done_size >= _CHUNK_DOCS:
                yield self.done
                self.done, self.done_size = {}, 0
        self.start(None, {})
        for chunk in (self.done, self.held):
            if chunk:
                yield chunk

    def start(self, query_id: str | None, scored: dict[str, float]) -> None:
        """Close the open query and open `query_id` with its first scores."""
        if self.open_id is not None:
            self.done[self.open_id] = self.open
            self.done_size += len(self.open)
            self.seen.add(self.open_id)
        self.open_id, self.open = query_id, scored

    def take_block(self, text: str) -> bool:
        """Take in a block of plain six-column lines; False, taking nothing, otherwise."""
        columns = _six_columns(text)
        if columns is None:
            return False
        query_ids, docs, score_texts = columns
        try:
            scores = list(map(float, score_texts))
        except ValueError:
            return False
        # One NaN, inf or -inf makes the sum not finite (as may large finite scores
        # overflowing): the lines then pass, one at a time, with the error where due.
        if not math.isfinite(sum(scores)):
            return False
        queries = _group(query_ids, docs, scores)
        if queries is None or not self.may_take(queries):
            return False
        for query_id, scored in queries.items():
            if query_id in self.scattered:
                self.held.setdefault(query_id, {}).update(scored)
            elif query_id == self.open_id:
                self.open.update(scored)
            else:
                self.start(query_id, scored)
        return True

    def may_take(self, queries: dict[str, dict[str, float]]) -> bool:
        """Whether a block's queries (in order) just continue the run, repeating no document."""
        for query_id in self.scattered.intersection(queries):
            if not self.held.get(query_id, {}).keys().isdisjoint(queries[query_id]):
                return False
        query_ids = [query_id for query_id in queries if query_id not in self.scattered]
        if not query_ids:
            return True
        if not self.seen.isdisjoint(query_ids):
            return False
        if query_ids[0] == self.open_id:
            return self.open.keys().isdisjoint(queries[query_ids[0]])
        return self.open_id not in query_ids

    def take_lines(self, first: int, text: str) -> None:
        """Take in a block line by line, with an error naming the first bad line."""
        for number, line in enumerate(text.split("\n"), first):
            fields = _trec_fields(line, self.path, number)
            if fields is not None:
                self.add(number, *fields)

    def add(self, line: int, query_id: str, doc_id: str, score: float) -> None:
        """Add one line's document and score to its query."""
        if query_id in self.scattered:
            scored = self.held.setdefault(query_id, {})
        elif query_id == self.open_id:
            scored = self.open
        elif query_id in self.seen:
            raise _NotContiguous
        else:
            self.start(query_id, {})
            scored = self.open
        if doc_id in scored:
            raise InputError(
                f"document {doc_id!r} is listed twice for query {query_id!r}",
                path=self.path,
                line=line,
            )
        scored[doc_id] = score


# What a newline becomes before a block is split: a field that no line can contain.
_LINE_END = "\x00"


def _six_columns(text: str) -> tuple[list[str], list[str], list[str]] | None:
    """Query ids, doc ids and score texts when every line of `text` has six fields."""
    if _LINE_END in text:
        return None
    lines = text.count("\n") + (not text.endswith("\n"))
    # One split of the whole block, with each line end kept as a field of its own: the
    # block is regular when that field is every 7th, and then no line needs a split.
    fields = text.rstrip("\n").replace("\n", f" {_LINE_END} ").split()
    fields.append(_LINE_END)
    if len(fields) != 7 * lines or fields[6::7].count(_LINE_END) != lines:
        return None
    return fields[0::7], fields[2::7], fields[4::7]


def _group(
    query_ids: list[str], docs: list[str], scores: list[float]
) -> dict[str, dict[str, float]] | None:
    """Lines as `{query_id: {doc_id: score}}`; None if a query is split or repeats a document."""
    queries: dict[str, dict[str, float]] = {}
    start = 0
    for query_id, lines in itertools.groupby(query_ids):
        stop = start + len(list(lines))
        scored = dict(zip(docs[start:stop], scores[start:stop], strict=True))
        if len(scored) < stop - start or query_id in queries:
            return None
        queries[query_id] = scored
        start = stop
    return queries


def _trec_fields(text: str, path: str | Path, line: int) -> tuple[str, str, float] | None:
    """Query id, doc id and score of one line; None for a blank line."""
    fields = text.split()
    if not fields:
        return None
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
    if not math.isfinite(score):
        raise InputError(f"score must be a finite number, got {fields[4]!r}", path=path, line=line)
    return fields[0], fields[2], score


def _scattered_queries(path: str | Path) -> frozenset[str]:
    """Query ids whose lines come in more than one stretch of the file."""
    stretches: list[str] = []
    try:
        for _, text in iter_text_blocks(path):
            lines = map(str.split, text.split("\n"), itertools.repeat(None), itertools.repeat(1))
            stretches += (key for key, _ in itertools.groupby(f[0] for f in lines if f))
    except InputError:
        pass  # a line that is not UTF-8: the reader stops there with the error anyway
    counts = Counter(query_id for query_id, _ in itertools.groupby(stretches))
    return frozenset(query_id for query_id, n in counts.items() if n > 1)


def dump_jsonl(run: Run, *, text: bool = True) -> str:
    """The run as JSONL text, one query a line, in the format `load_run` reads;
    without the results' passage text when `text` is false."""
    lines = []
    for query in run.queries.values():
        record: dict[str, Any] = {
            "query_id": query.query_id,
            "results": [_result_record(r, text) for r in query.results],
        }
        if query.latency_ms is not None:
            record["latency_ms"] = round(query.latency_ms, 3)
        if query.error is not None:
            record["error"] = query.error
        if query.abstained:
            record["abstain"] = True
        if query.answer is not None:
            record["answer"] = query.answer
        lines.append(json.dumps(record, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def _result_record(result: RankedResult, text: bool = True) -> dict[str, Any]:
    fields = {
        "doc_id": result.doc_id,
        "score": result.score,
        "text": result.text if text else None,
        "document": result.document,
        "page": result.page,
    }
    return {key: item for key, item in fields.items() if item is not None}


def dump_trec(run: Run, tag: str) -> tuple[str, int]:
    """The run as a TREC run file (`query_id Q0 doc_id rank score tag`) and the number of
    queries whose scores were replaced.

    A reader of TREC runs ranks by score (trec_eval's rule, as `load_run`), not by the
    rank column; where the retriever's scores (or their absence) would not give back its
    own order under that rule, the query gets rank-derived scores (n, n-1, … 1) so that
    the ranking survives. A document listed again in one query is written once, at its
    first rank (later copies earn nothing anyway); a query without results has no line.
    """
    lines: list[str] = []
    replaced = 0
    for query in run.queries.values():
        first: dict[str, RankedResult] = {}
        for result in query.results:
            first.setdefault(result.doc_id, result)
        results = list(first.values())
        for name in (query.query_id, *(r.doc_id for r in results)):
            if not name or len(name.split()) != 1 or name != name.strip():
                raise InputError(
                    f"id {name!r} holds whitespace or is empty: a TREC run file cannot hold "
                    "it; write JSONL"
                )
        scores = _order_keeping_scores(results)
        if scores is None:
            replaced += 1
            scores = [float(len(results) - i) for i in range(len(results))]
        lines += [
            f"{query.query_id} Q0 {r.doc_id} {rank} {score!r} {tag}\n"
            for rank, (r, score) in enumerate(zip(results, scores, strict=True), 1)
        ]
    return "".join(lines), replaced


def _order_keeping_scores(results: list[RankedResult]) -> list[float] | None:
    """The results' scores when trec_eval's order of them (score descending in single
    precision, ties by doc id descending) is the list's own order; else None."""
    scores = [float(r.score) for r in results if r.score is not None]
    if len(scores) != len(results) or not all(map(math.isfinite, scores)):
        return None
    keys = [(np.float32(score), r.doc_id) for score, r in zip(scores, results, strict=True)]
    return scores if all(a > b for a, b in itertools.pairwise(keys)) else None
