"""A LangChain vector store (or its retriever) as an llm-eval retriever.

`llm-eval.yaml` beside this file points the python kind at llm-eval's adapter,
`llm_eval.adapters:LangChain`, whose `factory` is `make_store` (or `make_retriever`)
below: the adapter calls it once and asks the object it returns for each gold query.
Every Document carries its corpus id in `metadata["doc_id"]`, which is where the
adapter reads it.

`make_store` returns LangChain's `InMemoryVectorStore` over all-MiniLM-L6-v2 vectors:
exact cosine search in numpy, and the adapter takes each hit's score from
`similarity_search_with_score` (the cosine). `make_retriever` returns the same store's
`as_retriever()`: its Documents come without scores, so the hits have none (the
ranking, and every metric but `score_cv`, are the same).

Needs `pip install langchain-core sentence-transformers` (and torch).
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from llm_eval.adapters import corpus_texts, sentence_transformer


class SentenceTransformerEmbeddings(Embeddings):
    """A sentence-transformers model on disk as LangChain `Embeddings`, never from the
    network (langchain-huggingface's HuggingFaceEmbeddings does the same with more)."""

    def __init__(self, model_path: str) -> None:
        self.model = sentence_transformer(model_path)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts, batch_size=32).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.model.encode([text], batch_size=32)[0].tolist()


def make_store(corpus: str, model_path: str) -> InMemoryVectorStore:
    """The corpus embedded into an in-memory store, each Document's id in its metadata."""
    documents = corpus_texts(corpus)
    store = InMemoryVectorStore(SentenceTransformerEmbeddings(model_path))
    store.add_texts(
        [text for _, text in documents],
        metadatas=[{"doc_id": doc_id} for doc_id, _ in documents],
        ids=[doc_id for doc_id, _ in documents],
    )
    return store


def make_retriever(corpus: str, model_path: str) -> Any:
    """The same store as a LangChain retriever (a `BaseRetriever`)."""
    return make_store(corpus, model_path).as_retriever()
