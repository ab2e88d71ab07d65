"""`llm_eval.adapters`' helpers for a vector store: the texts and vectors the embedding
retriever works with (the LangChain adapter is tested in test_recipes_langchain.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llm_eval.adapters import corpus_texts, sentence_transformer, unit_rows
from llm_eval.errors import InputError


def test_corpus_texts_are_the_fields_joined_with_the_prefix_in_corpus_order(
    tmp_path: Path,
) -> None:
    docs = [
        {"_id": "b", "title": "Sorting", "text": "sorted returns a list"},
        {"_id": "a", "title": "", "text": "no title"},
        {"_id": "c", "title": "Only a title", "text": ""},
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    assert corpus_texts(path) == [
        ("b", "Sorting sorted returns a list"),
        ("a", "no title"),
        ("c", "Only a title"),
    ]
    assert corpus_texts(path, ["text"], "passage: ")[0] == ("b", "passage: sorted returns a list")


def test_unit_rows_are_float32_of_length_one_and_a_zero_row_stays_zero() -> None:
    rows = unit_rows([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])
    assert rows.dtype == np.float32
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0], [0.0, -1.0]]


def test_a_folder_that_is_not_a_model_fails_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    with pytest.raises(InputError, match="cannot load the model in"):
        sentence_transformer(tmp_path)
