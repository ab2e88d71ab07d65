"""Hybrid retrieval: the fused results of other configured retrievers.

    retriever:
      kind: fusion
      method: weighted              # or rrf (the default)
      weights: {lexical: 0.3, dense: 0.7}
      depth: 50                     # results asked of each component; default top_k
      retrievers:
        lexical: {kind: bm25, k1: 0.9, b: 0.4}
        dense: {kind: embedding, base_url: http://127.0.0.1:8000/v1, model: e5}

Components are any registered kinds, named by the user. Two methods:

- `rrf`, reciprocal-rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009):
  score(d) = Σ_i w_i / (rrf_k + rank_i(d)), over the components that returned d;
  rrf_k is 60 as in the paper, weights default to 1.
- `weighted`: each component's scores normalised per query (`minmax`: to [0, 1],
  a list of equal scores all 1; `zscore`: mean 0, sd 1), then
  score(d) = Σ_i w_i · norm_i(d), a component that did not return d adding 0.
  It needs scores: a component result without one fails the query.

Ties go to the document with the best rank in any component, then the smaller id.
A query fails when any component failed on it, and its error says which and why
(`timeout (from dense): …`, `no score (from dense): …`, so that the run's summary of
failures reads `20 timeout (from dense)`); its latency is the sum of the components'
(they are asked one after another), and so is its CPU time when every component has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.retrievers import (
    ResultCache,
    Retriever,
    RetrieverContext,
    RetrieverKind,
    held,
    retriever_kind,
)
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.settings import Setting, number_check

METHODS = ("rrf", "weighted")
NORMALIZATIONS = ("minmax", "zscore")


def check_components(value: Any) -> str | None:
    """Two or more named retrievers, each a mapping with a valid kind and settings; an
    error in a component's settings is raised at its own key path
    (`retrievers.dense.url`), so that the config's reader points at its line."""
    if not isinstance(value, dict) or len(value) < 2:
        return (
            "must name two or more retrievers, e.g. {lexical: {kind: bm25}, dense: {...}}, "
            f"got {value!r}"
        )
    for name, entry in value.items():
        if not isinstance(name, str) or not name.strip():
            return f"component names must be non-empty strings, got {name!r}"
        if not isinstance(entry, dict) or "kind" not in entry:
            return f"{name}: expected a mapping with a `kind` key, got {entry!r}"
        with _in_component(name):
            kind = _kind_of(entry)
            if kind.name == "fusion":
                raise InputError("a fusion cannot contain another fusion", key="kind")
            kind.checked({k: v for k, v in entry.items() if k != "kind"})
    return None


def _kind_of(entry: Mapping[str, Any]) -> RetrieverKind[Any]:
    try:
        return retriever_kind(str(entry["kind"]))
    except InputError as exc:
        raise InputError(exc.reason, key="kind") from None


def check_method(value: Any) -> str | None:
    """rrf or weighted."""
    return None if value in METHODS else f"must be one of {', '.join(METHODS)}, got {value!r}"


def check_normalization(value: Any) -> str | None:
    """minmax or zscore."""
    if value in NORMALIZATIONS:
        return None
    return f"must be one of {', '.join(NORMALIZATIONS)}, got {value!r}"


def check_weights(value: Any) -> str | None:
    """None, or a mapping of component name to a number >= 0."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        return f"must map component names to numbers >= 0, got {value!r}"
    for name, weight in value.items():
        reason = number_check(0)(weight)
        if reason is not None:
            return f"{name}: {reason}"
    if not any(value.values()):
        return "at least one weight must be above 0"
    return None


def check_depth(value: Any) -> str | None:
    """None or a whole number >= 1."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return f"must be a whole number >= 1, got {value!r}"


SETTINGS: Mapping[str, Setting] = {
    "retrievers": Setting(
        None,
        check_components,
        "The retrievers to fuse, by name: {name: {kind: ..., settings...}}.",
        required=True,
        environ=False,  # each component's settings are read by its own kind
    ),
    "method": Setting("rrf", check_method, "rrf (reciprocal rank) or weighted (scores)."),
    "weights": Setting(
        None, check_weights, "Weight per component name; unnamed components weigh 0. Default 1."
    ),
    "rrf_k": Setting(60, number_check(0), "The constant k of rrf: 1 / (k + rank)."),
    "normalization": Setting(
        "minmax", check_normalization, "How weighted fusion scales scores: minmax or zscore."
    ),
    "depth": Setting(None, check_depth, "Results asked of each component; default top_k."),
}


