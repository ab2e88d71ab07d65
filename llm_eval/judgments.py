"""Turn qrels and a run into flat arrays of judged hits: the input of every metric kernel.

A *hit* is a retrieved document with a positive grade, credited at its first rank.
Everything a relevance metric needs is in these arrays, so the metric kernels run
over all queries at once (see `llm_eval.metrics`).

Two front ends build them:

- `judge_scored` for `{query_id: {doc_id: score}}` (pytrec_eval's shape). Following
  trec_eval, the ranking is score descending, ties broken by doc id in descending
  byte order; like trec_eval, scores are compared in single precision (it stores
  them as C floats), so scores equal to 7 significant digits tie. Instead of
  sorting every list, it looks up only the relevant documents' scores and counts
  how many scores in the same list beat each of them.
- `judge_ranked` for `{query_id: [doc_id, ...]}` where list order is the ranking
  (JSONL runs). A repeated id counts at its first rank only.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from llm_eval.errors import InputError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

Qrels = Mapping[str, Mapping[str, int]]
ScoredRun = Mapping[str, Mapping[str, float]]
RankedRun = Mapping[str, Sequence[str]]
_T = TypeVar("_T")

# Rows of the score matrix compared at once when ranking scored runs: bounds memory.
_RANK_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True, slots=True, eq=False)
class Judgments:
    """Relevance facts of one run against qrels, as flat arrays.

    Queries are the qrels queries with at least one relevant document (grade at or
    above `relevance_level`); queries without one are rejection queries, kept apart.
    """

    query_ids: tuple[str, ...]
    """Evaluated queries; index `i` in the arrays below refers to `query_ids[i]`."""
    num_relevant: IntArray
    """Per query: documents with grade >= relevance_level."""
    hit_query: IntArray
    """Per hit: the query index. Hits are sorted by query, then rank."""
    hit_rank: IntArray
    """Per hit: the 1-based rank of the document in the query's ranking."""
    hit_grade: IntArray
    """Per hit: the document's grade (always > 0)."""
    ideal_query: IntArray
    """Per positive qrels entry: the query index (sorted by query, then grade descending)."""
    ideal_position: IntArray
    """Per positive qrels entry: its 1-based position in the ideal ranking."""
    ideal_grade: IntArray
    """Per positive qrels entry: its grade."""
    relevance_level: int
    missing: tuple[str, ...]
    """Evaluated queries absent from the run (they score 0 everywhere)."""
    rejection: tuple[str, ...]
    """Qrels queries with no relevant document: left out of relevance metrics."""
    not_in_gold: int
    """Run queries that are not in the qrels (ignored)."""

    @property
    def hit_relevant(self) -> npt.NDArray[np.bool_]:
        """Per hit: whether it counts as relevant for binary metrics."""
        return self.hit_grade >= self.relevance_level

    def first_relevant_rank(self) -> IntArray:
        """Per query: rank of the first relevant document, 0 when none was retrieved."""
        first = np.zeros(len(self.query_ids), dtype=np.int64)
        relevant = self.hit_relevant
        queries, ranks = self.hit_query[relevant], self.hit_rank[relevant]
        starts = _group_starts(queries)
        first[queries[starts]] = ranks[starts]
        return first


def _group_starts(sorted_keys: IntArray) -> IntArray:
    """Indices where a run of equal values begins in a sorted key array."""
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate(([0], change)).astype(np.int64)


class _Builder:
    """Flattens the qrels into arrays and freezes hits into `Judgments`."""

    def __init__(self, qrels: Qrels, relevance_level: int) -> None:
        self.relevance_level = relevance_level
        judged = [j if isinstance(j, dict) else dict(j) for j in qrels.values()]
        all_ids = list(qrels)
        self.lengths = np.fromiter(map(len, judged), np.int64, len(judged))
        size = int(self.lengths.sum())
        self.docs: list[str] = list(itertools.chain.from_iterable(judged))
        self.grades = np.fromiter(
            itertools.chain.from_iterable(map(dict.values, judged)), np.int64, size
        )
        owner = np.repeat(np.arange(len(judged), dtype=np.int64), self.lengths)
        relevant = np.bincount(owner[self.grades >= relevance_level], minlength=len(judged))
        evaluated = relevant > 0
        self.query_ids = [q for q, keep in zip(all_ids, evaluated.tolist(), strict=True) if keep]
        self.rejection = [
            q for q, keep in zip(all_ids, evaluated.tolist(), strict=True) if not keep
        ]
        self.num_relevant = relevant[evaluated]
        # Index of each qrels query among the evaluated ones (-1 for rejection queries).
        self.position = np.cumsum(evaluated) - 1
        self.position[~evaluated] = -1
        self.evaluated = evaluated
        self.entry_owner = owner
        self.positive = (self.grades > 0) & evaluated[owner]

    def ideal(self) -> tuple[IntArray, IntArray, IntArray]:
        queries = self.position[self.entry_owner[self.positive]]
        grades = self.grades[self.positive]
        order = np.lexsort((-grades, queries))
        queries, grades = queries[order], grades[order]
        starts = _group_starts(queries)
        lengths = np.diff(np.append(starts, queries.size))
        positions = np.arange(queries.size, dtype=np.int64) - np.repeat(starts, lengths)
        return queries, positions + 1, grades

    def freeze(
        self,
        hit_entries: IntArray,
        hit_rank: IntArray,
        missing: Iterable[str],
        not_in_gold: int,
    ) -> Judgments:
        """Judgments from the qrels entries that were retrieved and their ranks."""
        hit_query = self.position[self.entry_owner[hit_entries]]
        hit_grade = self.grades[hit_entries]
        order = np.lexsort((hit_rank, hit_query))
        ideal_query, ideal_position, ideal_grade = self.ideal()
        return Judgments(
            query_ids=tuple(self.query_ids),
            num_relevant=self.num_relevant.astype(np.int64),
            hit_query=hit_query[order],
            hit_rank=hit_rank[order].astype(np.int64),
            hit_grade=hit_grade[order],
            ideal_query=ideal_query,
            ideal_position=ideal_position,
            ideal_grade=ideal_grade,
            relevance_level=self.relevance_level,
            missing=tuple(missing),
            rejection=tuple(self.rejection),
            not_in_gold=not_in_gold,
        )

    def lists_of(self, run: Mapping[str, _T]) -> tuple[list[_T | None], list[str]]:
        """Per evaluated query its list in the run (None when missing), and the missing ids."""
        lists = [run.get(q) for q in self.query_ids]
        missing = [q for q, found in zip(self.query_ids, lists, strict=True) if found is None]
        return lists, missing


