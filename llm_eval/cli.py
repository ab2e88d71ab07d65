"""The `llm-eval` command line: parses options, calls the library, maps results to exit codes.

Heavy modules (numpy, PyGithub, jinja2) are imported inside the commands so that
`llm-eval --help` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import click

from llm_eval import __version__, defaults
from llm_eval.errors import ExitCode, LlmEvalError
from llm_eval.formats import format_names
from llm_eval.output import degrade_unencodable_output, encodes

METRIC_HELP = "Metric name, repeatable (`llm-eval metrics` lists them)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llm-eval")
def cli() -> None:
    """Retrieval-quality gate for RAG systems."""


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
@click.option("--run", "run_path", type=click.Path(path_type=Path), required=True, help="Run file.")
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
@click.option("--per-query", is_flag=True, help="Also show each query's values.")
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table")
def evaluate(
    gold_paths: tuple[Path, ...],
    qrels_path: Path | None,
    run_path: Path,
    run_format: str,
    metrics: tuple[str, ...],
    relevance_level: int,
    per_query: bool,
    output_format: str,
) -> None:
    """Compute metrics of a run against a gold set or qrels (no gate)."""
    from llm_eval.commands import evaluate as command

    if bool(gold_paths) == (qrels_path is not None):
        raise click.UsageError("give either --gold or --qrels")
    scores = command.evaluate_files(
        run_path=run_path,
        metrics=metrics or defaults.METRICS,
        gold_paths=gold_paths,
        qrels_path=qrels_path,
        run_format=run_format,  # type: ignore[arg-type]
        relevance_level=relevance_level,
    )
    if output_format == "json":
        _echo(json.dumps(command.to_json(scores, per_query), indent=2))
    else:
        _echo(command.to_table(scores, per_query))


_CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=defaults.CONFIG,
    show_default=True,
    help="What to evaluate: gold set, retriever, metrics (llm-eval.yaml).",
)


def _config_options(command: Callable[..., Any]) -> Callable[..., Any]:
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
    return _CONFIG_OPTION(command)


_RUN_OPTION = click.option(
    "--run",
    "run_path",
    type=click.Path(path_type=Path),
    help="Use this precomputed run (JSONL or TREC) instead of calling the retriever.",
)


def _retrieval_options(command: Callable[..., Any]) -> Callable[..., Any]:
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
    return _CACHE_OPTION(command)


_CACHE_OPTION = click.option(
    "--cache/--no-cache",
    "use_cache",
    default=None,
    help="Answer from results cached by earlier runs, or ask the retriever for every "
    "query. Default: the config's `cache` (off).",
)
_ALPHA_OPTION = click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of the paired tests (the gate's) that pick a winner.",
)


@cli.command(short_help="Evaluate, compare with the baseline, print the verdict.")
@_config_options
@_RUN_OPTION
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
@_retrieval_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(format_names()),
    default="text",
    show_default=True,
    help="What stdout gets: text, the verdict for a person; json (report.json), markdown "
    "(report.md) or junit (JUnit XML) for tools, with other output on stderr.",
)
@click.option(
    "--judge-repeat",
    type=click.IntRange(min=1),
    metavar="N",
    default=1,
    show_default=True,
    help="Ask the judge every question N times: judged values are the means, and their "
    "spread and the verdicts that flip are reported.",
)
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
    run_path: Path | None,
    out_dir: Path | None,
    allow_gold_change: bool,
    use_cache: bool | None,
    repeat: int,
    output_format: str,
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

    if run_path is not None and repeat > 1:
        raise click.UsageError("--repeat runs the configured retriever; it cannot repeat --run")
    if dry_run:
        from llm_eval.commands.gate import judge_dry_run

        with Progress() as progress:
            text = judge_dry_run(
                config_path=config_path,
                criteria_path=criteria_path,
                run_path=run_path,
                retrieve_options=RetrieveOptions(use_cache, repeat, progress.update),
                repeat=judge_repeat,
            )
        _echo("\n".join(wrap(text, terminal_width())))
        return ExitCode.PASS
    with Progress() as progress:
        outcome = run_gate(
            config_path=config_path,
            criteria_path=criteria_path,
            baseline_path=baseline_path,
            run_path=run_path,
            out_dir=out_dir,
            allow_gold_change=allow_gold_change,
            retrieve_options=RetrieveOptions(use_cache, repeat, progress.update),
            judge_options=JudgeOptions(judge_repeat, max_cost),
        )
    for_tools = output_format != "text"
    if for_tools:
        _echo(get_format(output_format).render(outcome.report, RenderOptions()).rstrip("\n"))
    else:
        plain = not encodes(sys.stdout, "Δ−≥✓✗…")
        _echo(outcome.text(terminal_width(), use_colour(sys.stdout, os.environ), plain))
    for line in publish(outcome.report, os.environ, Path.cwd()):
        _echo(line, err=for_tools)  # the runner reads workflow commands on both streams
    return outcome.exit_code


@cli.group()
def baseline() -> None:
    """Refresh or show the committed baseline."""


@baseline.command("refresh")
@_config_options
@_RUN_OPTION
@click.option("--force", is_flag=True, help="Write it even when an error gate's floor fails.")
def baseline_refresh(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    run_path: Path | None,
    force: bool,
) -> int:
    """Recompute the baseline; write it atomically when a score moved."""
    from llm_eval.commands.baseline import refresh

    outcome = refresh(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        run_path=run_path,
        force=force,
    )
    _echo(outcome.text)
    return ExitCode.GATE_FAILED if outcome.refused else ExitCode.PASS


@baseline.command("show")
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    help="Baseline JSON (default: the `baseline` of the config).",
)
@_CONFIG_OPTION
def baseline_show(baseline_path: Path | None, config_path: Path) -> None:
    """Print the baseline's provenance and aggregates."""
    from llm_eval.commands.baseline import show
    from llm_eval.config_io import load_config

    _echo(show(baseline_path or load_config(config_path).baseline))