@dataclass(frozen=True, slots=True)
class ComponentSettings:
    """One component as configured: its name, its kind and that kind's record."""

    name: str
    kind: RetrieverKind[Any]
    settings: object
    """The record `kind.record` read from the component's checked settings."""


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """The checked settings of the fusion kind (`SETTINGS` says what each one means)."""

    components: tuple[ComponentSettings, ...]
    """In the order the config names them, each checked by its own kind."""
    weights: Mapping[str, float] | None
    method: str
    rrf_k: float
    normalization: str
    depth: int | None

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> FusionSettings:
        """The record of checked settings (`RetrieverKind.checked`: every one present),
        each component's own settings checked (their `${VAR}` read) and read by its kind."""
        weights = values["weights"]
        return cls(
            components=tuple(_component(n, e) for n, e in values["retrievers"].items()),
            weights=None if weights is None else {n: float(w) for n, w in weights.items()},
            method=values["method"],
            rrf_k=float(values["rrf_k"]),
            normalization=values["normalization"],
            depth=values["depth"],
        )


def _component(name: str, entry: Mapping[str, Any]) -> ComponentSettings:
    kind = retriever_kind(str(entry["kind"]))
    with _in_component(name):
        checked = kind.checked({k: v for k, v in entry.items() if k != "kind"})
    return ComponentSettings(name, kind, kind.record(checked))


@contextmanager
def _in_component(name: str) -> Iterator[None]:
    """An InputError of a component's (unless it names a file) at its key path below the
    fusion's `retrievers` setting: `retrievers.dense.url`."""
    try:
        yield
    except InputError as exc:
        if exc.path is not None:
            raise
        where = f"retrievers.{name}.{exc.key}" if exc.key else f"retrievers.{name}"
        raise InputError(exc.reason, key=where) from None


@dataclass(frozen=True, slots=True)
class Component:
    """One fused retriever and its weight."""

    name: str
    retriever: Retriever
    weight: float


@dataclass(frozen=True, slots=True)
class FusionRetriever:
    """The fused results of its components."""

    components: tuple[Component, ...]
    method: str
    rrf_k: float
    normalization: str
    depth: int | None

    @property
    def cache_identity(self) -> Mapping[str, Any] | None:
        """Cached when every component is (then by all their identities and the weights)."""
        identities = [c.retriever.cache_identity for c in self.components]
        if any(identity is None for identity in identities):
            return None
        return {
            "fusion": self.method,
            "rrf_k": self.rrf_k,
            "normalization": self.normalization,
            "depth": self.depth,
            "components": [
                {"name": c.name, "weight": c.weight, "identity": identity}
                for c, identity in zip(self.components, identities, strict=True)
            ],
        }

    @contextmanager
    def held(self) -> Iterator[FusionRetriever]:
        """This retriever with each component's session held open (`held` of a pooled
        component), for a caller that asks a few queries at a time."""
        with ExitStack() as stack:
            components = tuple(
                replace(c, retriever=stack.enter_context(held(c.retriever)))
                for c in self.components
            )
            yield replace(self, components=components)

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """Each component's results for every query, fused; at most `top_k` each."""
        depth = self.depth or top_k
        runs = [c.retriever.retrieve(queries, depth) for c in self.components]
        fused = {}
        for query in queries:
            answers = [run.queries.get(query.query_id) for run in runs]
            fused[query.query_id] = self._fuse(query.query_id, answers, top_k)
            if on_done is not None:
                on_done()
        return Run(fused)

    def _fuse(
        self, query_id: str, answers: Sequence[QueryResults | None], top_k: int
    ) -> QueryResults:
        for component, answer in zip(self.components, answers, strict=True):
            if answer is None:
                return QueryResults(query_id, (), error=_from("no answer", component.name))
            if answer.error is not None:
                error = _from(answer.error, component.name)
                return QueryResults(query_id, (), answer.latency_ms, error=error)
        present = [a for a in answers if a is not None]
        latencies = [a.latency_ms for a in present]
        latency = None if any(v is None for v in latencies) else sum(v or 0.0 for v in latencies)
        spent = [a.cpu_ms for a in present]
        cpu = None if any(v is None for v in spent) else sum(v or 0.0 for v in spent)
        scores: dict[str, float] = {}
        best_rank: dict[str, int] = {}
        shown: dict[str, RankedResult] = {}
        for component, answer in zip(self.components, present, strict=True):
            firsts = _first_occurrences(answer.results)
            try:
                contributions = self._contributions(firsts)
            except ValueError as exc:
                return QueryResults(query_id, (), latency, error=_from(str(exc), component.name))
            for rank, (result, contribution) in enumerate(
                zip(firsts, contributions, strict=True), 1
            ):
                doc = result.doc_id
                scores[doc] = scores.get(doc, 0.0) + component.weight * contribution
                best_rank[doc] = min(best_rank.get(doc, rank), rank)
                shown.setdefault(doc, result)
        order = sorted(scores, key=lambda d: (-scores[d], best_rank[d], d))[:top_k]
        results = tuple(
            RankedResult(d, scores[d], shown[d].text, shown[d].document, shown[d].page)
            for d in order
        )
        abstained = all(a.abstained for a in present)
        return QueryResults(
            query_id, results, latency, abstained=abstained and not results, cpu_ms=cpu
        )

    def _contributions(self, results: Sequence[RankedResult]) -> list[float]:
        """Each result's share of the fused score, before its component's weight."""
        if self.method == "rrf":
            return [1.0 / (self.rrf_k + rank) for rank in range(1, len(results) + 1)]
        raw = [r.score for r in results]
        for rank, score in enumerate(raw, 1):
            if score is None:
                raise ValueError(f"no score: result {rank} has none; weighted fusion needs scores")
            if not math.isfinite(score):
                raise ValueError(
                    f"non-finite score: result {rank} scores {score}; weighted fusion needs "
                    "finite scores"
                )
        values = np.array(raw, dtype=np.float64)
        if values.size == 0:
            return []
        if self.normalization == "minmax":
            spread = values.max() - values.min()
            return ((values - values.min()) / spread if spread else np.ones_like(values)).tolist()
        sd = values.std()
        return ((values - values.mean()) / sd if sd else np.zeros_like(values)).tolist()


