"""The dashboard as one self-contained HTML page: no CDN, no request, opens from disk
and from GitHub Pages.

The first screen answers "is retrieval getting worse?": the gated metrics' trends with
their floors, regression and drift limits, each point's interval as a band and the
change points marked, and the latest change against the one before. Below, every
metric as a table of sparklines (overall in the design's order, then tiers, then
tags), each opening its full chart. Everything is SVG and HTML generated here, with
the numbers in the text, so the page reads with scripts off; a small inline script
(templates/dashboard.js) adds one linked marker per point to the charts shown, from a
compact JSON block, and sorts the tables.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from llm_eval.formats._markup import visible
from llm_eval.history.dashboard import (
    DESIGN_ORDER,
    Change,
    Dashboard,
    Limit,
    Series,
    gap_runs,
    gaps,
    metric_order,
)
from llm_eval.history.series import Point
from llm_eval.metrics import parse_metric
from llm_eval.wording.english import plural
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


def render_dashboard(board: Dashboard) -> str:
    """The page."""
    page = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>llm-eval dashboard</title>",
        f"<style>{_asset('dashboard.css')}</style></head><body>",
        "<h1>Retrieval quality over time</h1>",
        f"<p class=sub>{_text(_subtitle(board))}</p>",
        *_first_screen(board),
        *_gap_list(board),
        *_tables(board),
        *_change(board),
        *_judge(board),
        *_experiment(board),
        f'<script type="application/json" id="points">{_points_json(board)}</script>',
        f"<script>{_asset('dashboard.js')}</script>",
        "</body></html>",
    ]
    return "\n".join(page) + "\n"


def _text(value: object) -> str:
    """Text from the inputs (tags, questions, commits, gate and metric names) as HTML:
    shown as the PR comment shows it (`visible`: one line, control and bidirectional
    characters as escapes), then escaped, quotes included, for text and attributes."""
    return html.escape(visible(str(value)))


def _asset(name: str) -> str:
    return resources.files("llm_eval").joinpath("templates", name).read_text("utf-8")


def _subtitle(board: Dashboard) -> str:
    entries = board.entries
    dates = [e.date[:10] for e in entries if e.date]
    span = f", {dates[0]} to {dates[-1]}" if dates else ""
    text = f"{plural(len(entries), 'point', 'points')} of the default branch{span}, newest right."
    if board.shallow:
        text += " This clone is shallow: older points were not fetched."
    return text


def _gap_list(board: Dashboard) -> list[str]:
    found = gaps(board.entries)
    if not found:
        return []
    rows = [f"<li>#{i + 1} {_text(e.where)}: {_text(e.reason)}</li>" for i, e in found]
    title = f"Skipped, drawn as gaps ({len(found)})"
    shown = " open" if len(found) <= 3 else ""
    return [f"<details class=gaps{shown}><summary>{title}</summary><ul>", *rows, "</ul></details>"]


# The first screen


def _first_screen(board: Dashboard) -> list[str]:
    gated = [(i, s) for i, s in enumerate(board.series) if s.gates and not s.empty]
    out = ['<section id="now" aria-labelledby="now-h">']
    out.append('<h2 id="now-h">Is retrieval getting worse?</h2>')
    if not gated:
        out.append("<p>no data yet: no gated metric has a point (gates read the baselines).</p>")
        return [*out, "</section>"]
    out.append('<ul class="verdict">')
    out += [f"<li>{_verdict(board, s)}</li>" for _, s in gated]
    out.append("</ul>")
    size = WIDE if len(gated) <= 2 else NARROW
    out.append('<div class="grid wide">')
    out += [_chart(board, i, s, size) for i, s in gated]
    out.append("</div>")
    out.append(_legend([s for _, s in gated]))
    out += _latest(board, [s for _, s in gated])
    return [*out, "</section>"]


def _worse(metric: str, change: float) -> bool:
    return change > 0 if parse_metric(metric).lower_is_better else change < 0


def _verdict(board: Dashboard, series: Series) -> str:
    """One line per gated chart: where the newest value stands against the floor and
    the drift limit, and the drops beyond their interval. Marked `worse` when past a
    limit or dropped by the latest change, `watch` for earlier drops, else `ok`."""
    metric = series.metric
    known = [(i, v) for i, v in enumerate(series.values) if v is not None]
    i, newest = known[-1]
    lower = parse_metric(metric).lower_is_better
    serious, notes, room = [], [], []
    for limit in series.limits:
        if limit.kind == "limit":
            continue
        name = limit.label.split(" (")[0]
        if (newest > limit.value) if lower else (newest < limit.value):
            serious.append(f"past its {name} {value(metric, limit.value)}")
        elif limit.kind == "drift":
            gap = delta(metric, abs(newest - limit.value)).lstrip("+")
            room.append(f"{gap} {'below' if lower else 'above'} its {name}")
    bad = [m for m in series.moves if _worse(metric, _step(series, m))]
    if bad and bad[-1] == i:
        serious.append(f"the latest change dropped it beyond its interval ({_sha(board, i)})")
    elif bad:
        notes.append(
            f"{plural(len(bad), 'drop', 'drops')} beyond the interval, the last at "
            f"{_sha(board, bad[-1])}"
        )
    words = [*serious, *notes] or ["within its floor and limits, no drop beyond its interval"]
    state = "; ".join(words) + (f" ({', '.join(room)})" if room else "")
    mark = "worse" if serious else "watch" if notes else "ok"
    name = _text(_chart_title(series).split(" — ")[0])
    return f'<b class="{mark}">{name}: {value(metric, newest)}</b> — {_text(state)}'


def _step(series: Series, i: int) -> float:
    """The change of the value at `i` from the known value before it."""
    before = next(v for v in reversed(series.values[:i]) if v is not None)
    now = series.values[i]
    assert now is not None
    return now - before


def _sha(board: Dashboard, i: int) -> str:
    return (board.entries[i].commit or "?")[:7]


def _legend(gated: Sequence[Series]) -> str:
    """What the gated charts draw, each mark once: only those some chart has."""
    kinds = {lim.kind for s in gated for lim in s.limits}
    shown = {
        "value",
        *(["95% interval"] if any(b for s in gated for b in s.intervals) else []),
        *(["floor"] if "floor" in kinds else []),
        *(["next change's regression limit"] if "limit" in kinds else []),
        *(["drift limit"] if "drift" in kinds else []),
        *(["moved beyond its interval"] if any(s.moves for s in gated) else []),
    }
    keys = [
        ('<path class="line" d="M2 8h26"/>', "value"),
        ('<rect class="band" x="2" y="3" width="26" height="10"/>', "95% interval"),
        ('<path class="floor" d="M2 8h26"/>', "floor"),
        ('<path class="limit" d="M2 8h26"/>', "next change's regression limit"),
        ('<path class="drift" d="M2 8h26"/>', "drift limit"),
        (f'<path class="cp down" d="{_triangle(15, 8, True)}"/>', "moved beyond its interval"),
    ]
    items = "".join(
        f'<li><svg width="30" height="16" aria-hidden="true">{shape}</svg>{_text(word)}</li>'
        for shape, word in keys
        if word in shown
    )
    return f'<ul class="legend" aria-label="Legend">{items}</ul>'


def _latest(board: Dashboard, gated: Sequence[Series]) -> list[str]:
    """The newest point against the one before: each gated value, the commit, its link."""
    points = [i for i, e in enumerate(board.entries) if isinstance(e, Point)]
    out = ['<div class="latest"><h3>Latest change</h3>']
    if len(points) < 2:
        return [*out, "<p>Fewer than two points: no change to show yet.</p></div>"]
    before, after = points[-2:]
    entry, prior = board.entries[after], board.entries[before]
    subject = ""
    if isinstance(entry, Point) and entry.subject:
        short = entry.subject if len(entry.subject) <= 72 else entry.subject[:71] + "…"
        subject = f' <span title="{_text(entry.subject)}">“{_text(short)}”</span>'

    out.append(
        f"<p>{_commit_link(board, entry.commit)}{subject} ({_text((entry.date or '')[:10])}"
        f"), against {_commit_link(board, prior.commit)} "
        f"({_text((prior.date or '')[:10])}):</p>"
    )
    rows = []
    for series in gated:
        now, then = series.values[after], series.values[before]
        interval = series.intervals[after] if after < len(series.intervals) else None
        moved = "n/a"
        if now is not None and then is not None:
            word = "beyond" if after in series.moves else "within"
            moved = delta(series.metric, now - then)
            if interval:
                moved += f" ({word} its interval)"
        band = (
            f"{value(series.metric, interval[0])}–{value(series.metric, interval[1])}"
            if interval
            else "none kept"
        )
        rows.append(
            f"<tr><th scope=row>{_text(_chart_title(series).split(' — ')[0])}</th>"
            f"<td class=num>{value(series.metric, then)}</td>"
            f"<td class=num>{value(series.metric, now)}</td><td>{_text(moved)}</td>"
            f"<td class=num>{_text(band)}</td></tr>"
        )
    out.append(
        "<table><tr><th>Gated metric</th><th>Before</th><th>After</th><th>Change</th>"
        f"<th>95% interval</th></tr>{''.join(rows)}</table>"
    )
    change = board.change
    if change is not None:
        out.append(
            f"<p>Between the two newest baselines ({_text(change.before[:7])} → "
            f"{_text(change.after[:7])}): "
            f"{plural(len(change.lost), 'question', 'questions')} lost "
            f"{'its' if len(change.lost) == 1 else 'their'} relevant result from the top "
            f'{change.k}, {len(change.gained)} gained one (<a href="#questions">listed '
            "below</a>).</p>"
        )
    return [*out, "</div>"]


def _commit_link(board: Dashboard, commit: str | None) -> str:
    short = _text((commit or "?")[:7])
    if board.commit_url and commit:
        return f'<a href="{_text(board.commit_url + commit)}"><code>{short}</code></a>'
    return f"<code>{short}</code>"


# The tables of sparklines


def _tables(board: Dashboard) -> list[str]:
    indexed = list(enumerate(board.series))
    overall = sorted(
        ((i, s) for i, s in indexed if s.slice == "overall"),
        key=lambda p: metric_order(p[1].metric),
    )
    tiers = [(i, s) for i, s in indexed if s.slice.startswith("tier:")]
    tags = [(i, s) for i, s in indexed if s.slice.startswith("tag:")]
    out = ['<h2 id="metrics">Every metric, all queries</h2>']
    seen = {s.metric for s in board.series if not s.empty}
    missing = [m for m in DESIGN_ORDER if m not in seen]
    if missing:
        labels = ", ".join(parse_metric(m).label for m in missing)
        out.append(
            f'<p class="nodata">no data yet: {_text(labels)} '
            "(no baseline or kept report has computed it).</p>"
        )
    out += _table(board, overall, "overall", by_change=False)
    if tiers:
        out += ['<h2 id="tiers">By tier</h2>', *_table(board, tiers, "tiers", by_change=True)]
    if tags:
        out += ['<h2 id="tags">By tag</h2>', *_table(board, tags, "tags", by_change=True)]
    return out


def _goodness(series: Series) -> float | None:
    """The newest change, signed so that a drop in quality is negative."""
    known = [v for v in series.values if v is not None]
    if len(known) < 2:
        return None
    change = known[-1] - known[-2]
    return -change if parse_metric(series.metric).lower_is_better else change


def _table(
    board: Dashboard, rows: Sequence[tuple[int, Series]], name: str, *, by_change: bool
) -> list[str]:
    if by_change:  # the worst newest change first, a slice's metrics together; none last
        rows = sorted(
            rows,
            key=lambda p: (
                (g := _goodness(p[1])) is None,
                g or 0.0,
                p[1].slice,
                metric_order(p[1].metric),
            ),
        )
    head = (
        f'<table class="multiples" id="t-{name}"><thead><tr><th scope=col>Metric</th>'
        "<th scope=col>Slice</th><th scope=col>Trend</th><th scope=col>Last</th>"
        '<th scope=col><button type="button" class="sort" '
        'aria-label="Change: sort by the newest change">'
        "Change</button></th><th scope=col>Chart</th></tr></thead><tbody>"
    )
    body = []
    for order, (index, series) in enumerate(rows):
        label = _text(parse_metric(series.metric).label)
        where = _text(_slice_name(series.slice))
        if series.empty:
            body.append(
                f'<tr class="empty" data-change="" data-order="{order}"><th scope=row>{label}'
                f'</th><td>{where}</td><td colspan=4 class="nodata">no data yet: no point has '
                f"{label} on {where}</td></tr>"
            )
            continue
        known = [v for v in series.values if v is not None]
        good = _goodness(series)
        change = "" if len(known) < 2 else delta(series.metric, known[-1] - known[-2])
        cls = "down" if good is not None and good < 0 else "up" if good else ""
        body.append(
            f'<tr id="{_anchor(series)}" '
            f'data-change="{"" if good is None else f"{good:.6f}"}" data-order="{order}">'
            f"<th scope=row>{label}</th><td>{where}</td><td>{_spark(series)}</td>"
            f"<td class=num>{value(series.metric, known[-1])}</td>"
            f'<td class="num {cls}">{_text(change)}</td>'
            f"<td><details><summary>chart</summary>{_chart(board, index, series, FULL)}"
            "</details></td></tr>"
        )
    return [head, *body, "</tbody></table>"]


def _anchor(series: Series) -> str:
    """The row's id: `#s-tag-x-recall-5` opens its chart."""
    words = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{series.slice}-{series.metric}").strip("-")
    return f"s-{words}"


