"""Choosing the chunks a model writes questions from, and dropping near-duplicates (pure).

`llm-eval gold synthesize` asks a model to write one question per chosen chunk. The
chunks are spread over what `gold plan` says is short, in proportion to how many
questions each scope lacks (or over one tag's areas with `--tag`), drawn at random
(seeded) from the documents no gold question is near yet. A written question is kept
only when its token F1 (SQuAD's normalisation) against every existing question and
every candidate stays below a limit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_eval.authoring.corpus_coverage import Coverage, area_of
from llm_eval.authoring.plan import Need
from llm_eval.matching import token_f1, tokens

if TYPE_CHECKING:  # the record only: its reader is file I/O
    from llm_eval.corpus import Document


@dataclass(frozen=True, slots=True)
class Target:
    """Questions to write for one tag (or none) about some areas."""

    tag: str | None
    areas: tuple[str, ...]
    count: int
    pool: tuple[str, ...] = ()
    """Documents drawn from before the areas: for a tag, what BM25 finds deeper down
    for its questions, so that a chunk is about what the tag is about."""


def targets(needs: Sequence[Need], found: Coverage, n: int, tag: str | None) -> list[Target]:
    """How `n` questions are spread: all to `tag`'s areas when given, else over the
    scopes that fall short, in proportion to what each lacks (largest remainders)."""
    if n <= 0:
        return []
    if tag is not None:
        areas = next((t.areas for t in found.tags if t.tag == tag), ())
        return [Target(tag, areas, n)]
    short = [need for need in needs if need.more > 0]
    if not short:  # nothing falls short: write where the corpus is least covered
        return [Target(None, tuple(a.name for a in found.areas if a.uncovered)[:5], n)]
    total = sum(need.more for need in short)
    shares = [n * need.more / total for need in short]
    counts = [math.floor(share) for share in shares]
    order = sorted(range(len(short)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    merged: dict[tuple[str | None, tuple[str, ...]], int] = {}
    for need, count in zip(short, counts, strict=True):
        if count:
            key = (need.scope.tags[0] if need.scope.tags else None, need.areas)
            merged[key] = merged.get(key, 0) + count
    return [Target(t, areas, count) for (t, areas), count in merged.items()]


def choose_chunks(
    documents: Sequence[Document],
    target: Target,
    skip: Iterable[str],
    rng: random.Random,
    areas: Mapping[str, str] | None = None,
) -> list[Document]:
    """Up to `target.count` documents, none of them in `skip`, drawn at random: first
    from the target's pool, then from its areas (any area when it names none), each
    area in turn. `areas` is coverage's `{doc_id: area}` (default: `area_of`)."""
    skipped = set(skip)
    chosen: list[Document] = []
    if target.pool:  # best first: drawn at random from the first three per question wanted
        by_id = {d.doc_id: d for d in documents}
        pooled = [by_id[d] for d in target.pool if d in by_id and d not in skipped]
        pooled = [d for d in pooled if d.text.strip()][: 3 * target.count]
        chosen = rng.sample(pooled, min(target.count, len(pooled)))
        skipped |= {d.doc_id for d in chosen}
    pools: dict[str, list[Document]] = {}
    for document in documents:
        if document.doc_id in skipped or not document.text.strip():
            continue
        area = areas[document.doc_id] if areas is not None else area_of(document)
        if not target.areas or area in target.areas:
            pools.setdefault(area, []).append(document)
    for pool in pools.values():
        rng.shuffle(pool)
    ordered = [a for a in target.areas if a in pools] or sorted(pools)
    while len(chosen) < target.count and any(pools[a] for a in ordered):
        for area in ordered:
            if pools[area] and len(chosen) < target.count:
                chosen.append(pools[area].pop())
    return chosen


class Deduplicator:
    """Remembers questions; says whether a new one is too close to any of them."""

    def __init__(self, questions: Iterable[str], limit: float) -> None:
        self.limit = limit
        self.seen: list[frozenset[str]] = [frozenset(tokens(q)) for q in questions]

    def closest(self, question: str) -> float:
        """The largest token F1 against a remembered question (0 with none)."""
        words = frozenset(tokens(question))
        return max((token_f1(words, other) for other in self.seen), default=0.0)

    def admit(self, question: str) -> bool:
        """Remember the question unless it is at or above the limit."""
        if self.closest(question) >= self.limit:
            return False
        self.seen.append(frozenset(tokens(question)))
        return True


class MeaningDeduplicator:
    """Remembers questions by their embeddings; says whether a new one means nearly the
    same as any of them (cosine at or above the limit), which a paraphrase sharing few
    words escapes in token F1. `embed` maps texts to vectors (an `Embedder`'s)."""

    def __init__(
        self,
        questions: Sequence[str],
        limit: float,
        embed: Callable[[Sequence[str]], list[list[float]]],
    ) -> None:
        import numpy as np

        self.limit = limit
        self.embed = embed
        vectors = np.asarray(embed(list(questions)), dtype=np.float64) if questions else None
        self.seen = None if vectors is None else _unit(vectors)

    def closest(self, question: str) -> float:
        """The largest cosine against a remembered question (-1 with none)."""
        return self._closest(self._vector(question))

    def admit(self, question: str) -> bool:
        """Remember the question unless it is at or above the limit."""
        import numpy as np

        vector = self._vector(question)
        if self._closest(vector) >= self.limit:
            return False
        self.seen = vector if self.seen is None else np.vstack([self.seen, vector])
        return True

    def _vector(self, question: str) -> Any:
        import numpy as np

        return _unit(np.asarray(self.embed([question]), dtype=np.float64))

    def _closest(self, vector: Any) -> float:
        if self.seen is None or not len(self.seen):
            return -1.0
        return float((self.seen @ vector[0]).max())


def _unit(vectors: Any) -> Any:
    """Rows scaled to length 1 (a zero row stays zero: it is close to nothing)."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0.0, norms, 1.0)
