"""What the dashboard shows, as records: one series per metric and slice (overall, each
tier, each tag) over the history's entries, with the floors and limits of the gates
that read it. Pure; `llm_eval.history.dashboard_view` draws it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_eval.against_baseline import RankChange
from llm_eval.criteria import Gate, Scope
from llm_eval.history.series import BuildRange, Entry, Point, Skipped
from llm_eval.metrics import parse_metric


@dataclass(frozen=True, slots=True)
class Limit:
    """A horizontal line on a chart."""

    kind: Literal["floor", "limit", "drift"]
    value: float
    label: str


@dataclass(frozen=True, slots=True)
class Series:
    """One chart: a metric over one slice, a value (or a gap) per entry."""

    metric: str
    slice: str
    """`overall`, `tier:A`, `tag:x`."""
    values: tuple[float | None, ...]
    limits: tuple[Limit, ...] = ()
    gates: tuple[str, ...] = ()
    """The gates that read this metric on this slice."""
    intervals: tuple[tuple[float, float] | None, ...] = ()
    """Per entry, the value's 95% interval (None: none known)."""
    moves: tuple[int, ...] = ()
    """The entries whose value moved beyond their interval from the point before:
    change points (`change_points`)."""
    builds: tuple[BuildRange | None, ...] = ()
    """Per entry, the lowest and highest of its builds' values, where it was measured on
    several builds of its retriever (None: one build); empty when no entry was."""

    @property
    def empty(self) -> bool:
        """No entry has a value: nothing to draw."""
        return all(v is None for v in self.values)


@dataclass(frozen=True, slots=True)
class Change:
    """The newest change of the baseline: the questions that crossed the gating cutoff."""

    before: str
    after: str
    """The commits of the two newest baselines."""
    k: int
    lost: tuple[RankChange, ...]
    gained: tuple[RankChange, ...]


@dataclass(frozen=True, slots=True)
class Dashboard:
    """Everything the page shows."""

    entries: tuple[Entry, ...]
    series: tuple[Series, ...]
    change: Change | None = None
    judge: Mapping[str, Any] | None = None
    """The newest kept report's judge summary (its calibration), when there is one."""
    experiment: Mapping[str, Any] | None = None
    """experiment.json, when an experiment was run."""
    shallow: bool = False
    commit_url: str | None = None
    """`https://github.com/OWNER/REPO/commit/`: each point links to its commit there."""
    questions: Mapping[str, str] | None = None
    """Question text by id, for the lost and gained lists."""


def slice_of(scope: Scope) -> str | None:
    """The slice a gate's scope is among the baseline's aggregates (None: a scope that
    combines tier and tags, or several tags, is not one of them)."""
    if scope.tier is None and not scope.tags:
        return "overall"
    if scope.tags == ():
        return f"tier:{scope.tier}"
    if scope.tier is None and len(scope.tags) == 1:
        return f"tag:{scope.tags[0]}"
    return None


DESIGN_ORDER = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")
"""The diagnostic set, in the order the page shows it (other metrics follow, by name)."""
Z95 = 1.959964


def metric_order(metric: str) -> tuple[int, str, int, str]:
    """Sort key: the design's set first in its order, then by family and cutoff
    (recall@5 before recall@10), then by name."""
    if metric in DESIGN_ORDER:
        return (DESIGN_ORDER.index(metric), "", 0, metric)
    name, _, k = metric.partition("@")
    return (len(DESIGN_ORDER), name, int(k) if k.isdigit() else 0, metric)


def build_series(
    entries: Sequence[Entry],
    gates: Sequence[Gate],
    drift_references: Mapping[str, str] | None = None,
) -> tuple[Series, ...]:
    """A series per metric and slice seen at any point: the gated ones first (in the
    criteria's order), then overall before tiers before tags, each by metric in the
    design's order. `drift_references` maps a gate's name to the commit its drift
    limit is measured from."""
    points = [e for e in entries if isinstance(e, Point)]
    keys: dict[tuple[str, str], None] = {}
    for point in points:
        for slice_, row in point.aggregates.items():
            for metric in row:
                if metric != "n":
                    keys[(metric, slice_)] = None
    gated = [(g.metric, s) for g in gates if (s := slice_of(g.scope)) is not None]
    order = {"overall": 0, "tier": 1, "tag": 2}
    rest = sorted(
        (k for k in keys if k not in gated),
        key=lambda k: (order.get(k[1].split(":")[0], 3), metric_order(k[0]), k[1]),
    )
    return tuple(
        _series(entries, metric, slice_, gates, drift_references or {})
        for metric, slice_ in [*dict.fromkeys(g for g in gated if g in keys), *rest]
    )


