"""A/B comparison of two runs on one gold set: paired tests per metric and slice (pure).

Each metric is compared on every slice (all queries, each tier, each tag) with the
gate's paired tests (`stats.margin_tests` against a zero limit), tags Holm-corrected;
`llm_eval.commands.compare` loads the runs and writes the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from llm_eval.errors import InputError
from llm_eval.gate import delta_interval, worsening_pair
from llm_eval.gold import GoldSet
from llm_eval.metrics import parse_metric
from llm_eval.scoring import Measurement
from llm_eval.slices import members, standard_scopes
from llm_eval.stats import holm, holm_levels, margin_tests
from llm_eval.wording.gates import delta


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
    """The interval of B − A from the same test, at `confidence`."""
    winner: str
    """`A`, `B`, or `no significant difference`."""
    confidence: float
    """1 - alpha; for tag rows the Holm-consistent level, so that the interval excludes
    zero exactly when the adjusted p-value is below alpha."""
    method: str = "exact-unconditional"
    """The test's `MarginTest.method`: whether `p_value` is exact or a bound."""

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
    seed: int = 0,
) -> list[Row]:
    """Per metric, overall and per tier and tag: means, and the gate's own paired test
    (`stats.margin_tests` with no allowed change, two one-sided tests at alpha / 2) so
    that `compare` and `gate` never disagree on the same pair; tag rows Holm-corrected
    per metric."""
    rows, pairs = [], []
    for kind, label, scope in standard_scopes(gold.queries):
        name = kind if kind == "overall" else f"{kind} {label}"
        members_of_scope = members(gold.queries, scope)
        for metric in metrics:
            paired = scored_pairs(a, b, members_of_scope, metric)
            if paired is None:
                continue
            rows.append(_row(name, metric, *paired, alpha, seed))
            pairs.append(paired)
    return _holm_on_tags(rows, pairs, alpha, seed)


def scored_pairs(
    a: Measurement, b: Measurement, ids: Sequence[str], metric: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """The values of `metric` in A and B over the queries of `ids` that both score (relevance
    metrics on answerable queries, rejection metrics on rejection queries); None below two."""
    both = [q for q in ids if metric in a.per_query.get(q, {}) and metric in b.per_query.get(q, {})]
    if len(both) < 2:
        return None
    before = np.array([a.per_query[q][metric] for q in both])
    return before, np.array([b.per_query[q][metric] for q in both])


def compare_pair(
    a: Measurement,
    b: Measurement,
    ids: Sequence[str],
    metric: str,
    *,
    alpha: float = 0.05,
    seed: int = 0,
) -> Row | None:
    """`compare_runs`'s overall row for one metric over `ids`; None below two queries."""
    paired = scored_pairs(a, b, ids, metric)
    return None if paired is None else _row("overall", metric, *paired, alpha, seed)


def _row(
    name: str,
    metric: str,
    before: np.ndarray,
    after: np.ndarray,
    alpha: float,
    seed: int,
    level: float | None = None,
) -> Row:
    """Two one-sided tests at alpha / 2 against no change; the interval's two-sided level
    is `level` (default alpha)."""
    worse = worsening_pair(metric, before, after)
    two_sided = alpha if level is None else level
    span = parse_metric(metric).span
    test = margin_tests(
        *worse, [0.0], alpha=alpha / 2, seed=seed, span=span, levels=[two_sided / 2]
    )[0]
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
        winner(metric, p_value, low, high, alpha),
        1.0 - two_sided,
        test.method,
    )


def winner(metric: str, p_value: float, low: float, high: float, alpha: float) -> str:
    """The better run when the interval of B − A excludes zero (and p < alpha)."""
    if p_value >= alpha or low <= 0.0 <= high:
        return "no significant difference"
    b_higher = low > 0.0
    return "B" if b_higher != parse_metric(metric).lower_is_better else "A"


def _holm_on_tags(
    rows: list[Row], pairs: list[tuple[np.ndarray, np.ndarray]], alpha: float, seed: int
) -> list[Row]:
    """Tag rows of one metric are many chances of a fluke: Holm-adjust their p-values,
    decide their winners on the adjusted ones, and draw each interval at the level that
    agrees with that decision (`stats.holm_levels`)."""
    out = list(rows)
    for metric in dict.fromkeys(r.metric for r in rows):
        tags = [i for i, r in enumerate(rows) if r.metric == metric and r.slice.startswith("tag ")]
        raw = [rows[i].p_value for i in tags]
        for i, p, level in zip(tags, holm(raw), holm_levels(raw, alpha), strict=True):
            row = _row(rows[i].slice, metric, *pairs[i], alpha, seed, level)
            out[i] = replace(
                row, p_value=p, winner=winner(metric, p, row.ci_low, row.ci_high, alpha)
            )
    return out


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
    over queries, not per-query values, and an unbounded score (score_discrimination@k)
    has no paired test valid at every size: asking for one explicitly is an error.
    """
    kept, skipped = [], []
    for name in (parse_metric(n).name for n in names):
        metric = parse_metric(name)
        if not metric.testable:
            if explicit:
                why = (
                    "is unbounded, so no paired test valid at every size exists for it"
                    if metric.pairable
                    else "is an aggregate over queries"
                )
                raise InputError(
                    f"compare pairs per-query values, and {name} {why}; gate it with "
                    "`llm-eval gate` instead"
                )
            skipped.append(name)
        else:
            kept.append(name)
    return kept, skipped
