"""An experiment: retriever variants measured on one gold set and compared (pure).

    result = compare_variants(gold, variants, metrics, reference, quality, lifts)

Every variant is paired with the reference variant by the gate's own paired tests
(`llm_eval.ab_compare.compare_runs`, the code behind `llm-eval compare`), so an
experiment, `compare` and the gate never disagree on the same pair; the overall
p-values are then Holm-adjusted across the variants, per metric. Slices (tiers and
tags) are listed worst first. The Pareto front is taken over the quality metric and
the p95 latency; `recommendation` says in words what the numbers mean.
`llm_eval.commands.experiment` retrieves, measures and writes the files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_eval.ab_compare import Row, compare_runs, winner
from llm_eval.gold import GoldSet
from llm_eval.metrics import parse_metric
from llm_eval.scoring import Measurement
from llm_eval.slices import value_over
from llm_eval.stats import format_p, holm
from llm_eval.wording import delta, value

SERVICE = ("latency_p50", "latency_p95", "error_rate")


@dataclass(frozen=True, slots=True)
class Measured:
    """One variant's scores."""

    name: str
    measurement: Measurement
    top_k: int


@dataclass(frozen=True, slots=True)
class Pair:
    """One metric of one variant against the reference, over all queries."""

    row: Row
    """The paired test exactly as `compare` reports it (A = reference, B = variant)."""
    p_holm: float
    """The p-value Holm-adjusted across the variants."""
    winner: str
    """`reference`, `variant` or `no significant difference`, on the adjusted p."""


@dataclass(frozen=True, slots=True)
class VariantRow:
    """One line of the experiment table."""

    name: str
    top_k: int
    values: Mapping[str, float | None]
    """Every metric over all gold queries, service metrics included."""
    pairs: Mapping[str, Pair]
    """Per metric with a paired test (bounded per-query values), against the reference
    (empty for the reference)."""
    slices: tuple[Row, ...]
    """Tier and tag rows against the reference, worst first."""
    on_front: bool | None
    """On the quality-versus-p95-latency front; None without a latency."""


@dataclass(frozen=True, slots=True)
class LiftRow:
    """A derived column: `metric` of `variant` minus that of `base`, with its test."""

    name: str
    base: str
    variant: str
    row: Row | None
    """None when the two share fewer than two scored queries."""
    latency_ratio: float | None


@dataclass(frozen=True, slots=True)
class Experiment:
    """Everything the experiment files say."""

    rows: tuple[VariantRow, ...]
    reference: str
    quality: str
    metrics: tuple[str, ...]
    pairable: tuple[str, ...]
    """The metrics with a paired test: pairable, with bounded per-query values."""
    lifts: tuple[LiftRow, ...]
    alpha: float

    def row(self, name: str) -> VariantRow:
        """The row of a variant."""
        return next(r for r in self.rows if r.name == name)


