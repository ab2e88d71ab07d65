"""Turn qrels and a run into flat arrays of judged hits: the input of every metric kernel.

A *hit* is a retrieved document with a positive grade, credited at its first rank;
every retrieved document with any grade in the qrels (0 and negative too) is also kept
as *labelled*, for `judged@k`. Everything a relevance metric needs is in these arrays,
so the metric kernels run over all queries at once (see `llm_eval.metrics`).

Two front ends build them:

- `judge_scored` for `{query_id: {doc_id: score}}` (pytrec_eval's shape; a large
  run file is judged as columns, `llm_eval.columns.judge_columns`). Following
  trec_eval, the ranking is score descending, ties broken by doc id in descending
  byte order; like trec_eval, scores are compared in single precision (it stores
  them as C floats), so scores equal to 7 significant digits tie. Instead of sorting
  every list, it looks up only the relevant documents' scores and counts how many
  scores in the same list beat each of them. The lists are Python objects spread
  over memory, so the time goes into reading them: each is read once, while it is
  in the processor's cache.
- `judge_ranked` for `{query_id: [doc_id, ...]}` where list order is the ranking
  (JSONL runs). A repeated id counts at its first rank only.
"""

from __future__ import annotations

import array
import functools
import itertools
import math
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from llm_eval.errors import InputError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]

Qrels = Mapping[str, Mapping[str, int]]
ScoredRun = Mapping[str, Mapping[str, float]]
RankedRun = Mapping[str, Sequence[str]]
_K = TypeVar("_K")
_V = TypeVar("_V")


@runtime_checkable
class UnitRows(Protocol):
    """Qrels that give their rows' lengths, grades and units without a dict a row (a
    gold set's compact labels: `llm_eval.matching.GoldQrels`)."""

    def sizes_and_grades(self) -> tuple[IntArray, IntArray]:
        """`_flatten_qrels` of the rows, without their ids."""
        ...

    def unit_rows(self) -> Iterator[Collection[str]]:
        """Per row in order, its units in order (as iterating the row gives them)."""
        ...


_NO_INTS = np.zeros(0, dtype=np.int64)
# What a query missing from a scored run reads as: an empty list, never written to.
_ABSENT: dict[str, float] = {}

# Lists read together by `_read_scores`: a few hundred kilobytes of Python objects.
_READ_BATCH = 100

# Cells of the score matrix compared at once when ranking scored runs: small enough to
# stay in the processor's cache, which is faster than one large comparison.
_RANK_CHUNK_CELLS = 1_000_000


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
    labelled_query: IntArray
    """Per retrieved document with any grade in the qrels: the query index (sorted)."""
    labelled_rank: IntArray
    """Per retrieved document with any grade in the qrels: its 1-based rank."""
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
        starts = group_starts(queries)
        first[queries[starts]] = ranks[starts]
        return first


def group_starts(sorted_keys: IntArray) -> IntArray:
    """Indices where a run of equal values begins in a sorted key array."""
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def _ranges(starts: IntArray, counts: IntArray) -> IntArray:
    """The concatenated ranges `starts[i] .. starts[i] + counts[i] - 1`."""
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()), dtype=np.int64)


def _as_dicts(mappings: list[Mapping[_K, _V]]) -> list[dict[_K, _V]]:
    """The mappings as dicts, so that the C-level dict methods apply; copies only non-dicts."""
    if all(map(isinstance, mappings, itertools.repeat(dict))):
        return mappings  # type: ignore[return-value]
    return [m if isinstance(m, dict) else dict(m) for m in mappings]


def _kept(items: list[_K], keep: npt.NDArray[np.bool_]) -> list[_K]:
    """The items whose flag is set; without a pass over them when all or none are."""
    if keep.all():
        return items
    if not keep.any():
        return []
    return list(itertools.compress(items, keep.tolist()))


