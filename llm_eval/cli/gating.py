"""The gate's own commands: `evaluate`, `gate`, `baseline refresh|show`, `retrieve`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from llm_eval import defaults
from llm_eval.cli.root import (
    BUILDS_OPTION,
    CONFIG_OPTION,
    METRIC_HELP,
    RUNS_OPTION,
    cli,
    config_options,
    echo,
    retrieval_options,
    shard_option,
)
from llm_eval.errors import ExitCode
from llm_eval.formats import format_names
from llm_eval.output import encodes

if TYPE_CHECKING:
    from llm_eval.shards import Shard


@cli.command()
@click.option(
    "--gold",
    "gold_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Gold set JSONL file (repeatable).",
)
@click.option(
    "--qrels",
    "qrels_path",
    type=click.Path(path_type=Path),
    help="TREC qrels or BEIR qrels TSV, instead of --gold.",
)
@click.option(
    "--run",
    "run_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    required=True,
    help="Run file; for a run in parts (`retrieve --shard`), every part: --run once each, "
    "or a glob.",
)
@click.option(
    "--run-format",
    type=click.Choice(["auto", "jsonl", "trec"]),
    default="auto",
    show_default=True,
)
@click.option("-m", "--metric", "metrics", multiple=True, help=METRIC_HELP)
@click.option(
    "--relevance-level",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Smallest grade that counts as relevant for binary metrics.",
)
@click.option(
    "--rejection-score-threshold",
    type=float,
    metavar="SCORE",
    help="A rejection query whose top score is below SCORE counts as rejected (the config's "
    "rejection_score_threshold; unset: only abstaining or returning nothing does).",
)
@click.option("--per-query", is_flag=True, help="Also show each query's values.")
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table")
def evaluate(
    gold_paths: tuple[Path, ...],
    qrels_path: Path | None,
    run_paths: tuple[Path, ...],
    run_format: str,
    metrics: tuple[str, ...],
    relevance_level: int,
    rejection_score_threshold: float | None,
    per_query: bool,
    output_format: str,
) -> None:
    """Compute metrics of a run against a gold set or qrels (no gate).

    Relevance and ranking metrics, and with a gold set the rejection metrics."""
    from llm_eval.commands import evaluate as command

    if bool(gold_paths) == (qrels_path is not None):
        raise click.UsageError("give either --gold or --qrels")
    scores = command.evaluate_files(
        run_paths=run_paths,
        metrics=metrics or defaults.METRICS,
        gold_paths=gold_paths,
        qrels_path=qrels_path,
        run_format=run_format,  # type: ignore[arg-type]
        relevance_level=relevance_level,
        rejection_score_threshold=rejection_score_threshold,
    )
    if output_format == "json":
        echo(json.dumps(command.to_json(scores, per_query), indent=2))
    else:
        echo(command.to_table(scores, per_query))


JUDGE_REPEAT_OPTION = click.option(
    "--judge-repeat",
    type=click.IntRange(min=1),
    metavar="N",
    default=1,
    show_default=True,
    help="Ask the judge every question N times: judged values are the means, and their "
    "spread and the verdicts that flip are reported. Refresh the baseline with the same N "
    "the gate uses.",
)


@cli.command(short_help="Evaluate, compare with the baseline, print the verdict.")
@config_options
@RUNS_OPTION
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for report.json and report.md (default: the `output` of the config).",
)
@click.option(
    "--allow-gold-change",
    is_flag=True,
    help="When the gold set changed since the baseline, compare on the unchanged queries.",
)
@retrieval_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(format_names()),
    default="text",
    show_default=True,
    help="What stdout gets: text, the verdict for a person; json (report.json), markdown "
    "(report.md) or junit (JUnit XML) for tools, with other output on stderr.",
)
@BUILDS_OPTION
@JUDGE_REPEAT_OPTION
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    metavar="AMOUNT",
    help="Refuse to start judging (exit 3) when its estimated cost at the configured "
    "prices is higher.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Retrieve, then print how many judge calls and tokens the run would take and "
    "their estimated cost; ask nothing, write nothing.",
)
def gate(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    run_paths: tuple[Path, ...],
    out_dir: Path | None,
    allow_gold_change: bool,
    use_cache: bool | None,
    repeat: int,
    output_format: str,
    builds: int | None,
    judge_repeat: int,
    max_cost: float | None,
    dry_run: bool,
) -> int:
    """Evaluate, compare with the baseline and the ship criteria, print the verdict.

    \b
    Exit codes:
      0  every blocking gate passes (warnings allowed)
      1  a blocking gate failed
      2  bad command line
      3  bad config or data, the gold set changed, or no trustworthy comparison
      4  the retriever or another external service failed
      5  a bug in llm-eval
    """
    from llm_eval.actions import publish
    from llm_eval.commands.gate import run_gate
    from llm_eval.formats import RenderOptions, get_format
    from llm_eval.inputs import JudgeOptions
    from llm_eval.output import terminal_width, use_colour, wrap
    from llm_eval.progress import Progress
    from llm_eval.retrieval import RetrieveOptions

    if run_paths and repeat > 1:
        raise click.UsageError("--repeat runs the configured retriever; it cannot repeat --run")
    if run_paths and builds is not None:
        raise click.UsageError("--builds builds the configured retriever; it cannot build --run")
    if dry_run:
        from llm_eval.commands.gate import judge_dry_run

        with Progress() as progress:
            text = judge_dry_run(
                config_path=config_path,
                criteria_path=criteria_path,
                run_paths=run_paths,
                retrieve_options=RetrieveOptions(use_cache, repeat, progress.update),
                repeat=judge_repeat,
            )
        echo("\n".join(wrap(text, terminal_width())))
        return ExitCode.PASS
    with Progress() as progress:
        outcome = run_gate(
            config_path=config_path,
            criteria_path=criteria_path,
            baseline_path=baseline_path,
            run_paths=run_paths,
            out_dir=out_dir,
            allow_gold_change=allow_gold_change,
            retrieve_options=RetrieveOptions(
                use_cache, repeat, progress.update, builds, progress.name_build
            ),
            judge_options=JudgeOptions(judge_repeat, max_cost),
        )
    if outcome.failure is not None:  # the report says so; the error line is the output
        for line in publish(outcome.report, os.environ, Path.cwd()):
            echo(line, err=True)
        raise outcome.failure
    for_tools = output_format != "text"
    if for_tools:
        echo(get_format(output_format).render(outcome.report, RenderOptions()).rstrip("\n"))
    else:
        plain = not encodes(sys.stdout, "Δ−≥✓✗…")
        echo(outcome.text(terminal_width(), use_colour(sys.stdout, os.environ), plain))
    for line in publish(outcome.report, os.environ, Path.cwd()):
        echo(line, err=for_tools)  # the runner reads workflow commands on both streams
    return outcome.exit_code


@cli.group()
def baseline() -> None:
    """Refresh or show the committed baseline."""


@baseline.command("refresh")
@config_options
@RUNS_OPTION
@click.option("--force", is_flag=True, help="Write it even when an error gate's floor fails.")
@BUILDS_OPTION
@JUDGE_REPEAT_OPTION
def baseline_refresh(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    run_paths: tuple[Path, ...],
    force: bool,
    builds: int | None,
    judge_repeat: int,
) -> int:
    """Recompute the baseline; write it atomically when a score moved.

    A retriever not known to answer the same at every build, with no `builds` set, is
    built twice, and the refresh says how much a rebuild alone moves each gate."""
    from llm_eval.commands.baseline import refresh
    from llm_eval.inputs import JudgeOptions
    from llm_eval.progress import Progress

    if run_paths and builds is not None:
        raise click.UsageError("--builds builds the configured retriever; it cannot build --run")
    with Progress() as progress:
        outcome = refresh(
            config_path=config_path,
            criteria_path=criteria_path,
            baseline_path=baseline_path,
            run_paths=run_paths,
            force=force,
            judge=JudgeOptions(judge_repeat),
            builds=builds,
            progress=progress,
        )
    echo(outcome.text)
    return ExitCode.GATE_FAILED if outcome.refused else ExitCode.PASS


@baseline.command("show")
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    help="Baseline JSON (default: the `baseline` of the config).",
)
@CONFIG_OPTION
def baseline_show(baseline_path: Path | None, config_path: Path) -> None:
    """Print the baseline's provenance and aggregates."""
    from llm_eval.commands.baseline import show
    from llm_eval.config_io import load_config

    echo(show(baseline_path or load_config(config_path).baseline))


