"""Comparing retrievers: `compare`, `experiment`, and the `metrics` and `retrievers`
listings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_eval import defaults
from llm_eval.cli.root import (
    ALPHA_OPTION,
    CACHE_OPTION,
    CONFIG_OPTION,
    METRIC_HELP,
    cli,
    config_options,
    echo,
    shard_option,
)

if TYPE_CHECKING:
    from llm_eval.shards import Shard


@cli.command("compare", short_help="A/B comparison of two runs with paired tests.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@CONFIG_OPTION
@click.option("-m", "--metric", "metrics", multiple=True, help=METRIC_HELP)
@ALPHA_OPTION
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for compare.md and compare.csv (default: the `output` of the config).",
)
def compare_command(
    run_a: Path,
    run_b: Path,
    config_path: Path,
    metrics: tuple[str, ...],
    alpha: float,
    out_dir: Path | None,
) -> None:
    """A/B comparison of two runs on the same gold set, with paired statistics."""
    from llm_eval.commands.compare import compare

    echo(
        compare(
            config_path=config_path,
            run_a=run_a,
            run_b=run_b,
            metrics=metrics,
            out_dir=out_dir,
            alpha=alpha,
        )
    )


@cli.command("experiment", short_help="Compare retriever variants: table, lift, Pareto front.")
@click.argument("configs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--reference", help="The variant the others are paired with (default: the first).")
@click.option(
    "--quality",
    help="The metric of the Pareto front and the recommendation (default: the first "
    "relevance metric of the config).",
)
@click.option(
    "--tier",
    help="Measure only this tier's gold queries, as a gate scoped to it does (default: all tiers).",
)
@click.option(
    "--latency",
    type=click.Choice(["auto", "cpu", "wall"]),
    help="The clock latencies are compared on: cpu (this process's CPU time, which a busy "
    "machine does not stretch), wall, or auto: cpu when every variant searches in this "
    "process (bm25, embedding with model_path, fusions of those), else wall (default: "
    "the config's experiment.latency, else auto).",
)
@ALPHA_OPTION
@CACHE_OPTION
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for the experiment files (default: `output`/experiment of the config).",
)
@click.option(
    "--consistency",
    "consistency_repeats",
    type=click.IntRange(min=2),
    help="Also ask each llm reranker about every candidate pair of the first "
    "--consistency-queries gold queries this many times, and print how steady it is "
    "(as `llm-eval rerank consistency`).",
)
@click.option(
    "--consistency-queries",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="The gold queries (the first ones) --consistency asks about.",
)
@click.option(
    "--group",
    "group_size",
    type=click.IntRange(min=1),
    default=defaults.EXPERIMENT_GROUP,
    show_default=True,
    help="Variants built and run in turns together, besides the reference (which runs in "
    "every group): memory holds one group's indexes and runs; latencies are compared "
    "within a group only.",
)
@shard_option(
    "Run only part I of N of the variants (by a hash of their names, the reference "
    "in every part) and write experiment-part-I-of-N.json for --merge.",
)
@click.option(
    "--merge",
    is_flag=True,
    help="The arguments are the N parts that --shard wrote: join them into the table, "
    "words and picture of one run over all variants.",
)
def experiment_command(
    configs: tuple[Path, ...],
    reference: str | None,
    quality: str | None,
    tier: str | None,
    latency: str | None,
    alpha: float,
    use_cache: bool | None,
    out_dir: Path | None,
    consistency_repeats: int | None,
    consistency_queries: int,
    group_size: int,
    shard: Shard | None,
    merge: bool,
) -> None:
    """Run each retriever variant over the gold set and compare them with the gate's
    paired tests: one config with `variants:`, or several configs (one variant each).
    Writes experiment.md, experiment.csv, experiment.json and, with matplotlib
    (`llm-eval-ci[plots]`), the quality-versus-latency Pareto picture."""
    from llm_eval.commands.experiment import merge_experiment, run_experiment
    from llm_eval.output import terminal_width
    from llm_eval.progress import Progress

    if merge and (shard or consistency_repeats):
        raise click.UsageError(
            "--merge joins parts already run: leave out --shard and --consistency"
        )
    if shard and consistency_repeats:
        raise click.UsageError("--consistency is asked of a whole run, not of a --shard")
    if merge:
        echo(merge_experiment(configs, out_dir=out_dir, width=terminal_width()))
        return
    with Progress() as progress:
        text = run_experiment(
            list(configs) or [Path(defaults.CONFIG)],
            out_dir=out_dir,
            reference=reference,
            quality=quality,
            use_cache=use_cache,
            alpha=alpha,
            tier=tier,
            latency=latency,
            progress=progress.update,
            width=terminal_width(),
            consistency=None
            if consistency_repeats is None
            else (consistency_repeats, consistency_queries),
            group_size=group_size,
            shard=shard,
        )
    echo(text)


@cli.group()
def rerank() -> None:
    """Measure a `rerank` retriever's second stage."""


