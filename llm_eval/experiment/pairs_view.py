"""`llm-eval compare`'s results: the terminal table, compare.md and compare.csv."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from llm_eval.experiment.pairs import Row, verdict_line
from llm_eval.metrics import parse_metric
from llm_eval.output import render_blocks
from llm_eval.stats import format_p
from llm_eval.wording.gates import delta, value

HEADER = ["slice", "metric", "n", "A", "B", "Δ (B − A)", "CI", "p (Holm: tags)", "winner"]


def cells(row: Row) -> list[str]:
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
        format_p(row.p_value, row.method),
        row.winner,
    ]


def terminal_table(rows: Sequence[Row], width: int = 80) -> str:
    """The terminal's table: one block per slice, one row per metric, no wider than
    `width` (whole columns move to a block of their own beyond it)."""
    header = ["metric", "A", "B", "Δ (B − A)", "CI", "p", "winner"]
    blocks = []
    for name in dict.fromkeys(r.slice for r in rows):
        mine = [r for r in rows if r.slice == name]
        body = []
        for row in mine:
            full = cells(row)
            shown_p = full[7].removeprefix("p = ").removeprefix("p ")
            winner = "neither" if row.winner == "no significant difference" else row.winner
            body.append([full[1], full[3], full[4], full[5], full[6], shown_p, winner])
        title = f"{name} ({mine[0].n} queries)"
        blocks.append(title + "\n" + render_blocks(header, body, width))
    return "\n\n".join(blocks)


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
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(_cell(c) for c in cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A Markdown table cell: `|` escaped, and `<` `>` (p-values) as HTML entities."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


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
