"""Embeddings from a sentence-transformers model on disk: no server, never a download.

    embeddings:                                # or the embedding retriever's settings
      model_path: models/all-MiniLM-L6-v2      # a folder with modules.json or config.json
      batch_size: 32

Needs `pip install 'llm-eval-ci[local-embeddings]'` (sentence-transformers, and so
torch). The model is loaded once per process, only when a text is not in the cache,
with the Hugging Face hub switched off (`HF_HUB_OFFLINE=1` and `local_files_only`), so a
folder that is not a whole model fails in one line instead of reaching the network.
Each text's vector is cached on disk as an endpoint's is, keyed by a digest of every
file of the model folder and the text: a second run loads no model, and a changed
model is never answered from the old one's cache. The embedding retriever's corpus
goes through `encode` instead (a numpy matrix, no per-text cache): it keeps the
vectors in its own store of batch files.

Its vectors are checked as an endpoint's are: one that is not finite, all zeros, or of
another dimension than the model's others fails the call (a half-precision model can
overflow to NaN), and a cached vector that fails the check is embedded again.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llm_eval.digest import digest
from llm_eval.endpoints.cache import read_entry, write_entry
from llm_eval.endpoints.client import Answer, EndpointFailed, Usage
from llm_eval.endpoints.embeddings import Dimension, cached_vector, check_vector
from llm_eval.endpoints.settings import EmbeddingSettings
from llm_eval.errors import InputError
from llm_eval.textio import file_digest

INSTALL = "needs sentence-transformers: pip install 'llm-eval-ci[local-embeddings]'"

_FORMAT = 1
_ENCODING = threading.Lock()
"""One batch at a time: a fast tokenizer refuses concurrent use ("Already borrowed"),
and torch already uses every core for one batch."""


def model_digest(folder: str | Path) -> str:
    """A digest of every file in the model folder (names and contents)."""
    root = Path(folder).resolve()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    signature = tuple(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    )
    return _digest_of(root, signature)


@functools.lru_cache(maxsize=8)
def _digest_of(root: Path, signature: tuple[tuple[str, int, int], ...]) -> str:
    """Read once per process for each state of the folder (its names, sizes and times)."""
    return digest([[name, file_digest(root / name)] for name, _, _ in signature])


@functools.lru_cache(maxsize=2)
def load_model(folder: str) -> Any:
    """The sentence-transformers model in `folder`, loaded without the network;
    InputError when the extra is not installed or the folder is not a whole model."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # read when huggingface_hub is first imported
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if importlib.util.find_spec("sentence_transformers") is None:
        raise InputError(INSTALL, key="model_path")
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(folder, local_files_only=True)
    except Exception as exc:  # a damaged or foreign folder: its own library's words
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot load the model in {folder}: {reason}", key="model_path") from None


@dataclass(frozen=True, slots=True)
class LocalEmbeddingClient:
    """Embeddings from a model on disk, each text's vector cached under `cache_dir` (the
    `llm_eval.endpoints.embeddings.EmbeddingClient` interface)."""

    settings: EmbeddingSettings
    cache_dir: Path | None
    usage: Usage = field(default_factory=Usage)
    dimension: Dimension = field(default_factory=lambda: Dimension())

    @property
    def folder(self) -> str:
        """The model folder, as configured."""
        return str(self.settings.model_path)

    def identity(self) -> dict[str, Any]:
        """What the vectors depend on: the model's files, not where they lie."""
        return {"local_model": model_digest(self.folder), "format": _FORMAT}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; the model is loaded only for texts not cached.
        Without a cache folder no key is computed (a query's latency is the model's)."""
        unique = list(dict.fromkeys(texts))
        identity = self.identity() if self.cache_dir is not None else None
        keys = {t: digest({**identity, "text": t}) for t in unique} if identity else {}
        vectors: dict[str, list[float]] = {}
        for text, key in keys.items():
            cached = cached_vector(read_entry(self.cache_dir, key))
            if cached is not None:
                vectors[text] = cached
                self.usage.add(Answer("", 0, 0, cached=True))
        missing = [t for t in unique if t not in vectors]
        if missing:
            for text, vector in zip(missing, self.encode(missing).tolist(), strict=True):
                vectors[text] = vector
                if text in keys:
                    write_entry(self.cache_dir, keys[text], vector)
        for text in texts:
            self.dimension.check(len(vectors[text]))
        return [vectors[t] for t in texts]

    def encode(self, texts: Sequence[str]) -> Any:
        """The texts' vectors as one numpy matrix (a row a text, in order), checked, with
        no cache: the embedding retriever keeps the corpus's vectors in its own store.
        One call of the model, in batches of `batch_size` (the library groups texts of
        similar length, so little of each batch is padding); each batch counts as a call."""
        model = load_model(self.folder)
        size = self.settings.batch_size
        with _ENCODING:
            matrix = model.encode(
                list(texts), batch_size=size, convert_to_numpy=True, show_progress_bar=False
            )
        rows = np.asarray(matrix)
        self._check(texts, rows)
        for _ in range(0, len(texts), size):
            self.usage.add(Answer("", 0, 0))
        return rows

    def _check(self, texts: Sequence[str], rows: Any) -> None:
        """EndpointFailed, naming the first text concerned, for a vector that is not
        finite, all zeros, or of another dimension than the model's others."""
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1) | ~rows.any(axis=1))
        number = int(bad[0]) if len(bad) else 0
        try:
            if len(bad):
                check_vector(rows[number].tolist())
            if len(texts):
                self.dimension.check(rows.shape[1])
        except EndpointFailed as failure:
            self.usage.add(None)
            shown = texts[number][:60]
            where = f"(the model in {self.folder}, for {shown!r})"
            raise EndpointFailed(f"{failure} {where}") from None
