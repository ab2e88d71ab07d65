"""The dashboard's SVG drawing: a metric's chart (its line broken at gaps, each
point's interval as a band, the range of a point's builds as a whisker, floors and
limits with labels pushed apart, date ticks, the change points as triangles) and its
sparkline, for `dashboard_view.py`'s page.

Where points are denser than pixels, a line keeps each pixel column's lowest and
highest value and a band each column's widest interval, so a chart of thousands of
points costs about as many vertices as it has columns; coordinates are relative
steps rounded to a tenth of a pixel.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

from llm_eval.formats._markup import visible
from llm_eval.history.dashboard import Dashboard, Limit, Series, gap_runs
from llm_eval.history.series import BuildRange
from llm_eval.metrics import parse_metric
from llm_eval.wording.gates import delta, value

WIDE = (600, 230)
"""Width and height of a gated chart, in px (two side by side in 1280 px)."""
NARROW = (400, 210)
"""A gated chart when there are three or more."""
FULL = (600, 200)
"""A chart opened from the tables."""
SPARK = (120, 24)
PAD = (56, 118, 26, 34)
"""Left, right (the limits' labels), top (the title), bottom (the dates) margins."""
LABEL_GAP = 11.0
"""Smallest vertical distance between two limit labels, in px."""


def escaped(value: object) -> str:
    """Text from the inputs (tags, questions, commits, gate and metric names) as HTML:
    shown as the PR comment shows it (`visible`: one line, control and bidirectional
    characters as escapes), then escaped, quotes included, for text and attributes."""
    return html.escape(visible(str(value)))


def step(series: Series, i: int) -> float:
    """The change of the value at `i` from the known value before it."""
    before = next(v for v in reversed(series.values[:i]) if v is not None)
    now = series.values[i]
    assert now is not None
    return now - before


def slice_name(slice_: str) -> str:
    return "all queries" if slice_ == "overall" else slice_.replace(":", " ")


def spark(series: Series) -> str:
    """The series as a small line, at most one vertex per pixel column, its newest value
    dotted."""
    width, height = SPARK
    count = len(series.values)
    buckets: dict[int, float] = {}
    for i, v in enumerate(series.values):
        if v is not None:
            buckets[round(i * (width - 4) / max(count - 1, 1))] = v
    low, high = min(buckets.values()), max(buckets.values())
    span = (high - low) or 1.0

    def y(v: float) -> float:
        return height - 3 - (v - low) / span * (height - 6) if high > low else height / 2

    path = "".join(
        f"{'M' if n == 0 else 'L'}{x + 2} {y(v):.1f}" for n, (x, v) in enumerate(buckets.items())
    )
    last_x, last_v = list(buckets.items())[-1]
    title = (
        f"{parse_metric(series.metric).label}, {slice_name(series.slice)}: "
        f"{value(series.metric, low)} to {value(series.metric, high)}, "
        f"newest {value(series.metric, last_v)}"
    )
    return (
        f'<svg class="spark" role="img" width="{width}" height="{height}" '
        f'aria-label="{escaped(title)}"><title>{escaped(title)}</title>'
        f'<path class="line" d="{path}"/><circle cx="{last_x + 2}" cy="{y(last_v):.1f}" '
        'r="2"/></svg>'
    )


# A chart


def chart(board: Dashboard, index: int, series: Series, size: tuple[int, int]) -> str:
    """The series' chart at `size` (width, height in px), the `index`-th of the page
    (the script finds its markers by it): a y axis of nice ticks spanning the values,
    bands and limits, then the date ticks, gaps, bands, limits, line and change points."""
    width, height = size
    left, right, top, bottom = PAD
    plot_right, plot_bottom = width - right, height - bottom
    count = len(series.values)
    known = [v for v in series.values if v is not None]
    bands = [b for b in series.intervals if b is not None]
    spreads = [e for b in series.builds if b is not None for e in (b.low, b.high)]
    low, high = _range(
        [*known, *(lim.value for lim in series.limits), *(e for b in bands for e in b), *spreads]
    )
    ticks = nice_ticks(low, high)
    if parse_metric(series.metric).percent:  # a share stays within 0% and 100%
        ticks = [t for t in ticks if -1e-9 <= t <= 1 + 1e-9] or ticks
    low, high = min(low, ticks[0]), max(high, ticks[-1])
    step = (plot_right - left) / max(count - 1, 1)
    scale = (plot_bottom - top) / (high - low)

    def x(i: int) -> float:
        return left + (i * step if count > 1 else (plot_right - left) / 2)

    def y(v: float) -> float:
        return top + (high - v) * scale

    metric = series.metric
    title = chart_title(series)
    parts = [
        f'<svg class="chart" role="img" aria-label="{escaped(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" data-series="{index}" '
        f'data-metric="{escaped(metric)}" data-slice="{escaped(series.slice)}" '
        f'data-x0="{x(0):.2f}" '
        f'data-dx="{step if count > 1 else 0:.4f}" data-y0="{top + high * scale:.2f}" '
        f'data-ky="{scale:.4f}" data-expected="{len(known)}">',
        f"<title>{escaped(title)}</title>",
        f'<text class="t" x="{left}" y="16">{escaped(title)}</text>',
    ]
    for tick in ticks:
        at = y(tick)
        parts.append(
            f'<line class="grid" x1="{left}" x2="{plot_right}" y1="{at:.1f}" y2="{at:.1f}"/>'
            f'<text class="yl" x="{left - 6}" y="{at + 3.5:.1f}">{value(metric, tick)}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}"/>'
    )
    parts += _date_ticks(board, x, plot_right - left, plot_bottom)
    for first, last in gap_runs(board.entries):
        skipped = f"point {first + 1}" if first == last else f"points {first + 1}–{last + 1}"
        parts.append(
            f'<rect class="gap" x="{x(first) - 3:.1f}" y="{top}" '
            f'width="{x(last) - x(first) + 6:.1f}" height="{plot_bottom - top}">'
            f"<title>gap: {skipped} skipped</title></rect>"
        )
    parts.append(_bands(series.intervals, x, y))
    parts += _whiskers(board, series, x, y)
    parts += _limits(series.limits, metric, left, plot_right, y, top, plot_bottom)
    parts.append(f'<path class="line" d="{_path(series.values, x, y)}"/>')
    parts += _moves(board, series, x, y)
    parts.append("</svg>")
    return "".join(parts)


def _limits(
    limits: Sequence[Limit],
    metric: str,
    left: float,
    right: float,
    y: Callable[[float], float],
    top: float,
    bottom: float,
) -> list[str]:
    """Each limit's line across the plot, its label in the right margin beside the
    line's end, labels pushed apart so that none covers another."""
    order = sorted(limits, key=lambda lim: y(lim.value))
    places: list[float] = []
    for limit in order:
        at = max(y(limit.value) + 3.5, top + 8)
        if places and at - places[-1] < LABEL_GAP:
            at = places[-1] + LABEL_GAP
        places.append(at)
    overflow = places[-1] - (bottom + 8) if places else 0
    if overflow > 0:  # shift the stack up to stay in the chart
        places = [p - overflow for p in places]
    out = []
    for limit, at in zip(order, places, strict=True):
        line_y = y(limit.value)
        name = limit.label.split(" (")[0].replace("next change's limit", "next limit")
        out.append(
            f'<g class="lim"><title>{escaped(limit.label)}: '
            f"{value(metric, limit.value)}</title>"
            f'<line class="{limit.kind}" x1="{left}" x2="{right}" y1="{line_y:.1f}" '
            f'y2="{line_y:.1f}"/><text class="ll" x="{right + 6}" y="{at:.1f}">'
            f"{escaped(name)} {value(metric, limit.value)}</text></g>"
        )
    return out


def _date_ticks(
    board: Dashboard, x: Callable[[int], float], plot_width: float, baseline: float
) -> list[str]:
    """A few dates under the axis, spread evenly, each the date of its commit; its sha
    on hover."""
    entries = board.entries
    if not entries:
        return []
    wanted = max(2, min(6, int(plot_width // 90)))
    count = len(entries)
    picks = sorted({round(k * (count - 1) / (wanted - 1)) for k in range(wanted)})
    out, shown = [], None
    for n, i in enumerate(picks):
        entry = entries[i]
        date = (entry.date or "")[:10]
        if date == shown and n != len(picks) - 1:
            continue  # a tick per day: the sha of the first commit of the day
        shown = date
        anchor = (
            "start" if n == 0 and len(picks) > 1 else "end" if n == len(picks) - 1 else "middle"
        )
        if len(picks) == 1:
            anchor = "middle"
        sha = (entry.commit or "")[:7] or "no commit"
        out.append(
            f'<line class="tick" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{baseline}" '
            f'y2="{baseline + 4}"/><text class="xl" text-anchor="{anchor}" x="{x(i):.1f}" '
            f'y="{baseline + 16}"><title>{escaped(sha)}</title>'
            f"{escaped((entry.date or '')[:10])}</text>"
        )
    return out


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """Round values from at most one step below `low` to one above `high`, about
    `count` of them, a step of 1, 2, 2.5 or 5 times a power of ten."""
    span = high - low if high > low else max(abs(high), 1.0)
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    k = 0
    while first + k * step <= high + step - 1e-9:
        ticks.append(round(first + k * step, 12))
        k += 1
        if first + (k - 1) * step >= high - 1e-9:
            break
    return ticks


def _bands(
    intervals: Sequence[tuple[float, float] | None],
    x: Callable[[int], float],
    y: Callable[[float], float],
) -> str:
    """Each run of points with an interval as one filled band; a lone one as a bar.
    Where points are denser than pixels, each column draws its widest interval."""
    paths = []
    for run in _runs([band is not None for band in intervals]):
        ends = []
        for column in _columns(run, x):
            bands = [intervals[i] or (0.0, 0.0) for i in column]
            at = sum(x(i) for i in column) / len(column)
            ends.append((at, min(b[0] for b in bands), max(b[1] for b in bands)))
        if len(ends) == 1:
            at, low, high = ends[0]
            paths.append(
                _relative(
                    [(at - 2, y(high)), (at + 2, y(high)), (at + 2, y(low)), (at - 2, y(low))],
                    close=True,
                )
            )
            continue
        upper = [(at, y(high)) for at, _, high in ends]
        lower = [(at, y(low)) for at, low, _ in reversed(ends)]
        paths.append(_relative(upper + lower, close=True))
    if not paths:
        return ""
    return f'<path class="band" d="{"".join(paths)}"/>'


def whisker(cx: float, top: float, bottom: float) -> str:
    """A range's marker: a vertical line from `top` to `bottom` with a cap at each end."""
    return f"M{cx:.1f} {top:.1f}V{bottom:.1f}M{cx - 3:.1f} {top:.1f}h6M{cx - 3:.1f} {bottom:.1f}h6"


def _whiskers(
    board: Dashboard, series: Series, x: Callable[[int], float], y: Callable[[float], float]
) -> list[str]:
    """The lowest to the highest of the builds' values at each point measured on several
    builds, with them in its title. Where points are denser than pixels, each column
    draws its widest range."""
    if not series.builds:
        return []
    out = []
    at_points = [i for i, b in enumerate(series.builds) if b is not None]
    for column in _columns(at_points, x):
        ranges = [b for i in column if (b := series.builds[i]) is not None]
        low, high = min(b.low for b in ranges), max(b.high for b in ranges)
        centre = sum(x(i) for i in column) / len(column)
        out.append(
            f'<path class="builds" d="{whisker(centre, y(high), y(low))}">'
            f"<title>{escaped(_whisker_words(board, series, column))}</title></path>"
        )
    return out


def _whisker_words(board: Dashboard, series: Series, column: Sequence[int]) -> str:
    """`2026-01-05 1a2b3c4: 48.2% (3 builds: 47.3–51.1%)`; for a column of several
    points, the first's date and commit and the lowest and highest build of any."""
    first = board.entries[column[0]]
    where = f"{(first.date or '')[:10]} {(first.commit or '')[:7]}"
    metric = series.metric
    if len(column) == 1:
        spread = series.builds[column[0]]
        return f"{where}: {with_builds(metric, series.values[column[0]], spread)}"
    ranges = [b for i in column if (b := series.builds[i]) is not None]
    low, high = min(b.low for b in ranges), max(b.high for b in ranges)
    return f"{where} and {len(column) - 1} more points: builds {builds_span(metric, low, high)}"


def with_builds(metric: str, number: float | None, spread: BuildRange | None) -> str:
    """A value as a reader gets it: `48.2%`, or, measured on several builds, `48.2% (3
    builds: 47.3–51.1%)`, the lowest and the highest build (`0.530 (the same in all 3
    builds)` where they do not differ as shown)."""
    shown = value(metric, number)
    if spread is None:
        return shown
    if value(metric, spread.low) == value(metric, spread.high):
        every = "both" if spread.builds == 2 else f"all {spread.builds}"
        return f"{shown} (the same in {every} builds)"
    return f"{shown} ({spread.builds} builds: {builds_span(metric, spread.low, spread.high)})"


def builds_span(metric: str, low: float, high: float) -> str:
    """`47.3–51.1%`, `0.583–0.601` or `41.2–44.0 ms`: the unit once, at the end."""
    high_text = value(metric, high)
    unit = next((u for u in ("%", " ms") if high_text.endswith(u)), "")
    return f"{value(metric, low).removesuffix(unit)}–{high_text}"


def triangle(cx: float, cy: float, down: bool) -> str:
    """A change point's marker at (cx, cy), pointing down or up."""
    if down:
        return f"M{cx - 5:.1f} {cy - 4:.1f}h10l-5 8Z"
    return f"M{cx - 5:.1f} {cy + 4:.1f}h10l-5 -8Z"


def _moves(
    board: Dashboard, series: Series, x: Callable[[int], float], y: Callable[[float], float]
) -> list[str]:
    """A triangle at each change point, pointing the way the value moved, with what
    moved in its title."""
    out = []
    lower = parse_metric(series.metric).lower_is_better
    for i in series.moves:
        now = series.values[i]
        band = series.intervals[i]
        if now is None or band is None:
            continue
        change = step(series, i)
        worse = change > 0 if lower else change < 0
        entry = board.entries[i]
        words = (
            f"{(entry.date or '')[:10]} {(entry.commit or '')[:7]}: {value(series.metric, now)}, "
            f"{delta(series.metric, change)} from the point before, beyond its interval "
            f"{value(series.metric, band[0])}–{value(series.metric, band[1])}"
        )
        at = y(now) + (-9 if change > 0 else 9)
        out.append(
            f'<path class="cp {"down" if worse else "up"}" data-i="{i}" '
            f'd="{triangle(x(i), at, change < 0)}"><title>{escaped(words)}</title></path>'
        )
    return out


def chart_title(series: Series) -> str:
    name = parse_metric(series.metric).label
    gates = f" — gate {', '.join(series.gates)}" if series.gates else ""
    return f"{name}, {slice_name(series.slice)}{gates}"


def _range(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    pad = max((high - low) * 0.08, 0.005 * max(abs(high), 1.0))
    return low - pad, high + pad


def _path(values: Sequence[float | None], x: Any, y: Any) -> str:
    """The line, broken at every gap (a new `M` after a missing value), in relative
    steps. Where points are denser than pixels, each pixel column keeps its lowest and
    highest value in their order: the same line, a fraction of the vertices."""
    parts = []
    for run in _runs([v is not None for v in values]):
        kept = _thinned(run, x, lambda i: values[i] or 0.0)
        coords = [(x(i), y(values[i] or 0.0)) for i in kept]
        parts.append(_relative(coords))
    return "".join(parts)


def _relative(coords: Sequence[tuple[float, float]], close: bool = False) -> str:
    """`M x y` then `l dx dy` steps, rounded to a tenth of a pixel without drifting."""
    if not coords:
        return ""
    x0, y0 = round(coords[0][0], 1), round(coords[0][1], 1)
    out = [f"M{x0:g} {y0:g}"]
    for cx, cy in coords[1:]:
        nx, ny = round(cx, 1), round(cy, 1)
        out.append(f"l{_num(nx - x0)} {_num(ny - y0)}")
        x0, y0 = nx, ny
    return "".join(out) + ("Z" if close else "")


def _num(v: float) -> str:
    text = f"{v:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _runs(present: Sequence[bool]) -> list[list[int]]:
    """The indices of each unbroken run of present entries."""
    runs: list[list[int]] = []
    for i, here in enumerate(present):
        if not here:
            continue
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _columns(run: Sequence[int], x: Any) -> list[list[int]]:
    """`run` split by pixel column of x."""
    columns: list[list[int]] = []
    for i in run:
        if columns and int(x(i)) == int(x(columns[-1][0])):
            columns[-1].append(i)
        else:
            columns.append([i])
    return columns


def _thinned(run: Sequence[int], x: Any, key: Callable[[int], float]) -> list[int]:
    """`run` with at most two indices per pixel column of x: its lowest and highest."""
    kept: list[int] = []
    for column in _columns(run, x):
        if len(column) <= 2:
            kept += column
        else:
            kept += sorted({min(column, key=key), max(column, key=key)})
    return kept