def _flatten_qrels(
    judged: Iterable[Mapping[str, int]], keep_docs: bool = True
) -> tuple[IntArray, IntArray, list[str]]:
    """Per qrels query its number of entries; per entry its grade and doc id (none
    without `keep_docs`).

    Read a few queries at a time, for the reason `_read_scores` gives.
    """
    sizes: list[int] = []
    grades: list[IntArray] = [_NO_INTS]
    docs: list[str] = []
    source = iter(judged)
    while batch := _as_dicts(list(itertools.islice(source, _READ_BATCH))):
        batch_sizes = list(map(len, batch))
        sizes += batch_sizes
        values = itertools.chain.from_iterable(map(dict.values, batch))
        grades.append(np.fromiter(values, np.int64, sum(batch_sizes)))
        if keep_docs:
            docs += itertools.chain.from_iterable(batch)
    return np.array(sizes, dtype=np.int64), np.concatenate(grades), docs


class _QrelsIndex:
    """The qrels as arrays: evaluated queries and all their entries (any grade), grouped
    by query."""

    def __init__(self, qrels: Qrels, relevance_level: int, keep_docs: bool = True) -> None:
        """Without `keep_docs`, `docs` is empty: the entries' ids are read from the qrels
        again where they are needed (a gold set's rows may be made when read, and holding
        their ids would hold a string per entry)."""
        if not keep_docs and isinstance(qrels, UnitRows):
            self._setup(list(qrels), *qrels.sizes_and_grades(), [], relevance_level)
            return
        self._setup(list(qrels), *_flatten_qrels(qrels.values(), keep_docs), relevance_level)

    @classmethod
    def from_arrays(
        cls,
        query_ids: list[str],
        lengths: IntArray,
        grades: IntArray,
        docs: npt.NDArray[np.bytes_],
        relevance_level: int,
    ) -> _QrelsIndex:
        """The index of qrels given as arrays: per query its entries, per entry its grade
        and doc id (UTF-8 bytes), grouped by query."""
        index = cls.__new__(cls)
        index._setup(query_ids, lengths, grades, docs, relevance_level)
        return index

    def _setup(
        self,
        all_ids: list[str],
        lengths: IntArray,
        grades: IntArray,
        docs: list[str] | npt.NDArray[np.bytes_],
        relevance_level: int,
    ) -> None:
        self.all_ids = all_ids
        self.relevance_level = relevance_level
        owner = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
        self.evaluated = np.bincount(owner[grades >= relevance_level], minlength=lengths.size) > 0
        """Per qrels query: whether it has a relevant document."""
        self.query_ids = _kept(all_ids, self.evaluated)
        self.rejection = _kept(all_ids, ~self.evaluated)
        kept = self.evaluated[owner]
        self.docs: Any = docs[kept] if isinstance(docs, np.ndarray) else _kept(docs, kept)
        """Per entry: its document id (UTF-8 bytes when built `from_arrays`)."""
        self.grades = grades[kept]
        """Per entry: its grade."""
        self.query = (np.cumsum(self.evaluated) - 1)[owner[kept]]
        """Per entry: its query's index among the evaluated queries."""
        self.count = np.bincount(self.query, minlength=len(self.query_ids))
        """Per evaluated query: its entries, which start at `start`."""
        self.start = np.cumsum(self.count) - self.count

    @functools.cached_property
    def where(self) -> IntArray:
        """Per qrels query: its index among the evaluated queries, -1 for a rejection query."""
        where = np.cumsum(self.evaluated) - 1
        where[~self.evaluated] = -1
        where.flags.writeable = False
        return where

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """`where` by qrels query id."""
        return dict(zip(self.all_ids, self.where.tolist(), strict=True))

    def not_in_qrels(self, run: Mapping[str, object], answered: int) -> int:
        """Run queries not in the qrels, given how many evaluated queries the run answers."""
        return len(run) - answered - sum(map(run.__contains__, self.rejection))

    def locate(self, run_ids: Sequence[str], start: int = 0) -> IntArray:
        """Per run query: its evaluated index, -1 for a rejection query, -2 when not in qrels.

        Run queries that are the qrels queries from `start` on, in their order (a run
        and its qrels are often written alike), are placed without a lookup each.
        """
        if self.all_ids[start : start + len(run_ids)] == list(run_ids):
            return self.where[start : start + len(run_ids)]
        lookups = map(self.position.get, run_ids, itertools.repeat(-2))
        return np.fromiter(lookups, np.int64, len(run_ids))

    def entries_of(self, queries: IntArray) -> tuple[IntArray, IntArray, list[str]]:
        """The entries of these queries, grouped by query: indices, counts, doc ids."""
        if np.array_equal(queries, np.arange(len(self.query_ids))):
            return np.arange(len(self.docs)), self.count, self.docs
        counts = self.count[queries]
        entries = _ranges(self.start[queries], counts)
        return entries, counts, list(map(self.docs.__getitem__, entries.tolist()))

    def ideal(self) -> tuple[IntArray, IntArray, IntArray]:
        """Per positive entry, by query then grade descending: query, position, grade."""
        # Each step's arrays replace the last's (an entry's worth each, at the gate's peak).
        positive = self.grades > 0
        query, grades = self.query[positive], self.grades[positive]
        del positive
        order = np.lexsort((-grades, query))
        query, grades = query[order], grades[order]
        del order
        count = np.bincount(query, minlength=len(self.query_ids))
        positions = np.arange(1, query.size + 1, dtype=np.int64)
        positions -= np.repeat(np.cumsum(count) - count, count)
        return query, positions, grades

    def freeze(
        self, hit_entries: IntArray, hit_rank: IntArray, answered: npt.NDArray[np.bool_], other: int
    ) -> Judgments:
        """Judgments from the entries that were retrieved and their ranks.

        `answered` flags the evaluated queries found in the run; `other` counts the run
        queries that are not in the qrels.
        """
        hit_query = self.query[hit_entries]
        # One stable sort on a combined key orders the hits by query, then rank.
        key = hit_query * (int(hit_rank.max(initial=0)) + 1)
        key += hit_rank
        order = np.argsort(key, kind="stable")
        del key
        labelled_query = hit_query[order]
        del hit_query  # not held while the ideal orders are made, the judging's peak
        labelled_rank = hit_rank[order].astype(np.int64, copy=False)
        hit_grade = self.grades[hit_entries][order]
        positive = hit_grade > 0
        if positive.all():  # no hit judged not relevant: the labelled hits are the hits
            hits_query, hits_rank = labelled_query, labelled_rank
        else:
            hits_query, hits_rank, hit_grade = (
                labelled_query[positive],
                labelled_rank[positive],
                hit_grade[positive],
            )
        del positive, order
        ideal_query, ideal_position, ideal_grade = self.ideal()
        relevant = self.grades >= self.relevance_level
        return Judgments(
            query_ids=tuple(self.query_ids),
            num_relevant=np.bincount(self.query[relevant], minlength=len(self.query_ids)),
            hit_query=hits_query,
            hit_rank=hits_rank,
            hit_grade=hit_grade,
            ideal_query=ideal_query,
            ideal_position=ideal_position,
            ideal_grade=ideal_grade,
            labelled_query=labelled_query,
            labelled_rank=labelled_rank,
            relevance_level=self.relevance_level,
            missing=tuple(itertools.compress(self.query_ids, (~answered).tolist())),
            rejection=tuple(self.rejection),
            not_in_gold=other,
        )