@rerank.command("consistency")
@CONFIG_OPTION
@click.option(
    "--repeats",
    type=click.IntRange(min=2),
    default=3,
    show_default=True,
    help="How many times each (query, candidate) pair is asked.",
)
@click.option(
    "--queries",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="How many gold queries (the first ones) whose candidates are asked about.",
)
@click.option(
    "--max-flips",
    type=click.FloatRange(0, 1),
    default=0.05,
    show_default=True,
    help="The largest share of candidate pairs whose order may flip between repeats for "
    "the reranker to be called consistent.",
)
@click.option(
    "--prompt",
    "prompts",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Also measure the retriever with this prompt file in place of its own (repeatable).",
)
def rerank_consistency_command(
    config_path: Path, repeats: int, queries: int, max_flips: float, prompts: tuple[Path, ...]
) -> None:
    """Ask an llm reranker about the same pairs several times: per-pair variance of the
    normalised score (mean and max), the share of candidate pairs whose order flips
    between repeats, and whether that is within --max-flips; for each variant of the
    config, or for the retriever and each --prompt."""
    from llm_eval.commands.rerank import rerank_consistency

    echo(
        rerank_consistency(
            config_path, repeats=repeats, queries=queries, max_flips=max_flips, prompts=prompts
        )
    )


@cli.command("metrics", short_help="List the metrics, their units and directions.")
def metrics_command() -> None:
    """List every metric llm-eval computes: how to write it, where its values come from,
    its unit, which way is better, and what it measures."""
    from llm_eval.commands.metrics import metric_table
    from llm_eval.output import terminal_width

    echo(metric_table(terminal_width()))


@cli.command("retrievers", short_help="List the retriever kinds and their settings.")
def retrievers_command() -> None:
    """List every retriever kind the config's `retriever:` can name, with its settings,
    their defaults and what they do."""
    from llm_eval.commands.retrievers import retriever_list
    from llm_eval.output import terminal_width

    echo(retriever_list(terminal_width()))


@cli.command("history", short_help="The gated metrics over the baseline's git history.")
@config_options
@click.option(
    "--history-file",
    type=click.Path(path_type=Path),
    help="Also read the report.json files kept in this file, one a line (a workflow "
    "appends the default branch's reports to it).",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many of the newest points to show.",
)
@click.option(
    "--record",
    "record_path",
    type=click.Path(path_type=Path),
    help="Instead of printing the history, keep this report.json as one line at the end "
    "of --history-file (checked against the schema first, its commit a commit id; the "
    "file is rewritten atomically, one writer at a time). The dashboard workflow does "
    "this for each push to the default branch.",
)
def history_command(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    history_file: Path | None,
    last: int,
    record_path: Path | None,
) -> None:
    """Print each gate's metric over the last points of the default branch: every
    commit of the baseline file (git log --follow), and the kept reports when given,
    with dates, commits and a sparkline. A point that cannot be read, or that measured
    another gold set, is drawn as a gap and listed with its reason."""
    from llm_eval.commands.history import record_report
    from llm_eval.history.gates import read_gate_history
    from llm_eval.history.series_view import history_text
    from llm_eval.output import terminal_width

    if record_path is not None:
        if history_file is None:
            raise click.UsageError("--record needs --history-file: the file to keep it in")
        echo(record_report(record_path, history_file))
        return
    found = read_gate_history(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        history_file=history_file,
        last=last,
    )
    echo(history_text(found, terminal_width()))


@cli.command("dashboard", short_help="The history as a static, self-contained web page.")
@config_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for index.html (default: the `output` of the config, /dashboard).",
)
@click.option(
    "--history-file",
    type=click.Path(path_type=Path),
    help="Also read the report.json files kept in this file, one a line.",
)
@click.option(
    "--experiment",
    type=click.Path(path_type=Path),
    help="An experiment.json to show (default: the one `llm-eval experiment` wrote, if any).",
)
@click.option(
    "--no-experiment",
    is_flag=True,
    help="Leave the experiment table out, even when `llm-eval experiment` wrote one.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="How many of the newest points to read.",
)
def dashboard_command(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    out_dir: Path | None,
    history_file: Path | None,
    experiment: Path | None,
    no_experiment: bool,
    last: int,
) -> None:
    """Write a static page (no CDN, opens from disk and from GitHub Pages): a chart per
    metric for all queries, each tier and each tag over the baseline's git history (and
    the kept reports), floors and limits drawn, each point linked to its commit; the
    latest change's lost and gained questions, the judge's calibration and the
    experiment table when there are some. Skipped points are gaps, labelled."""
    from llm_eval.commands.dashboard import write_dashboard

    if experiment is not None and no_experiment:
        raise click.UsageError("--experiment and --no-experiment cannot be given together")
    echo(
        write_dashboard(
            config_path=config_path,
            criteria_path=criteria_path,
            out=out_dir,
            baseline_path=baseline_path,
            history_file=history_file,
            experiment=experiment,
            show_experiment=not no_experiment,
            last=last,
        )
    )
