"""Judging scored runs whole or in chunks, and reading TREC runs a block at a time.

The block reader is checked against `read_trec_line_by_line`, a plain reading of the
file one line at a time: the same runs and the same errors at the same lines, for
any block size (down to one byte, so that every line and field straddles blocks).
"""

from __future__ import annotations

import codecs
import itertools
import math
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_eval import judgments, runs_io, textio
from llm_eval.columns import RunColumns, judge_columns, run_columns
from llm_eval.errors import InputError
from llm_eval.judgments import Judgments, judge_scored
from llm_eval.runs_io import iter_trec_scores, load_trec_scores
from llm_eval.textio import iter_lines, iter_text_blocks

BLOCK_SIZES = [1, 2, 7, 64, 1 << 16]


def read_trec_line_by_line(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run read one line at a time: what the block reader must reproduce."""
    run: dict[str, dict[str, float]] = {}
    raw = path.read_bytes()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    for number, line in enumerate(raw.split(b"\n"), 1):
        try:
            fields = line.decode("utf-8").split()
        except UnicodeDecodeError as exc:
            reason = f"not valid UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})"
            raise InputError(reason, path=path, line=number) from None
        if not fields:
            continue
        if len(fields) < 6:
            reason = f"expected 6 columns `query_id Q0 doc_id rank score tag`, got {len(fields)}"
            raise InputError(reason, path=path, line=number)
        try:
            score = float(fields[4])
        except ValueError:
            raise InputError(
                f"score must be a number, got {fields[4]!r}", path=path, line=number
            ) from None
        if not math.isfinite(score):
            reason = f"score must be a finite number, got {fields[4]!r}"
            raise InputError(reason, path=path, line=number)
        scored = run.setdefault(fields[0], {})
        if fields[2] in scored:
            reason = f"document {fields[2]!r} is listed twice for query {fields[0]!r}"
            raise InputError(reason, path=path, line=number)
        scored[fields[2]] = score
    return run


@contextmanager
def small_pieces(block_bytes: int, chunk_docs: int = 3) -> Iterator[None]:
    """Read files `block_bytes` at a time and hand out chunks of about `chunk_docs`."""
    with (
        mock.patch.object(textio, "BLOCK_BYTES", block_bytes),
        mock.patch.object(runs_io, "_CHUNK_DOCS", chunk_docs),
    ):
        yield


def columns_of(chunks: Iterable[Mapping[str, Mapping[str, float]]]) -> Iterator[RunColumns]:
    """Each chunk of a scored run as columns (a query with no documents has no rows)."""
    for chunk in chunks:
        rows = [(q, d, s) for q, scored in chunk.items() for d, s in scored.items()]
        query_ids, doc_ids, scores = zip(*rows, strict=True) if rows else ((), (), ())
        yield run_columns(np.array(query_ids, dtype=np.str_), np.array(doc_ids, dtype=np.str_),
                          np.array(scores, dtype=np.float64))  # fmt: skip


def with_rows(run: Mapping[str, Mapping[str, float]]) -> dict[str, Mapping[str, float]]:
    """The queries of a run that list a document: all that columns can hold."""
    return {query: scored for query, scored in run.items() if scored}


def outcome(read: object, path: Path) -> object:
    """What reading returns, or the text of the `InputError` it raises."""
    try:
        return read(path)  # type: ignore[operator]
    except InputError as error:
        return f"error: {error}"


def assert_same_judgments(ours: Judgments, expected: Judgments) -> None:
    for field in Judgments.__slots__:
        got, want = getattr(ours, field), getattr(expected, field)
        if isinstance(want, np.ndarray):
            assert np.array_equal(got, want), field
        else:
            assert got == want, field


def write(folder: Path, content: bytes) -> Path:
    path = folder / "run.trec"
    path.write_bytes(content)
    return path


# --- TREC files -------------------------------------------------------------------

QUERY_IDS = ["q1", "q2", "q3", "q\u00e9"]
DOC_IDS = ["a", "b", "B", "\u00e9", "z10", "z2"]
SCORE_TEXTS = ["1", "0.5", "2.5e-1", "-3", "1.0000001", "1.00000001", "inf", "-inf", "7"]
# Oddities, one line in a few: malformed scores, a no-break space (a field separator
# to str.split), a missing or an extra column, other whitespace, blank lines.
ODD_SCORES = ["nan", "high", "1_0", "1,5", "x\u00a0y"]
ODD_SEPARATORS = ["\t", "  ", " \u2003"]


# Built once: building a strategy inside `draw` costs more than drawing from it.
ODDITIES = st.sampled_from([0.0, 0.05, 0.3])
UNIT = st.floats(0, 1)
QUERY_LISTS = st.lists(st.sampled_from(QUERY_IDS), max_size=5)
DOC_LISTS = st.lists(st.sampled_from(DOC_IDS), max_size=8)
ODD_SCORE_TEXTS = st.sampled_from(ODD_SCORES)
PLAIN_SCORE_TEXTS = st.sampled_from(SCORE_TEXTS)
SEPARATORS = st.sampled_from(ODD_SEPARATORS)
BLANK_LINES = st.sampled_from(["", "  ", "\t"])
COINS = st.booleans()


@st.composite
def trec_lines(draw: st.DrawFn) -> bytes:
    """TREC runs, half of them with the oddities real files have now and then."""
    oddity = draw(ODDITIES)

    def odd() -> bool:
        return draw(UNIT) < oddity

    lines = []
    for query_id in draw(QUERY_LISTS):
        for doc in draw(DOC_LISTS):
            score = draw(ODD_SCORE_TEXTS if odd() else PLAIN_SCORE_TEXTS)
            columns = [query_id, "Q0", doc, "1", score, "tag"]
            if odd():
                columns = draw(st.sampled_from([columns[:5], [*columns, "extra"]]))
            separator = draw(SEPARATORS) if odd() else " "
            lines.append(separator.join(columns))
        if odd():
            lines.append(draw(BLANK_LINES))
    if draw(COINS):
        lines = draw(st.permutations(lines))
    end = "\r\n" if odd() else "\n"
    text = "".join(line + end for line in lines)
    if draw(COINS):
        text = text.rstrip("\r\n")
    content = text.encode()
    if odd():
        content = codecs.BOM_UTF8 + content
    if content and odd():
        cut = draw(st.integers(0, len(content) - 1))
        content = content[:cut] + b"\xff" + content[cut:]
    return content


@settings(max_examples=300, deadline=None)
@given(content=trec_lines(), block_bytes=st.sampled_from(BLOCK_SIZES))
def test_the_block_reader_reads_as_line_by_line(content: bytes, block_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), content)
        expected = outcome(read_trec_line_by_line, path)
        with small_pieces(block_bytes):
            assert outcome(load_trec_scores, path) == expected


def test_a_run_whose_queries_are_apart_reads_as_the_contiguous_one(tmp_path: Path) -> None:
    together = "q1 Q0 a 1 3 t\nq1 Q0 b 2 2 t\nq2 Q0 c 1 1 t\nq3 Q0 a 1 1 t\nq3 Q0 d 2 0 t\n"
    apart = "q1 Q0 a 1 3 t\nq2 Q0 c 1 1 t\nq3 Q0 a 1 1 t\nq1 Q0 b 2 2 t\nq3 Q0 d 2 0 t\n"
    qrels = {"q1": {"b": 1}, "q2": {"c": 1}, "q3": {"d": 2}}
    (tmp_path / "together").write_text(together)
    (tmp_path / "apart").write_text(apart)
    with small_pieces(16, chunk_docs=1):
        chunks = list(iter_trec_scores(tmp_path / "apart"))
        assert load_trec_scores(tmp_path / "apart") == load_trec_scores(tmp_path / "together")
        assert_same_judgments(
            judge_columns(qrels, columns_of(iter_trec_scores(tmp_path / "apart"))),
            judge_columns(qrels, columns_of(iter_trec_scores(tmp_path / "together"))),
        )
    # Read once up to q1's second stretch, then again holding q1 and q3 to the end.
    assert chunks == [
        {"q1": {"a": 3.0}},
        {"q2": {"c": 1.0}},
        {"q2": {"c": 1.0}},
        {"q1": {"a": 3.0, "b": 2.0}, "q3": {"a": 1.0, "d": 0.0}},
    ]


TWICE = "document 'a' is listed twice for query 'q1'"
SHORT = "expected 6 columns `query_id Q0 doc_id rank score tag`, got 2"


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        # the second copy of a document of a query whose lines are apart
        (b"q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 a 2 1 t\n", 3, TWICE),
        # that error comes first, though a later line is malformed too
        (b"q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 a 2 1 t\nq3 x\n", 3, TWICE),
        (b"q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 b 2 1 t\nq3 x\n", 4, SHORT),
        # a duplicate far from the first copy, with the query's lines together
        (b"q1 Q0 a 1 1 t\nq1 Q0 b 1 1 t\nq1 Q0 c 1 1 t\nq1 Q0 a 1 1 t\n", 4, TWICE),
        (b"q1 Q0 a 1 1 t\n\r\nq1 Q0 a 1 1 t\n", 3, TWICE),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 \xff t\n", 2, "not valid UTF-8 (byte 0xff at column 11)"),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 NaN t\n", 2, "score must be a finite number, got 'NaN'"),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 inf t\n", 2, "score must be a finite number, got 'inf'"),
        (b"q1 Q0 a 1 -Infinity t\n", 1, "score must be a finite number, got '-Infinity'"),
        (
            b"q1 Q0 a 1 1e308 t\nq1 Q0 b 1 1e309 t\n",
            2,
            "score must be a finite number, got '1e309'",
        ),
    ],
)
@pytest.mark.parametrize("block_bytes", BLOCK_SIZES)
def test_errors_name_the_first_bad_line(
    tmp_path: Path, content: bytes, line: int, message: str, block_bytes: int
) -> None:
    path = write(tmp_path, content)
    with small_pieces(block_bytes), pytest.raises(InputError) as info:
        load_trec_scores(path)
    assert str(info.value) == f"{path}:{line}: {message}"


def test_ties_across_blocks_are_broken_by_doc_id(tmp_path: Path) -> None:
    """A query read over many blocks ranks its tied documents by id, largest first."""
    # Distinct grades tell the hits apart.
    grades = {"d1": 1, "d3": 2, "d10": 3, "d2": 4, "d30": 5}
    path = tmp_path / "run.trec"
    path.write_text("".join(f"q Q0 {doc} {rank} 0.5 t\n" for rank, doc in enumerate(grades, 1)))
    for block_bytes in BLOCK_SIZES:
        with small_pieces(block_bytes):
            judged = judge_columns({"q": grades}, columns_of(iter_trec_scores(path)))
        ranks = dict(zip(judged.hit_grade.tolist(), judged.hit_rank.tolist(), strict=True))
        assert ranks == {
            grades["d30"]: 1,
            grades["d3"]: 2,
            grades["d2"]: 3,
            grades["d10"]: 4,
            grades["d1"]: 5,
        }


# --- reading text in blocks -------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"a\nbb\r\n\n  \nccc",
        b"\xef\xbb\xbfone\r\ntwo\n",
        b"\xef\xbb\xbf\n\nx",
        "caf\u00e9 \u2013 \u6587\nz\n".encode(),
        b"x" * 300 + b"\n" + b"y" * 5,
    ],
)
@pytest.mark.parametrize("block_bytes", BLOCK_SIZES)
def test_blocks_hold_whole_lines_whatever_their_size(
    tmp_path: Path, content: bytes, block_bytes: int
) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    text = content.removeprefix(codecs.BOM_UTF8).decode()
    expected_lines = [
        (n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), 1) if line.strip()
    ]
    with small_pieces(block_bytes):
        blocks = list(iter_text_blocks(path))
        assert list(iter_lines(path)) == expected_lines
    assert "".join(block for _, block in blocks) == text
    read = ""
    for first, block in blocks:
        assert first == read.count("\n") + 1
        read += block
    assert all(block.endswith("\n") for _, block in blocks[:-1])


@pytest.mark.parametrize("block_bytes", BLOCK_SIZES)
def test_a_bad_byte_is_reported_after_the_lines_before_it(tmp_path: Path, block_bytes: int) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(b"one\ntwo\nthr\xc3(e\nfour\n")
    seen = []
    with small_pieces(block_bytes), pytest.raises(InputError) as info:
        seen.extend(line for line in iter_lines(path))
    assert seen == [(1, "one"), (2, "two")]
    assert str(info.value) == f"{path}:3: not valid UTF-8 (byte 0xc3 at column 4)"


# --- judging in chunks ----------------------------------------------------------

SCORES = st.one_of(st.sampled_from([0.0, 0.5, 1.0, -1.0]), st.floats(-5, 5))


QUERY_COUNTS = st.integers(1, 6)
JUDGED = st.dictionaries(st.sampled_from(DOC_IDS), st.integers(-1, 3), min_size=1)
SCORED = st.dictionaries(st.sampled_from(DOC_IDS), SCORES, max_size=7)
IN_RUN = st.integers(0, 3)  # 0: the query is missing from the run


@st.composite
def qrels_and_run(draw: st.DrawFn) -> tuple[dict, dict]:
    query_ids = [f"q{i}" for i in range(draw(QUERY_COUNTS))]
    qrels = {q: draw(JUDGED) for q in query_ids}
    run = {q: draw(SCORED) for q in [*query_ids, "not-judged"] if draw(IN_RUN)}
    return qrels, run


@settings(max_examples=200, deadline=None)
@given(data=qrels_and_run(), cuts=st.lists(st.integers(0, 7), max_size=3), level=st.integers(1, 2))
def test_chunks_judge_as_the_whole_run(
    data: tuple[dict, dict], cuts: list[int], level: int
) -> None:
    qrels, run = data
    items = list(run.items())
    bounds = [0, *sorted(cuts), len(items)]
    chunks = [dict(items[a:b]) for a, b in itertools.pairwise(bounds)]
    assert_same_judgments(
        judge_columns(qrels, columns_of(chunks), level),
        judge_scored(qrels, with_rows(run), level),
    )


@settings(max_examples=100, deadline=None)
@given(data=qrels_and_run(), stale=qrels_and_run())
def test_a_later_chunk_replaces_a_query_of_an_earlier_one(
    data: tuple[dict, dict], stale: tuple[dict, dict]
) -> None:
    """As `dict.update` would: what counts is the last list given for each query."""
    qrels, run = data
    chunks = [stale[1], run]
    # A chunk's empty list has no rows: the earlier list of that query stands.
    merged = {**with_rows(stale[1]), **with_rows(run)}
    assert_same_judgments(judge_columns(qrels, columns_of(chunks)), judge_scored(qrels, merged))


@settings(max_examples=100, deadline=None)
@given(data=qrels_and_run(), batch=st.integers(1, 3), cells=st.integers(1, 20))
def test_the_reading_batch_and_comparison_chunk_sizes_change_nothing(
    data: tuple[dict, dict], batch: int, cells: int
) -> None:
    qrels, run = data
    expected = judge_scored(qrels, run)
    with (
        mock.patch.object(judgments, "_READ_BATCH", batch),
        mock.patch.object(judgments, "_RANK_CHUNK_CELLS", cells),
    ):
        assert_same_judgments(judge_scored(qrels, run), expected)


def trec_ranks(scored: Mapping[str, float]) -> dict[str, int]:
    """trec_eval's rank of each document: score descending (as C floats), ties by doc id
    descending."""
    ordered = sorted(scored, key=lambda d: (np.float32(scored[d]), d), reverse=True)
    return {doc: rank for rank, doc in enumerate(ordered, 1)}


@pytest.mark.parametrize("lengths", [(1, 1000), (3, 40, 700, 2), (5, 6, 7, 8), (200, 0, 1)])
def test_lists_of_very_different_lengths(lengths: tuple[int, ...]) -> None:
    """Lists are padded to a matrix by length class: ranks stay exact, memory bounded."""
    rng = np.random.default_rng(len(lengths))
    run = {
        f"q{i}": {f"d{j}": float(rng.integers(0, 20)) for j in range(n)}
        for i, n in enumerate(lengths)
    }
    qrels = {q: dict.fromkeys(list(scored)[::3], 1) or {"none": 1} for q, scored in run.items()}
    judged = judge_scored(qrels, run)
    ranks = {q: trec_ranks(scored) for q, scored in run.items()}
    hits = [
        (i, ranks[q][d]) for i, q in enumerate(judged.query_ids) for d in qrels[q] if d in run[q]
    ]
    got = list(zip(judged.hit_query.tolist(), judged.hit_rank.tolist(), strict=True))
    assert got == sorted(hits)


def test_an_empty_list_answers_its_query() -> None:
    """A query with an empty list is in the run (and retrieves nothing): not missing."""
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}}
    judged = judge_scored(qrels, {"q1": {}, "q3": {"a": 1.0}, "x": {"a": 1.0}})
    assert judged.missing == ("q2",)
    assert judged.rejection == ("q3",)
    assert judged.not_in_gold == 1
    assert judged.hit_rank.size == 0


def test_mappings_that_are_not_dicts_are_read_the_same() -> None:
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
    run = {"q1": {"b": 1.0, "a": 1.0, "x": 3.0}, "q2": {"c": 0.1}}
    frozen_qrels = MappingProxyType({q: MappingProxyType(j) for q, j in qrels.items()})
    frozen_run = MappingProxyType({q: MappingProxyType(s) for q, s in run.items()})
    assert_same_judgments(judge_scored(frozen_qrels, frozen_run), judge_scored(qrels, run))


@pytest.mark.parametrize(
    "run",
    [
        {"q": {"a": math.nan, "b": 1.0}},  # the relevant document's own score
        {"q": {"a": 1.0, "b": math.nan}},
        {"q": {"b": math.nan}},  # a list without the relevant document
    ],
)
def test_a_nan_score_is_an_error(run: dict[str, dict[str, float]]) -> None:
    with pytest.raises(InputError) as info:
        judge_scored({"q": {"a": 1}}, run)
    assert str(info.value) == "run scores must be numbers, found NaN"