@cli.group()
def gold() -> None:
    """Lint, measure and grow the gold set."""


@gold.command("validate")
@_config_options
def gold_validate(config_path: Path, criteria_path: Path, baseline_path: Path | None) -> None:
    """Check the gold set against the config, the criteria and the corpus."""
    from llm_eval.commands.gold import validate

    warnings = validate(config_path, criteria_path, baseline_path)
    for warning in warnings:
        _echo(f"warning: {warning}")
    _echo("gold set OK" + (f" ({len(warnings)} warnings)" if warnings else ""))


@gold.command("stats")
@_config_options
def gold_stats(config_path: Path, criteria_path: Path, baseline_path: Path | None) -> None:
    """Queries per tier and tag, and the smallest drop each gate could detect there."""
    from llm_eval.commands.gold import stats

    _echo(stats(config_path, criteria_path, baseline_path))


@gold.command("coverage")
@_config_options
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Where to write coverage.json (default: the `output` folder of the config).",
)
def gold_coverage(
    config_path: Path, criteria_path: Path, baseline_path: Path | None, out: Path | None
) -> None:
    """Which corpus sections and tags the gold set covers, the share of the corpus no
    question is near, and every label naming a document the corpus lacks."""
    from llm_eval.commands.coverage import run_coverage
    from llm_eval.output import terminal_width

    _echo(run_coverage(config_path, criteria_path, out, terminal_width()))


@gold.command("plan")
@_config_options
@click.option(
    "--catch",
    type=float,
    default=2.0,
    show_default=True,
    help="Each gated scope should catch a drop of this many times its limit, 4 times in 5.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Where to write plan.json (default: the `output` folder of the config).",
)
def gold_plan(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    catch: float,
    out: Path | None,
) -> None:
    """How many questions each gated scope needs to catch its gate's drops, and which
    tags and corpus sections to write them for."""
    from llm_eval.commands.plan import run_plan
    from llm_eval.output import terminal_width

    _echo(run_plan(config_path, criteria_path, catch, out, terminal_width()))


@gold.command("synthesize")
@_config_options
@click.option("--n", "n", type=click.IntRange(0), required=True, help="Questions to draft.")
@click.option("--tag", help="Draft them all for this tag (its areas of the corpus).")
@click.option(
    "--rejection",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Also draft this many questions the corpus should not answer.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="The candidates file to append to (default: candidates.jsonl in `output`).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the chunk sample.")
