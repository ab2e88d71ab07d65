"""What the dashboard shows, as records: one series per metric and slice (overall, each
tier, each tag) over the history's entries, with the floors and limits of the gates
that read it. Pure; `llm_eval.formats.commands.dashboard` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_eval.against_baseline import RankChange
from llm_eval.criteria import Gate, Scope
from llm_eval.history import Entry, Point, Skipped
from llm_eval.metrics import parse_metric


@dataclass(frozen=True, slots=True)
class Limit:
    """A horizontal line on a chart."""

    kind: Literal["floor", "limit"]
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


def build_series(entries: Sequence[Entry], gates: Sequence[Gate]) -> tuple[Series, ...]:
    """A series per metric and slice seen at any point: the gated ones first (in the
    criteria's order), then by metric, overall before tiers before tags."""
    points = [e for e in entries if isinstance(e, Point)]
    keys: dict[tuple[str, str], None] = {}
    for point in points:
        for slice_, row in point.aggregates.items():
            for metric in row:
                keys[(metric, slice_)] = None
    gated = [(g.metric, s) for g in gates if (s := slice_of(g.scope)) is not None]
    order = {"overall": 0, "tier": 1, "tag": 2}
    rest = sorted(
        (k for k in keys if k not in gated),
        key=lambda k: (k[0], order.get(k[1].split(":")[0], 3), k[1]),
    )
    return tuple(
        _series(entries, metric, slice_, gates)
        for metric, slice_ in [*dict.fromkeys(g for g in gated if g in keys), *rest]
    )


def _series(entries: Sequence[Entry], metric: str, slice_: str, gates: Sequence[Gate]) -> Series:
    values = tuple(
        e.aggregates.get(slice_, {}).get(metric) if isinstance(e, Point) else None for e in entries
    )
    reading = [g for g in gates if g.metric == metric and slice_of(g.scope) == slice_]
    newest = next((v for v in reversed(values) if v is not None), None)
    limits = [lim for g in reading for lim in _limits(g, newest)]
    return Series(metric, slice_, values, tuple(limits), tuple(g.name for g in reading))


def _limits(gate: Gate, newest: float | None) -> list[Limit]:
    """The gate's floor, and the lowest value its regression limit lets the next change
    reach from the newest baseline (absolute limits only)."""
    limits = []
    lower = parse_metric(gate.metric).lower_is_better
    if gate.threshold is not None:
        limits.append(Limit("floor", gate.threshold, "ceiling" if lower else "floor"))
    if gate.regression_max is not None and newest is not None and not gate.regression_relative:
        step = gate.regression_max if lower else -gate.regression_max
        limits.append(Limit("limit", newest + step, "next change's limit"))
    return limits


def gaps(entries: Sequence[Entry]) -> list[tuple[int, Skipped]]:
    """Where the timeline has a skipped entry, and why."""
    return [(i, e) for i, e in enumerate(entries) if isinstance(e, Skipped)]
