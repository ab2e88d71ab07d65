"""Framework retrievers (LangChain, LlamaIndex) as llm-eval retrievers.

`langchain_retriever(obj)` turns a LangChain object into the function the `python`
retriever kind calls, `search(query_text, top_k)` returning hits best first:

- a retriever (a `BaseRetriever`, anything with `invoke(query)` returning Documents) is
  invoked with `k=top_k` (LangChain passes it on to retrievers that take keyword
  arguments, such as a vector store's `as_retriever()`, and drops it for the others)
  and its list is cut to `top_k`. A Document carries no score of its own: the hit's
  score is `metadata[score_key]` when the retriever put one there, and is left out
  otherwise (never made up from the rank, which would read as a confidence to
  `rejection_score_threshold` and `score_cv`);
- a vector store (anything with `similarity_search_with_score`) is asked for its
  `top_k` best with their scores, which are the store's own, taken as they come:
  LangChain's in-memory store gives the cosine, some stores a distance (lower is
  better), which `rejection_score_threshold` would read upside down.

The hit's doc_id is `metadata[id_key]`; with `id_key` unset, the first of
`metadata["doc_id"]`, `metadata["id"]` and the Document's own `id`. A Document with
none of them fails its query with a message naming the keys tried.

In `llm-eval.yaml`, `LangChain` is the class the python kind instantiates: `factory`
names a function of yours (`module:function`, found on `python_path`) that builds the
retriever or store, called once with `factory_init` as keyword arguments:

    retriever:
      kind: python
      target: llm_eval.adapters:LangChain
      python_path: [src]
      init:
        factory: my_rag.chain:make_retriever
        factory_init: {index: indexes/main}
        id_key: doc_id                      # optional
        score_key: score                    # optional

langchain-core is not a dependency of llm-eval: your factory imports it, and this
module never does (it calls the object's methods).

`llamaindex_retriever(obj)` and the `LlamaIndex` class do the same for LlamaIndex:

- a retriever (anything with `retrieve(query)` returning `NodeWithScore`s, such as a
  `VectorStoreIndex`'s `as_retriever()`) is asked once per query and its list cut to
  `top_k`; set its `similarity_top_k` to at least the config's top_k;
- a query engine (anything with `query(query)` returning a response with
  `source_nodes`) gives the nodes its answer was made from, in its order.

Each node's score is the one LlamaIndex gives it (the cosine for an in-memory vector
index; None when it has none); its doc_id is `metadata[id_key]`, else the first of
`metadata["doc_id"]`, `metadata["id"]` and the node's own `node_id`; its text the
node's content. llama-index-core is not a dependency of llm-eval either.

For a vector store of your own (examples/recipes/ has LanceDB and pgvector), three
helpers give it what `kind: embedding` works with, so that on the same model the
two rank alike: `corpus_texts` (each document's id and the text that is embedded),
`sentence_transformer` (a model on disk, loaded as `model_path:` loads it, never
from the network) and `unit_rows` (vectors scaled to length 1, in single precision).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_ID_KEYS = ("doc_id", "id")
"""Metadata keys tried, in order, when `id_key` is not given."""

Hit = dict[str, Any]
Search = Callable[[str, int], list[Hit]]


def corpus_texts(
    path: str | Path, fields: Sequence[str] = ("title", "text"), document_prefix: str = ""
) -> list[tuple[str, str]]:
    """(doc_id, text) for each document of a BEIR JSONL corpus, in corpus order: the
    text the embedding retriever embeds with the same `fields` and `document_prefix`."""
    from llm_eval.corpus import field_text
    from llm_eval.corpus_io import iter_corpus

    return [(d.doc_id, document_prefix + field_text(d, fields)) for d in iter_corpus(path)]


def sentence_transformer(model_path: str | Path) -> Any:
    """The sentence-transformers model in the folder, loaded once per process with the
    hub switched off, as the embedding retriever's `model_path:` loads it."""
    from llm_eval.endpoints.local import load_model

    return load_model(str(model_path))


def unit_rows(vectors: Any) -> Any:
    """The vectors as float32 rows of length 1 (an all-zero row stays zero), as the
    embedding retriever holds the corpus."""
    from llm_eval.retrievers.embedding import unit

    return unit(vectors)


def langchain_retriever(obj: Any, *, id_key: str | None = None, score_key: str = "score") -> Search:
    """`search(query_text, top_k)` over a LangChain retriever or vector store, for the
    python retriever kind (the module docstring says where ids and scores come from)."""
    if callable(getattr(obj, "similarity_search_with_score", None)):

        def search_store(query: str, top_k: int) -> list[Hit]:
            found = obj.similarity_search_with_score(query, k=top_k)
            return [_hit(doc, id_key, float(score)) for doc, score in list(found)[:top_k]]

        return search_store
    if callable(getattr(obj, "invoke", None)):

        def search_retriever(query: str, top_k: int) -> list[Hit]:
            documents = list(obj.invoke(query, k=top_k))[:top_k]
            return [_hit(doc, id_key, _metadata(doc).get(score_key)) for doc in documents]

        return search_retriever
    kind = type(obj).__name__
    raise TypeError(
        f"expected a LangChain retriever (invoke) or vector store "
        f"(similarity_search_with_score), got {kind}"
    )


