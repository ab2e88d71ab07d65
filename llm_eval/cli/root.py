"""The root command group, the options several commands share, and `echo`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from llm_eval import __version__, defaults

METRIC_HELP = "Metric name, repeatable (`llm-eval metrics` lists them)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llm-eval")
def cli() -> None:
    """Retrieval-quality gate for RAG systems."""


CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=defaults.CONFIG,
    show_default=True,
    help="What to evaluate: gold set, retriever, metrics (llm-eval.yaml).",
)


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--config, --criteria and --baseline, shared by the commands that read them."""
    command = click.option(
        "--baseline",
        "baseline_path",
        type=click.Path(path_type=Path),
        help="Baseline JSON (default: the `baseline` of the config).",
    )(command)
    command = click.option(
        "--criteria",
        "criteria_path",
        type=click.Path(path_type=Path),
        default=defaults.CRITERIA,
        show_default=True,
        help="Ship criteria (the gates).",
    )(command)
    return CONFIG_OPTION(command)


RUN_OPTION = click.option(
    "--run",
    "run_path",
    type=click.Path(path_type=Path),
    help="Use this precomputed run (JSONL or TREC) instead of calling the retriever.",
)


RUNS_OPTION = click.option(
    "--run",
    "run_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Use this precomputed run (JSONL or TREC) instead of calling the retriever; for "
    "a run in parts (`retrieve --shard`), every part: --run once each, or a glob.",
)


def retrieval_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--no-cache and --repeat, shared by the commands that run the retriever."""
    command = click.option(
        "--repeat",
        type=click.IntRange(min=1),
        metavar="N",
        default=1,
        show_default=True,
        help="Run each query N times (bypassing the cache) and list the queries whose "
        "rankings differ between the runs.",
    )(command)
    return CACHE_OPTION(command)


BUILDS_OPTION = click.option(
    "--builds",
    type=click.IntRange(1, defaults.MAX_BUILDS),
    metavar="K",
    default=None,
    help="Build the retriever K times, each build answering every query, so that the "
    "test holds the variance between builds (an approximate index, a sampled reranker). "
    "Default: the retriever's `builds` in the config, else 1.",
)


CACHE_OPTION = click.option(
    "--cache/--no-cache",
    "use_cache",
    default=None,
    help="Answer from results cached by earlier runs, or ask the retriever for every "
    "query. Default: the config's `cache` (off).",
)
ALPHA_OPTION = click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of the paired tests (the gate's) that pick a winner.",
)


def shard_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--shard I/N`, parsed into a `llm_eval.shards.Shard` (a usage error otherwise)."""
    return click.option("--shard", metavar="I/N", callback=_parse_shard, help=help_text)


def _parse_shard(context: click.Context, parameter: click.Parameter, value: str | None) -> Any:
    from llm_eval.shards import parse_shard

    if value is None:
        return None
    try:
        return parse_shard(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def echo(message: str, err: bool = False) -> None:
    """click.echo to this process's own stdout or stderr.

    click would rewrap a stream declared ASCII (`PYTHONIOENCODING=ascii`) as UTF-8;
    the streams themselves spell what they cannot encode in ASCII instead (see
    `degrade_unencodable_output`).
    """
    click.echo(message, file=sys.stderr if err else sys.stdout)
