"""TREC run and qrels files read as columns (`llm_eval.columns`): the fast way in.

A run file is read a block of whole lines at a time and split by numpy passes over
its bytes, without a Python object per line: when every line of a block is plain
ASCII with six fields one space apart, the separators' positions give each field,
the query ids, doc ids and scores are copied out as fixed-width byte arrays, and the
scores are converted by `_decimals`. Any other block (blank lines, tabs, extra
columns, non-ASCII text, a line in error) is read line by line, as `run_io` reads
every line. The reading rules are `run_io`'s, and so are the errors: on any error the
file is read again by `run_io.iter_trec_scores`, which words it and names its line.
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from llm_eval.columns import (
    BytesArray,
    QrelsColumns,
    RunColumns,
    qrels_columns,
    refuse_repeats,
    run_columns,
)
from llm_eval.errors import InputError
from llm_eval.judgments import FloatArray, IntArray
from llm_eval.qrels_io import load_qrels
from llm_eval.runs_io import _scattered_queries, _trec_fields, iter_trec_scores
from llm_eval.textio import open_regular

# Bytes read at a time: large enough that the fixed cost of a block's numpy calls is
# small beside its lines, small enough to stay a few MiB in memory.
BLOCK_BYTES = 1 << 21

_SPACE, _NEWLINE, _MINUS, _DOT, _ZERO, _NINE = b" \n-.09"
# Exact powers of ten: a whole number below 2**53 divided by one is correctly rounded.
_POWERS = 10.0 ** np.arange(23)
_EXACT_LIMIT = 2**53
_MAX_DIGITS = 18


def read_trec_run(path: str | Path) -> RunColumns:
    """Read a TREC run file (`query_id Q0 doc_id rank score tag`) into columns.

    As `run_io.load_run` reads it: the rank column is ignored, a document listed twice
    for a query is an error, a query's lines may be apart.
    """
    chunks = list(iter_trec_columns(path))
    if not chunks:
        raise InputError("the run file has no queries", path=path)
    last = {query_id: number for number, chunk in enumerate(chunks) for query_id in chunk.query_ids}
    kept = []
    for number, chunk in enumerate(chunks):
        keep = np.array([last[q] == number for q in chunk.query_ids], dtype=np.bool_)
        rows = np.repeat(keep, chunk.counts)
        ids = tuple(itertools.compress(chunk.query_ids, keep.tolist()))
        kept.append(RunColumns(ids, chunk.counts[keep], chunk.doc_ids[rows], chunk.scores[rows]))
    return RunColumns(
        tuple(itertools.chain.from_iterable(c.query_ids for c in kept)),
        np.concatenate([c.counts for c in kept]),
        np.concatenate([c.doc_ids for c in kept]),
        np.concatenate([c.scores for c in kept]),
    )


def read_qrels(path: str | Path) -> QrelsColumns:
    """Read a TREC qrels file or a BEIR qrels TSV (as `qrels.load_qrels`) into columns."""
    qrels = load_qrels(path)
    rows = [(q, d, g) for q, judged in qrels.items() for d, g in judged.items()]
    query_ids, doc_ids, grades = zip(*rows, strict=True)
    return qrels_columns(np.array(query_ids), np.array(doc_ids), np.array(grades, np.int64))


def iter_trec_columns(path: str | Path) -> Iterator[RunColumns]:
    """Read a TREC run file as columns, a part of whole queries at a time.

    Only a block of the file and one part are held at a time. When a query's lines
    are apart, the file is read again and such queries come last; a part may then
    repeat a query of an earlier one, and replaces it (as `iter_trec_scores` does).
    """
    try:
        try:
            yield from _ColumnReader(path, frozenset()).chunks()
        except _NotContiguous:
            scattered = frozenset(q.encode("utf-8") for q in _scattered_queries(path))
            yield from _ColumnReader(path, scattered).chunks()
    except InputError:
        # Worded, and placed at its line, by the line-by-line reader.
        for _ in iter_trec_scores(path):
            pass
        raise


class _NotContiguous(Exception):
    """A query's lines resumed after other queries' lines."""


@dataclass(frozen=True, slots=True)
class _Block:
    """The lines of a block of the file: per stretch of one query's lines its id and
    size; per line its doc id and score."""

    ids: list[bytes]
    counts: IntArray
    docs: BytesArray
    scores: FloatArray

    def rows(self, first: int, stop: int) -> tuple[BytesArray, FloatArray]:
        """Doc ids and scores of the stretches `first` to `stop - 1`."""
        ends = np.concatenate(([0], np.cumsum(self.counts)))
        return self.docs[ends[first] : ends[stop]], self.scores[ends[first] : ends[stop]]


class _ColumnReader:
    """Groups a run's lines into whole queries, a block at a time (as `run_io._TrecReader`)."""

    def __init__(self, path: str | Path, scattered: frozenset[bytes]) -> None:
        self.path = path
        self.scattered = scattered
        """Queries whose lines are apart: collected in `held` until the end."""
        self.held: list[tuple[BytesArray, BytesArray, FloatArray]] = []
        self.seen: set[bytes] = set()
        """Every query that was complete once."""
        self.open_id: bytes | None = None
        self.open: list[tuple[BytesArray, FloatArray]] = []
        """The query being read: more of its lines may follow in the next block."""

    def chunks(self) -> Iterator[RunColumns]:
        """The complete queries of each block; the last open query and held ones last."""
        for first, raw in _byte_blocks(self.path):
            block = _regular_block(raw) or _irregular_block(raw, self.path, first)
            chunk = self.take(self._without_scattered(block))
            if chunk is not None:
                yield chunk
        rest = self.held
        if self.open_id is not None:
            docs, scores = (np.concatenate(c) for c in zip(*self.open, strict=True))
            rest = [(np.full(docs.size, self.open_id), docs, scores), *rest]
        if rest:
            ids, docs, scores = (np.concatenate(c) for c in zip(*rest, strict=True))
            yield run_columns(ids, docs, scores)

    def _without_scattered(self, block: _Block) -> _Block:
        """The block, its scattered queries' lines moved to `held`."""
        held = np.array([i in self.scattered for i in block.ids], dtype=np.bool_)
        if not held.any():
            return block
        rows = np.repeat(held, block.counts)
        ids = np.repeat(np.array(block.ids, dtype=np.bytes_), block.counts)
        self.held.append((ids[rows], block.docs[rows], block.scores[rows]))
        kept = [i for i in block.ids if i not in self.scattered]
        return _Block(kept, block.counts[~held], block.docs[~rows], block.scores[~rows])

    def take(self, block: _Block) -> RunColumns | None:
        """The queries this block completes; the block's last query stays open."""
        if not block.ids:
            return None
        first = 0
        if block.ids[0] == self.open_id:
            self.open.append(block.rows(0, 1))
            first = 1
        new = block.ids[first:]
        if not new:
            return None
        if len(set(new)) < len(new) or self.open_id in new or not self.seen.isdisjoint(new):
            raise _NotContiguous
        complete = block.ids[first:-1]
        docs, scores = block.rows(first, len(block.ids) - 1)
        counts = block.counts[first:-1]
        if self.open_id is not None:
            complete = [self.open_id, *complete]
            open_docs, open_scores = (np.concatenate(c) for c in zip(*self.open, strict=True))
            docs, scores = np.concatenate((open_docs, docs)), np.concatenate((open_scores, scores))
            counts = np.concatenate(([open_docs.size], counts))
        self.seen.update(complete)
        self.open_id, self.open = block.ids[-1], [block.rows(len(block.ids) - 1, len(block.ids))]
        if not complete:
            return None
        ids = tuple(i.decode("utf-8") for i in complete)
        return refuse_repeats(RunColumns(ids, counts.astype(np.int64), docs, scores))