@click.option(
    "--max-overlap",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.7,
    show_default=True,
    help="Drop a question whose token F1 with an existing one reaches this.",
)
@click.option("--max-cost", type=click.FloatRange(0), help="Refuse to start above this cost.")
@click.option("--dry-run", is_flag=True, help="Print the calls, tokens and cost; ask nothing.")
def gold_synthesize(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    n: int,
    tag: str | None,
    rejection: int,
    out: Path | None,
    seed: int,
    max_overlap: float,
    max_cost: float | None,
    dry_run: bool,
) -> None:
    """Draft questions with the judge model from chunks no question is near yet, in the
    areas `gold plan` says are short, into a candidates file (tier `candidate`,
    unreviewed). `gold review` is where a person accepts them."""
    from llm_eval.commands.synthesize import run_synthesize
    from llm_eval.output import terminal_width

    _echo(
        run_synthesize(
            config_path,
            criteria_path,
            n=n,
            tag=tag,
            rejection=rejection,
            out=out,
            seed=seed,
            max_overlap=max_overlap,
            max_cost=max_cost,
            dry_run=dry_run,
            width=terminal_width(),
        )
    )


@gold.command("review")
@click.argument("candidates", type=click.Path(path_type=Path))
@_CONFIG_OPTION
@click.option("--tier", help="The tier accepted questions join (its gold file in the config).")
@click.option(
    "--to",
    type=click.Path(path_type=Path),
    help="The gold file accepted questions are appended to (instead of --tier's).",
)
def gold_review(candidates: Path, config_path: Path, tier: str | None, to: Path | None) -> None:
    """Review drafted questions one screen each: accept (into a tier), edit, retag,
    relabel, reject, skip or undo, by word or key (`accept` or `a`). Decisions are saved
    as they are made; run it again to go on."""
    with _threads_deaf_to_ctrl_c():
        import numpy  # noqa: F401  (its BLAS threads start here, and must not take Ctrl-C)

        from llm_eval.commands.review import TerminalConsole, review

    _echo(review(candidates, config_path, tier=tier, to=to, console=TerminalConsole()))


