"""The `llm-eval` command line: parses options, calls the library, maps results to exit codes.

Heavy modules (numpy, PyGithub, jinja2) are imported inside the commands so that
`llm-eval --help` stays fast.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from llm_eval import __version__
from llm_eval.errors import ExitCode, LlmEvalError

METRIC_HELP = (
    "Metric name, repeatable: recall@k, precision@k (P@k), hit_rate@k (success@k), "
    "mrr, mrr@k, map, map@k, ndcg@k, ndcg_exp@k."
)


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
    from llm_eval.evaluation import DEFAULT_METRICS

    if bool(gold_paths) == (qrels_path is not None):
        raise click.UsageError("give either --gold or --qrels")
    scores = command.evaluate_files(
        run_path=run_path,
        metrics=metrics or DEFAULT_METRICS,
        gold_paths=gold_paths,
        qrels_path=qrels_path,
        run_format=run_format,  # type: ignore[arg-type]
        relevance_level=relevance_level,
    )
    if output_format == "json":
        click.echo(json.dumps(command.to_json(scores, per_query), indent=2))
    else:
        click.echo(command.to_table(scores, per_query))


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
        default="config/ship-criteria.yaml",
        show_default=True,
        help="Ship criteria (the gates).",
    )(command)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default="config/llm-eval.yaml",
        show_default=True,
        help="What to evaluate.",
    )(command)


_RUN_OPTION = click.option(
    "--run",
    "run_path",
    type=click.Path(path_type=Path),
    help="Use this precomputed run (JSONL or TREC) instead of calling the retriever.",
)


@cli.command()
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
def gate(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    run_path: Path | None,
    out_dir: Path | None,
    allow_gold_change: bool,
) -> int:
    """Evaluate, compare with the baseline and the ship criteria, print the verdict."""
    from llm_eval.commands.gate import run_gate

    outcome = run_gate(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        run_path=run_path,
        out_dir=out_dir,
        allow_gold_change=allow_gold_change,
    )
    click.echo(outcome.text)
    return outcome.exit_code


@cli.group()
def baseline() -> None:
    """Create, refresh or show the committed baseline."""


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
    """Recompute the baseline and write it atomically."""
    from llm_eval.commands.baseline import refresh

    outcome = refresh(
        config_path=config_path,
        criteria_path=criteria_path,
        baseline_path=baseline_path,
        run_path=run_path,
        force=force,
    )
    click.echo(outcome.text)
    return ExitCode.PASS if outcome.written else ExitCode.GATE_FAILED


@baseline.command("show")
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    default="gold/baseline.json",
    show_default=True,
)
def baseline_show(baseline_path: Path) -> None:
    """Print the baseline's provenance and aggregates."""
    from llm_eval.commands.baseline import show

    click.echo(show(baseline_path))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the command line and turn every outcome into an exit code."""
    try:
        result = cli.main(args=argv, prog_name="llm-eval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return ExitCode.USAGE
    except click.Abort:
        click.echo("Aborted.", err=True)
        return ExitCode.USAGE
    except LlmEvalError as exc:
        click.echo(f"llm-eval: error: {exc}", err=True)
        return exc.exit_code
    except Exception:
        traceback.print_exc()
        click.echo(
            f"llm-eval {__version__}: internal error (a bug); please report it with the "
            "traceback above.",
            err=True,
        )
        return ExitCode.INTERNAL
    return int(result) if isinstance(result, int) else ExitCode.PASS


if __name__ == "__main__":
    sys.exit(main())