def compare_variants(
    gold: GoldSet,
    variants: Sequence[Measured],
    metrics: Sequence[str],
    reference: str,
    quality: str,
    lifts: Sequence[tuple[str, str, str, str]] = (),
    *,
    alpha: float = 0.05,
    seed: int = 0,
) -> Experiment:
    """Measure and pair every variant; `lifts` are (name, metric, base, variant)."""
    by_name = {v.name: v for v in variants}
    ref = by_name[reference]
    pairable = tuple(m for m in metrics if parse_metric(m).testable)
    ids = [q.query_id for q in gold.queries]
    shown = tuple(dict.fromkeys([*metrics, *SERVICE]))
    rows_of: dict[str, list[Row]] = {}
    for variant in variants:
        if variant.name != reference:
            rows_of[variant.name] = compare_runs(
                gold,
                ref.measurement,
                variant.measurement,
                pairable,
                alpha=alpha,
                seed=seed,
            )
    adjusted = _holm_across_variants(rows_of, pairable)
    values = {v.name: _values(v.measurement, ids, shown) for v in variants}
    front = pareto_front(
        {v.name: (values[v.name][quality], values[v.name]["latency_p95"]) for v in variants},
        parse_metric(quality).lower_is_better,
    )
    rows = []
    for variant in variants:
        overall = {r.metric: r for r in rows_of.get(variant.name, []) if r.slice == "overall"}
        pairs = {
            m: Pair(
                overall[m],
                adjusted[(variant.name, m)],
                _side(winner(m, adjusted[(variant.name, m)], r.ci_low, r.ci_high, alpha)),
            )
            for m, r in overall.items()
        }
        others = [r for r in rows_of.get(variant.name, []) if r.slice != "overall"]
        rows.append(
            VariantRow(
                variant.name,
                variant.top_k,
                values[variant.name],
                pairs,
                tuple(sorted(others, key=_worst_first)),
                front.get(variant.name),
            )
        )
    lift_rows = tuple(
        _lift(
            gold,
            by_name,
            values,
            (name, metric, base, over),
            rows_of.get(over, []) if base == reference else [],
            alpha,
            seed,
        )
        for name, metric, base, over in lifts
    )
    return Experiment(tuple(rows), reference, quality, tuple(shown), pairable, lift_rows, alpha)


def _values(
    measurement: Measurement, ids: Sequence[str], metrics: Sequence[str]
) -> dict[str, float | None]:
    table = measurement.table
    out: dict[str, float | None] = {}
    for metric in metrics:
        number = value_over(table, ids, metric).value
        out[metric] = None if number is None or math.isnan(number) else float(number)
    return out


def _holm_across_variants(
    rows_of: Mapping[str, Sequence[Row]], metrics: Sequence[str]
) -> dict[tuple[str, str], float]:
    """Per metric, the overall p-values of all variants Holm-adjusted together."""
    adjusted: dict[tuple[str, str], float] = {}
    for metric in metrics:
        keys = [
            (name, r.p_value)
            for name, rows in rows_of.items()
            for r in rows
            if r.slice == "overall" and r.metric == metric
        ]
        for (name, _), p in zip(keys, holm([p for _, p in keys]), strict=True):
            adjusted[(name, metric)] = p
    return adjusted


def _side(result: str) -> str:
    return {"A": "reference", "B": "variant"}.get(result, result)


def _worst_first(row: Row) -> tuple[float, str, str]:
    """Largest loss first: the change in the direction where the metric gets worse."""
    worse = row.delta if not parse_metric(row.metric).lower_is_better else -row.delta
    return (worse, row.metric, row.slice)


def pareto_front(
    points: Mapping[str, tuple[float | None, float | None]], lower_is_better: bool = False
) -> dict[str, bool | None]:
    """Per name: whether no other point is at least as good on both quality and
    latency and better on one (None when either is unknown)."""
    known = {
        n: (-q if lower_is_better else q, lat)
        for n, (q, lat) in points.items()
        if q is not None and lat is not None
    }
    front: dict[str, bool | None] = dict.fromkeys(points)
    for name, (q, lat) in known.items():
        front[name] = not any(
            q2 >= q and l2 <= lat and (q2 > q or l2 < lat)
            for other, (q2, l2) in known.items()
            if other != name
        )
    return front


def _lift(
    gold: GoldSet,
    by_name: Mapping[str, Measured],
    values: Mapping[str, Mapping[str, float | None]],
    lift: tuple[str, str, str, str],
    paired: Sequence[Row],
    alpha: float,
    seed: int,
) -> LiftRow:
    """`lift` is (name, metric, base, variant); `paired` the rows already computed for
    that variant against the reference, reused when the base is the reference (each
    metric's overall row is the same test whatever else was compared with it)."""
    name, metric, base, over = lift
    overall = next((r for r in paired if r.slice == "overall" and r.metric == metric), None)
    if overall is None:
        rows = compare_runs(
            gold,
            by_name[base].measurement,
            by_name[over].measurement,
            [metric],
            alpha=alpha,
            seed=seed,
        )
        overall = next((r for r in rows if r.slice == "overall"), None)
    return LiftRow(name, base, over, overall, _ratio(values[over], values[base]))


