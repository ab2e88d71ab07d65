"""What a gate run works from: the validated config, criteria and gold set, read once
by `llm_eval.pipeline.load_inputs` and handed to every later step as records."""

from __future__ import annotations

from dataclasses import dataclass

from llm_eval.config import EvalConfig
from llm_eval.criteria import Criteria
from llm_eval.gold import GoldSet
from llm_eval.metrics import coverage_metric, parse_metric
from llm_eval.scoring import Scoring

DEFAULT_GATING_K = 5


@dataclass(frozen=True, slots=True)
class Inputs:
    """Validated config, criteria and gold set."""

    config: EvalConfig
    criteria: Criteria
    gold: GoldSet
    scoring: Scoring
    """How results are judged beyond ids (with the versions sidecar, when named)."""

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics to compute: the reported ones, then the ones gates need."""
        return tuple(dict.fromkeys([*self.config.metrics, *self.criteria.metrics()]))

    @property
    def coverage_metrics(self) -> tuple[str, ...]:
        """The `judged@k` shown beside the gates on relevance metrics, also measured."""
        wanted = (coverage_metric(g.metric, self.gating_k) for g in self.criteria.gates)
        return tuple(dict.fromkeys(m for m in wanted if m is not None))

    @property
    def gating_k(self) -> int:
        """The cutoff at which a query counts as a hit: the first error gate's, or 5."""
        ordered = sorted(self.criteria.gates, key=lambda g: g.severity != "error")
        for gate in ordered:
            parsed = parse_metric(gate.metric)
            k = parsed.k if parsed.kind == "relevance" else None
            if k is not None:
                return k
        return DEFAULT_GATING_K


@dataclass(frozen=True, slots=True)
class JudgeOptions:
    """How the judge model is asked (`--judge-repeat`, `--max-cost`)."""

    repeat: int = 1
    """Ask every question this many times; values are the means, their spread reported."""
    max_cost: float | None = None
    """Refuse to start judging when the estimated cost is higher."""
