"""The judge's step of a gate run: ask, then join the judged values into the scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eval.judge.client import ChatClient
from llm_eval.judge.run import judge_run
from llm_eval.judge.scoring import JudgeSummary
from llm_eval.matching import match_run
from llm_eval.metrics import Metric
from llm_eval.pipeline import Inputs
from llm_eval.runs import Run
from llm_eval.scoring import Measurement


def judged_measurement(
    inputs: Inputs, run: Run, measurement: Measurement, metrics: Sequence[Metric]
) -> Measurement:
    """The measurement with the judged metrics in each judged query's row, and the
    judge's summary (cost, calibration against the gold labels, unscored queries)."""
    config = inputs.config
    assert config.judge is not None  # the config refuses judged metrics without a judge
    client = ChatClient(config.judge, config.output / "cache" / "judge")
    matched = match_run(inputs.gold, run, config.matching)

    def gold_relevant(query_id: str, rank: int) -> bool | None:
        grades = matched.qrels.get(query_id)
        ranked = matched.ranked.get(query_id, ())
        if not grades or rank > len(ranked):
            return None
        return grades.get(ranked[rank - 1], 0) >= config.relevance_level

    outcome = judge_run(inputs.gold, run, metrics, client, gold_relevant)
    per_query = {q: dict(row) for q, row in measurement.per_query.items()}
    for query_id, row in outcome.per_query.items():
        per_query.setdefault(query_id, {}).update(row)
    usage = outcome.usage
    summary = JudgeSummary(
        model=str(config.judge["model"]),
        calls=usage.calls,
        cached=usage.cached,
        failed=usage.failed,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost(config.judge["price_per_1k_input"], config.judge["price_per_1k_output"]),
        calibration=outcome.calibration,
        unscored=outcome.unscored,
    )
    return replace(measurement, per_query=per_query, judge=summary)
