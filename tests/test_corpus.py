from __future__ import annotations

from pathlib import Path

import pytest

from llm_eval.corpus import Document
from llm_eval.corpus_io import iter_corpus
from llm_eval.errors import ExitCode, InputError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_beir_corpus(tmp_path: Path) -> None:
    path = write(
        tmp_path / "corpus.jsonl",
        '{"_id": "sorting-howto#2", "title": "Sorting", "text": "Use key=.",'
        ' "metadata": {"url": "https://docs.python.org", "year": 2024}}\n'
        "\n"
        '{"_id": 17, "text": "no title"}\n'
        '{"_id": "d3", "title": "only a title", "extra": "ignored"}\n'
        '{"_id": 0}\n',
    )
    assert list(iter_corpus(path)) == [
        Document(
            "sorting-howto#2",
            "Sorting",
            "Use key=.",
            {"url": "https://docs.python.org", "year": 2024},
        ),
        Document("17", "", "no title", {}),
        Document("d3", "only a title", "", {}),
        Document("0", "", "", {}),
    ]


def test_integer_id_becomes_a_string(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.jsonl", '{"_id": 42, "title": "t", "text": "x"}\n')
    (document,) = iter_corpus(path)
    assert document.doc_id == "42"
    assert isinstance(document.doc_id, str)


def test_corpus_is_streamed(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.jsonl", '{"_id": "a"}\n{"_id": "a"}\n')
    documents = iter_corpus(path)
    assert next(documents).doc_id == "a"
    with pytest.raises(InputError):
        next(documents)


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ('{"title": "t", "text": "x"}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": "", "text": "x"}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": null}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": true}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": 1.5}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": ["a"]}', 1, "_id: missing or not a non-empty string"),
        ('{"_id": "d1", "title": 3}', 1, "title: must be a string"),
        ('{"_id": "d1", "text": null}', 1, "text: must be a string"),
        ('{"_id": "d1", "metadata": ["a"]}', 1, "metadata: must be an object"),
        (
            '{"_id": "d1"}\n\n{"_id": "d2"}\n{"_id": "d1"}',
            4,
            "_id: duplicate _id 'd1' (first at line 1)",
        ),
        ('{"_id": 7}\n{"_id": "7"}', 2, "_id: duplicate _id '7' (first at line 1)"),
        ('{"_id": "d1"}\n{"_id": "d2"', 2, "invalid JSON: Expecting ',' delimiter (column 13)"),
        ('"d1"', 1, "expected a JSON object, got a string"),
    ],
)
def test_corpus_errors(tmp_path: Path, lines: str, line: int, message: str) -> None:
    path = write(tmp_path / "corpus.jsonl", lines + "\n")
    with pytest.raises(InputError) as info:
        list(iter_corpus(path))
    assert str(info.value) == f"{path}:{line}: {message}"
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_empty_corpus(tmp_path: Path) -> None:
    assert list(iter_corpus(write(tmp_path / "corpus.jsonl", "\n"))) == []
