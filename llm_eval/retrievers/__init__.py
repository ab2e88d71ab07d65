"""Retrievers: one Protocol, one module per kind, one registry.

A retriever turns gold queries into a `Run`. The config names a kind and its
settings; each kind declares its settings so the config is validated (with file,
line and key) before any work starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.runs import Run


class Retriever(Protocol):
    """Anything that answers gold queries with ranked results."""

    def retrieve(self, queries: Sequence[GoldQuery], top_k: int) -> Run:
        """Results for every query, at most `top_k` each, best first."""
        ...


@dataclass(frozen=True, slots=True)
class RetrieverContext:
    """What a retriever may use besides its settings."""

    corpus_path: Path | None
    """The configured corpus (BEIR JSONL), when there is one."""
    cache_dir: Path
    """A folder under the output folder where the retriever may cache (e.g. an index)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One configurable setting of a retriever kind."""

    default: Any
    check: Callable[[Any], str | None]
    """Returns the reason a value is invalid, or None when it is fine."""
    help: str


@dataclass(frozen=True, slots=True)
class RetrieverKind:
    """A registered kind of retriever."""

    name: str
    description: str
    build: Callable[[Mapping[str, Any], RetrieverContext], Retriever]
    settings: Mapping[str, Setting] = field(default_factory=dict)
    needs_corpus: bool = False


def _bm25_kind() -> RetrieverKind:
    from llm_eval.retrievers import bm25

    return bm25.KIND


_KINDS: dict[str, Callable[[], RetrieverKind]] = {"bm25": _bm25_kind}


def retriever_kind(name: str) -> RetrieverKind:
    """Look up a kind by name; an unknown name is an error listing the valid ones."""
    factory = _KINDS.get(name)
    if factory is None:
        raise InputError(f"unknown retriever kind {name!r}; valid kinds: {', '.join(_KINDS)}")
    return factory()


def kind_names() -> tuple[str, ...]:
    """The registered kinds."""
    return tuple(_KINDS)