def _slice_name(slice_: str) -> str:
    return "all queries" if slice_ == "overall" else slice_.replace(":", " ")


def _spark(series: Series) -> str:
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
        f"{parse_metric(series.metric).label}, {_slice_name(series.slice)}: "
        f"{value(series.metric, low)} to {value(series.metric, high)}, "
        f"newest {value(series.metric, last_v)}"
    )
    return (
        f'<svg class="spark" role="img" width="{width}" height="{height}" '
        f'aria-label="{_text(title)}"><title>{_text(title)}</title>'
        f'<path class="line" d="{path}"/><circle cx="{last_x + 2}" cy="{y(last_v):.1f}" '
        'r="2"/></svg>'
    )


# A chart


def _chart(board: Dashboard, index: int, series: Series, size: tuple[int, int]) -> str:
    width, height = size
    left, right, top, bottom = PAD
    plot_right, plot_bottom = width - right, height - bottom
    count = len(series.values)
    known = [v for v in series.values if v is not None]
    bands = [b for b in series.intervals if b is not None]
    low, high = _range(
        [*known, *(lim.value for lim in series.limits), *(e for b in bands for e in b)]
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
    title = _chart_title(series)
    parts = [
        f'<svg class="chart" role="img" aria-label="{_text(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" data-series="{index}" '
        f'data-metric="{_text(metric)}" data-slice="{_text(series.slice)}" '
        f'data-x0="{x(0):.2f}" '
        f'data-dx="{step if count > 1 else 0:.4f}" data-y0="{top + high * scale:.2f}" '
        f'data-ky="{scale:.4f}" data-expected="{len(known)}">',
        f"<title>{_text(title)}</title>",
        f'<text class="t" x="{left}" y="16">{_text(title)}</text>',
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
            f'<g class="lim"><title>{_text(limit.label)}: '
            f"{value(metric, limit.value)}</title>"
            f'<line class="{limit.kind}" x1="{left}" x2="{right}" y1="{line_y:.1f}" '
            f'y2="{line_y:.1f}"/><text class="ll" x="{right + 6}" y="{at:.1f}">'
            f"{_text(name)} {value(metric, limit.value)}</text></g>"
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
            f'y="{baseline + 16}"><title>{_text(sha)}</title>'
            f"{_text((entry.date or '')[:10])}</text>"
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


def _triangle(cx: float, cy: float, down: bool) -> str:
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
        change = _step(series, i)
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
            f'd="{_triangle(x(i), at, change < 0)}"><title>{_text(words)}</title></path>'
        )
    return out


def _chart_title(series: Series) -> str:
    name = parse_metric(series.metric).label
    gates = f" — gate {', '.join(series.gates)}" if series.gates else ""
    return f"{name}, {_slice_name(series.slice)}{gates}"


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


def _points_json(board: Dashboard) -> str:
    """What the script needs to draw the markers: per entry its commit and date, per
    series its values and how to print them. Commits and dates are shown as the page's
    text is (`visible`); `<`, `>`, `&` and the two JavaScript line separators are
    `\\u` escapes, so no content can end the script block, open a comment in it or
    change how it is parsed."""
    data = {
        "base": board.commit_url,
        "commits": [
            [visible((e.commit or "")[:12]), visible((e.date or "")[:10])] for e in board.entries
        ],
        "series": [
            {
                "v": [None if v is None else round(v, 5) for v in s.values],
                "u": parse_metric(s.metric).family.unit
                if not parse_metric(s.metric).percent
                else "%",
            }
            for s in board.series
        ],
    }
    text = json.dumps(data, separators=(",", ":"))
    return _SCRIPT_SPECIAL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SCRIPT_SPECIAL = re.compile("[<>&\u2028\u2029]")
"""What must not appear as itself in a script block's JSON; a `\\u` escape reads as
the same character once parsed."""


def _change(board: Dashboard) -> list[str]:
    change = board.change
    if change is None:
        return [
            '<h2 id="questions">Questions that moved</h2><p>Fewer than two readable '
            "baselines: no change to show.</p>"
        ]
    head = (
        '<h2 id="questions">Questions that moved</h2>'
        f"<p>From {_text(change.before[:7])} to {_text(change.after[:7])}: "
        f"{plural(len(change.lost), 'question', 'questions')} lost "
        f"{'its' if len(change.lost) == 1 else 'their'} relevant result from the top "
        f"{change.k}, {len(change.gained)} gained one.</p>"
    )
    return [
        head,
        *_change_table(board, "Lost (hit → miss)", change.lost, change),
        *_change_table(board, "Gained (miss → hit)", change.gained, change),
    ]


def _change_table(board: Dashboard, title: str, rows: Sequence[Any], change: Change) -> list[str]:
    if not rows:
        return []
    questions = board.questions or {}
    body = [
        f"<tr><td><code>{_text(r.query_id)}</code></td>"
        f"<td>{_text(questions.get(r.query_id, ''))}</td>"
        f"<td>{_rank(r.rank_before)} → {_rank(r.rank_after)}</td></tr>"
        for r in rows
    ]
    return [
        f"<h3>{title}</h3><table><tr><th>Question</th><th></th><th>Rank</th></tr>",
        *body,
        "</table>",
    ]


def _rank(rank: int) -> str:
    return str(rank) if rank else "not retrieved"


def _judge(board: Dashboard) -> list[str]:
    judge = board.judge
    if not judge:
        return [
            "<h2>Judged metrics</h2><p>No kept report has judged metrics "
            "(their calibration comes with the reports kept in a history file).</p>"
        ]
    calibration = judge.get("calibration") or {}
    rows = "".join(
        f"<tr><th>{_text(str(k))}</th><td>{_text(_cell(v))}</td></tr>"
        for k, v in calibration.items()
    )
    model = _text(str(judge.get("model", "")))
    if not rows:
        return [
            f"<h2>Judged metrics</h2><p>Judge {model}: no calibration (no labelled chunks).</p>"
        ]
    return [
        f"<h2>Judged metrics</h2><p>Judge {model}, calibrated against the gold labels:</p>",
        f"<table>{rows}</table>",
    ]


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "n/a" if v is None else str(v)


def _experiment(board: Dashboard) -> list[str]:
    experiment = board.experiment
    if not experiment:
        return []
    quality = str(experiment.get("quality", ""))
    head = (
        "<tr><th>Variant</th><th>"
        + _text(quality)
        + "</th><th>Δ vs reference</th><th>Front</th></tr>"
    )
    rows = []
    for variant in experiment.get("variants") or []:
        mean = (variant.get("values") or {}).get(quality)
        pair = (variant.get("versus_reference") or {}).get(quality) or {}
        rows.append(
            f"<tr><td>{_text(str(variant.get('name')))}</td>"
            f"<td>{_cell(mean)}</td><td>{_cell(pair.get('delta'))}</td>"
            f"<td>{'yes' if variant.get('pareto_front') else ''}</td></tr>"
        )
    words = _text(str(experiment.get("recommendation", "")))
    return ["<h2>Experiment</h2>", f"<p>{words}</p>", f"<table>{head}{''.join(rows)}</table>"]


def point_count(board: Dashboard) -> int:
    """Markers the page draws: one per known value of each series."""
    return sum(1 for s in board.series for v in s.values if v is not None)
