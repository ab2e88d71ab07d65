"""Which embeddings client an `embeddings:` section (or the embedding retriever's
settings) names: a model on disk (`local`) or an OpenAI-compatible endpoint (`client`)."""

from __future__ import annotations

from pathlib import Path

from llm_eval.endpoints.embeddings import Embedder, EmbeddingClient
from llm_eval.endpoints.local import LocalEmbeddingClient
from llm_eval.endpoints.settings import EmbeddingSettings


def embedder(settings: EmbeddingSettings, cache_dir: Path | None) -> Embedder:
    """The client for checked settings: the model on disk when they give a `model_path`,
    else the endpoint. Both cache each text's vector under `cache_dir`."""
    if settings.model_path is not None:
        return LocalEmbeddingClient(settings, cache_dir)
    return EmbeddingClient(settings, cache_dir)
