"""`llm-eval compare RUN_A RUN_B`: load two runs, compare them (`llm_eval.ab_compare`),
write compare.md and compare.csv."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from llm_eval.ab_compare import Row, compare_runs, per_query_metrics, verdict_line
from llm_eval.config_io import load_config
from llm_eval.gold_io import load_gold
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table
from llm_eval.pipeline import scoring_for
from llm_eval.run_io import load_run
from llm_eval.scoring import score_run
from llm_eval.stats import format_p
from llm_eval.textio import write_atomic
from llm_eval.wording import delta, value

_HEADER = ["slice", "metric", "n", "A", "B", "Δ (B − A)", "CI", "p (Holm: tags)", "winner"]


def _cells(row: Row) -> list[str]:
    metric = row.metric
    low = delta(metric, row.ci_low).removesuffix(" pp")
    return [
        row.slice,
        parse_metric(metric).label,
        str(row.n),
        value(metric, row.mean_a),
        value(metric, row.mean_b),
        delta(metric, row.delta),
        f"{low} to {delta(metric, row.ci_high)}" + _level(row),
        format_p(row.p_value),
        row.winner,
    ]


def _level(row: Row) -> str:
    """The interval's level where Holm widened it (tag rows)."""
    return f" ({row.confidence * 100:.1f}%)" if row.slice.startswith("tag ") else ""


def to_markdown(rows: Sequence[Row], run_a: str, run_b: str, alpha: float) -> str:
    """The Markdown report."""
    lines = [
        f"## A/B comparison: A = `{run_a}`, B = `{run_b}`",
        "",
        f"**{verdict_line(rows)}**",
        "",
        f"Winner: the better run where the {(1 - alpha) * 100:g}% interval of B − A excludes "
        f"zero (p < {alpha:g}), by the paired tests the gate uses (an exact test for 0/1 "
        "scores, a betting test for graded ones, both valid at every number of queries); "
        "tag rows Holm-corrected per metric, each interval drawn at the level that agrees "
        "with its adjusted p-value (shown in brackets).",
        "",
        "| " + " | ".join(_HEADER) + " |",
        "|" + "---|" * len(_HEADER),
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[Row]) -> str:
    """One line per slice and metric, raw numbers."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "slice",
            "metric",
            "n",
            "mean_a",
            "mean_b",
            "delta",
            "ci_low",
            "ci_high",
            "p_value",
            "winner",
        ]
    )
    for r in rows:
        writer.writerow(
            [
                r.slice,
                r.metric,
                r.n,
                r.mean_a,
                r.mean_b,
                r.delta,
                r.ci_low,
                r.ci_high,
                r.p_value,
                r.winner,
            ]
        )
    return out.getvalue()


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
    table = render_table(_HEADER, [_cells(r) for r in rows])
    written = f"Wrote {folder / 'compare.md'} and {folder / 'compare.csv'}"
    if skipped:
        written += f"\nNot compared (aggregates, not per-query values): {', '.join(skipped)}"
    return f"compare: {verdict_line(rows)}\nA = {run_a}\nB = {run_b}\n\n{table}\n\n{written}"
