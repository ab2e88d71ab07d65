"""A LlamaIndex vector index (its retriever, or a query engine over it) as an llm-eval
retriever.

`llm-eval.yaml` beside this file points the python kind at llm-eval's adapter,
`llm_eval.adapters:LlamaIndex`, whose `factory` is `make_retriever` (or
`make_query_engine`) below: the adapter calls it once and asks the object it returns
for each gold query. Every node carries its corpus id in `metadata["doc_id"]`, which
is where the adapter reads it.

`make_retriever` returns a `VectorStoreIndex`'s retriever over all-MiniLM-L6-v2
vectors (LlamaIndex's in-memory store: exact cosine search), each node's score the
cosine. `make_query_engine` returns a query engine over the same index that
synthesises no answer (`response_mode="no_text"`; its LLM, a `MockLLM`, is never
asked): its response's source nodes are the retriever's.

Needs `pip install llama-index-core sentence-transformers` (and torch).
"""

from __future__ import annotations

from typing import Any

from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode

from llm_eval.adapters import corpus_texts, sentence_transformer

TOP_K = 10
"""Nodes each query returns: the config's top_k."""


class SentenceTransformerEmbedding(BaseEmbedding):
    """A sentence-transformers model on disk as a LlamaIndex embedding, never from the
    network (llama-index-embeddings-huggingface does the same with more)."""

    model_path: str

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        model = sentence_transformer(self.model_path)
        return [list(map(float, row)) for row in model.encode(texts, batch_size=32)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vectors([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vectors([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._vectors(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def make_index(corpus: str, model_path: str) -> VectorStoreIndex:
    """The corpus embedded into an in-memory index, one node a document, its id in the
    metadata (and as the node's id), its text embedded without the metadata."""
    nodes = [
        TextNode(
            id_=doc_id,
            text=text,
            metadata={"doc_id": doc_id},
            # LlamaIndex embeds "key: value" lines of the metadata above the text unless
            # told not to: the text is embedded alone, as kind: embedding embeds it.
            excluded_embed_metadata_keys=["doc_id"],
        )
        for doc_id, text in corpus_texts(corpus)
    ]
    embedding = SentenceTransformerEmbedding(model_path=model_path, embed_batch_size=32)
    return VectorStoreIndex(nodes, embed_model=embedding)


def make_retriever(corpus: str, model_path: str) -> Any:
    """The index's retriever, TOP_K nodes a query."""
    return make_index(corpus, model_path).as_retriever(similarity_top_k=TOP_K)


def make_query_engine(corpus: str, model_path: str) -> Any:
    """A query engine over the index that writes no answer: its source nodes only."""
    Settings.llm = MockLLM()  # a response synthesizer resolves the global LLM (OpenAI's)
    index = make_index(corpus, model_path)
    return index.as_query_engine(similarity_top_k=TOP_K, response_mode="no_text")