def _series(
    entries: Sequence[Entry],
    metric: str,
    slice_: str,
    gates: Sequence[Gate],
    references: Mapping[str, str],
) -> Series:
    values = tuple(
        e.aggregates.get(slice_, {}).get(metric) if isinstance(e, Point) else None for e in entries
    )
    reading = [g for g in gates if g.metric == metric and slice_of(g.scope) == slice_]
    intervals = tuple(_interval(e, metric, slice_, reading) for e in entries)
    newest = next((v for v in reversed(values) if v is not None), None)
    limits = [lim for g in reading for lim in _limits(g, newest, entries, values, references)]
    builds = tuple(_builds(e, reading) for e in entries)
    return Series(
        metric,
        slice_,
        values,
        tuple(limits),
        tuple(g.name for g in reading),
        intervals,
        change_points(values, intervals),
        builds if any(builds) else (),
    )


def _builds(entry: Entry, reading: Sequence[Gate]) -> BuildRange | None:
    """The range of the entry's builds' values on the first gate that reads the series
    and has one (the gates reading a series measure the same metric over the same
    queries)."""
    if not isinstance(entry, Point):
        return None
    return next((entry.builds[g.name] for g in reading if g.name in entry.builds), None)


def _interval(
    entry: Entry, metric: str, slice_: str, reading: Sequence[Gate]
) -> tuple[float, float] | None:
    """The interval a kept report gives a gated value; else, for a share, the 95% Wilson
    interval of the proportion over the slice's queries; else none."""
    if not isinstance(entry, Point):
        return None
    for gate in reading:
        if gate.name in entry.intervals:
            return entry.intervals[gate.name]
    row = entry.aggregates.get(slice_, {})
    v, n = row.get(metric), row.get("n")
    if v is None or not n or not parse_metric(metric).percent or not 0 <= v <= 1:
        return None
    return wilson(v, int(n))


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion `p` over `n` trials."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def change_points(
    values: Sequence[float | None], intervals: Sequence[tuple[float, float] | None]
) -> tuple[int, ...]:
    """The entries whose value moved beyond their interval: the point before (the
    previous known value) lies outside this point's interval. A slow drift of steps each
    inside the interval marks none; a single bad merge marks its commit."""
    moves, before = [], None
    for i, v in enumerate(values):
        if v is None:
            continue
        interval = intervals[i] if i < len(intervals) else None
        if before is not None and interval is not None:
            low, high = interval
            if not low - 1e-12 <= before <= high + 1e-12:
                moves.append(i)
        before = v
    return tuple(moves)


def _limits(
    gate: Gate,
    newest: float | None,
    entries: Sequence[Entry],
    values: Sequence[float | None],
    references: Mapping[str, str],
) -> list[Limit]:
    """The gate's floor, the lowest value its regression limit lets the next change
    reach from the newest baseline (absolute limits only), and its drift limit: the
    reference's value less `drift_max`."""
    limits = []
    lower = parse_metric(gate.metric).lower_is_better
    if gate.threshold is not None:
        limits.append(Limit("floor", gate.threshold, "ceiling" if lower else "floor"))
    if gate.regression_max is not None and newest is not None and not gate.regression_relative:
        step = gate.regression_max if lower else -gate.regression_max
        limits.append(Limit("limit", newest + step, "next change's limit"))
    if gate.drift is not None:
        reference = _reference(gate, entries, values, references.get(gate.name))
        if reference is not None:
            step = gate.drift.limit if lower else -gate.drift.limit
            limits.append(Limit("drift", reference + step, f"drift limit ({gate.drift.label()})"))
    return limits


def _reference(
    gate: Gate, entries: Sequence[Entry], values: Sequence[float | None], commit: str | None
) -> float | None:
    """The value of the gate's drift reference: the baseline at `commit`, or, without
    one, `since` refreshes back from the newest baseline."""
    baselines = [
        i for i, e in enumerate(entries) if isinstance(e, Point) and e.source == "baseline"
    ]
    if commit is not None:
        found = [i for i in baselines if entries[i].commit == commit]
    elif gate.drift is not None and isinstance(gate.drift.since, int):
        back = gate.drift.since
        found = [baselines[-1 - back]] if back < len(baselines) else []
    else:
        found = []
    return values[found[-1]] if found else None


def gaps(entries: Sequence[Entry]) -> list[tuple[int, Skipped]]:
    """Where the timeline has a skipped entry, and why."""
    return [(i, e) for i, e in enumerate(entries) if isinstance(e, Skipped)]


def gap_runs(entries: Sequence[Entry]) -> list[tuple[int, int]]:
    """The runs of skipped entries, as (first, last) positions: a chart draws one band a
    run, so that a page's size grows with the runs, not with every skipped entry."""
    runs: list[tuple[int, int]] = []
    for i, _ in gaps(entries):
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs
