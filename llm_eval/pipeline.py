"""The gate's pipeline as library functions: load and validate, retrieve, measure, compare.

    inputs = load_inputs(config_path, criteria_path)          # here
    run = obtain_run(inputs, run_path)                         # llm_eval.retrieval
    measurement = measure(inputs, run)                         # here (llm_eval.scoring)
    comparison = compare(inputs, measurement, baseline)        # llm_eval.comparison

Each step takes records and returns records; only `load_inputs` and the retrieval
step touch files or the retriever.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_eval.config import (
    EvalConfig,
    check_against_config,
    check_against_gold,
    load_config,
    load_criteria,
)
from llm_eval.criteria import Criteria
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.metrics import parse_metric
from llm_eval.runs import Run
from llm_eval.scoring import Measurement, Scoring, score_run
from llm_eval.versions_io import load_versions

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
    def gating_k(self) -> int:
        """The cutoff at which a query counts as a hit: the first error gate's, or 5."""
        ordered = sorted(self.criteria.gates, key=lambda g: g.severity != "error")
        for gate in ordered:
            parsed = parse_metric(gate.metric)
            k = parsed.k if parsed.kind == "relevance" else None
            if k is not None:
                return k
        return DEFAULT_GATING_K


def load_inputs(config_path: str | Path, criteria_path: str | Path) -> Inputs:
    """Read config, criteria and gold set; check them against each other before any work."""
    config = load_config(config_path)
    criteria = load_criteria(criteria_path)
    check_against_config(criteria, config)
    gold = load_gold(config.gold)
    check_against_gold(criteria, gold)
    return Inputs(config, criteria, gold, scoring_for(config))


@dataclass(frozen=True, slots=True)
class JudgeOptions:
    """How the judge model is asked (`--judge-repeat`, `--max-cost`)."""

    repeat: int = 1
    """Ask every question this many times; values are the means, their spread reported."""
    max_cost: float | None = None
    """Refuse to start judging when the estimated cost is higher."""


def measure(inputs: Inputs, run: Run, judge: JudgeOptions | None = None) -> Measurement:
    """Score every gold query on every metric the report and the gates need, asking the
    judge model for the judged ones."""
    measurement = score_run(
        inputs.gold, run, inputs.metrics, inputs.config.relevance_level, inputs.scoring
    )
    judged = [m for m in map(parse_metric, inputs.metrics) if m.kind == "judged"]
    if not judged:
        return measurement
    from llm_eval.judge.pipeline import judged_measurement

    return judged_measurement(inputs, run, measurement, judged, judge or JudgeOptions())


def scoring_for(config: EvalConfig) -> Scoring:
    """The config's matching settings, rejection threshold and versions sidecar."""
    versions = load_versions(config.versions) if config.versions is not None else None
    return Scoring(config.matching, config.rejection_score_threshold, versions)
