"""Growing the gold set: `gold validate|stats|coverage|plan|synthesize|review`, `init`,
`gain`."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import click

from llm_eval import defaults
from llm_eval.cli.root import (
    CONFIG_OPTION,
    RUN_OPTION,
    cli,
    config_options,
    echo,
)


@cli.group()
def gold() -> None:
    """Lint, measure and grow the gold set."""


@gold.command("validate")
@config_options
def gold_validate(config_path: Path, criteria_path: Path, baseline_path: Path | None) -> None:
    """Check the gold set against the config, the criteria and the corpus."""
    from llm_eval.commands.gold import validate

    warnings = validate(config_path, criteria_path, baseline_path)
    for warning in warnings:
        echo(f"warning: {warning}")
    echo("gold set OK" + (f" ({len(warnings)} warnings)" if warnings else ""))


@gold.command("stats")
@config_options
@RUN_OPTION
def gold_stats(
    config_path: Path, criteria_path: Path, baseline_path: Path | None, run_path: Path | None
) -> None:
    """Queries per tier and tag, the smallest drop each gate could detect there, and the
    rejection_score_threshold that best separates answerable from rejection questions
    (from the run's top scores: --run, else the configured retriever's)."""
    from llm_eval.commands.gold import stats

    echo(stats(config_path, criteria_path, baseline_path, run_path))


@gold.command("coverage")
@config_options
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

    echo(run_coverage(config_path, criteria_path, out, terminal_width()))


@gold.command("plan")
@config_options
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

    echo(run_plan(config_path, criteria_path, catch, out, terminal_width(), baseline_path))


@gold.command("synthesize")
@config_options
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
@click.option(
    "--max-similarity",
    type=click.FloatRange(-1, 1, min_open=True),
    default=0.9,
    show_default=True,
    help="With `embeddings:` in the config, also drop a question whose embedding cosine "
    "with an existing one reaches this: a paraphrase sharing few words.",
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
    max_similarity: float,
    max_cost: float | None,
    dry_run: bool,
) -> None:
    """Draft questions with the judge model from chunks no question is near yet, in the
    areas `gold plan` says are short, into a candidates file (tier `candidate`,
    unreviewed). `gold review` is where a person accepts them."""
    from llm_eval.commands.synthesize import run_synthesize
    from llm_eval.output import terminal_width

    echo(
        run_synthesize(
            config_path,
            criteria_path,
            n=n,
            tag=tag,
            rejection=rejection,
            out=out,
            seed=seed,
            max_overlap=max_overlap,
            max_similarity=max_similarity,
            max_cost=max_cost,
            dry_run=dry_run,
            width=terminal_width(),
            baseline=baseline_path,
        )
    )


@gold.command("review")
@click.argument("candidates", type=click.Path(path_type=Path))
@CONFIG_OPTION
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

    echo(review(candidates, config_path, tier=tier, to=to, console=TerminalConsole()))


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
    help="Where the workflows take the action and the package from: OWNER/REPO@COMMIT "
    "(a tag or branch is resolved to its commit at GitHub, or refused). Default: the "
    "GitHub commit this llm-eval was installed from, else OWNER/llm-eval@main.",
)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@click.option(
    "--from-beir",
    "beir",
    type=click.Path(path_type=Path, file_okay=False),
    help="A BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv): its "
    "split becomes the gold set, its corpus the corpus.",
)
@click.option("--split", help="The qrels split of --from-beir (default: test).")
@click.option(
    "--shards",
    type=click.IntRange(2, defaults.MAX_SHARDS),
    metavar="N",
    help="Write a gate workflow that retrieves in N matrix jobs, each uploading its part "
    "of the run as an artifact, and gates from the N parts in one more job.",
)
def init_command(
    root: Path,
    source: str | None,
    force: bool,
    beir: Path | None,
    split: str | None,
    shards: int | None,
) -> None:
    """Write config, ship criteria, a starter corpus and gold set, and the GitHub
    workflows, then compute the baseline: `llm-eval gate` runs right after. With
    --from-beir, the gold set and corpus are the BEIR folder's instead."""
    from llm_eval.commands.init import init
    from llm_eval.defaults import BEIR_SPLIT
    from llm_eval.output import terminal_width

    if split is not None and beir is None:
        raise click.UsageError("--split is the split of --from-beir; give that too")
    width = terminal_width()
    split = split or BEIR_SPLIT
    echo(init(root, source=source, force=force, width=width, beir=beir, split=split, shards=shards))


@cli.command("gain", short_help="Novelty and retrieval gain of new documents.")
@config_options
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

    echo(
        knowledge_gain(
            config_path=config_path,
            criteria_path=criteria_path,
            new_docs=new_docs,
            run_before=run_before,
            run_after=run_after,
            out_dir=out_dir,
        )
    )