def judge_ranked(qrels: Qrels, run: RankedRun, relevance_level: int = 1) -> Judgments:
    """Judgments for runs whose lists are already in rank order. Each list is looked
    up once and let go once its query's entries are found in it, so a run whose lists
    are made when read (`llm_eval.runs.Rankings`) is never held whole."""
    index = _QrelsIndex(qrels, relevance_level, keep_docs=False)
    # Each evaluated query's row is read again, in the order its entries were numbered:
    # a row made when read (a gold query's compact labels) is let go after its lookups.
    every = qrels.unit_rows() if isinstance(qrels, UnitRows) else iter(qrels.values())
    rows = itertools.compress(every, index.evaluated.tolist())
    # Held as machine integers, not as Python ints: a million queries' hits would
    # otherwise hold an int object each (28 bytes) at the gate's peak.
    hit_entries = array.array("q")
    hit_rank = array.array("q")
    answered = bytearray(len(index.query_ids))
    start = 0
    for query, (query_id, row) in enumerate(zip(index.query_ids, rows, strict=True)):
        ranking = run.get(query_id)
        if ranking is not None:
            answered[query] = 1
            for entry, doc in enumerate(row, start):
                if doc in ranking:  # a miss raises no exception: most labels are missed
                    hit_rank.append(ranking.index(doc) + 1)
                    hit_entries.append(entry)
        start += len(row)
    told = np.frombuffer(answered, dtype=np.uint8).astype(np.bool_)
    return index.freeze(
        np.frombuffer(hit_entries, dtype=np.int64),
        np.frombuffer(hit_rank, dtype=np.int64),
        told,
        index.not_in_qrels(run, int(told.sum())),
    )