def _ratio(
    variant: Mapping[str, float | None], reference: Mapping[str, float | None]
) -> float | None:
    """The variant's p95 latency as a multiple of the reference's."""
    a, b = variant.get("latency_p95"), reference.get("latency_p95")
    return a / b if a is not None and b else None


# --- in words -------------------------------------------------------------------------


def _significance(p: float, result: str, alpha: float) -> str:
    shown = format_p(p)
    if result == "no significant difference":
        return f"not significant, {shown}"
    return f"significant, {shown}"


def _times(ratio: float | None) -> str:
    if ratio is None:
        return "at an unknown latency"
    if 0.95 <= ratio <= 1.05:
        return "at about the same p95 latency"
    return f"at {ratio:.1f}× the p95 latency"


def recommendation(experiment: Experiment) -> str:
    """One paragraph: the best variant on the quality metric against the reference,
    the significant losses, the front, and every lift, with their p-values."""
    q, ref = experiment.quality, experiment.reference
    label = parse_metric(q).label
    reference = experiment.row(ref)
    sentences = []
    better, worse = [], []
    for row in experiment.rows:
        pair = row.pairs.get(q)
        if pair is not None and pair.winner == "variant":
            better.append(row)
        elif pair is not None and pair.winner == "reference":
            worse.append(row)
    lower = parse_metric(q).lower_is_better

    def quality_of(row: VariantRow) -> float:
        number = row.values.get(q)
        return -math.inf if number is None else (-number if lower else number)

    if better:
        best = max(better, key=quality_of)
        pair = best.pairs[q]
        sentences.append(
            f"`{best.name}` is the best variant on {label}: {value(q, best.values[q])} against "
            f"`{ref}`'s {value(q, reference.values[q])} ({delta(q, pair.row.delta)}, "
            f"{_significance(pair.p_holm, pair.winner, experiment.alpha)} after Holm across "
            f"{len(experiment.rows) - 1} variants), "
            f"{_times(_ratio(best.values, reference.values))} of `{ref}`."
        )
        if len(better) > 1:
            others = ", ".join(f"`{r.name}`" for r in better if r is not best)
            sentences.append(f"Also significantly better on {label}: {others}.")
    else:
        sentences.append(
            f"No variant is significantly better than `{ref}` on {label} "
            f"({value(q, reference.values[q])}); keep `{ref}` unless another metric or the "
            "latency decides."
        )
    if worse:
        names = ", ".join(f"`{r.name}` ({delta(q, r.pairs[q].row.delta)})" for r in worse)
        sentences.append(f"Significantly worse than `{ref}` on {label}: {names}.")
    front = [r.name for r in experiment.rows if r.on_front]
    if front:
        sentences.append(
            f"On the front of {label} against p95 latency (no other variant is both as good "
            f"and as fast): {', '.join(f'`{n}`' for n in front)}."
        )
    for lift in experiment.lifts:
        if lift.row is None:
            sentences.append(f"{lift.name}: too few queries scored by both to compare.")
            continue
        m = lift.row.metric
        direction = "improves" if lift.row.delta > 0 else "lowers"
        if lift.row.delta == 0:
            direction = "leaves unchanged"
        result = _side(lift.row.winner)
        sentences.append(
            f"{lift.name}: `{lift.variant}` {direction} {parse_metric(m).label} over "
            f"`{lift.base}` by {delta(m, lift.row.delta).lstrip('+').lstrip('−')} "
            f"({_significance(lift.row.p_value, result, experiment.alpha)}), "
            f"{_times(lift.latency_ratio)}."
        )
    return " ".join(sentences)
