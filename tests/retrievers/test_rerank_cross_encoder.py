"""The cross-encoder reranker on a small BERT cross-encoder built here (random weights,
a vocabulary of the test's words, saved with `save_pretrained`): loaded from disk by
sentence-transformers' CrossEncoder, scored in batches, its scores cached by the model's
files. Needs torch, transformers and sentence-transformers (the `local-embeddings`
extra); skips without them, except in the real-model tier run by .ci/run
(LLM_EVAL_REAL_MODEL=required), where it fails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import gold_query, need_modules

from llm_eval.rerankers.cross_encoder import load_cross_encoder
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.runs import Run

QUERY = "sort a list by key"
TEXTS = {
    "a": "nothing in common here",
    "b": "sort things quickly",
    "c": "sort the list",
    "d": "one list of keys",
    "e": "sort a list by its key",
    "f": "keys and values",
    "g": "a list",
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_modules(
        ("torch", "transformers", "sentence_transformers"),
        "the cross-encoder test needs {missing} (pip install 'llm-eval-ci[local-embeddings]')",
        required=os.environ.get("LLM_EVAL_REAL_MODEL") == "required",
    )
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("cross-encoder")
    words = sorted({w for text in [QUERY, *TEXTS.values()] for w in text.split()})
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab))
    config = BertConfig(
        vocab_size=5 + len(words),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=1,
        initializer_range=0.5,  # weights wide enough that no two texts score alike
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def first_stage(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    results = [{"doc_id": d, "score": 9.0 - n, "text": t} for n, (d, t) in enumerate(TEXTS.items())]
    path = folder / "first.jsonl"
    path.write_text(json.dumps({"query_id": "q", "results": results}) + "\n", encoding="utf-8")
    return {"kind": "run", "path": str(path)}


def reranked(folder: Path, model: Path, batch_size: int) -> Run:
    settings = {
        "first": first_stage(folder),
        "reranker": {"type": "cross-encoder", "model_path": str(model), "batch_size": batch_size},
    }
    retriever = retriever_kind("rerank").create(settings, RetrieverContext(None, folder / "cache"))
    return retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], 10)


def test_the_model_on_disk_orders_the_candidates_by_its_scores(tmp_path: Path, model: Path) -> None:
    from sentence_transformers import CrossEncoder

    direct = CrossEncoder(str(model), device="cpu").predict([(QUERY, t) for t in TEXTS.values()])
    expected = sorted(TEXTS, key=lambda d: -float(direct[list(TEXTS).index(d)]))
    answer = reranked(tmp_path, model, batch_size=16).queries["q"]
    assert list(answer.doc_ids) == expected
    assert [r.score for r in answer.results] == pytest.approx(
        sorted((float(v) for v in direct), reverse=True), abs=1e-5
    )
    assert len(set(answer.doc_ids)) == 7 and len({float(v) for v in direct}) == 7


def test_batches_of_two_score_as_one_batch_does(tmp_path: Path, model: Path) -> None:
    whole = reranked(tmp_path / "whole", model, batch_size=16).queries["q"]
    pairs = reranked(tmp_path / "pairs", model, batch_size=2).queries["q"]
    assert pairs.doc_ids == whole.doc_ids
    assert [r.score for r in pairs.results] == pytest.approx(
        [r.score for r in whole.results], abs=1e-5
    )


def test_a_second_run_loads_no_model_and_the_same_files_elsewhere_are_the_same_model(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = reranked(tmp_path, model, batch_size=4).queries["q"]
    load_cross_encoder.cache_clear()
    moved = tmp_path / "moved"
    shutil.copytree(model, moved)
    again = reranked(tmp_path, moved, batch_size=4).queries["q"]
    assert load_cross_encoder.cache_info().currsize == 0
    assert again.results == first.results
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "rerank (cross-encoder): 7 pairs, 7 scored now and 0 from the cache; 7 of 7 scored",
        "rerank (cross-encoder): 7 pairs, 0 scored now and 7 from the cache; 7 of 7 scored",
    ]


def test_a_folder_that_is_no_model_is_refused_in_one_line(tmp_path: Path, model: Path) -> None:
    from llm_eval.errors import InputError

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    settings = {
        "first": first_stage(tmp_path),
        "reranker": {"type": "cross-encoder", "model_path": str(broken)},
    }
    retriever = retriever_kind("rerank").create(settings, RetrieverContext(None, tmp_path / "c"))
    with pytest.raises(InputError) as caught:
        retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], 10)
    assert caught.value.key == "model_path"
    assert caught.value.reason.startswith(f"cannot load the model in {broken}: ")
    assert "\n" not in caught.value.reason


def test_it_runs_through_retrieve_gate_and_experiment_on_the_demo(
    tmp_path: Path, model: Path, cli: Any
) -> None:
    from servers import write_project

    section = {
        "kind": "rerank",
        "first": {"kind": "bm25"},
        "candidates": 20,
        "reranker": {"type": "cross-encoder", "model_path": str(model), "batch_size": 8},
    }
    project = write_project(tmp_path, section, queries=3)
    code, _, err = cli("retrieve", "--config", project.config, "--out", tmp_path / "run.jsonl")
    assert code == 0, err
    assert "rerank (cross-encoder): 60 pairs, 60 scored now and 0 from the cache" in err
    code, out, err = cli(
        "gate", "--config", project.config, "--criteria", project.criteria, "--out", project.out
    )
    assert code == 0, out + err
    assert "rerank (cross-encoder): 60 pairs, 0 scored now and 60 from the cache" in err
    text = project.config.read_text(encoding="utf-8")
    variants = "variants:\n  - name: bm25\n    retriever: {kind: bm25}\n  - name: reranked\n"
    project.config.write_text(text + variants, encoding="utf-8")
    code, out, err = cli("experiment", project.config, "--out", tmp_path / "experiment")
    assert code == 0, out + err
    table = json.loads((tmp_path / "experiment" / "experiment.json").read_text())
    assert {row["name"] for row in table["variants"]} == {"bm25", "reranked"}
