"""An experiment: retriever variants measured on one gold set and compared (pure).

    result = compare_variants(gold, variants, metrics, reference, quality, lifts)

Every variant is paired with the reference variant by the gate's own paired tests
(`llm_eval.experiment.pairs.compare_runs`, the code behind `llm-eval compare`), so an
experiment, `compare` and the gate never disagree on the same pair; the overall
p-values are then Holm-adjusted across the variants, per metric. Slices (tiers and
tags) are listed worst first. `recommendation` says in words what the numbers mean.

The Pareto front is taken over the quality metric and the p95 latency, and a
difference inside the measured noise is a tie, never a win. Latencies are on one
clock, given with the measurements: CPU time when every variant searches in this
process, wall time otherwise (`llm_eval.experiment.latency_clock`).

- quality: A is better than B when the paired test of the two (the same test, at
  alpha, not adjusted: the front is a screen; the Holm-adjusted table is the claim)
  says so; a metric without a paired test compares the values;
- latency: A is faster than B when the 1 − alpha (95%) interval of the ratio of their
  p95 latencies lies below 1: a paired bootstrap over the queries both answered
  (`llm_eval.experiment.latency_ratio`), since the variants answered each query in turn under
  the same load. Each variant's p50 and p95 carry that ratio against the reference
  too, and the words say "as fast as" only when its interval covers 1. Each p95 also
  has its own distribution-free interval (`stats.quantile_interval`), for the table
  and the picture.

A variant is dominated when another is better on one axis and not worse on the
other; the front is every variant no other dominates. Two variants with neither
better on either axis are tied within noise. So when latencies are within noise the
front depends on the scores alone.

`llm_eval.commands.experiment` retrieves, measures and writes the files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from llm_eval.experiment.latency_ratio import Draws, Ratio, paired_ratio, ratio_words
from llm_eval.experiment.pairs import Row, compare_pair, compare_runs, winner
from llm_eval.gold import GoldSet
from llm_eval.metrics import parse_metric
from llm_eval.scoring import Measurement
from llm_eval.slices import value_over
from llm_eval.stats import QuantileInterval, format_p, holm, quantile_interval
from llm_eval.wording.gates import delta, value

SERVICE = ("latency_p50", "latency_p95", "error_rate")


@dataclass(frozen=True, slots=True)
class Measured:
    """One variant's scores."""

    name: str
    measurement: Measurement
    top_k: int
    group: int = 0
    """The group of variants it took turns with (`llm_eval.experiment.sweep`): its
    latencies are compared only with theirs and the reference's run in that group."""


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
    ties: tuple[str, ...]
    """The other variants tied with it within noise on both quality and latency."""
    latency_interval: QuantileInterval | None
    """The 1 − alpha interval of the p95 latency; None without a latency."""
    latency_ratios: Mapping[str, Ratio] = field(default_factory=dict)
    """`p50` and `p95` as multiples of the reference's, paired over the queries, with
    their intervals (empty for the reference, or without latencies)."""
    clocks: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """`{"wall": {"p50": ms, "p95": ms}, "cpu": {...}}`: the latencies on each clock that
    was recorded for every answered query, whichever the comparison used."""


