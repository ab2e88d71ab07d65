"""Runs and qrels as columns (numpy arrays), and judging a run given that way.

A `RunColumns` holds a scored run as three columns, its rows grouped by query: the
form a TREC run file is read into block by block (`llm_eval.trec_columns_io`) and what
`llm_eval.evaluate_columns` takes, built from any arrays (numpy, pandas, pyarrow)
by `run_columns`. Doc ids are kept as UTF-8 bytes in a numpy `S` array, so that
every step runs over whole arrays:

- a 64-bit hash of each doc id and its query (the id's bytes read as machine words)
  finds the rows that are in the qrels, through a small table of the hashes of the
  qrels entries of a slice of the run's queries; a match is then checked byte for
  byte, so a hash collision cannot credit a document;
- the same hashes find a document listed twice for one query (an error, as in a
  TREC file);
- ranks follow trec_eval as `judge_scored` does (score descending, compared in single
  precision; ties broken by doc id in descending byte order), counting the scores that
  beat each relevant document rather than sorting every list; in a list already in
  rank order (as TREC runs are written) a document's rank is its position.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval.errors import InputError
from llm_eval.judgments import (
    Float32Array,
    FloatArray,
    IntArray,
    Judgments,
    Qrels,
    _count_better_and_equal,
    _QrelsIndex,
    _ranges,
)

BytesArray = npt.NDArray[np.bytes_]
HashArray = npt.NDArray[np.uint64]

_MULTIPLIER = np.uint64(0xFF51AFD7ED558CCD)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SHIFT = np.uint64(29)

# Rows judged at a time: their hashes and their queries' qrels entries stay in cache.
_SLICE_ROWS = 1 << 17


@dataclass(frozen=True, slots=True, eq=False)
class RunColumns:
    """A scored run as columns: rows grouped by query, each query in one group, no doc
    id twice in a query (`run_columns` and the file readers check it)."""

    query_ids: tuple[str, ...]
    """Per group: its query id."""
    counts: IntArray
    """Per group: its number of rows (at least one)."""
    doc_ids: BytesArray
    """Per row: the doc id, UTF-8 encoded."""
    scores: FloatArray
    """Per row: the score (finite or infinite, never NaN)."""

    def query_id_column(self) -> npt.NDArray[np.str_]:
        """Per row: its query id."""
        return np.repeat(np.array(self.query_ids, dtype=np.str_), self.counts)


@dataclass(frozen=True, slots=True, eq=False)
class QrelsColumns:
    """Relevance judgments as columns: rows grouped by query, each query in one group."""

    query_ids: tuple[str, ...]
    """Per group: its query id."""
    counts: IntArray
    """Per group: its number of judged documents (at least one)."""
    doc_ids: BytesArray
    """Per row: the doc id, UTF-8 encoded."""
    grades: IntArray
    """Per row: the grade (negative grades count as judged non-relevant)."""

    def to_dict(self) -> dict[str, dict[str, int]]:
        """`{query_id: {doc_id: grade}}`, the form `llm_eval.evaluate` takes."""
        docs = [doc.decode("utf-8") for doc in self.doc_ids.tolist()]
        grades = self.grades.tolist()
        ends = list(itertools.accumulate(self.counts.tolist(), initial=0))
        return {
            query_id: dict(zip(docs[start:end], grades[start:end], strict=True))
            for query_id, start, end in zip(self.query_ids, ends, ends[1:], strict=False)
        }


def run_columns(query_ids: Any, doc_ids: Any, scores: Any) -> RunColumns:
    """A `RunColumns` from three equally long columns: numpy arrays, lists, or a pandas
    or pyarrow frame's columns. Ids may be text or UTF-8 bytes; rows of one query need
    not be together (they are grouped, keeping their order)."""
    values = np.asarray(scores, dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("run scores must be numbers, found NaN")
    groups, counts, order = _grouped(query_ids, values.size)
    docs = utf8_column(doc_ids, values.size)
    if order is not None:
        docs, values = docs[order], values[order]
    return refuse_repeats(RunColumns(groups, counts, docs, values))


def qrels_columns(query_ids: Any, doc_ids: Any, grades: Any) -> QrelsColumns:
    """A `QrelsColumns` from three equally long columns, as `run_columns` takes them."""
    values = np.asarray(grades)
    if values.dtype.kind not in "iu":
        as_int = values.astype(np.int64)
        if not np.array_equal(as_int, values):
            raise InputError("qrels grades must be whole numbers")
        values = as_int
    groups, counts, order = _grouped(query_ids, values.size)
    docs = utf8_column(doc_ids, values.size)
    if order is not None:
        docs, values = docs[order], values[order]
    repeat = _first_repeat(groups, counts, docs)
    if repeat is not None:
        raise InputError(f"document {repeat[1]!r} is judged twice for query {repeat[0]!r}")
    return QrelsColumns(groups, counts, docs, values.astype(np.int64))


def utf8_column(column: Any, size: int) -> BytesArray:
    """The ids of a column as a numpy array of UTF-8 bytes."""
    array = np.asarray(column)
    if array.ndim != 1 or array.size != size:
        raise InputError(f"columns must be one-dimensional and {size} long, got {array.shape}")
    if array.dtype.kind == "S":
        return array
    if array.dtype.kind == "O":
        items = array.tolist()
        if all(isinstance(item, bytes) for item in items):
            return np.array(items, dtype=np.bytes_) if items else np.zeros(0, "S1")
        array = np.array([str(item) for item in items], dtype=np.str_)
    elif array.dtype.kind != "U":
        array = array.astype(np.str_)
    return _encode(array)


def _encode(array: npt.NDArray[np.str_]) -> BytesArray:
    """Text as UTF-8 bytes; ASCII text (the usual ids) without a pass per element."""
    width = array.dtype.itemsize // 4
    if array.size == 0 or width == 0:
        return np.zeros(array.size, dtype="S1")
    code_points = np.ascontiguousarray(array).view(np.uint32).reshape(array.size, width)
    if int(code_points.max()) < 0x80:
        return code_points.astype(np.uint8).view(f"S{width}").ravel()
    return np.char.encode(array, "utf-8")


def _grouped(column: Any, size: int) -> tuple[tuple[str, ...], IntArray, IntArray | None]:
    """Query ids of the groups, rows per group, and the order that groups the rows
    (None when each query's rows are together already)."""
    ids = np.asarray(column)
    if ids.ndim != 1 or ids.size != size:
        raise InputError(f"columns must be one-dimensional and {size} long, got {ids.shape}")
    if size == 0:
        return (), np.zeros(0, dtype=np.int64), None
    starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    counts = np.diff(np.concatenate(([0], starts, [size]))).astype(np.int64)
    heads = [_text(item) for item in ids[np.concatenate(([0], starts))].tolist()]
    if len(set(heads)) == len(heads):
        return tuple(heads), counts, None
    # A query in more than one stretch: gather its rows, in the order they came.
    first: dict[str, int] = {}
    codes = np.fromiter((first.setdefault(h, len(first)) for h in heads), np.int64, len(heads))
    order = np.argsort(np.repeat(codes, counts), kind="stable")
    return tuple(first), np.bincount(codes, weights=counts).astype(np.int64), order


def _text(item: object) -> str:
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def doc_hashes(docs: BytesArray, salt: IntArray, seed: int = 0) -> HashArray:
    """A 64-bit hash of each doc id's bytes and its salt (its query, say)."""
    return _mixed(docs, _salted(salt, seed))


def _salted(salt: IntArray, seed: int) -> HashArray:
    """The start of each hash, from its salt: taken per query and repeated per row, it
    costs one pass over the rows where three would be needed per row."""
    hashes = salt.astype(np.uint64)
    hashes += np.uint64(seed + 1)
    hashes *= _GOLDEN
    return hashes


def _mixed(docs: BytesArray, hashes: HashArray) -> HashArray:
    """`hashes` (changed in place) with each doc id's bytes mixed in: read as machine
    words, the first and every other word but the zero words of padding mixed in by a
    multiplication and a shift, so that an id hashes alike in arrays of any width."""
    width = -(-max(docs.dtype.itemsize, 1) // 8) * 8
    padded = np.ascontiguousarray(docs, dtype=f"S{width}")
    words = padded.view(np.uint64).reshape(docs.size, width // 8)
    mixed, shifted = np.empty_like(hashes), np.empty_like(hashes)
    for number, column in enumerate(words.T):
        np.bitwise_xor(hashes, column, out=mixed)
        mixed *= _MULTIPLIER
        np.right_shift(mixed, _SHIFT, out=shifted)
        mixed ^= shifted
        if number == 0:
            hashes, mixed = mixed, hashes
        else:
            np.copyto(hashes, mixed, where=column != 0)
    return hashes


class _EntryKeys:
    """The qrels entries of evaluated queries, found by hash of (query, doc id)."""

    def __init__(self, index: _QrelsIndex) -> None:
        self.index = index
        self.docs = utf8_column(index.docs, len(index.docs))
        # Seeds are tried until no two entries share a key (almost always the first).
        for seed in itertools.count():
            self.keys = doc_hashes(self.docs, index.query, seed)
            ordered = np.sort(self.keys)
            if not (ordered[1:] == ordered[:-1]).any():
                self.seed = seed
                break

    def match(self, chunk: RunColumns, queries: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Rows whose (query, doc id) is a qrels entry, that entry, and the row's group.

        `queries[g]` is group `g`'s evaluated query (negative for others). Rows are
        looked up among these queries' entries only: a small table, in the processor's
        cache.
        """
        evaluated = queries[queries >= 0]
        entries = _ranges(self.index.start[evaluated], self.index.count[evaluated])
        if entries.size == 0:
            return entries[:0], entries[:0], entries[:0]
        hashes = _mixed(chunk.doc_ids, np.repeat(_salted(queries, self.seed), chunk.counts))
        rows, found = _lookup(self.keys[entries], hashes)
        entries = entries[found]
        groups = np.searchsorted(np.cumsum(chunk.counts), rows, side="right")
        same = (self.index.query[entries] == queries[groups]) & (
            self.docs[entries] == chunk.doc_ids[rows]
        )
        return rows[same], entries[same], groups[same]


_SHARED = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
"""What a slot of `_lookup`'s table that two keys share holds: no empty slot holds it."""


def _lookup(table_keys: HashArray, keys: HashArray) -> tuple[IntArray, IntArray]:
    """The keys found in `table_keys` (which are distinct): their indices among `keys`,
    and in `table_keys`.

    An open table of 8 to 16 slots per key, indexed by the keys' top bits (they are
    mixed), holding the key itself: a lookup is one read and a comparison where a
    binary search takes a dozen. An empty slot holds a value with other top bits, which
    no key that reads it equals. The keys found, and the few that read a slot two keys
    share (`_SHARED`), are then looked up by binary search.
    """
    bits = max(4, (table_keys.size * 8).bit_length())
    shift = np.uint64(64 - bits)
    slots = table_keys >> shift
    table = (np.arange(1 << bits, dtype=np.uint64) ^ np.uint64(1)) << shift
    table[slots] = table_keys
    table[np.bincount(slots.view(np.int64), minlength=1 << bits) > 1] = _SHARED
    read = table[(keys >> shift).view(np.int64)]  # signed: numpy casts unsigned indices
    maybe = np.flatnonzero((read == keys) | (read == _SHARED))
    order = np.argsort(table_keys)
    ordered = table_keys[order]
    where = np.minimum(np.searchsorted(ordered, keys[maybe]), ordered.size - 1)
    found = ordered[where] == keys[maybe]
    return maybe[found], order[where[found]]


def judge_columns(
    qrels: Qrels | QrelsColumns, chunks: Iterable[RunColumns], relevance_level: int = 1
) -> Judgments:
    """Judgments for a scored run given as columns, in one part or several (a large run
    file read block by block). A query repeated in a later part replaces the earlier
    one, as `dict.update` would: the run is the union of the parts."""
    if isinstance(qrels, QrelsColumns):
        index = _QrelsIndex.from_arrays(
            list(qrels.query_ids), qrels.counts, qrels.grades, qrels.doc_ids, relevance_level
        )
    else:
        index = _QrelsIndex(qrels, relevance_level)
    keys = _EntryKeys(index)
    # Per evaluated query the part that last listed it; hits of earlier parts are dropped.
    last_part = np.full(len(index.query_ids), -1, dtype=np.int64)
    other: set[str] = set()
    parts = [(np.zeros(0, np.int64),) * 3]
    # Where the next part's queries start among the qrels' if both list them alike.
    following = 0
    for number, chunk in enumerate(chunks):
        queries = index.locate(chunk.query_ids, following)
        following += len(chunk.query_ids)
        last_part[queries[queries >= 0]] = number
        other.update(itertools.compress(chunk.query_ids, (queries == -2).tolist()))
        for groups, piece in _slices(chunk):
            entries, ranks = _judge_chunk(piece, queries[groups], keys)
            parts.append((entries, ranks, np.full(entries.size, number, dtype=np.int64)))
    entries, ranks, numbers = (np.concatenate(column) for column in zip(*parts, strict=True))
    keep = last_part[index.query[entries]] == numbers
    return index.freeze(entries[keep], ranks[keep], last_part >= 0, len(other))


def _slices(chunk: RunColumns) -> Iterator[tuple[slice, RunColumns]]:
    """The run in slices of whole queries of about `_SLICE_ROWS` rows, and their groups:
    the qrels entries of a slice's queries are then few enough to search in cache."""
    ends = np.cumsum(chunk.counts)
    cuts = np.searchsorted(
        ends, np.arange(_SLICE_ROWS, int(ends[-1]) if ends.size else 0, _SLICE_ROWS)
    )
    bounds = [0, *np.unique(cuts + 1).tolist(), len(chunk.query_ids)]
    for start, stop in itertools.pairwise(bounds):
        if start >= stop:
            continue
        first, last = int(ends[start - 1]) if start else 0, int(ends[stop - 1])
        yield (
            slice(start, stop),
            RunColumns(
                chunk.query_ids[start:stop],
                chunk.counts[start:stop],
                chunk.doc_ids[first:last],
                chunk.scores[first:last],
            ),
        )


def _judge_chunk(
    chunk: RunColumns, queries: IntArray, keys: _EntryKeys
) -> tuple[IntArray, IntArray]:
    """The qrels entries retrieved in one part of a run, and their ranks."""
    rows, entries, groups = keys.match(chunk, queries)
    scores = chunk.scores.astype(np.float32)
    starts = np.cumsum(chunk.counts) - chunk.counts
    better, equal = _better_and_equal(scores, starts, chunk.counts, rows, groups)
    ranks = better + 1
    # Every hit equals itself; a second equal score is a tie, broken by doc id.
    for i in np.flatnonzero(equal > 1).tolist():
        start = int(starts[groups[i]])
        members = slice(start, start + int(chunk.counts[groups[i]]))
        tied = chunk.scores[members].astype(np.float32) == scores[rows[i]]
        ranks[i] += int((tied & (chunk.doc_ids[members] > chunk.doc_ids[rows[i]])).sum())
    return entries, ranks


def _better_and_equal(
    scores: Float32Array, starts: IntArray, counts: IntArray, rows: IntArray, groups: IntArray
) -> tuple[IntArray, IntArray]:
    """Per hit (row `rows[i]`, in group `groups[i]`): the scores of its group above its
    score, and those equal to it. In a group listed best first (as TREC runs are), a hit
    with no equal score beside it has its position for the first and one for the
    second; the other hits are counted (`_count_better_and_equal`)."""
    rising = scores[1:] > scores[:-1]
    rising[starts[1:] - 1] = False  # from one group's last row to the next one's first
    unordered = np.zeros(counts.size, dtype=np.bool_)
    unordered[np.searchsorted(starts, np.flatnonzero(rising), side="right") - 1] = True
    hit = scores[rows]
    first, last = starts[groups], starts[groups] + counts[groups] - 1
    tied = ((rows > first) & (scores[np.maximum(rows - 1, 0)] == hit)) | (
        (rows < last) & (scores[np.minimum(rows + 1, scores.size - 1)] == hit)
    )
    slow = np.flatnonzero(unordered[groups] | tied)
    better, equal = rows - first, np.ones(rows.size, dtype=np.int64)
    if slow.size:
        better[slow], equal[slow] = _count_better_and_equal(scores, counts, groups[slow], hit[slow])
    return better, equal


def refuse_repeats(chunk: RunColumns) -> RunColumns:
    """The run; an error naming the first document listed twice for one query, if any."""
    repeat = _first_repeat(chunk.query_ids, chunk.counts, chunk.doc_ids)
    if repeat is not None:
        raise InputError(f"document {repeat[1]!r} is listed twice for query {repeat[0]!r}")
    return chunk


def _first_repeat(
    query_ids: tuple[str, ...], counts: IntArray, docs: BytesArray
) -> tuple[str, str] | None:
    """The query and doc id of the first row whose doc id came before in its query."""
    if docs.size == 0:
        return None
    groups = np.repeat(np.arange(len(query_ids), dtype=np.int64), counts)
    keys = doc_hashes(docs, groups)
    width = int(counts.max(initial=0))
    if width * counts.size <= 2 * keys.size:
        # Lists of about one length (the usual run): sorted a list at a time, in cache,
        # padded with distinct fillers. A repeated key (or a filler equal to a key) is
        # then looked into by the exact search below.
        matrix = np.arange(width * counts.size, dtype=np.uint64).reshape(-1, width)
        matrix[np.arange(width) < counts[:, None]] = keys
        matrix.sort(axis=1)
        if not (matrix[:, 1:] == matrix[:, :-1]).any():
            return None
    order = np.argsort(keys)
    ordered = keys[order]
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    first, second = order[same], order[same + 1]
    repeated = (groups[first] == groups[second]) & (docs[first] == docs[second])
    if not repeated.any():
        return None
    row = int(np.maximum(first, second)[repeated].min())
    return query_ids[int(groups[row])], docs[row].decode("utf-8")


def qrels_from_columns(qrels: Any) -> Qrels | QrelsColumns:
    """Qrels given as a dict, a `QrelsColumns`, or a frame with `query_id`, `doc_id` and
    `grade` columns (a pandas or pyarrow frame, a dict of arrays)."""
    if isinstance(qrels, QrelsColumns):
        return qrels
    columns = _columns(qrels, ("query_id", "doc_id", "grade"))
    if columns is None:
        return qrels
    return qrels_columns(*columns)


def run_from_columns(run: Any) -> RunColumns:
    """A run given as a `RunColumns` or a frame with `query_id`, `doc_id` and `score`
    columns (a pandas or pyarrow frame, a dict of arrays)."""
    if isinstance(run, RunColumns):
        return run
    columns = _columns(run, ("query_id", "doc_id", "score"))
    if columns is None:
        raise InputError(
            "a run in columns is a RunColumns (llm_eval.run_columns) or a frame with "
            "query_id, doc_id and score columns"
        )
    return run_columns(*columns)


def _columns(frame: Any, names: tuple[str, ...]) -> list[Any] | None:
    """The named columns of a frame; None when it has not all of them, or when it is
    a dict of dicts (qrels keyed by query id, whatever the ids are)."""
    columns = []
    for name in names:
        try:
            column = frame[name]
        except (KeyError, TypeError, IndexError, ValueError):
            return None
        if isinstance(column, Mapping):
            return None
        columns.append(column)
    return columns
