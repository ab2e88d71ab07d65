"""`llm-eval experiment CONFIG...`: run retriever variants over one gold set, compare
them (`llm_eval.experiment.variants`) and write experiment.md, experiment.csv, experiment.json
and the Pareto picture.

Variants come from the `variants:` list of one config (each overriding the base
retriever's settings, or naming its own kind), or from several configs, one variant
each (named by file stem), which must share the gold set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from llm_eval.config import EvalConfig, Variant, variant_name_from
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.experiment.latency_clock import choose_clock, fall_back, on_clock
from llm_eval.experiment.variants import (
    Experiment,
    Measured,
    compare_variants,
    recommendation,
)
from llm_eval.experiment.variants_view import (
    draw_pareto,
    terminal_text,
    to_csv,
    to_json,
    to_markdown,
)
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.metrics import parse_metric
from llm_eval.pipeline import scoring_for
from llm_eval.retrieval import (
    Contender,
    RetrieveOptions,
    retrieve_interleaved,
    searched_elsewhere,
)
from llm_eval.runs import Run
from llm_eval.scoring import Scoring, score_run
from llm_eval.textio import write_atomic


@dataclass(frozen=True, slots=True)
class Plan:
    """What an experiment runs: the base config and its variants."""

    base: EvalConfig
    variants: tuple[Variant, ...]


def plan(config_paths: Sequence[Path]) -> Plan:
    """The variants of one config's `variants:`, or one variant per config."""
    configs = [load_config(p) for p in config_paths]
    base = configs[0]
    if len(configs) == 1:
        if not base.variants:
            raise InputError(
                "an experiment compares two or more variants: list `variants:` in the config, "
                "or give two or more configs",
                path=base.path,
            )
        return Plan(base, base.variants)
    variants = []
    names: set[str] = set()
    for config in configs:
        if config.gold != base.gold:
            raise InputError(
                f"its gold set differs from {base.path}'s; variants are compared on one gold set",
                path=config.path,
            )
        if config.retriever is None:
            raise InputError("no retriever is configured; add `retriever:`", path=config.path)
        name = _unique(names, Path(config.path).stem, str(config.path))
        names.add(name)
        variants.append(Variant(name, config.retriever, config.top_k))
    return Plan(base, tuple(variants))


def _unique(taken: set[str], stem: str, path: str) -> str:
    """The config's file name, else its path, else its path numbered: the same config
    given three times is three variants, each named apart (and named safely)."""
    for name in (variant_name_from(stem), variant_name_from(path)):
        if name not in taken:
            return name
    number = 2
    while f"{variant_name_from(path)} ({number})" in taken:
        number += 1
    return f"{variant_name_from(path)} ({number})"