@dataclass(frozen=True, slots=True)
class LiftRow:
    """A derived column: `metric` of `variant` minus that of `base`, with its test."""

    name: str
    base: str
    variant: str
    row: Row | None
    """None when the two share fewer than two scored queries."""
    latency_ratio: float | None
    latency: Ratio | None = None
    """The variant's p95 latency against the base's, paired, with its interval."""


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
    scope: str
    """Which gold queries every value is over: `all tiers` or `tier A`."""
    queries: int
    """How many of them the quality metric scores (answerable queries, for relevance)."""
    clock: str = "wall"
    """The clock every latency is on: `cpu` (the CPU time of this process) or `wall`."""
    clock_reason: str = ""
    """Why that clock, in words (`llm_eval.experiment.latency_clock.choose_clock`)."""

    @property
    def latency_name(self) -> str:
        """`p95 CPU time` or `p95 wall time`, for words and titles."""
        return "p95 CPU time" if self.clock == "cpu" else "p95 wall time"

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
    scope: str = "all tiers",
    clock: str = "wall",
    clock_reason: str = "",
    clocks: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
    anchors: Mapping[int, Measurement] | None = None,
) -> Experiment:
    """Measure and pair every variant; `lifts` are (name, metric, base, variant); `scope`
    names the gold queries given (all of them, or one tier's). The measurements'
    latencies are on `clock` (`cpu` or `wall`, chosen for `clock_reason`): the ratios,
    the intervals and the front use them as they are. `clocks` holds per variant its
    p50 and p95 on each clock recorded, for the files. Latencies are compared within a
    variant's group only; `anchors` holds the reference's run in each group other than
    its own, whose latencies the group's ratios and front use."""
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
    intervals = {v.name: _latency_interval(v.measurement, ids, alpha) for v in variants}
    latencies = {v.name: query_latencies(v.measurement, ids) for v in variants}
    anchored = {
        group: query_latencies(m, ids) for group, m in (anchors or {}).items() if group != ref.group
    }
    anchored[ref.group] = latencies[reference]
    standings = _grouped_standings(
        variants, values, latencies, anchored, reference, (quality, ids, alpha, seed)
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
        on_front, ties = standings.get(variant.name, (None, ()))
        rows.append(
            VariantRow(
                variant.name,
                variant.top_k,
                values[variant.name],
                pairs,
                tuple(sorted(others, key=_worst_first)),
                on_front,
                ties,
                intervals[variant.name],
                {}
                if variant.name == reference
                else _ratios(latencies[variant.name], anchored[variant.group], alpha, seed),
                (clocks or {}).get(variant.name, {}),
            )
        )
    lift_rows = tuple(
        _lift(
            gold,
            by_name,
            values,
            (name, metric, base, over),
            rows_of.get(over, []) if base == reference else [],
            _paired_latencies(by_name[base], by_name[over], latencies, anchored, reference),
            alpha,
            seed,
        )
        for name, metric, base, over in lifts
    )
    scored = sum(quality in ref.measurement.per_query.get(q, {}) for q in ids)
    return Experiment(
        tuple(rows),
        reference,
        quality,
        tuple(shown),
        pairable,
        lift_rows,
        alpha,
        scope,
        scored,
        clock,
        clock_reason,
    )


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


def query_latencies(measurement: Measurement, ids: Sequence[str]) -> dict[str, float]:
    """Each query's own latency, of the queries that answered with one, in gold order."""
    out = {}
    for q in ids:
        record = measurement.service.get(q)
        if record is not None and record.latency_ms is not None and not record.error:
            out[q] = record.latency_ms
    return out


def latency_ratio(
    variant: Mapping[str, float],
    base: Mapping[str, float],
    quantile: float,
    alpha: float,
    seed: int,
) -> Ratio | None:
    """`paired_ratio` over the queries both answered with a latency."""
    shared = [q for q in variant if q in base]
    return paired_ratio(
        [variant[q] for q in shared],
        [base[q] for q in shared],
        quantile,
        alpha=alpha,
        seed=seed,
    )


def _ratios(
    variant: Mapping[str, float], base: Mapping[str, float], alpha: float, seed: int
) -> dict[str, Ratio]:
    found = {f"p{q * 100:g}": latency_ratio(variant, base, q, alpha, seed) for q in (0.5, 0.95)}
    return {k: r for k, r in found.items() if r is not None}


def _latency_interval(
    measurement: Measurement, ids: Sequence[str], alpha: float
) -> QuantileInterval | None:
    """The interval of the p95 latency over the queries that answered with a latency."""
    records = [measurement.service[q] for q in ids if q in measurement.service]
    latencies = [r.latency_ms for r in records if r.latency_ms is not None and not r.error]
    return quantile_interval(latencies, 0.95, alpha) if latencies else None


def _better_pairs(
    measured: Mapping[str, Measurement],
    values: Mapping[str, float],
    quality: str,
    ids: Sequence[str],
    alpha: float,
    seed: int,
) -> set[tuple[str, str]]:
    """(A, B) for every A better than B on `quality` beyond the noise: the paired test
    of the two (`compare`'s, unadjusted), or the values when it has no paired test."""
    metric = parse_metric(quality)
    better: set[tuple[str, str]] = set()
    names = list(measured)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if metric.testable:
                row = compare_pair(measured[a], measured[b], ids, quality, alpha=alpha, seed=seed)
                side = "" if row is None else row.winner
            else:
                higher = "B" if values[b] > values[a] else "A"
                side = "" if values[a] == values[b] else higher
                side = {"A": "B", "B": "A"}.get(side, side) if metric.lower_is_better else side
            if side in ("A", "B"):
                better.add((a, b) if side == "A" else (b, a))
    return better


def _paired_latencies(
    base: Measured,
    over: Measured,
    latencies: Mapping[str, Mapping[str, float]],
    anchored: Mapping[int, Mapping[str, float]],
    reference: str,
) -> tuple[Mapping[str, float], Mapping[str, float]] | None:
    """The two variants' latencies measured in turns (base's, then over's): in one group,
    or the reference's run in the other's group; None when they ran at other times."""
    if base.name == reference:
        return anchored[over.group], latencies[over.name]
    if over.name == reference:
        return latencies[base.name], anchored[base.group]
    if base.group == over.group:
        return latencies[base.name], latencies[over.name]
    return None


def _grouped_standings(
    variants: Sequence[Measured],
    values: Mapping[str, Mapping[str, float | None]],
    latencies: Mapping[str, Mapping[str, float]],
    anchored: Mapping[int, Mapping[str, float]],
    reference: str,
    quality: tuple[str, Sequence[str], float, int],
) -> dict[str, tuple[bool | None, tuple[str, ...]]]:
    """`_standings` within each group, the reference's run in that group among them (it
    may dominate a variant there); the reference's own standing and ties are those of
    its own group, so that every tie lies within one group. `quality` is (metric, gold
    ids, alpha, seed)."""
    own = next(v.group for v in variants if v.name == reference)
    out: dict[str, tuple[bool | None, tuple[str, ...]]] = {}
    for group in dict.fromkeys(v.group for v in variants):
        members = [v for v in variants if v.group == group or v.name == reference]
        timed = {**latencies, reference: anchored[group]}
        found = _standings(members, values, timed, *quality)
        if group != own:  # the reference stands, and is tied, in its own group only
            found.pop(reference, None)
            found = {
                n: (front, tuple(t for t in ties if t != reference))
                for n, (front, ties) in found.items()
            }
        out.update(found)
    return out


def _standings(
    variants: Sequence[Measured],
    values: Mapping[str, Mapping[str, float | None]],
    latencies: Mapping[str, Mapping[str, float]],
    quality: str,
    ids: Sequence[str],
    alpha: float,
    seed: int,
) -> dict[str, tuple[bool | None, tuple[str, ...]]]:
    """Per variant with a quality value and a latency: on the front, and its ties."""
    measured, points = {}, {}
    for v in variants:
        q = values[v.name][quality]
        if q is not None and latencies[v.name]:
            measured[v.name], points[v.name] = v.measurement, q
    better = _better_pairs(measured, points, quality, ids, alpha, seed)
    names = list(measured)
    faster = set()
    ratio_of = _pair_ratios({n: latencies[n] for n in names}, alpha, seed)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ratio = ratio_of(a, b)
            if ratio is not None and ratio.faster:
                faster.add((a, b))
            elif ratio is not None and not ratio.tied:
                faster.add((b, a))
    front = pareto_front(names, better, faster)
    return {
        n: (front[n], tuple(o for o in names if o != n and tied(n, o, better, faster)))
        for n in names
    }


def _pair_ratios(
    latencies: Mapping[str, Mapping[str, float]], alpha: float, seed: int
) -> Callable[[str, str], Ratio | None]:
    """`latency_ratio` at p95 of any two of the variants; each variant's resampled p95s
    computed once when all answered the same queries (the usual case), so that a group's
    pairs cost one bootstrap a variant, not one a pair. The same numbers either way."""
    keys = {tuple(found) for found in latencies.values()}
    if len(keys) != 1 or len(next(iter(keys))) < 2:
        return lambda a, b: latency_ratio(latencies[a], latencies[b], 0.95, alpha, seed)
    arrays = {n: np.fromiter(found.values(), dtype=np.float64) for n, found in latencies.items()}
    draws = Draws(len(next(iter(keys))), 0.95, seed)
    resampled = {n: draws.of(array) for n, array in arrays.items()}
    return lambda a, b: draws.ratio(arrays[a], arrays[b], resampled[a], resampled[b], alpha)


def dominates(
    a: str, b: str, better: Collection[tuple[str, str]], faster: Collection[tuple[str, str]]
) -> bool:
    """A is better than B on one axis and B is better than A on neither."""
    return (b, a) not in better and (b, a) not in faster and ((a, b) in better or (a, b) in faster)


def tied(
    a: str, b: str, better: Collection[tuple[str, str]], faster: Collection[tuple[str, str]]
) -> bool:
    """Neither is better than the other on either axis: tied within noise."""
    return not ({(a, b), (b, a)} & (set(better) | set(faster)))


def pareto_front(
    names: Sequence[str], better: Collection[tuple[str, str]], faster: Collection[tuple[str, str]]
) -> dict[str, bool]:
    """Per name: whether no other dominates it. `better` and `faster` hold the pairs
    (A, B) where A is beyond the noise better in quality, or faster."""
    return {b: not any(dominates(a, b, better, faster) for a in names if a != b) for b in names}


def _lift(
    gold: GoldSet,
    by_name: Mapping[str, Measured],
    values: Mapping[str, Mapping[str, float | None]],
    lift: tuple[str, str, str, str],
    paired: Sequence[Row],
    latencies: tuple[Mapping[str, float], Mapping[str, float]] | None,
    alpha: float,
    seed: int,
) -> LiftRow:
    """`lift` is (name, metric, base, variant); `paired` the rows already computed for
    that variant against the reference, reused when the base is the reference (each
    metric's overall row is the same test whatever else was compared with it);
    `latencies` the base's and the variant's taken in turns, None when they were not."""
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
    ratio = None if latencies is None else latency_ratio(*latencies[::-1], 0.95, alpha, seed)
    return LiftRow(name, base, over, overall, _ratio(values[over], values[base]), ratio)


def _ratio(
    variant: Mapping[str, float | None], reference: Mapping[str, float | None]
) -> float | None:
    """The variant's p95 latency as a multiple of the reference's."""
    a, b = variant.get("latency_p95"), reference.get("latency_p95")
    return a / b if a is not None and b else None


# --- in words -------------------------------------------------------------------------


def _significance(p: float, method: str, result: str, alpha: float) -> str:
    shown = format_p(p, method)
    if result == "no significant difference":
        return f"not significant, {shown}"
    return f"significant, {shown}"


def tie_groups(rows: Sequence[VariantRow]) -> list[list[str]]:
    """The front's variants that are tied within noise, joined through their ties (two
    or more a group), in table order."""
    order = [r.name for r in rows if r.on_front]
    ties = {r.name: [t for t in r.ties if t in order] for r in rows if r.on_front}
    groups: list[list[str]] = []
    seen: set[str] = set()
    for start in order:
        if start in seen or not ties[start]:
            continue
        group, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name not in group:
                group.add(name)
                todo += ties[name]
        seen |= group
        groups.append(sorted(group, key=order.index))
    return groups


def _front_words(experiment: Experiment) -> list[str]:
    """Who is on the front, and which of them are tied within noise."""
    front = [r.name for r in experiment.rows if r.on_front]
    if not front:
        return []
    label = parse_metric(experiment.quality).label
    groups = tie_groups(experiment.rows)
    latency = experiment.latency_name
    noise = f"{latency}s within noise of each other, no significant difference in {label}"
    lead = (
        f"On the front of {label} against {latency} (no other variant is better beyond the "
        f"noise on one and not worse on the other): {_names(front)}"
    )
    if len(front) > 1 and groups == [front]:
        return [f"{lead}, {'both' if len(front) == 2 else 'all'} tied within noise ({noise})."]
    return [f"{lead}."] + [f"{_names(g)} are tied within noise ({noise})." for g in groups]


def _names(names: Sequence[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


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
            f"`{best.name}` is the best variant on {label} over {experiment.scope} "
            f"({experiment.queries} queries): {value(q, best.values[q])} against "
            f"`{ref}`'s {value(q, reference.values[q])} ({delta(q, pair.row.delta)}, "
            f"{_significance(pair.p_holm, pair.row.method, pair.winner, experiment.alpha)} "
            "after Holm across "
            f"{len(experiment.rows) - 1} variants), "
            f"{ratio_words(best.latency_ratios.get('p95'), ref, experiment.clock)}."
        )
        if len(better) > 1:
            others = ", ".join(f"`{r.name}`" for r in better if r is not best)
            sentences.append(f"Also significantly better on {label}: {others}.")
    else:
        sentences.append(
            f"No variant is significantly better than `{ref}` on {label} over "
            f"{experiment.scope} ({value(q, reference.values[q])}, {experiment.queries} "
            f"queries); keep `{ref}` unless another metric or the "
            "latency decides."
        )
    if worse:
        names = ", ".join(f"`{r.name}` ({delta(q, r.pairs[q].row.delta)})" for r in worse)
        sentences.append(f"Significantly worse than `{ref}` on {label}: {names}.")
    sentences += _front_words(experiment)
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
            f"({_significance(lift.row.p_value, lift.row.method, result, experiment.alpha)}), "
            f"{ratio_words(lift.latency, lift.base, experiment.clock)}."
        )
    return " ".join(sentences)
