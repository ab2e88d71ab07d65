"""Runs and qrels as columns: `evaluate_columns` against pytrec_eval, and TREC files read
into columns as `run_io` reads them.

The parity tests draw the same qrels and runs as `test_pytrec_parity` (ties, graded and
negative labels, short lists, queries missing from the run, run queries not in the
qrels, rejection queries) and feed them in as columns: from arrays, shuffled so that a
query's rows are apart, and from TREC files. The file reader is checked against the
line-by-line reading of `test_judgments` on the same odd files, at many block sizes.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_judgments import (
    BLOCK_SIZES,
    assert_same_judgments,
    outcome,
    qrels_and_run,
    read_trec_line_by_line,
    trec_lines,
    write,
)
from test_pytrec_parity import all_metrics, assert_parity, qrels_and_runs

import llm_eval
from llm_eval import trec_columns_io as trec_columns
from llm_eval.columns import RunColumns, _lookup, judge_columns
from llm_eval.errors import InputError
from llm_eval.judgments import judge_scored
from llm_eval.runs_io import load_trec_scores
from llm_eval.trec_columns_io import _decimals, iter_trec_columns

pytest.importorskip("pytrec_eval")


def rows_of(run: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    return [(q, d, s) for q, scored in run.items() for d, s in scored.items()]


def as_columns(rows: list[tuple[str, str, float]]) -> dict[str, np.ndarray]:
    """Rows as a dict of numpy columns, the shape of a frame."""
    query_ids, doc_ids, scores = zip(*rows, strict=True) if rows else ((), (), ())
    return {
        "query_id": np.array(query_ids, dtype=np.str_),
        "doc_id": np.array(doc_ids, dtype=np.str_),
        "score": np.array(scores, dtype=np.float64),
    }


def as_dict(chunks: Iterator[RunColumns] | list[RunColumns]) -> dict[str, dict[str, float]]:
    """Parts of a run as `{query_id: {doc_id: score}}`, a later part replacing a query."""
    run: dict[str, dict[str, float]] = {}
    for chunk in chunks:
        ends = np.concatenate(([0], np.cumsum(chunk.counts))).tolist()
        docs = [d.decode() for d in chunk.doc_ids.tolist()]
        scores = chunk.scores.tolist()
        for query_id, start, end in zip(chunk.query_ids, ends[:-1], ends[1:], strict=True):
            run[query_id] = dict(zip(docs[start:end], scores[start:end], strict=True))
    return run


def write_trec(folder: Path, qrels: dict, rows: list[tuple[str, str, float]]) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())
    )
    run_path.write_text("".join(f"{q} Q0 {d} 1 {s!r} t\n" for q, d, s in rows))
    return qrels_path, run_path


@contextmanager
def small_blocks(block_bytes: int) -> Iterator[None]:
    with mock.patch.object(trec_columns, "BLOCK_BYTES", block_bytes):
        yield


# --- parity with pytrec_eval -------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]), shuffle=st.randoms())
def test_columns_match_pytrec_eval(data: tuple[dict, dict], level: int, shuffle: object) -> None:
    qrels, run = data
    rows = rows_of(run)
    shuffle.shuffle(rows)  # type: ignore[attr-defined]
    scores = llm_eval.evaluate_columns(
        qrels, as_columns(rows), all_metrics(), relevance_level=level
    )
    runs_with_rows = {q: scored for q, scored in run.items() if scored}
    assert_parity(qrels, runs_with_rows, level, scores)


@settings(max_examples=200, deadline=None)
@given(data=qrels_and_runs(), level=st.sampled_from([1, 2]))
def test_runs_listed_best_first_match_pytrec_eval(data: tuple[dict, dict], level: int) -> None:
    """Rows in rank order, as TREC runs list them: a hit is ranked by its position,
    unless a score beside it is equal (in single precision, as trec_eval compares)."""
    qrels, run = data
    rows = sorted(rows_of(run), key=lambda row: (row[0], -float(np.float32(row[2]))))
    scores = llm_eval.evaluate_columns(
        qrels, as_columns(rows), all_metrics(), relevance_level=level
    )
    runs_with_rows = {q: scored for q, scored in run.items() if scored}
    assert_parity(qrels, runs_with_rows, level, scores)


def test_keys_that_share_a_slot_are_found() -> None:
    """The lookup table's slots are the keys' top bits: keys that share one, and a key
    equal to what such a slot holds, are found (or not) by binary search."""
    shared = 1 << 60
    table = np.array([shared, shared + 1, shared + 2, 7, 2**64 - 1], dtype=np.uint64)
    keys = np.array([shared + 2, 5, 7, shared + 3, 2**64 - 1, shared], dtype=np.uint64)
    rows, found = _lookup(table, keys)
    assert (rows.tolist(), found.tolist()) == ([0, 2, 4, 5], [2, 3, 4, 0])


@settings(max_examples=150, deadline=None)
@given(
    data=qrels_and_runs(),
    level=st.sampled_from([1, 2]),
    block_bytes=st.sampled_from([7, 64, 1 << 21]),
)
def test_files_read_into_columns_match_pytrec_eval(
    data: tuple[dict, dict], level: int, block_bytes: int
) -> None:
    qrels, run = data
    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = write_trec(Path(folder), qrels, rows_of(run))
        if not any(run.values()):
            with pytest.raises(InputError, match="the run file has no queries"):
                llm_eval.read_trec_run(run_path)
            return
        with small_blocks(block_bytes):
            columns = llm_eval.read_trec_run(run_path)
        judged = llm_eval.read_qrels(qrels_path)
    scores = llm_eval.evaluate_columns(judged, columns, all_metrics(), relevance_level=level)
    assert_parity(qrels, {q: scored for q, scored in run.items() if scored}, level, scores)


@settings(max_examples=200, deadline=None)
@given(data=qrels_and_run(), level=st.integers(1, 2))
def test_columns_judge_as_dicts_with_negative_grades(data: tuple[dict, dict], level: int) -> None:
    """Grades from -1 to 3: the same judgments as the dict path, field by field."""
    qrels, run = data
    run = {q: scored for q, scored in run.items() if scored}
    columns = llm_eval.run_columns(*as_columns(rows_of(run)).values())
    judged = llm_eval.qrels_columns(*as_columns(rows_of(qrels)).values())
    expected = judge_scored(qrels, run, level)
    assert_same_judgments(judge_columns(judged, [columns], level), expected)
    # Doc ids held in arrays of other widths (as a file's blocks and the qrels are).
    for width in (9, 17, 40):
        wider = dataclasses.replace(columns, doc_ids=columns.doc_ids.astype(f"S{width}"))
        assert_same_judgments(judge_columns(judged, [wider], level), expected)
        assert_same_judgments(judge_columns(qrels, [wider], level), expected)


# --- the file reader ---------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(content=trec_lines(), block_bytes=st.sampled_from(BLOCK_SIZES), level=st.integers(1, 2))
def test_the_column_reader_reads_and_judges_as_line_by_line(
    content: bytes, block_bytes: int, level: int
) -> None:
    qrels = {"q1": {"a": 1, "b": 2, "\u00e9": 1}, "q2": {"z2": 1}, "q3": {"B": 0}, "q9": {"a": 1}}
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), content)
        expected = outcome(read_trec_line_by_line, path)
        whole = outcome(lambda p: judge_scored(qrels, read_trec_line_by_line(p), level), path)
        with small_blocks(block_bytes):
            read = outcome(lambda p: as_dict(iter_trec_columns(p)), path)
            judged = outcome(lambda p: judge_columns(qrels, iter_trec_columns(p), level), path)
    assert read == expected
    if isinstance(whole, str):
        assert judged == whole
    else:
        assert_same_judgments(judged, whole)  # type: ignore[arg-type]


def test_a_query_apart_is_gathered_and_read_last(tmp_path: Path) -> None:
    apart = "q1 Q0 a 1 3 t\nq2 Q0 c 1 1 t\nq3 Q0 a 1 1 t\nq1 Q0 b 2 2 t\nq3 Q0 d 2 0 t\n"
    path = write(tmp_path, apart.encode())
    with small_blocks(16):
        chunks = list(iter_trec_columns(path))
        run = llm_eval.read_trec_run(path)
    # Read once up to q1's second stretch, then again holding q1 and q3 to the end,
    # where they come with the query still open (q2).
    assert [c.query_ids for c in chunks] == [("q1",), ("q2",), ("q2", "q1", "q3")]
    assert run.query_ids == ("q2", "q1", "q3")
    assert as_dict([run]) == load_trec_scores(path)


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b"q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 a 2 1 t\n", 3, "listed twice for query 'q1'"),
        (b"q1 Q0 a 1 1 t\nq1 Q0 b 1 1 t\nq1 Q0 a 1 1 t\n", 3, "listed twice for query 'q1'"),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 \xff t\n", 2, "not valid UTF-8 (byte 0xff at column 11)"),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 NaN t\n", 2, "score must be a finite number, got 'NaN'"),
        (b"q1 Q0 a 1 1 t\nq2 Q0 b 1 0x10 t\n", 2, "score must be a number, got '0x10'"),
        (b"q1 Q0 a 1 1e309 t\n", 1, "score must be a finite number, got '1e309'"),
        (b"q1 Q0 a 1 1 t\nq2 x\n", 2, "expected 6 columns"),
    ],
)
@pytest.mark.parametrize("block_bytes", [1, 64, 1 << 21])
def test_errors_are_those_of_the_line_reader(
    tmp_path: Path, content: bytes, line: int, message: str, block_bytes: int
) -> None:
    path = write(tmp_path, content)
    with small_blocks(block_bytes), pytest.raises(InputError) as info:
        llm_eval.read_trec_run(path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)
    with pytest.raises(InputError) as reference:
        load_trec_scores(path)
    assert str(info.value) == str(reference.value)


NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.tuples(st.floats(-1e6, 1e6), st.integers(0, 20)).map(lambda p: f"{p[0]:.{p[1]}f}"),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["-0", ".5", "5.", "-.5", "007", "1e5", "+1", "1_0", "0.1234567890123456789"]),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(NUMBERS, min_size=1, max_size=20))
def test_scores_are_read_exactly_as_float_reads_them(texts: list[str]) -> None:
    width = max(map(len, texts))
    matrix = np.array([t.encode().ljust(width, b"\0") for t in texts], dtype=f"S{width}")
    values = _decimals(
        matrix.view(np.uint8).reshape(len(texts), width), np.array(list(map(len, texts)))
    )
    assert values is not None
    assert values.tolist() == [float(t) for t in texts]
    assert [str(v) for v in values.tolist()] == [str(float(t)) for t in texts]  # signs of zero


@pytest.mark.parametrize("text", ["-", ".", "1.2.3", "--1", "1-", "nan", "inf", "1e400"])
def test_a_text_that_is_not_a_finite_number_is_refused(text: str) -> None:
    matrix = np.frombuffer(text.encode(), dtype=np.uint8).reshape(1, -1).copy()
    assert _decimals(matrix, np.array([len(text)])) is None


# --- the columnar API --------------------------------------------------------------

ROWS = [("q1", "a", 0.5), ("q2", "c", 1.0), ("q1", "b", 0.5), ("q1", "c", 0.9)]
QRELS = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}, "q3": {"d": 0}}


@pytest.mark.parametrize("kind", ["U", "S", "O", "list"])
def test_any_array_of_ids_is_taken(kind: str) -> None:
    columns = as_columns(ROWS)
    if kind == "list":
        run = {name: column.tolist() for name, column in columns.items()}
    elif kind == "S":
        run = {**columns, "query_id": np.char.encode(columns["query_id"])}
        run["doc_id"] = np.char.encode(columns["doc_id"])
    else:
        run = {
            name: column.astype(kind) if name != "score" else column
            for name, column in columns.items()
        }
    got = llm_eval.evaluate_columns(QRELS, run, ["mrr", "ndcg@10"]).to_dict()
    assert (
        got
        == llm_eval.evaluate(
            QRELS, {"q1": {"a": 0.5, "b": 0.5, "c": 0.9}, "q2": {"c": 1.0}}, ["mrr", "ndcg@10"]
        ).to_dict()
    )
    # q1's ties: b before a (larger id first), both after c.
    assert got["q1"]["mrr"] == 0.5


def test_a_pandas_frame_is_taken() -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(ROWS, columns=["query_id", "doc_id", "score"])
    qrels = pandas.DataFrame(
        [(q, d, g) for q, judged in QRELS.items() for d, g in judged.items()],
        columns=["query_id", "doc_id", "grade"],
    )
    got = llm_eval.evaluate_columns(qrels, frame, ["mrr"]).per_query("mrr")
    assert got == {"q1": 0.5, "q2": 1.0}


def test_non_ascii_ids_are_taken_as_utf8() -> None:
    run = llm_eval.run_columns(["q\u00e9", "q\u00e9"], ["\u00e9", "z"], [1.0, 1.0])
    assert run.doc_ids.tolist() == ["\u00e9".encode(), b"z"]
    # Tied: "é" (0xc3 0xa9) is above "z" in byte order, so ranks first.
    got = llm_eval.evaluate_columns({"q\u00e9": {"\u00e9": 1}}, run, ["mrr"]).per_query("mrr")
    assert got == {"q\u00e9": 1.0}


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (
            {"query_id": ["q", "r", "q"], "doc_id": ["a", "a", "a"], "score": [1, 2, 3]},
            "document 'a' is listed twice for query 'q'",
        ),
        (
            {"query_id": ["q"], "doc_id": ["a"], "score": [float("nan")]},
            "run scores must be numbers, found NaN",
        ),
        ({"query_id": ["q"], "doc_id": ["a", "b"], "score": [1, 2]}, "columns must be"),
        ({"doc_id": ["a"], "score": [1.0]}, "a run in columns is a RunColumns"),
    ],
)
def test_bad_columns_are_refused(run: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        llm_eval.evaluate_columns(QRELS, run, ["mrr"])


def test_qrels_judging_a_document_twice_are_refused() -> None:
    with pytest.raises(InputError, match="document 'a' is judged twice for query 'q'"):
        llm_eval.qrels_columns(["q", "r", "q"], ["a", "a", "a"], [1, 2, 0])
