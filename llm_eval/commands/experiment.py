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

from llm_eval import defaults
from llm_eval.config import EvalConfig, Variant, variant_name_from
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.experiment.latency_clock import choose_clock, fall_back, on_clock, without_cpu
from llm_eval.experiment.parts_io import (
    check_part_inputs,
    part_fingerprints,
    part_header,
    part_name,
    part_text,
    read_parts,
)
from llm_eval.experiment.sweep import (
    Scored,
    grouping_words,
    in_shard,
    split_reference,
    turn_groups,
    without_cpu_time,
)
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
from llm_eval.scoring import Scoring, score_run, service_records
from llm_eval.shards import Shard
from llm_eval.textio import write_atomic
from llm_eval.wording.english import plural


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


@dataclass(frozen=True, slots=True)
class Setup:
    """An experiment's plan and options, checked before any retrieval."""

    plan: Plan
    gold: GoldSet
    scope: str
    metrics: tuple[str, ...]
    reference: str
    quality: str
    clock: tuple[str, str]
    """The clock asked for or chosen, and why (`choose_clock`), before the run."""


def prepare(
    config_paths: Sequence[Path],
    reference: str | None = None,
    quality: str | None = None,
    tier: str | None = None,
    latency: str | None = None,
) -> Setup:
    """The plan, its gold set and the options an experiment runs with; InputError when
    they do not fit together."""
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
    clock = choose_clock(
        latency or base.experiment.latency,
        [(v.name, searched_elsewhere(v.retriever)) for v in experiment_plan.variants],
    )
    return Setup(experiment_plan, gold, scope, tuple(metrics), reference, quality, clock)


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
    group_size: int = defaults.EXPERIMENT_GROUP,
    shard: Shard | None = None,
) -> str:
    """Retrieve and score every variant, group by group, compare, write the files; the
    terminal text. `latency` is the clock (`auto`, `cpu`, `wall`; None: the config's).
    `consistency` (repeats, queries): each llm reranker's consistency over the first
    gold queries, after the comparison (`llm_eval.commands.rerank`). With `shard`, only
    that part of the variants is run and written as a part for `merge_experiment`."""
    started = time.perf_counter()
    setup = prepare(config_paths, reference, quality, tier, latency)
    base = setup.plan.base
    scoring = scoring_for(base)
    timings: dict[str, float] = {}
    names = in_shard([v.name for v in setup.plan.variants], setup.reference, shard)
    groups = turn_groups(names, setup.reference, group_size)
    scored = run_groups(setup, scoring, groups, RetrieveOptions(use_cache, 1, progress), timings)
    folder = out_dir or base.output / "experiment"
    if shard is not None:
        options = {
            "reference": setup.reference,
            "quality": setup.quality,
            "tier": tier,
            "latency": latency,
            "alpha": alpha,
            "group_size": group_size,
        }
        header = part_header(config_paths, shard, options, setup.gold)
        path = folder / part_name(shard)
        write_atomic(path, part_text(header, scored, timings))
        return (
            f"llm-eval experiment: part {shard}, {plural(len(names), 'variant', 'variants')} "
            f"in {plural(len(groups), 'group', 'groups')}, written to {path}; join the parts "
            "with `llm-eval experiment --merge PART...`"
        )
    grouping = grouping_words(len(groups), group_size)
    result = compare_scored(setup, scored, alpha, grouping)
    text = _write_files(result, folder, timings, time.perf_counter() - started, width)
    if consistency is not None:
        from llm_eval.commands.rerank import experiment_section

        repeats, first = consistency
        queries = setup.gold.queries[:first]
        text += "\n\n" + experiment_section(base, setup.plan.variants, queries, repeats)
    return text


def merge_experiment(
    part_paths: Sequence[Path], *, out_dir: Path | None = None, width: int = 80
) -> str:
    """Join the parts `--shard` wrote into the table, words and picture of the single run
    over all variants (its timings apart); InputError naming a part that is missing,
    given twice, unreadable or of another config or gold set."""
    started = time.perf_counter()
    merged = read_parts(part_paths)
    options = merged.header["options"]
    configs = [Path(p) for p in merged.header["configs"]]
    setup = prepare(
        configs, options["reference"], options["quality"], options["tier"], options["latency"]
    )
    check_part_inputs(merged, part_fingerprints(configs, options, setup.gold))
    grouping = grouping_words(merged.groups, options["group_size"], merged.shards)
    result = compare_scored(setup, merged.scored, options["alpha"], grouping)
    folder = out_dir or setup.plan.base.output / "experiment"
    return _write_files(result, folder, merged.timings, time.perf_counter() - started, width)


