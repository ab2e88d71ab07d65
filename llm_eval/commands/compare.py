"""`llm-eval compare RUN_A RUN_B`: load two runs, compare them (`llm_eval.experiment.pairs`),
write compare.md and compare.csv."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_eval.config_io import load_config
from llm_eval.experiment.pairs import compare_runs, per_query_metrics, verdict_line
from llm_eval.experiment.pairs_view import terminal_table, to_csv, to_markdown
from llm_eval.gold_io import load_gold
from llm_eval.output import wrap
from llm_eval.pipeline import scoring_for
from llm_eval.runs_io import load_run
from llm_eval.scoring import score_run
from llm_eval.textio import write_atomic


def compare(
    *,
    config_path: Path,
    run_a: Path,
    run_b: Path,
    metrics: Sequence[str],
    out_dir: Path | None,
    alpha: float,
) -> str:
    """Load, compare, write compare.md and compare.csv, return the terminal table."""
    config = load_config(config_path)
    gold = load_gold(config.gold)
    names, skipped = per_query_metrics(metrics or config.metrics, explicit=bool(metrics))
    scoring = scoring_for(config)
    a = score_run(gold, load_run(run_a), names, config.relevance_level, scoring)
    b = score_run(gold, load_run(run_b), names, config.relevance_level, scoring)
    rows = compare_runs(gold, a, b, names, alpha=alpha)
    folder = out_dir or config.output
    write_atomic(folder / "compare.md", to_markdown(rows, str(run_a), str(run_b), alpha))
    write_atomic(folder / "compare.csv", to_csv(rows))
    table = terminal_table(rows)
    written = f"Wrote {folder / 'compare.md'} and {folder / 'compare.csv'}"
    if skipped:
        written += f"\nNot compared (aggregates, not per-query values): {', '.join(skipped)}"
    verdict = "\n".join(wrap(f"compare: {verdict_line(rows)}", 80))
    legend = (
        "winner: the run better by a paired test at this level (tag rows Holm-corrected "
        "per metric, their interval's level in brackets); neither: no significant difference"
    )
    notes = "\n".join(wrap(legend, 80))
    return f"{verdict}\nA = {run_a}\nB = {run_b}\n\n{table}\n\n{notes}\n{written}"