@cli.command("retrieve", short_help="Run the retriever over the gold set; write a run.")
@CONFIG_OPTION
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="The run file to write."
)
@click.option(
    "--format",
    "run_format",
    type=click.Choice(["jsonl", "trec"]),
    default="jsonl",
    show_default=True,
    help="JSONL (the ranking, scores, passage text, latency) or a TREC run file "
    "(`query_id Q0 doc_id rank score tag`) for trec_eval, ranx and the like.",
)
@click.option(
    "--no-text",
    is_flag=True,
    help="Leave the passages' text out of a JSONL run (runs scored by passage text or "
    "by a judge need it).",
)
@retrieval_options
@BUILDS_OPTION
@shard_option(
    "Retrieve only shard I of N: the queries whose id hashes to I, the same at every "
    "run whatever the gold file's order. Writes a part (JSONL, its header first); gate, "
    "baseline refresh and evaluate join all N parts into the run.",
)
def retrieve_command(
    config_path: Path,
    out: Path,
    run_format: Literal["jsonl", "trec"],
    no_text: bool,
    use_cache: bool | None,
    repeat: int,
    builds: int | None,
    shard: Shard | None,
) -> None:
    """Run the configured retriever over the gold set and write a run file."""
    from llm_eval.commands.retrieve import retrieve
    from llm_eval.progress import Progress
    from llm_eval.retrieval import RetrieveOptions

    if shard is not None and builds is not None:
        raise click.UsageError("--builds writes a run per build; a shard's part holds one")

    with Progress() as progress:
        options = RetrieveOptions(use_cache, repeat, progress.update, builds, progress.name_build)
        summary = retrieve(
            config_path=config_path,
            out=out,
            options=options,
            run_format=run_format,
            text=not no_text,
            shard=shard,
        )
    echo(summary)