def run_experiment(
    config_paths: Sequence[Path],
    *,
    out_dir: Path | None = None,
    reference: str | None = None,
    quality: str | None = None,
    use_cache: bool | None = None,
    alpha: float = 0.05,
    tier: str | None = None,
    latency: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    width: int = 80,
    consistency: tuple[int, int] | None = None,
) -> str:
    """Retrieve and score every variant, compare, write the files; the terminal text.
    `latency` is the clock (`auto`, `cpu`, `wall`; None: the config's). `consistency`
    (repeats, queries): each llm reranker's consistency over the first gold queries,
    after the comparison (`llm_eval.commands.rerank`)."""
    started = time.perf_counter()
    experiment_plan = plan(config_paths)
    base = experiment_plan.base
    names = [v.name for v in experiment_plan.variants]
    reference = reference or base.experiment.reference or names[0]
    if reference not in names:
        raise InputError(f"no variant is named {reference!r} (variants: {', '.join(names)})")
    metrics = [m for m in base.metrics if parse_metric(m).kind != "judged"]
    quality = quality or base.experiment.quality or _first_relevance(metrics)
    quality = parse_metric(quality).name
    if quality not in metrics:
        metrics.append(quality)
    for variant in experiment_plan.variants:
        for name in metrics:
            k = parse_metric(name).k
            if k is not None and k > variant.top_k:
                raise InputError(
                    f"variant {variant.name!r} retrieves top_k {variant.top_k}, fewer than "
                    f"{name} needs",
                    path=base.path,
                )
    gold, scope = in_scope(load_gold(base.gold), tier)
    scoring = scoring_for(base)
    contenders = [
        Contender(variant.name, replace(base, retriever=variant.retriever, top_k=variant.top_k))
        for variant in experiment_plan.variants
    ]
    clock, reason = choose_clock(
        latency or base.experiment.latency,
        [(v.name, searched_elsewhere(v.retriever)) for v in experiment_plan.variants],
    )
    timings: dict[str, float] = {}
    retrievals = retrieve_interleaved(
        contenders, gold.queries, RetrieveOptions(use_cache, 1, progress), timings=timings
    )
    runs = {name: retrieval.run for name, retrieval in retrievals.items()}
    result = compare_runs(
        experiment_plan,
        gold,
        scoring,
        runs,
        metrics,
        reference,
        quality,
        (clock, reason),
        alpha=alpha,
        scope=scope,
    )
    folder = out_dir or base.output / "experiment"
    words = recommendation(result)
    picture = draw_pareto(result, folder)
    write_atomic(folder / "experiment.md", to_markdown(result, words, picture))
    write_atomic(folder / "experiment.csv", to_csv(result))
    write_atomic(folder / "experiment.json", to_json(result, words, timings))
    elapsed = time.perf_counter() - started
    text = terminal_text(result, words, folder, picture, elapsed, width)
    if consistency is not None:
        from llm_eval.commands.rerank import experiment_section

        repeats, first = consistency
        variants = experiment_plan.variants
        text += "\n\n" + experiment_section(base, variants, gold.queries[:first], repeats)
    return text


def compare_runs(
    experiment_plan: Plan,
    gold: GoldSet,
    scoring: Scoring,
    runs: Mapping[str, Run],
    metrics: Sequence[str],
    reference: str,
    quality: str,
    clock: tuple[str, str],
    *,
    alpha: float = 0.05,
    scope: str = "all tiers",
) -> Experiment:
    """Every variant's run scored and compared: on the chosen clock (`clock` is it and
    its reason), or wall time when a run lacks CPU times. `scoring` is read before the
    retrieval, so that a bad versions file stops the run before the work."""
    base = experiment_plan.base
    chosen, reason = fall_back(runs, *clock)
    measured = [
        Measured(
            variant.name,
            score_run(
                gold,
                on_clock(runs[variant.name], chosen),
                metrics,
                base.relevance_level,
                scoring,
            ),
            variant.top_k,
        )
        for variant in experiment_plan.variants
    ]
    lifts = [(x.name, x.metric, x.base, x.variant) for x in base.experiment.lifts]
    return compare_variants(
        gold,
        measured,
        metrics,
        reference,
        quality,
        lifts,
        alpha=alpha,
        scope=scope,
        clock=chosen,
        clock_reason=reason,
        clocks={name: clock_percentiles(run, gold) for name, run in runs.items()},
    )


def clock_percentiles(run: Run, gold: GoldSet) -> dict[str, dict[str, float]]:
    """`{"wall": {"p50": ms, "p95": ms}, "cpu": {...}}` over the gold queries answered,
    each clock only when every one of them has a time on it."""
    ids = {q.query_id for q in gold.queries}
    answered = [a for q, a in run.queries.items() if q in ids and a.error is None]
    out = {}
    for clock, times in (
        ("wall", [a.latency_ms for a in answered]),
        ("cpu", [a.cpu_ms for a in answered]),
    ):
        known = [t for t in times if t is not None]
        if known and len(known) == len(times):
            out[clock] = {f"p{q}": float(np.percentile(known, q)) for q in (50, 95)}
    return out


def in_scope(gold: GoldSet, tier: str | None) -> tuple[GoldSet, str]:
    """The gold queries of one tier (a gate scoped to it measures those), or all; and
    the words for which."""
    if tier is None:
        return gold, "all tiers"
    if tier not in gold.tiers():
        raise InputError(f"no gold query is in tier {tier!r} (tiers: {', '.join(gold.tiers())})")
    return GoldSet(tuple(q for q in gold.queries if q.tier == tier)), f"tier {tier}"


def _first_relevance(metrics: Sequence[str]) -> str:
    for name in metrics:
        if parse_metric(name).kind == "relevance":
            return name
    return "recall@5"
