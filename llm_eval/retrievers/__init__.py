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
    required: bool = False
    """The config must give it (the default is not used)."""


def checked_settings(
    settings: Mapping[str, Any], declared: Mapping[str, Setting]
) -> dict[str, Any]:
    """Every declared setting, given or default, checked; InputError naming a bad one."""
    unknown = sorted(set(settings) - set(declared))
    if unknown:
        raise InputError(f"unknown setting (valid: {', '.join(declared)})", key=unknown[0])
    values: dict[str, Any] = {}
    for name, setting in declared.items():
        if setting.required and name not in settings:
            raise InputError("missing required setting", key=name)
        values[name] = value = settings.get(name, setting.default)
        reason = setting.check(value)
        if reason is not None:
            raise InputError(reason, key=name)
    return values


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


def _run_kind() -> RetrieverKind:
    from llm_eval.retrievers import runfile

    return runfile.KIND


def _http_kind() -> RetrieverKind:
    from llm_eval.retrievers import http

    return http.KIND


def _python_kind() -> RetrieverKind:
    from llm_eval.retrievers import python

    return python.KIND


_KINDS: dict[str, Callable[[], RetrieverKind]] = {
    "bm25": _bm25_kind,
    "run": _run_kind,
    "http": _http_kind,
    "python": _python_kind,
}


def retriever_kind(name: str) -> RetrieverKind:
    """Look up a kind by name; an unknown name is an error listing the valid ones."""
    factory = _KINDS.get(name)
    if factory is None:
        raise InputError(f"unknown retriever kind {name!r}; valid kinds: {', '.join(_KINDS)}")
    return factory()
