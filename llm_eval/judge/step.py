"""The judge's step of a gate run: ask, then join the judged values into the scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eval.endpoints.chat import ChatClient
from llm_eval.endpoints.client import Usage
from llm_eval.endpoints.embedders import embedder
from llm_eval.errors import InputError
from llm_eval.inputs import Inputs, JudgeOptions
from llm_eval.judge.calls import JudgePlan, judge_run, plan_calls
from llm_eval.judged.arithmetic import JudgeSummary
from llm_eval.matching import match_run
from llm_eval.metrics import Metric, parse_metric
from llm_eval.progress import Progress
from llm_eval.runs import Run
from llm_eval.scoring import Measurement


def judge_client(inputs: Inputs) -> ChatClient:
    """The configured judge, caching under the output folder."""
    config = inputs.config
    assert config.judge is not None  # the config refuses judged metrics without a judge
    return ChatClient(config.judge, config.output / "cache" / "judge")


def judged_metrics(inputs: Inputs) -> list[Metric]:
    """The judged metrics the report and the gates need."""
    return [m for m in map(parse_metric, inputs.metrics) if m.kind == "judged"]


def plan_judging(inputs: Inputs, run: Run, repeat: int = 1) -> JudgePlan:
    """The calls judging this run would make, and their estimated tokens and cost."""
    return plan_calls(inputs.gold, run, judged_metrics(inputs), judge_client(inputs), repeat)


def judged_measurement(
    inputs: Inputs,
    run: Run,
    measurement: Measurement,
    metrics: Sequence[Metric],
    options: JudgeOptions,
) -> Measurement:
    """The measurement with the judged metrics in each judged query's row, and the
    judge's summary (cost, calibration against the gold labels, unscored queries).
    InputError, before any call, when the estimated cost is above `options.max_cost`."""
    config = inputs.config
    client = judge_client(inputs)
    if options.max_cost is not None:
        plan = plan_calls(inputs.gold, run, metrics, client, options.repeat)
        if plan.cost > options.max_cost:
            raise InputError(
                f"judging would cost about {plan.cost:.4f} ({plan.calls - plan.cached:,} calls, "
                f"{plan.prompt_tokens + plan.answer_tokens:,} tokens estimated), more than "
                f"--max-cost {options.max_cost:g}; nothing was asked"
            )
    matched = match_run(inputs.gold, run, config.matching)

    def gold_relevant(query_id: str, rank: int) -> bool | None:
        grades = matched.qrels.get(query_id)
        ranked = matched.ranked.get(query_id, ())
        if not grades or rank > len(ranked):
            return None
        return grades.get(ranked[rank - 1], 0) >= config.relevance_level

    embeddings = (
        None
        if config.embeddings is None
        else embedder(config.embeddings, config.output / "cache" / "embeddings")
    )
    with Progress(unit="judgments") as progress:
        outcome = judge_run(
            inputs.gold,
            run,
            metrics,
            client,
            gold_relevant,
            options.repeat,
            embeddings,
            progress.update,
        )
    per_query = {q: dict(row) for q, row in measurement.per_query.items()}
    for query_id, row in outcome.per_query.items():
        per_query.setdefault(query_id, {}).update(row)
    usage = outcome.usage
    spent = embeddings.usage if embeddings is not None else Usage()
    summary = JudgeSummary(
        model=client.settings.model,
        calls=usage.calls,
        cached=usage.cached,
        failed=usage.failed,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost(client.settings)
        + (spent.cost(embeddings.settings) if embeddings is not None else 0.0),
        embedding_calls=spent.calls,
        embedding_cached=spent.cached,
        embedding_tokens=spent.prompt_tokens,
        calibration=outcome.calibration,
        unscored=outcome.unscored,
        repeats=outcome.repeats,
        spread=outcome.spread,
        flips=outcome.flips,
        labels=outcome.labels,
        readability=outcome.readability,
        embedding_pooled=spent.pooled,
    )
    return replace(measurement, per_query=per_query, judge=summary)