def _count_not_in_gold(run_ids: Iterable[str], qrels: Qrels) -> int:
    return sum(1 for query_id in run_ids if query_id not in qrels)


def judge_ranked(qrels: Qrels, run: RankedRun, relevance_level: int = 1) -> Judgments:
    """Judgments for runs whose lists are already in rank order."""
    builder = _Builder(qrels, relevance_level)
    lists, missing = builder.lists_of(run)
    owners = builder.position[builder.entry_owner]
    hit_entries: list[int] = []
    hit_rank: list[int] = []
    for entry in np.flatnonzero(builder.positive).tolist():
        ranking = lists[owners[entry]]
        if ranking is None:
            continue
        try:
            hit_rank.append(ranking.index(builder.docs[entry]) + 1)
        except ValueError:
            continue
        hit_entries.append(entry)
    return builder.freeze(
        np.asarray(hit_entries, dtype=np.int64),
        np.asarray(hit_rank, dtype=np.int64),
        missing,
        _count_not_in_gold(run, qrels),
    )


def judge_scored(qrels: Qrels, run: ScoredRun, relevance_level: int = 1) -> Judgments:
    """Judgments for `{query_id: {doc_id: score}}` runs, ranked as trec_eval ranks them."""
    builder = _Builder(qrels, relevance_level)
    lists, missing = builder.lists_of(run)
    present = [d if isinstance(d, dict) else dict(d) for d in lists if d is not None]
    # Row of each evaluated query in the score matrix; queries missing from the run get
    # an empty dict so that every lookup below stays one C-level call.
    row_of = np.cumsum([d is not None for d in lists]) - 1
    empty: dict[str, float] = {}
    per_query = [d if isinstance(d, dict) else (empty if d is None else dict(d)) for d in lists]
    entries = np.flatnonzero(builder.positive)
    owners = builder.position[builder.entry_owner[entries]]
    docs = [builder.docs[i] for i in entries.tolist()]
    scores = np.fromiter(
        map(dict.get, (per_query[o] for o in owners.tolist()), docs, itertools.repeat(math.nan)),
        np.float64,
        entries.size,
    )
    retrieved = ~np.isnan(scores)
    hit_entries = entries[retrieved]
    ranks = _ranks_by_score(
        present,
        row_of[owners[retrieved]],
        scores[retrieved],
        [docs[i] for i in np.flatnonzero(retrieved).tolist()],
    )
    return builder.freeze(hit_entries, ranks, missing, _count_not_in_gold(run, qrels))


def _score_matrix(lists: Sequence[Mapping[str, float]]) -> npt.NDArray[np.float32]:
    """All scores as one row per list, padded with -inf (which beats nothing)."""
    lengths = np.fromiter(map(len, lists), np.int64, len(lists))
    total = int(lengths.sum())
    flat = np.fromiter(
        itertools.chain.from_iterable(map(operator.methodcaller("values"), lists)),
        np.float64,
        total,
    ).astype(np.float32)
    if np.isnan(flat).any():
        raise InputError("run scores must be numbers, found NaN")
    width = int(lengths.max(initial=0))
    if total == width * len(lists):
        return flat.reshape(len(lists), width)
    matrix = np.full((len(lists), width), -np.inf, dtype=np.float32)
    # Row-major boolean assignment fills each row's first `length` cells in order.
    matrix[np.arange(width) < lengths[:, None]] = flat
    return matrix


def _ranks_by_score(
    lists: Sequence[Mapping[str, float]],
    rows: IntArray,
    scores: FloatArray,
    docs: Sequence[str],
) -> IntArray:
    """Rank of each hit: 1 + scores that beat it + equal scores with a larger doc id."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    matrix = _score_matrix(lists)
    single = scores.astype(np.float32)
    better = np.empty(rows.size, dtype=np.int64)
    equal = np.empty(rows.size, dtype=np.int64)
    step = max(1, _RANK_CHUNK_CELLS // max(1, matrix.shape[1]))
    for start in range(0, rows.size, step):
        block = matrix[rows[start : start + step]]
        threshold = single[start : start + step, None]
        better[start : start + step] = (block > threshold).sum(axis=1)
        equal[start : start + step] = (block == threshold).sum(axis=1)
    ranks = better + 1
    for i in np.flatnonzero(equal > 1).tolist():
        ranks[i] += _tied_ahead(lists[rows[i]], docs[i], single[i])
    return ranks


def _tied_ahead(scored: Mapping[str, float], doc: str, score: np.float32) -> int:
    """Documents with the same score ranked ahead of `doc`: trec_eval puts larger ids first.

    Python compares strings by code point, which for UTF-8 text is the byte order
    trec_eval's strcmp uses.
    """
    return sum(1 for other, value in scored.items() if np.float32(value) == score and other > doc)