@cli.command("embed", short_help="Embed the corpus in shards; join the shards' vectors.")
@CONFIG_OPTION
@shard_option(
    "Embed only shard I of N of the corpus: the documents whose id hashes to I, whatever "
    "the corpus's order. Adds them to the vector store and writes them as a part in --out."
)
@click.option(
    "--out", type=click.Path(path_type=Path), help="The folder a shard's part is written to."
)
@click.option(
    "--merge",
    is_flag=True,
    help="The arguments are the N part folders that --shard wrote (or globs): check them "
    "and add their vectors to the vector store.",
)
@click.argument("parts", nargs=-1, type=click.Path(path_type=Path))
def embed_command(
    config_path: Path, shard: Shard | None, out: Path | None, merge: bool, parts: tuple[Path, ...]
) -> None:
    """Embed the corpus of the configured `embedding` retriever in N shards (a CI
    matrix), then join the shards' vectors into its vector store, so that `retrieve`
    and `gate` embed nothing. Exit 3 for a part missing, given twice or of another
    corpus or model."""
    from llm_eval.commands.embed import embed_shard, merge_vectors
    from llm_eval.shards_io import expand_runs

    if merge == (shard is not None):
        raise click.UsageError("give --shard I/N (with --out) or --merge PART...")
    if merge:
        echo(merge_vectors(config_path=config_path, parts=expand_runs(parts, "part")))
        return
    assert shard is not None
    if out is None or parts:
        raise click.UsageError("--shard writes one part: give --out DIR and no arguments")
    echo(embed_shard(config_path=config_path, shard=shard, out=out))


@cli.command("judge", short_help="Judge a run in shards; join the shards' answers.")
@CONFIG_OPTION
@click.option(
    "--criteria",
    "criteria_path",
    type=click.Path(path_type=Path),
    default=defaults.CRITERIA,
    show_default=True,
    help="Ship criteria (the gates, whose judged metrics are asked too).",
)
@click.option(
    "--run",
    "run_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="The run to judge: the whole run, or parts of it with the shard's (`retrieve "
    "--shard`); repeatable, or a glob.",
)
@shard_option(
    "Judge only shard I of N: the queries whose id hashes to I, as `retrieve --shard` "
    "splits them. Writes the judge's answers as a part (JSONL, its header first) to --out."
)
@click.option("--out", type=click.Path(path_type=Path), help="The part file a shard writes.")
@JUDGE_REPEAT_OPTION
@click.option(
    "--merge",
    is_flag=True,
    help="The arguments are the N parts that --shard wrote (or globs): check them and "
    "write their answers into the judge's call cache, from which the gate then judges.",
)
@click.argument("parts", nargs=-1, type=click.Path(path_type=Path))
def judge_command(
    config_path: Path,
    criteria_path: Path,
    run_paths: tuple[Path, ...],
    shard: Shard | None,
    out: Path | None,
    judge_repeat: int,
    merge: bool,
    parts: tuple[Path, ...],
) -> None:
    """Ask the judge about a run's queries in N shards (a CI matrix), then join the
    shards' answers into its call cache, so that `gate` (with the same --judge-repeat)
    asks nothing and reports the single process's judged values. Exit 3 for a part
    missing, given twice or of another gold set, retriever or judge."""
    from llm_eval.commands.judge import judge_shard, merge_judgments
    from llm_eval.shards_io import expand_runs

    if merge == (shard is not None):
        raise click.UsageError("give --shard I/N (with --run and --out) or --merge PART...")
    if merge:
        found = expand_runs(parts, "part")
        echo(merge_judgments(config_path=config_path, criteria_path=criteria_path, parts=found))
        return
    assert shard is not None
    if out is None or not run_paths or parts:
        raise click.UsageError("--shard writes one part: give --run RUN, --out FILE, no arguments")
    summary = judge_shard(
        config_path=config_path,
        criteria_path=criteria_path,
        run_paths=expand_runs(run_paths),
        shard=shard,
        out=out,
        repeat=judge_repeat,
    )
    echo(summary)
