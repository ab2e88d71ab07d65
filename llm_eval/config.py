"""The records of `config/llm-eval.yaml`: what to evaluate and how.

`llm_eval.config_io` reads and validates the file into these (and
`llm_eval.criteria_io` reads `config/ship-criteria.yaml` into `llm_eval.criteria`'s
records); nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_eval.criteria import Location
from llm_eval.errors import InputError
from llm_eval.gain import Weights
from llm_eval.gold import GoldSource
from llm_eval.matching import MatchSettings

if TYPE_CHECKING:
    from llm_eval.endpoints.settings import ChatSettings, EmbeddingSettings


@dataclass(frozen=True, slots=True)
class RetrieverConfig:
    """The configured retriever kind and its validated settings."""

    kind: str
    settings: Mapping[str, Any]
    max_error_rate: float = 0.0
    """The largest share of queries that may fail; more makes the run invalid (exit 4)."""
    where: Location | None = None
    """The `retriever` entry of the config."""
    setting_lines: tuple[tuple[str, int], ...] = ()
    """(setting, line) for each setting written in the config."""
    builds: int | None = None
    """How many times the retriever is built, each build answering every query, so the
    gate's test holds the variance between builds (an approximate index, a sampled
    reranker); None: not set (one build, and `baseline refresh` checks for noise)."""

    def locate(self, error: InputError) -> InputError:
        """An error raised while building the retriever, pointed at its setting."""
        if error.path is not None or self.where is None:
            return error
        setting = re.split(r"[.\[]", error.key or "", maxsplit=1)[0]  # init.model_path: init
        line = dict(self.setting_lines).get(setting, self.where.line)
        key = f"{self.where.key}.{error.key}" if error.key else self.where.key
        return InputError(error.reason, path=self.where.file, line=line, key=key)


_UNSAFE_IN_NAME = re.compile(
    "[\x00-\x1f\x7f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c`|<>]"
)
"""What a variant name may not hold: it is printed in Markdown tables and code spans,
on a terminal and in a picture, where these are markup, control or reorder the text."""


def variant_name_problem(name: str) -> str | None:
    """Why `name` cannot name a variant, or None."""
    if _UNSAFE_IN_NAME.search(name):
        return (
            "a variant name may not hold control characters, bidirectional controls, "
            f"`, |, < or > (got {name!r})"
        )
    return None


def variant_name_from(text: str) -> str:
    """A variant name made from other text (a config's file name): each character a
    name may not hold becomes `_`."""
    return _UNSAFE_IN_NAME.sub("_", text).strip() or "_"


@dataclass(frozen=True, slots=True)
class Variant:
    """One retriever configuration of an experiment (`variants:` in the config)."""

    name: str
    retriever: RetrieverConfig
    top_k: int


@dataclass(frozen=True, slots=True)
class Lift:
    """A derived column of an experiment: `metric` of `variant` minus that of `base`."""

    name: str
    metric: str
    base: str
    variant: str


@dataclass(frozen=True, slots=True)
class ExperimentSettings:
    """The `experiment:` section: how variants are compared."""

    reference: str | None = None
    """The variant every other is paired with; None: the first."""
    quality: str | None = None
    """The Pareto front's quality metric; None: the first relevance metric."""
    lifts: tuple[Lift, ...] = ()
    latency: str = "auto"
    """The clock latencies are compared on: `cpu`, `wall`, or `auto` (CPU time when
    every variant searches in this process; `llm_eval.experiment.latency_clock`)."""


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """The contents of `config/llm-eval.yaml`."""

    path: str
    gold: tuple[GoldSource, ...]
    corpus: Path | None
    retriever: RetrieverConfig | None
    metrics: tuple[str, ...]
    """Canonical metric names to report."""
    relevance_level: int
    top_k: int
    baseline: Path
    output: Path
    matching: MatchSettings = field(default_factory=MatchSettings)
    """`page_tolerance` and `f1_threshold`: how pages and passages are matched."""
    rejection_score_threshold: float | None = None
    """A rejection query whose top score is below this was rejected (None: only an
    abstention or an empty result list counts)."""
    cache: bool = False
    """Answer from the retrieval cache of earlier runs (`--cache` / `--no-cache` win)."""
    versions: Path | None = None
    """The corpus-versions sidecar (JSONL), for the stale and conflict metrics."""
    judge: ChatSettings | None = None
    """The judge model's checked settings (`llm_eval.endpoints.settings`), for judged metrics."""
    embeddings: EmbeddingSettings | None = None
    """The embeddings model's checked settings, for answer relevance and novelty."""
    gain: Weights = field(default_factory=Weights)
    """The weights of `llm-eval gain`."""
    variants: tuple[Variant, ...] = ()
    """Retriever configurations that `llm-eval experiment` compares."""
    experiment: ExperimentSettings = field(default_factory=ExperimentSettings)
    labels_in_corpus: bool = True
    """Whether gold labels name documents of `corpus` (`labels_in_corpus: off` for a
    retriever whose ids are not the corpus's): `gate`, `baseline refresh` and `gold
    validate` stop on a label the corpus lacks."""