def _from(error: str, component: str) -> str:
    """A component's error, its kind (the text before ': ') naming the component."""
    kind, colon, detail = error.partition(": ")
    return f"{kind} (from {component})" + (f": {detail}" if colon else "")


def _first_occurrences(results: Sequence[RankedResult]) -> list[RankedResult]:
    """The results with later repeats of a doc id dropped."""
    seen: set[str] = set()
    kept = []
    for result in results:
        if result.doc_id not in seen:
            seen.add(result.doc_id)
            kept.append(result)
    return kept


def build(settings: FusionSettings, context: RetrieverContext) -> FusionRetriever:
    """Build every component and the fusion over them."""
    names = [component.name for component in settings.components]
    weights = settings.weights
    if weights is not None:
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise InputError(
                f"{unknown[0]!r} is not a component (components: {', '.join(names)})",
                key="weights",
            )
    components = []
    for component in settings.components:
        kind = component.kind
        if kind.needs_corpus and context.corpus_path is None:
            raise InputError(
                f"{component.name}: the {kind.name} retriever needs a `corpus` file in the config",
                key="retrievers",
            )
        with _in_component(component.name):
            retriever = kind.build(component.settings, context)
        weight = 1.0 if weights is None else weights.get(component.name, 0.0)
        components.append(Component(component.name, retriever, weight))
    return FusionRetriever(
        tuple(components),
        settings.method,
        settings.rrf_k,
        settings.normalization,
        settings.depth,
    )


def depends_on(settings: FusionSettings, root: Path) -> list[Path]:
    """Every component's files."""
    files: list[Path] = []
    for component in settings.components:
        files += component.kind.depends_on(component.settings, root)
    return files


def elsewhere(settings: FusionSettings) -> str | None:
    """None when every component searches in this process."""
    for component in settings.components:
        if component.kind.searched_elsewhere(component.settings) is not None:
            return "a fusion with a component that does its work in another process"
    return None


KIND = RetrieverKind(
    name="fusion",
    description="Hybrid: the fused results of other retrievers (reciprocal rank or weighted).",
    record=FusionSettings.from_checked,
    build=build,
    settings=SETTINGS,
    depends_on=depends_on,
    elsewhere=elsewhere,
    deterministic=lambda settings: all(
        c.kind.deterministic(c.settings) for c in settings.components
    ),
)
