from __future__ import annotations

import math
from pathlib import Path

import pytest

import llm_eval
from llm_eval.errors import ExitCode, InputError
from llm_eval.qrels_io import load_qrels


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            b"q1 0 d1 1\nq1 0 d2 2\nq2 0 d1 0\n",
            {"q1": {"d1": 1, "d2": 2}, "q2": {"d1": 0}},
        ),
        (b"q1\tQ0\td1\t3\n\nq1  0   d2 1  \n", {"q1": {"d1": 3, "d2": 1}}),
        (b"\xef\xbb\xbfq1 0 d1 1\r\nq2 0 d2 1\r\n", {"q1": {"d1": 1}, "q2": {"d2": 1}}),
        (
            b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td1\t0\n",
            {"q1": {"d1": 1, "d2": 2}, "q2": {"d1": 0}},
        ),
        (
            b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\r\nq1\td1\t1\r\n\r\nq2\td 2\t1\r\n",
            {"q1": {"d1": 1}, "q2": {"d 2": 1}},
        ),
    ],
)
def test_load_qrels(tmp_path: Path, content: bytes, expected: dict[str, dict[str, int]]) -> None:
    path = tmp_path / "qrels.txt"
    path.write_bytes(content)
    assert load_qrels(path) == expected


def test_load_qrels_keeps_order_of_first_appearance(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text("q2 0 b 1\nq1 0 z 1\nq2 0 a 1\n")
    qrels = load_qrels(str(path))
    assert list(qrels) == ["q2", "q1"]
    assert list(qrels["q2"]) == ["b", "a"]


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        ("q1 0 d1\n", 1, "expected 4 columns `query_id iteration doc_id grade`, got 3"),
        (
            "q1 0 d1 1\nq1 0 d2 1 x\n",
            2,
            "expected 4 columns `query_id iteration doc_id grade`, got 5",
        ),
        ("q1 0 d1 x\n", 1, "grade must be a whole number, got 'x'"),
        ("q1 0 d1 1.5\n", 1, "grade must be a whole number, got '1.5'"),
        ("q1 0 d1 1\n\nq1 0 d1 2\n", 3, "document 'd1' is judged twice for query 'q1'"),
        (
            "query-id\tcorpus-id\tscore\nq1\td1\n",
            2,
            "expected 3 tab-separated columns `query-id corpus-id score`, got 2",
        ),
        (
            "query-id\tcorpus-id\tscore\nq1 d1 1\n",
            2,
            "expected 3 tab-separated columns `query-id corpus-id score`, got 1",
        ),
        (
            "query-id\tcorpus-id\tscore\nq1\td1\t1\tx\n",
            2,
            "expected 3 tab-separated columns `query-id corpus-id score`, got 4",
        ),
        (
            "query-id\tcorpus-id\tscore\nq1\td1\tgood\n",
            2,
            "grade must be a whole number, got 'good'",
        ),
        (
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t1\n",
            3,
            "document 'd1' is judged twice for query 'q1'",
        ),
        ("q1 0 d1 101\n", 1, "grade must be from -100 to 100, got '101'"),
        (
            "q1 0 d1 -99999999999999999999\n",
            1,
            "grade must be from -100 to 100, got '-99999999999999999999'",
        ),
        (
            "query-id corpus-id score\nq1 0 d1 1\n",
            1,
            "expected 4 columns `query_id iteration doc_id grade`, got 3",
        ),
    ],
)
def test_load_qrels_errors(tmp_path: Path, content: str, line: int, reason: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        load_qrels(path)
    assert str(info.value) == f"{path}:{line}: {reason}"
    assert info.value.exit_code == ExitCode.BAD_INPUT


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "the qrels file has no judgments"),
        (b"\n  \n", "the qrels file has no judgments"),
        (
            b"query-id\tcorpus-id\tscore\n",
            "the qrels file has no judgments, only BEIR's header line",
        ),
    ],
)
def test_a_qrels_file_without_judgments_is_an_error(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    """Nothing to evaluate is never `0 queries evaluated` with exit 0."""
    path = tmp_path / "qrels.txt"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_qrels(path)
    assert str(info.value) == f"{path}: {reason}"


def test_load_qrels_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_qrels(tmp_path / "qrels.txt")
    assert str(info.value) == f"{tmp_path / 'qrels.txt'}: no such file"


def test_negative_grades_are_judged_non_relevant(tmp_path: Path) -> None:
    """As in trec_eval (TREC Web track qrels use -2 for spam)."""
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 spam -2\nq1 0 good 1\n")
    qrels = load_qrels(path)
    assert qrels == {"q1": {"spam": -2, "good": 1}}
    scores = llm_eval.evaluate(qrels, {"q1": ["spam", "good"]}, ["P@1", "ndcg@2", "recall@2"])
    assert scores.means() == {
        "precision@1": 0.0,
        "ndcg@2": pytest.approx(1 / math.log2(3)),
        "recall@2": 1.0,
    }