def judge_scored(qrels: Qrels, run: ScoredRun, relevance_level: int = 1) -> Judgments:
    """Judgments for `{query_id: {doc_id: score}}` runs, ranked as trec_eval ranks them."""
    index = _QrelsIndex(qrels, relevance_level)
    # A query missing from the run reads as the empty `_ABSENT`, told apart by identity.
    lists = map(run.get, index.query_ids, itertools.repeat(_ABSENT))
    entries, ranks, read = _scored_hits(index, np.arange(len(index.query_ids)), lists)
    answered = np.fromiter(map(operator.is_not, read, itertools.repeat(_ABSENT)), np.bool_)
    return index.freeze(entries, ranks, answered, index.not_in_qrels(run, int(answered.sum())))


def _scored_hits(
    index: _QrelsIndex, queries: IntArray, lists: Iterable[Mapping[str, float]]
) -> tuple[IntArray, IntArray, list[dict[str, float]]]:
    """Entries retrieved in `lists` (one per query of `queries`), ranks, lists read."""
    entries, counts, docs = index.entries_of(queries)
    read, lengths, flat, scores = _read_scores(lists, counts.tolist(), docs)
    if np.isnan(flat).any():
        raise InputError("run scores must be numbers, found NaN")
    # No list holds a NaN, so a NaN looked up is a relevant document not retrieved.
    hits = np.flatnonzero(~np.isnan(scores))
    hit_rows = np.repeat(np.arange(len(read), dtype=np.int64), counts)[hits]
    hit_scores = scores[hits].astype(np.float32)
    better, equal = _count_better_and_equal(flat, lengths, hit_rows, hit_scores)
    ranks = better + 1
    # Every hit equals itself; a second equal score is a tie, broken by doc id.
    for i in np.flatnonzero(equal > 1).tolist():
        ranks[i] += _tied_ahead(read[hit_rows[i]], docs[hits[i]], hit_scores[i])
    return entries[hits], ranks, read