@contextlib.contextmanager
def _threads_deaf_to_ctrl_c() -> Iterator[None]:
    """Threads started inside (numpy's BLAS pool) block SIGINT. The kernel hands a
    process's SIGINT to any thread that does not block it; when that is a worker, the
    main thread, waiting for a key at the prompt, only sees Ctrl-C after the next key."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@cli.command("init", short_help="Write a working setup into an empty repository.")
@click.option(
    "--path",
    "root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(),
    help="The repository's root (default: here).",
)
@click.option(
    "--source",
    default="OWNER/llm-eval@main",
    show_default=True,
    help="Where the workflows take the action and the package from: OWNER/REPO@REF "
    "(pin a full commit sha).",
)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def init_command(root: Path, source: str, force: bool) -> None:
    """Write config, ship criteria, a starter corpus and gold set, and the GitHub
    workflows, then compute the baseline: `llm-eval gate` runs right after."""
    from llm_eval.commands.init import init
    from llm_eval.output import terminal_width

    _echo(init(root, source=source, force=force, width=terminal_width()))


@cli.command("compare", short_help="A/B comparison of two runs with paired tests.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@_CONFIG_OPTION
@click.option("-m", "--metric", "metrics", multiple=True, help=METRIC_HELP)
@_ALPHA_OPTION
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

    _echo(
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
@_ALPHA_OPTION
@_CACHE_OPTION
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Folder for the experiment files (default: `output`/experiment of the config).",
)
def experiment_command(
    configs: tuple[Path, ...],
    reference: str | None,
    quality: str | None,
    tier: str | None,
    alpha: float,
    use_cache: bool | None,
    out_dir: Path | None,
) -> None:
    """Run each retriever variant over the gold set and compare them with the gate's
    paired tests: one config with `variants:`, or several configs (one variant each).
    Writes experiment.md, experiment.csv, experiment.json and, with matplotlib
    (`llm-eval[plots]`), the quality-versus-latency Pareto picture."""
    from llm_eval.commands.experiment import run_experiment
    from llm_eval.output import terminal_width
    from llm_eval.progress import Progress

    with Progress() as progress:
        text = run_experiment(
            list(configs) or [Path(defaults.CONFIG)],
            out_dir=out_dir,
            reference=reference,
            quality=quality,
            use_cache=use_cache,
            alpha=alpha,
            tier=tier,
            progress=progress.update,
            width=terminal_width(),
        )
    _echo(text)


@cli.command("metrics", short_help="List the metrics, their units and directions.")
def metrics_command() -> None:
    """List every metric llm-eval computes: how to write it, where its values come from,
    its unit, which way is better, and what it measures."""
    from llm_eval.commands.metrics import metric_table
    from llm_eval.output import terminal_width

    _echo(metric_table(terminal_width()))


@cli.command("retrievers", short_help="List the retriever kinds and their settings.")
def retrievers_command() -> None:
    """List every retriever kind the config's `retriever:` can name, with its settings,
    their defaults and what they do."""
    from llm_eval.commands.retrievers import retriever_list
    from llm_eval.output import terminal_width

    _echo(retriever_list(terminal_width()))


@cli.command("gain", short_help="Novelty and retrieval gain of new documents.")
@_config_options
@click.argument("new_docs", type=click.Path(path_type=Path))
@click.option(
    "--run-before",
    type=click.Path(path_type=Path),
    help="A run without the new documents (default: the configured retriever).",
)
@click.option(
    "--run-after",
    type=click.Path(path_type=Path),
    help="A run with the new documents added (needed unless the retriever indexes the "
    "corpus itself, as bm25 does).",
)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Folder for gain.json.")
def gain_command(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    new_docs: Path,
    run_before: Path | None,
    run_after: Path | None,
    out_dir: Path | None,
) -> None:
    """Measure what the documents in NEW_DOCS.jsonl (BEIR JSONL) would add: each one's
    novelty against the corpus (1 − the highest cosine of its chunks to the corpus's, with
    the `embeddings:` model), the change in recall@k on the gold set once they are added,
    and with a judge the change in context recall; gain = alpha·ΔRecall@k +
    beta·ΔContextRecall + gamma·novelty, weights under `gain:` in the config."""
    from llm_eval.commands.gain import knowledge_gain

    _echo(
        knowledge_gain(
            config_path=config_path,
            criteria_path=criteria_path,
            new_docs=new_docs,
            run_before=run_before,
            run_after=run_after,
            out_dir=out_dir,
        )
    )


@cli.command("retrieve", short_help="Run the retriever over the gold set; write a run.")
@_CONFIG_OPTION
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="The run file to write."
)
@_retrieval_options
def retrieve_command(config_path: Path, out: Path, use_cache: bool | None, repeat: int) -> None:
    """Run the configured retriever over the gold set and write a JSONL run file."""
    from llm_eval.commands.retrieve import retrieve
    from llm_eval.progress import Progress
    from llm_eval.retrieval import RetrieveOptions

    with Progress() as progress:
        options = RetrieveOptions(use_cache, repeat, progress.update)
        summary = retrieve(config_path=config_path, out=out, options=options)
    _echo(summary)


@cli.group()
def hook() -> None:
    """Install or remove the git pre-push check."""


@hook.command("install")
@_config_options
@click.option(
    "--watch",
    metavar="PATH",
    multiple=True,
    help="Run the gate only when a push changes this path (repeatable; a git pathspec "
    "from the repository root). Default: config/, gold/ and the files the config names.",
)
@click.option(
    "--each-commit",
    is_flag=True,
    help="Gate every pushed commit that changes a watched path (oldest first), not only "
    "the tip of each pushed branch.",
)
@click.option("--force", is_flag=True, help="Replace a pre-push hook llm-eval did not write.")
def hook_install(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    watch: tuple[str, ...],
    each_commit: bool,
    force: bool,
) -> None:
    """Install the pre-push hook that runs the gate (honours core.hooksPath)."""
    from llm_eval.commands.hook import install

    outcome = install(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        watch=watch,
        force=force,
        each_commit=each_commit,
    )
    _echo(outcome.text)


@hook.command("uninstall")
def hook_uninstall() -> None:
    """Remove the pre-push hook, if llm-eval wrote it."""
    from llm_eval.commands.hook import uninstall

    _echo(uninstall().text)


@cli.command("comment", short_help="Post or update the pull request's llm-eval comment.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=".llm-eval/report.json",
    show_default=True,
    help="The report of `llm-eval gate` to post.",
)
@click.option("--repo", help="OWNER/NAME (default: $GITHUB_REPOSITORY).")
@click.option(
    "--pr",
    type=click.IntRange(min=1),
    help="Pull request number (default: the pull_request event in $GITHUB_EVENT_PATH).",
)
@click.option(
    "--head-sha",
    help="Comment on the open pull request whose head is this commit (for workflow_run).",
)
@click.option("--dry-run", is_flag=True, help="Print the comment instead; touch nothing.")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 4 when the comment cannot be posted (default: a warning, exit 0).",
)
@click.option(
    "--id",
    "marker_id",
    help="Keep a comment of its own for this gate (letters, digits, . _ -), e.g. the "
    "config's name when several gates run on one pull request.",
)
@click.option(
    "--when",
    type=click.Choice(defaults.COMMENT_WHEN_CHOICES),
    default=defaults.COMMENT_WHEN,
    show_default=True,
    help="When to post a new comment: every run; unless the gate passed and no query's "
    "score moved; only when the check fails. A comment already there is always updated.",
)
def comment_command(
    report_path: Path,
    repo: str | None,
    pr: int | None,
    head_sha: str | None,
    dry_run: bool,
    strict: bool,
    marker_id: str | None,
    when: str,
) -> None:
    """Post or update the pull request's one llm-eval comment (token: $GITHUB_TOKEN)."""
    from llm_eval.commands.comment import When, comment
    from llm_eval.formats.markdown import MARKER_ID

    if pr is not None and head_sha:
        raise click.UsageError("give --pr or --head-sha, not both")
    if marker_id is not None and not MARKER_ID.fullmatch(marker_id):
        raise click.UsageError(f"--id {marker_id!r}: use letters, digits, . _ - (at most 64)")
    outcome = comment(
        marker_id=marker_id,
        report_path=report_path,
        environ=os.environ,
        repo=repo,
        pr=pr,
        head_sha=head_sha,
        dry_run=dry_run,
        strict=strict,
        when=cast("When", when),
    )
    _echo(outcome.text, err=outcome.to_stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the command line and turn every outcome into an exit code."""
    degrade_unencodable_output()
    try:
        result = cli.main(args=argv, prog_name="llm-eval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return ExitCode.USAGE
    except click.Abort:
        _echo("Aborted.", err=True)
        return ExitCode.USAGE
    except LlmEvalError as exc:
        _echo(f"llm-eval: error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is None:
            return _internal_error()
        # A path the user gave that cannot be read or written (a folder where a file is
        # expected, a file where a folder is, no permission): their input, not a bug.
        _echo(f"llm-eval: error: {_os_error_line(exc)}", err=True)
        return ExitCode.BAD_INPUT
    except Exception:
        return _internal_error()
    return int(result) if isinstance(result, int) else ExitCode.PASS


def _echo(message: str, err: bool = False) -> None:
    """click.echo to this process's own stdout or stderr.

    click would rewrap a stream declared ASCII (`PYTHONIOENCODING=ascii`) as UTF-8;
    the streams themselves spell what they cannot encode in ASCII instead (see
    `degrade_unencodable_output`).
    """
    click.echo(message, file=sys.stderr if err else sys.stdout)


def _internal_error() -> int:
    """Print the traceback of the exception being handled: a bug, exit 5."""
    traceback.print_exc()
    _echo(
        f"llm-eval {__version__}: internal error (a bug); please report it with the "
        "traceback above.",
        err=True,
    )
    return ExitCode.INTERNAL


_OS_REASONS = {
    errno.EEXIST: "is a file, expected a folder",
    errno.ENOTDIR: "a part of the path is a file, expected a folder",
    errno.EISDIR: "is a folder, expected a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
}


def _os_error_line(exc: OSError) -> str:
    """`path: cannot read or write it: reason`, for a path the file system refused."""
    reason = _OS_REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    # A failed rename names the temporary file first and the target, the user's path, second.
    return f"{exc.filename2 or exc.filename}: cannot read or write it: {reason}"


if __name__ == "__main__":
    sys.exit(main())
