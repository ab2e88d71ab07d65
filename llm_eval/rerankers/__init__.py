"""Rerankers: the second stage of the `rerank` retriever kind, one module per type.

A reranker scores (query, document text) pairs; the `rerank` kind
(`llm_eval.retrievers.rerank`) asks it about the first stage's candidates that its
score cache does not hold, and orders them by score (`llm_eval.rerankers.order`).
Three types, each declaring its settings as a retriever kind does:

- `cross-encoder`: a sentence-transformers CrossEncoder from a folder on disk;
- `llm`: an OpenAI-compatible chat endpoint asked pointwise, with a prompt file and a
  scale (`llm_eval.rerankers.llm`);
- `http`: a rerank service (`query`, `documents`, `top_n` in; `results[].index` and
  `relevance_score` out, or other names mapped by `fields`).

A pair the reranker cannot score comes back as a `Scored` with its failure, never with
a made-up score.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from llm_eval.errors import InputError
from llm_eval.settings import Setting


@dataclass(frozen=True, slots=True)
class Scored:
    """One pair's score, or why there is none."""

    score: float | None
    """Higher is more relevant; None when `failure` says why there is none."""
    cost_ms: float
    """The wall time this score cost when it was made (a batch's time shared by its
    pairs); a cached score keeps it."""
    failure: str | None = None
    """`unreadable answer: …`, `http 503`: the text before ': ' is the kind counted."""


ScorePairs = Callable[[str, Sequence[str]], list[Scored]]
"""Scores one query against document texts: one `Scored` per text, in order."""


class Reranker(Protocol):
    """A second stage: scores (query, text) pairs."""

    @property
    def identity(self) -> Mapping[str, Any]:
        """What its scores depend on besides the query and the text (model or endpoint,
        prompt digest, scale, sampling; no secret): the score cache's key."""
        ...

    def session(self) -> AbstractContextManager[ScorePairs]:
        """The scoring function, with what it holds open (a connection pool) meanwhile."""
        ...


S = TypeVar("S")


def _no_files(settings: object) -> list[Path]:
    return []


@dataclass(frozen=True, slots=True)
class RerankerType(Generic[S]):
    """A registered type of reranker, whose checked settings it reads into an `S`."""

    name: str
    description: str
    record: Callable[[Mapping[str, Any]], S]
    build: Callable[[S, Path], Reranker]
    """Builds the reranker from its record and a cache folder (the output's cache)."""
    settings: Mapping[str, Setting] = field(default_factory=dict)
    files: Callable[[S], list[Path]] = _no_files
    """Files its scores depend on (a prompt file)."""
    in_process: bool = False
    """Whether it scores in this process (a model on disk) rather than a service."""


_TYPES: dict[str, str] = {
    "cross-encoder": "cross_encoder",
    "llm": "llm",
    "http": "http",
}
"""Type name → the module of `llm_eval.rerankers` that defines its `TYPE`."""


def reranker_type(name: str) -> RerankerType[Any]:
    """Look up a type by name; an unknown name is an error listing the valid ones."""
    module = _TYPES.get(name)
    if module is None:
        raise InputError(f"unknown reranker type {name!r}; valid types: {', '.join(_TYPES)}")
    found: RerankerType[Any] = importlib.import_module(f"{__name__}.{module}").TYPE
    return found


def reranker_types() -> Iterator[RerankerType[Any]]:
    """Every registered type, in registry order."""
    return (reranker_type(name) for name in _TYPES)