def _read_scores(
    lists: Iterable[Mapping[str, float]], counts: list[int], docs: list[str]
) -> tuple[list[dict[str, float]], IntArray, Float32Array, FloatArray]:
    """The lists (as dicts), their lengths and scores (flat), and the score of each of `docs`.

    `counts[i]` of the `docs` are looked up in the `i`-th list; an absent one scores NaN.
    The lists are read a few at a time, values first, so that a list is still in the
    processor's cache when its documents are looked up: about a third faster than
    separate passes over all lists.
    """
    ends = list(itertools.accumulate(counts, initial=0))
    read: list[dict[str, float]] = []
    sizes: list[int] = []
    flat: list[Float32Array] = [np.zeros(0, np.float32)]
    found: list[FloatArray] = [np.zeros(0, np.float64)]
    source = iter(lists)
    while batch := _as_dicts(list(itertools.islice(source, _READ_BATCH))):
        start, stop = len(read), len(read) + len(batch)
        read += batch
        batch_sizes = list(map(len, batch))
        sizes += batch_sizes
        values = itertools.chain.from_iterable(map(dict.values, batch))
        flat.append(np.fromiter(values, np.float32, sum(batch_sizes)))
        owners = itertools.chain.from_iterable(map(itertools.repeat, batch, counts[start:stop]))
        looked_up = map(
            dict.get, owners, docs[ends[start] : ends[stop]], itertools.repeat(math.nan)
        )
        found.append(np.fromiter(looked_up, np.float64, ends[stop] - ends[start]))
    return read, np.array(sizes, dtype=np.int64), np.concatenate(flat), np.concatenate(found)


def _count_better_and_equal(
    flat: Float32Array, lengths: IntArray, rows: IntArray, scores: Float32Array
) -> tuple[IntArray, IntArray]:
    """Per hit: the scores in its list (`rows[i]`) above its score, and those equal to it.

    `flat` holds the lists' scores one list after the other, `lengths` says how many
    each has. Lists of about the same length (within a factor of two) are compared
    as one matrix padded to the longest: never more than twice the cells, however
    much the lengths differ.
    """
    better = np.zeros(rows.size, dtype=np.int64)
    equal = np.zeros(rows.size, dtype=np.int64)
    size_class = np.frexp(lengths)[1]
    for size in np.unique(size_class[rows]).tolist():
        members = np.flatnonzero(size_class == size)
        mine = np.flatnonzero(size_class[rows] == size)
        matrix = _padded(flat, lengths, members)
        in_matrix = np.searchsorted(members, rows[mine])
        better[mine], equal[mine] = _count_in_rows(matrix, in_matrix, scores[mine])
    return better, equal


def _padded(flat: Float32Array, lengths: IntArray, members: IntArray) -> Float32Array:
    """The scores of the lists `members`, one row each, padded with -inf (which beats nothing)."""
    if members.size < lengths.size:
        offsets = np.cumsum(lengths) - lengths
        flat, lengths = flat[_ranges(offsets[members], lengths[members])], lengths[members]
    width = int(lengths.max(initial=0))
    if flat.size == width * lengths.size:
        return flat.reshape(lengths.size, width)
    matrix = np.full((lengths.size, width), -np.inf, dtype=np.float32)
    # Row-major boolean assignment fills each row's first `length` cells in order.
    matrix[np.arange(width) < lengths[:, None]] = flat
    return matrix


def _count_in_rows(
    matrix: Float32Array, rows: IntArray, scores: Float32Array
) -> tuple[IntArray, IntArray]:
    """Per hit: the cells of its row greater than its score, and those equal to it."""
    better = np.empty(rows.size, dtype=np.int64)
    equal = np.empty(rows.size, dtype=np.int64)
    step = max(1, _RANK_CHUNK_CELLS // max(1, matrix.shape[1]))
    for start in range(0, rows.size, step):
        block = matrix[rows[start : start + step]]
        threshold = scores[start : start + step, None]
        better[start : start + step] = (block > threshold).sum(axis=1, dtype=np.int32)
        equal[start : start + step] = (block == threshold).sum(axis=1, dtype=np.int32)
    return better, equal


def _tied_ahead(scored: Mapping[str, float], doc: str, score: np.float32) -> int:
    """Documents with the same score ranked ahead of `doc`: trec_eval puts larger ids first.

    Python compares strings by code point, which for UTF-8 text is the byte order
    trec_eval's strcmp uses.
    """
    return sum(1 for other, value in scored.items() if np.float32(value) == score and other > doc)
