"""A cross-encoder reranker: a sentence-transformers CrossEncoder from a folder on disk.

    reranker:
      type: cross-encoder
      model_path: models/ms-marco-MiniLM-L-6-v2   # pip install 'llm-eval-ci[local-embeddings]'
      batch_size: 16

The model is loaded once per process, on the CPU, with the Hugging Face hub switched
off (as `model_path:` of `embeddings:` is: nothing is downloaded), and only when a pair
is not in the score cache. A query's pairs are scored in batches of `batch_size`; each
score's cost is its batch's wall time shared by the batch's pairs. The score is the
model's as sentence-transformers' `predict` gives it (for a one-label model, its logit
through a sigmoid). The model's files, not its path, are its identity.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_eval.endpoints.local import INSTALL, model_digest
from llm_eval.endpoints.settings import check_model_folder
from llm_eval.errors import InputError
from llm_eval.rerankers import RerankerType, Scored, ScorePairs
from llm_eval.settings import Setting, whole_check

SETTINGS: Mapping[str, Setting] = {
    "model_path": Setting(
        None,
        check_model_folder,
        "A CrossEncoder model folder on disk; never downloaded (needs "
        "llm-eval-ci[local-embeddings]).",
        True,
    ),
    "batch_size": Setting(16, whole_check(1, 2048), "Pairs scored per batch."),
}

_SCORING = threading.Lock()
"""One batch at a time: torch already uses every core for one batch."""


@dataclass(frozen=True, slots=True)
class CrossEncoderSettings:
    """The checked settings of the cross-encoder reranker."""

    model_path: str
    batch_size: int

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> CrossEncoderSettings:
        """The record of checked settings."""
        return cls(values["model_path"], values["batch_size"])


@functools.lru_cache(maxsize=2)
def load_cross_encoder(folder: str) -> Any:
    """The CrossEncoder in `folder`, on the CPU, loaded without the network; InputError
    when the extra is not installed or the folder is not a whole model."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if importlib.util.find_spec("sentence_transformers") is None:
        raise InputError(INSTALL, key="model_path")
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(folder, device="cpu", local_files_only=True)
    except Exception as exc:  # a damaged or foreign folder: its own library's words
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot load the model in {folder}: {reason}", key="model_path") from None


@dataclass(frozen=True, slots=True)
class CrossEncoderReranker:
    """Scores pairs with a model on disk, a batch at a time."""

    settings: CrossEncoderSettings

    @property
    def identity(self) -> Mapping[str, Any]:
        """The model's files."""
        return {"type": "cross-encoder", "model": model_digest(self.settings.model_path)}

    @contextmanager
    def session(self) -> Iterator[ScorePairs]:
        """The scoring function (the model is loaded on the first pair to score)."""
        yield self.score

    def score(self, query: str, texts: Sequence[str]) -> list[Scored]:
        """Each text's score, in batches of `batch_size`."""
        if not texts:
            return []
        model = load_cross_encoder(self.settings.model_path)
        size = self.settings.batch_size
        scored: list[Scored] = []
        for start in range(0, len(texts), size):
            batch = [(query, text) for text in texts[start : start + size]]
            began = time.perf_counter()
            with _SCORING:
                values = np.asarray(
                    model.predict(batch, batch_size=size, show_progress_bar=False), dtype=float
                ).reshape(len(batch), -1)[:, -1]
            share = (time.perf_counter() - began) * 1000 / len(batch)
            scored += [_checked(float(v), share) for v in values]
        return scored


def _checked(value: float, cost_ms: float) -> Scored:
    if not np.isfinite(value):
        return Scored(None, cost_ms, f"non-finite score: the model gave {value}")
    return Scored(value, cost_ms)


def build(settings: CrossEncoderSettings, cache_dir: Path) -> CrossEncoderReranker:
    """The reranker (the model is loaded when first needed)."""
    return CrossEncoderReranker(settings)


TYPE = RerankerType(
    name="cross-encoder",
    description="A sentence-transformers CrossEncoder from a folder on disk, on the CPU.",
    record=CrossEncoderSettings.from_checked,
    build=build,
    settings=SETTINGS,
    in_process=True,
)
