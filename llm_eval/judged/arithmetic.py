"""The judged metrics' arithmetic, and the judge's agreement with the gold labels (pure).

- `context_precision@k` (RAGAS): with v_i = 1 when the judge finds the chunk at rank i
  useful, Σ_{i≤k} precision@i · v_i / Σ_{i≤k} v_i, and 0 when no chunk in the top k is.
  Ranks beyond the results count as not useful.
- `context_recall` (RAGAS): the share of the reference answer's statements the judge
  attributes to the retrieved context. Statements are the reference's sentences.
- `faithfulness` (RAGAS): the share of the generated answer's statements (its
  sentences) the judge attributes to the retrieved context.
- `answer_relevance` (RAGAS): the mean cosine, in the embeddings model, between the
  question and the questions the judge generates from the answer (RAGAS's
  noncommittal penalty is not applied).
- `context_sufficiency`: the judge's 0-1 score of how much of what the expected answer
  needs is in the context.

A verdict the judge did not give in the asked-for shape is an error, never a 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_eval.finite import is_finite_number

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)")
_OBJECT_START = re.compile(r"\{")


class BadVerdict(ValueError):
    """The judge answered, but not in the shape asked for."""


def context_precision(verdicts: Sequence[int], k: int) -> float:
    """RAGAS context precision@k from per-rank verdicts (1 useful, 0 not)."""
    top = [1 if v else 0 for v in verdicts[:k]]
    useful = sum(top)
    if useful == 0:
        return 0.0
    total, seen = 0.0, 0
    for rank, verdict in enumerate(top, start=1):
        seen += verdict
        total += verdict * seen / rank
    return total / useful


def statements(reference: str) -> list[str]:
    """The reference answer's sentences (its statements), blank ones left out."""
    return [s.strip() for s in _SENTENCE_END.split(reference.strip()) if s.strip()]


def answer_json(content: str) -> dict[str, Any]:
    """The first JSON object in a model's answer: the whole answer, or one inside a
    ```json fence or prose (small local models wrap and ramble)."""
    decoder = json.JSONDecoder()
    found_any = False
    for start in (m.start() for m in _OBJECT_START.finditer(content)):
        found_any = True
        try:
            value, _ = decoder.raw_decode(content, start)
        except (ValueError, RecursionError):  # nesting too deep to read is no verdict
            continue
        if isinstance(value, dict):
            return value
    raise BadVerdict(
        "the answer's JSON does not parse" if found_any else "no JSON object in the answer"
    )


def verdict(content: str) -> int:
    """`{"verdict": 1|0}` → 1 or 0."""
    value = answer_json(content).get("verdict")
    if isinstance(value, bool) or value not in (0, 1):
        raise BadVerdict(f"verdict must be 0 or 1, got {value!r}")
    return int(value)


def attributions(content: str, count: int) -> list[int]:
    """`{"attributed": [1, 0, …]}` with one 0/1 per statement."""
    value = answer_json(content).get("attributed")
    if (
        not isinstance(value, list)
        or len(value) != count
        or any(isinstance(v, bool) or v not in (0, 1) for v in value)
    ):
        raise BadVerdict(f"attributed must list {count} numbers 0 or 1, got {value!r}")
    return [int(v) for v in value]


def questions(content: str, count: int) -> list[str]:
    """`{"questions": ["…", …]}` with 1 to `count` non-empty questions."""
    value = answer_json(content).get("questions")
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= count
        or not all(isinstance(q, str) and q.strip() for q in value)
    ):
        raise BadVerdict(f"questions must list 1 to {count} questions, got {value!r}")
    return [q.strip() for q in value]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def answer_relevance(query: Sequence[float], generated: Sequence[Sequence[float]]) -> float:
    """RAGAS answer relevancy: the mean cosine between the question and the questions
    generated from the answer."""
    return sum(cosine(query, g) for g in generated) / len(generated)


def score(content: str) -> float:
    """`{"score": x}` with x from 0 to 1."""
    value = answer_json(content).get("score")
    if is_finite_number(value) and 0 <= value <= 1:
        return float(value)
    raise BadVerdict(f"score must be a number from 0 to 1, got {value!r}")


@dataclass(frozen=True, slots=True)
class Calibration:
    """How the judge's chunk verdicts agree with the gold labels on the same chunks."""

    n: int
    """Chunks of labelled queries the judge gave a verdict on."""
    agreement: float
    kappa: float | None
    """Cohen's kappa; None when chance agreement is 1 (one label everywhere)."""
    precision: float | None
    """Of the chunks the judge called useful, the share the gold labels call relevant."""
    recall: float | None
    """Of the chunks the gold labels call relevant, the share the judge called useful."""


def calibration(pairs: Sequence[tuple[int, bool]]) -> Calibration | None:
    """Agreement of (judge verdict, gold relevant) pairs; None without pairs."""
    n = len(pairs)
    if n == 0:
        return None
    both = sum(1 for j, g in pairs if j and g)
    judge_yes = sum(1 for j, _ in pairs if j)
    gold_yes = sum(1 for _, g in pairs if g)
    agree = sum(1 for j, g in pairs if bool(j) == g) / n
    chance = (judge_yes * gold_yes + (n - judge_yes) * (n - gold_yes)) / n**2
    kappa = None if chance == 1 else (agree - chance) / (1 - chance)
    return Calibration(
        n,
        agree,
        kappa,
        both / judge_yes if judge_yes else None,
        both / gold_yes if gold_yes else None,
    )


@dataclass(frozen=True, slots=True)
class Readability:
    """How many of one prompt's answers could be read in the shape asked for."""

    answers: int
    """Answers received (failed calls are none)."""
    unreadable: int
    """Of them, the ones not in the shape asked for: failures, never scores."""

    @property
    def share(self) -> float | None:
        """The share of unreadable answers; None without answers."""
        return self.unreadable / self.answers if self.answers else None


@dataclass(frozen=True, slots=True)
class JudgeSummary:
    """What the report says about the judge: who, what it cost, how far to trust it."""

    model: str
    calls: int
    """Calls made to the endpoint (answers from the cache not counted)."""
    cached: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    calibration: Calibration | None
    unscored: Mapping[str, str]
    """Queries left unscored, and why."""
    repeats: int = 1
    spread: Mapping[str, float] = field(default_factory=dict)
    """Per metric, the mean over queries of the range across repeats (with repeats > 1)."""
    embedding_calls: int = 0
    """Requests to the embeddings endpoint (each embeds a batch of texts)."""
    embedding_cached: int = 0
    """Texts whose vector came from the cache."""
    embedding_tokens: int = 0
    flips: tuple[tuple[str, int], ...] = ()
    """(query_id, rank) of the chunks whose verdict changed between repeats."""
    labels: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per query a person labelled, the judged metrics its gold labels give too (what
    `llm_eval.judged.correction` corrects the judge's values by)."""
    readability: Mapping[str, Readability] = field(default_factory=dict)
    """Per prompt, the answers it got and how many were unreadable."""
    embedding_pooled: int = 0
    """Texts whose embedding came back one vector per token and was mean-pooled."""