def _byte_blocks(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """`(first_line_number, raw)`: the file a block of whole lines at a time, each block
    ending with a newline; a UTF-8 BOM at the start is dropped."""
    with open_regular(path) as handle:
        head = handle.read(len(codecs.BOM_UTF8))
        partial = b"" if head == codecs.BOM_UTF8 else head
        number = 1
        while data := handle.read(BLOCK_BYTES):
            cut = data.rfind(b"\n") + 1
            if cut:
                block = partial + data[:cut]
                yield number, block
                number += block.count(b"\n")
                partial = data[cut:]
            else:
                partial += data
        if partial:
            yield number, partial + b"\n"


def _regular_block(raw: bytes) -> _Block | None:
    """The block's lines when each is ASCII with six fields one space apart; else None."""
    data = np.frombuffer(raw, dtype=np.uint8)
    lines = raw.count(b"\n")
    found = np.flatnonzero(data <= _SPACE)
    if lines == 0 or found.size != 6 * lines or (data >= 0x80).any():
        return None
    separators = found.reshape(lines, 6)
    if (data[separators[:, 5]] != _NEWLINE).any() or (data[separators[:, :5]] != _SPACE).any():
        return None
    starts = np.concatenate(([0], found[:-1] + 1)).reshape(lines, 6)
    lengths = separators - starts
    if not lengths.all():
        return None
    widths = [-(-int(lengths[:, c].max()) // 8) * 8 for c in (0, 2, 4)]
    padded = np.zeros(data.size + max(widths), dtype=np.uint8)
    padded[: data.size] = data
    windows = sliding_window_view(padded, max(widths))
    query_ids, docs, score_texts = (
        _field(windows, starts[:, c], lengths[:, c], width)
        for c, width in zip((0, 2, 4), widths, strict=True)
    )
    scores = _decimals(score_texts, lengths[:, 4])
    if scores is None:
        return None
    ids = query_ids.view(f"S{widths[0]}").ravel()
    heads = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    counts = np.diff(np.concatenate((heads, [lines])))
    return _Block(ids[heads].tolist(), counts, docs.view(f"S{widths[1]}").ravel(), scores)


def _field(
    windows: npt.NDArray[np.uint8], starts: IntArray, lengths: IntArray, width: int
) -> npt.NDArray[np.uint8]:
    """One field of every line, a row each, zero-padded to `width` bytes."""
    rows = windows[starts, :width]
    rows *= np.arange(width) < lengths[:, None]
    return rows


def _decimals(texts: npt.NDArray[np.uint8], lengths: IntArray) -> FloatArray | None:
    """The numbers in `texts` (one a row, zero-padded), exactly as `float` reads them;
    None when one is not a finite number.

    A decimal `[-]digits[.digits]` of at most 18 digits whose digits, read as a whole
    number, are below 2**53 is that number divided by an exact power of ten: one
    correctly rounded division, so the value `float` gives. Other texts go to `float`.
    """
    digit = (texts >= _ZERO) & (texts <= _NINE)
    dot = texts == _DOT
    negative = texts[:, 0] == _MINUS
    digits, dots = digit.sum(axis=1), dot.sum(axis=1)
    mantissa = np.zeros(texts.shape[0], dtype=np.int64)
    decimals = np.zeros(texts.shape[0], dtype=np.int64)
    after_dot = np.zeros(texts.shape[0], dtype=np.bool_)
    for column in range(texts.shape[1]):
        is_digit = digit[:, column]
        mantissa = np.where(is_digit, mantissa * 10 + texts[:, column] - _ZERO, mantissa)
        decimals += after_dot & is_digit
        after_dot |= dot[:, column]
    simple = (digits + dots + negative == lengths) & (dots <= 1) & (digits >= 1)
    simple &= (digits <= _MAX_DIGITS) & (mantissa < _EXACT_LIMIT)
    values = mantissa / _POWERS[np.minimum(decimals, _POWERS.size - 1)]
    values[negative] = -values[negative]
    for row in np.flatnonzero(~simple).tolist():
        try:
            values[row] = float(texts[row, : lengths[row]].tobytes())
        except ValueError:
            return None
    return values if np.isfinite(values).all() else None


def _irregular_block(raw: bytes, path: str | Path, first: int) -> _Block:
    """The block's lines read one at a time, with `run_io`'s rules and errors."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not valid UTF-8", path=path, line=first) from None
    fields = [_trec_fields(line, path, n) for n, line in enumerate(text.split("\n"), first)]
    rows = [f for f in fields if f is not None]
    stretches = [(key, len(list(group))) for key, group in itertools.groupby(r[0] for r in rows)]
    ids = [key.encode("utf-8") for key, _ in stretches]
    counts = [count for _, count in stretches]
    docs = np.array([r[1].encode("utf-8") for r in rows], dtype=np.bytes_)
    scores = np.array([r[2] for r in rows], dtype=np.float64)
    return _Block(ids, np.array(counts, dtype=np.int64), docs, scores)
