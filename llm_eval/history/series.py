"""The gated metrics over time: points read from the baseline's git history (and from
report.json files a workflow kept), their series per gate, and sparklines.

Pure: `llm_eval.history.series_io` reads git and files and hands the records here. A point
that cannot be read, or that measured another gold set, is never dropped silently: it
stays in the timeline as a `Skipped` entry, drawn as a gap and listed with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Source = Literal["baseline", "report"]

SPARK_BARS = "▁▂▃▄▅▆▇█"
"""The eight heights of a Unicode sparkline, lowest first."""
SPARK_GAP = "·"
"""A skipped point, or one without the series' metric: a gap, labelled where it is listed."""


@dataclass(frozen=True, slots=True)
class BuildRange:
    """How far apart the builds of one measurement lie on one gate: the retriever was
    built `builds` times (an approximate index answers differently each build) and each
    build's value of the gate's metric taken on its own."""

    builds: int
    low: float
    """The lowest build's value."""
    high: float
    """The highest build's value."""


def build_range(values: Sequence[float]) -> BuildRange | None:
    """The lowest and highest of the builds' values; None with fewer than two finite
    ones (one build has no spread to show)."""
    known = [v for v in values if math.isfinite(v)]
    if len(known) < 2:
        return None
    return BuildRange(len(known), min(known), max(known))


@dataclass(frozen=True, slots=True)
class GateFigures:
    """What one measurement gives each gate, by gate name."""

    values: Mapping[str, float | None]
    """The gate's metric over its scope (None: the measurement does not have it)."""
    builds: Mapping[str, BuildRange] = field(default_factory=dict)
    """The range of its builds' values, for a gate measured on several builds."""


@dataclass(frozen=True, slots=True)
class Point:
    """One measurement of the default branch: a baseline refresh, or a kept report."""

    commit: str
    """Full sha of the commit measured."""
    date: str
    """ISO 8601 time of the commit (of the run, for a kept report without one)."""
    subject: str
    """The commit's subject line (empty for a kept report)."""
    source: Source
    gold: str | None
    """The gold set's fingerprint the point was measured on."""
    values: Mapping[str, float | None]
    """Per gate name, its metric over its scope (None: the point does not have it)."""
    aggregates: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    """Per slice (`overall`, `tier:A`, `tag:x`), each metric's value (None: not computed)
    and `n`, the queries it was measured on."""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per gate name, the interval a kept report gives its value: the baseline plus the
    paired interval of the change (`stats.ci_low`, `stats.ci_high`)."""
    builds: Mapping[str, BuildRange] = field(default_factory=dict)
    """Per gate name, the lowest and highest of its builds' values, where the point was
    measured on several builds of its retriever (none for one build)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A point that could not be used, in the timeline where it would have been."""

    commit: str | None
    date: str | None
    where: str
    """`gold/baseline.json at 1a2b3c4` or `history.jsonl:12`."""
    reason: str


Entry = Point | Skipped


@dataclass(frozen=True, slots=True)
class History:
    """The timeline, oldest first, and what could not be seen."""

    entries: tuple[Entry, ...]
    shallow: bool = False
    """The clone is shallow and its log ended before `limit` points: older ones exist
    perhaps, but were not fetched."""

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """The entries that were not."""
        return tuple(e for e in self.entries if isinstance(e, Skipped))


def merge(baselines: Sequence[Entry], reports: Sequence[Entry], last: int) -> tuple[Entry, ...]:
    """Both sources in time order, the newest `last` kept; a kept report of a commit
    whose baseline is in the log is left out (the baseline measured the same state)."""
    known = {e.commit for e in baselines if isinstance(e, Point)}
    extra = [e for e in reports if not (isinstance(e, Point) and e.commit in known)]
    ordered = sorted([*baselines, *extra], key=lambda e: e.date or "")
    return tuple(ordered[-last:]) if last > 0 else ()


def of_gold(entries: Sequence[Entry], gold: str | None) -> tuple[Entry, ...]:
    """Points measured on another gold set than `gold` become skipped entries: their
    values are over other questions, and a line through them would show a change of
    questions as a change of quality."""
    if gold is None:
        return tuple(entries)
    return tuple(
        Skipped(
            e.commit,
            e.date,
            f"{e.source} at {e.commit[:7]}",
            f"another gold set (fingerprint {e.gold}, now {gold})",
        )
        if isinstance(e, Point) and e.gold != gold
        else e
        for e in entries
    )


def series(entries: Sequence[Entry], gate: str) -> list[float | None]:
    """The gate's value at each entry, None where it has none (a gap)."""
    return [e.values.get(gate) if isinstance(e, Point) else None for e in entries]


def sparkline(values: Sequence[float | None], span: float = 0.0) -> str:
    """One character per value, `SPARK_GAP` for a missing one.

    Heights are scaled over at least `span` (e.g. the gate's regression limit) around
    the middle of the values, so that noise smaller than the limit stays a flat line
    and only a move the size of the limit reaches from bottom to top.
    """
    scale = spark_scale(values, span)
    if scale is None:
        return SPARK_GAP * len(values)
    floor, width = scale[0], scale[1] - scale[0]
    bars = len(SPARK_BARS)
    chars = []
    for v in values:
        if v is None or not math.isfinite(v):
            chars.append(SPARK_GAP)
        elif width <= 0:
            chars.append(SPARK_BARS[bars // 2])
        else:
            chars.append(SPARK_BARS[min(bars - 1, max(0, int((v - floor) / width * bars + 1e-9)))])
    return "".join(chars)


def spark_scale(values: Sequence[float | None], span: float = 0.0) -> tuple[float, float] | None:
    """What the bottom and the top of `sparkline(values, span)` stand for: the values'
    range, widened to `span` around its middle; None without a value."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    if not known:
        return None
    low, high = min(known), max(known)
    width = max(high - low, span)
    floor = (low + high) / 2 - width / 2
    return floor, floor + width


TREND_POINTS = 12
"""Committed baselines in the trend line of a gate report (this run's value comes after)."""


def trend_entry(
    entries: Sequence[Entry],
    gate: str,
    metric: str,
    label: str,
    span: float,
    value: float,
    shallow: bool,
) -> dict[str, object]:
    """The gated metric's recent trend as report.json stores it: each baseline's value
    (null for a gap, with the reason it was skipped), then this run's."""
    points = [
        {
            "commit": e.commit,
            "date": e.date,
            "value": e.values.get(gate) if isinstance(e, Point) else None,
            "skipped": e.reason if isinstance(e, Skipped) else None,
        }
        for e in entries
    ]
    return {
        "gate": gate,
        "metric": metric,
        "label": label,
        "span": span,
        "points": points,
        "value": value if math.isfinite(value) else None,
        "shallow": shallow,
    }