def run_groups(
    setup: Setup,
    scoring: Scoring,
    groups: Sequence[Sequence[str]],
    options: RetrieveOptions,
    timings: dict[str, float],
) -> list[Scored]:
    """Each group built, run in turns and scored before the next is built, so that
    memory holds one group's retrievers and runs; `timings` sums each variant's
    seconds over its groups. Groups are numbered from 0 in the order given."""
    base = setup.plan.base
    by_name = {v.name: v for v in setup.plan.variants}
    total = len(setup.gold.queries) * sum(len(g) for g in groups)
    scored: list[Scored] = []
    done = 0
    for number, group in enumerate(groups):
        contenders = [
            Contender(n, replace(base, retriever=by_name[n].retriever, top_k=by_name[n].top_k))
            for n in group
        ]
        told = _offset(options.progress, done, total)
        clock: dict[str, float] = {}
        runs = retrieve_interleaved(
            contenders, setup.gold.queries, replace(options, progress=told), timings=clock
        )
        for name, retrieval in runs.items():
            timings[name] = timings.get(name, 0.0) + clock[name]
            scored.append(
                measure_run(setup, scoring, name, retrieval.run, (number, by_name[name].top_k))
            )
        done += len(setup.gold.queries) * len(group)
    return scored


def _offset(
    progress: Callable[[int, int], None] | None, done: int, total: int
) -> Callable[[int, int], None] | None:
    """A group's progress told as the sweep's."""
    if progress is None:
        return None
    return lambda finished, _: progress(done + finished, total)


def measure_run(
    setup: Setup, scoring: Scoring, name: str, run: Run, place: tuple[int, int]
) -> Scored:
    """A variant's run scored and reduced to what the comparison reads; `place` is (its
    group, its top_k)."""
    gold = setup.gold
    measurement = score_run(gold, run, setup.metrics, setup.plan.base.relevance_level, scoring)
    cpu = None if without_cpu({name: run}) else service_records(gold, on_clock(run, "cpu"))
    group, top_k = place
    clocks = clock_percentiles(run, gold)
    return Scored(name, group, top_k, measurement.per_query, measurement.service, cpu, clocks)


def compare_runs(
    setup: Setup, scoring: Scoring, runs: Mapping[str, Run], alpha: float = 0.05
) -> Experiment:
    """Every variant's run (all taken in turns together) scored and compared."""
    scored = [measure_run(setup, scoring, n, run, (0, _top_k(setup, n))) for n, run in runs.items()]
    return compare_scored(setup, scored, alpha)


def _top_k(setup: Setup, name: str) -> int:
    return next(v.top_k for v in setup.plan.variants if v.name == name)


def compare_scored(
    setup: Setup, scored: Sequence[Scored], alpha: float = 0.05, grouping: str = ""
) -> Experiment:
    """The scored variants compared, in the plan's order: on the chosen clock, or wall
    time when a variant lacks CPU times; `grouping` says how the variants took turns
    when they did so in groups (it joins the clock's reason)."""
    base = setup.plan.base
    chosen, reason = fall_back(without_cpu_time(scored), *setup.clock)
    variants, anchors = split_reference(scored, setup.reference)
    order = {v.name: number for number, v in enumerate(setup.plan.variants)}
    variants.sort(key=lambda one: order[one.name])
    measured = [Measured(v.name, v.measurement(chosen), v.top_k, v.group) for v in variants]
    lifts = [(x.name, x.metric, x.base, x.variant) for x in base.experiment.lifts]
    return compare_variants(
        setup.gold,
        measured,
        setup.metrics,
        setup.reference,
        setup.quality,
        lifts,
        alpha=alpha,
        scope=setup.scope,
        clock=chosen,
        clock_reason=f"{reason}; {grouping}" if grouping else reason,
        clocks={v.name: v.clocks for v in variants},
        anchors={group: one.measurement(chosen) for group, one in anchors.items()},
    )


def _write_files(
    result: Experiment, folder: Path, timings: Mapping[str, float], elapsed: float, width: int
) -> str:
    """experiment.md, .csv, .json and the picture written; the terminal text."""
    words = recommendation(result)
    picture = draw_pareto(result, folder)
    write_atomic(folder / "experiment.md", to_markdown(result, words, picture))
    write_atomic(folder / "experiment.csv", to_csv(result))
    write_atomic(folder / "experiment.json", to_json(result, words, timings))
    return terminal_text(result, words, folder, picture, elapsed, width)


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
