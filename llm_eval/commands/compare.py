"""`llm-eval compare RUN_A RUN_B`: an A/B comparison of two runs on the same gold set."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from llm_eval.config import load_config
from llm_eval.errors import InputError
from llm_eval.gate import delta_interval
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table
from llm_eval.pipeline import scoring_for
from llm_eval.run_io import load_run
from llm_eval.scoring import Measurement, score_run
from llm_eval.slices import members, standard_scopes
from llm_eval.stats import format_p, holm, margin_tests
from llm_eval.textio import write_atomic
from llm_eval.wording import delta, value


@dataclass(frozen=True, slots=True)
class Row:
    """One metric on one slice: A, B and the paired comparison."""

    slice: str
    metric: str
    n: int
    mean_a: float
    mean_b: float
    p_value: float
    """Two-sided p-value of the gate's paired test (Holm-adjusted across tags)."""
    ci_low: float
    ci_high: float
    """The (1 - alpha) interval of B − A from the same test."""
    winner: str
    """`A`, `B`, or `no significant difference`."""

    @property
    def delta(self) -> float:
        """B − A."""
        return self.mean_b - self.mean_a


def compare_runs(
    gold: GoldSet,
    a: Measurement,
    b: Measurement,
    metrics: Sequence[str],
    *,
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[Row]:
    """Per metric, overall and per tier and tag: means, and the gate's own paired test
    (`stats.margin_tests` with no allowed change, two one-sided tests at alpha / 2) so
    that `compare` and `gate` never disagree on the same pair; tag rows Holm-corrected
    per metric."""
    rows = []
    for kind, label, scope in standard_scopes(gold.queries):
        name = kind if kind == "overall" else f"{kind} {label}"
        members_of_scope = members(gold.queries, scope)
        for metric in metrics:
            # Each metric is paired over the queries it scores in both runs (relevance
            # metrics on answerable queries, rejection metrics on rejection queries).
            ids = [
                q
                for q in members_of_scope
                if metric in a.per_query.get(q, {}) and metric in b.per_query.get(q, {})
            ]
            if len(ids) < 2:
                continue
            before = np.array([a.per_query[q][metric] for q in ids])
            after = np.array([b.per_query[q][metric] for q in ids])
            rows.append(_row(name, metric, before, after, alpha, resamples, seed))
    return _holm_on_tags(rows, alpha)


def _row(
    name: str,
    metric: str,
    before: np.ndarray,
    after: np.ndarray,
    alpha: float,
    resamples: int,
    seed: int,
) -> Row:
    worse = (after, before) if parse_metric(metric).lower_is_better else (before, after)
    test = margin_tests(*worse, [0.0], alpha=alpha / 2, resamples=resamples, seed=seed)[0]
    low, high = delta_interval(metric, test)
    p_value = min(1.0, 2.0 * min(test.p_beyond, test.p_within))
    return Row(
        name,
        metric,
        len(before),
        float(before.mean()),
        float(after.mean()),
        p_value,
        low,
        high,
        _winner(metric, p_value, low, high, alpha),
    )


def _winner(metric: str, p_value: float, low: float, high: float, alpha: float) -> str:
    """The better run when the interval of B − A excludes zero (and p < alpha)."""
    if p_value >= alpha or low <= 0.0 <= high:
        return "no significant difference"
    b_higher = low > 0.0
    return "B" if b_higher != parse_metric(metric).lower_is_better else "A"


def _holm_on_tags(rows: list[Row], alpha: float) -> list[Row]:
    """Tag rows of one metric are many chances of a fluke: Holm-adjust their p-values
    and decide their winners on the adjusted ones."""
    adjusted: dict[int, float] = {}
    for metric in dict.fromkeys(r.metric for r in rows):
        tags = [i for i, r in enumerate(rows) if r.metric == metric and r.slice.startswith("tag ")]
        adjusted |= dict(zip(tags, holm([rows[i].p_value for i in tags]), strict=True))
    return [
        replace(
            r,
            p_value=adjusted[i],
            winner=_winner(r.metric, adjusted[i], r.ci_low, r.ci_high, alpha),
        )
        if i in adjusted
        else r
        for i, r in enumerate(rows)
    ]


def verdict_line(rows: Sequence[Row]) -> str:
    """One line on the overall rows: which run is better on which metric."""
    overall = [r for r in rows if r.slice == "overall"]
    parts: dict[str, list[str]] = {"A": [], "B": [], "no significant difference": []}
    for r in overall:
        parts[r.winner].append(f"{parse_metric(r.metric).label} ({delta(r.metric, r.delta)})")
    said = [
        f"B is better on {', '.join(parts['B'])}" if parts["B"] else "",
        f"A is better on {', '.join(parts['A'])}" if parts["A"] else "",
        f"no significant difference on {', '.join(parts['no significant difference'])}"
        if parts["no significant difference"]
        else "",
    ]
    return "; ".join(p for p in said if p) or "nothing to compare"


def per_query_metrics(names: Sequence[str], explicit: bool) -> tuple[list[str], list[str]]:
    """The metrics compare can pair per query, and the ones it leaves out.

    Service metrics (latency, error rate) and pooled ones (stale_rate@k) are aggregates
    over queries, not per-query values: asking for one explicitly is an error.
    """
    kept, skipped = [], []
    for name in (parse_metric(n).name for n in names):
        if not parse_metric(name).pairable:
            if explicit:
                raise InputError(
                    f"compare pairs per-query values, and {name} is an aggregate over "
                    "queries; gate it with `llm-eval gate` instead"
                )
            skipped.append(name)
        else:
            kept.append(name)
    return kept, skipped


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
        f"{low} to {delta(metric, row.ci_high)}",
        format_p(row.p_value),
        row.winner,
    ]


def to_markdown(rows: Sequence[Row], run_a: str, run_b: str, alpha: float) -> str:
    """The Markdown report."""
    lines = [
        f"## A/B comparison: A = `{run_a}`, B = `{run_b}`",
        "",
        f"**{verdict_line(rows)}**",
        "",
        f"Winner: the better run where the {(1 - alpha) * 100:g}% interval of B − A excludes "
        f"zero (p < {alpha:g}), by the paired tests the gate uses (Tango's score test for 0/1 "
        "scores, bootstrap-t for graded ones); tag rows Holm-corrected per metric.",
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