def _metadata(document: Any) -> Mapping[str, Any]:
    metadata = getattr(document, "metadata", None)
    return metadata if isinstance(metadata, Mapping) else {}


def _hit(document: Any, id_key: str | None, score: Any) -> Hit:
    """One hit: the Document's id, its score (None when absent) and its text."""
    metadata = _metadata(document)
    keys: Sequence[str] = (id_key,) if id_key is not None else DEFAULT_ID_KEYS
    found = next((metadata[k] for k in keys if metadata.get(k) is not None), None)
    if found is None and id_key is None:
        found = getattr(document, "id", None)
    if found is None:
        tried = ", ".join(f"metadata[{k!r}]" for k in keys)
        also = "" if id_key is not None else " or Document.id"
        raise ValueError(f"a Document has no doc id: no {tried}{also}")
    text = getattr(document, "page_content", None)
    return {"doc_id": str(found), "score": score, "text": text if isinstance(text, str) else None}


class LangChain:
    """The python kind's class for a LangChain retriever or vector store that
    `factory` (`module:function`) builds, called once with `factory_init`."""

    def __init__(
        self,
        factory: str,
        factory_init: Mapping[str, Any] | None = None,
        id_key: str | None = None,
        score_key: str = "score",
    ) -> None:
        from llm_eval.retrievers.python import check_target, import_target

        problem = check_target(factory)
        if problem:
            raise ValueError(f"factory {problem}")
        _, make = import_target(factory)
        self.search = langchain_retriever(
            make(**dict(factory_init or {})), id_key=id_key, score_key=score_key
        )

    def retrieve(self, query: str, top_k: int) -> list[Hit]:
        """The framework's hits for one query, best first."""
        return self.search(query, top_k)


def llamaindex_retriever(obj: Any, *, id_key: str | None = None) -> Search:
    """`search(query_text, top_k)` over a LlamaIndex retriever or query engine, for the
    python retriever kind (the module docstring says where ids and scores come from)."""
    if callable(getattr(obj, "retrieve", None)):
        return lambda query, top_k: _node_hits(obj.retrieve(query), top_k, id_key)
    if callable(getattr(obj, "query", None)):

        def search_engine(query: str, top_k: int) -> list[Hit]:
            return _node_hits(getattr(obj.query(query), "source_nodes", None), top_k, id_key)

        return search_engine
    kind = type(obj).__name__
    raise TypeError(
        f"expected a LlamaIndex retriever (retrieve) or query engine (query), got {kind}"
    )


def _node_hits(found: Any, top_k: int, id_key: str | None) -> list[Hit]:
    if found is None:
        raise ValueError("the query engine's response has no source_nodes")
    return [_node_hit(scored, id_key) for scored in list(found)[:top_k]]


def _node_hit(scored: Any, id_key: str | None) -> Hit:
    """One hit from a NodeWithScore: the node's id, LlamaIndex's score and the text."""
    node = getattr(scored, "node", scored)
    metadata = _metadata(node)
    keys: Sequence[str] = (id_key,) if id_key is not None else DEFAULT_ID_KEYS
    found = next((metadata[k] for k in keys if metadata.get(k) is not None), None)
    if found is None and id_key is None:
        found = getattr(node, "node_id", None)
    if found is None:
        tried = ", ".join(f"metadata[{k!r}]" for k in keys)
        also = "" if id_key is not None else " or node_id"
        raise ValueError(f"a node has no doc id: no {tried}{also}")
    score = getattr(scored, "score", None)
    content = getattr(node, "get_content", None)
    text = content() if callable(content) else None
    return {
        "doc_id": str(found),
        "score": None if score is None else float(score),
        "text": text if isinstance(text, str) else None,
    }


class LlamaIndex:
    """The python kind's class for a LlamaIndex retriever or query engine that
    `factory` (`module:function`) builds, called once with `factory_init`."""

    def __init__(
        self,
        factory: str,
        factory_init: Mapping[str, Any] | None = None,
        id_key: str | None = None,
    ) -> None:
        from llm_eval.retrievers.python import check_target, import_target

        problem = check_target(factory)
        if problem:
            raise ValueError(f"factory {problem}")
        _, make = import_target(factory)
        self.search = llamaindex_retriever(make(**dict(factory_init or {})), id_key=id_key)

    def retrieve(self, query: str, top_k: int) -> list[Hit]:
        """The framework's hits for one query, best first."""
        return self.search(query, top_k)
