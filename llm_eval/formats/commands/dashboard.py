"""The dashboard as one self-contained HTML page: no CDN, no request, opens from disk
and from GitHub Pages.

Charts are SVG generated here (axes, the line with its gaps, floors and limits), so
the page shows its lines with scripts off; a small inline script (templates/
dashboard.js) adds one marker per point from a compact JSON block, each linked to its
commit with its date and value as a tooltip. Drawing the points from data rather than
writing 20,000 linked elements into the file keeps a page of 1,000 points × 20
series well under 2 MB.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from llm_eval.dashboard import Change, Dashboard, Series, gaps
from llm_eval.english import plural
from llm_eval.metrics import parse_metric
from llm_eval.wording import value

WIDE = (720, 220)
"""Width and height of a gated chart, in px."""
SMALL = (340, 150)
PAD = (52, 12, 24, 20)
"""Left, right, top, bottom margins inside a chart."""


def render_dashboard(board: Dashboard) -> str:
    """The page."""
    page = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>llm-eval dashboard</title>",
        f"<style>{_asset('dashboard.css')}</style></head><body>",
        "<h1>Retrieval quality over time</h1>",
        f"<p class=sub>{html.escape(_subtitle(board))}</p>",
        *_gap_list(board),
        *_charts(board),
        *_change(board),
        *_judge(board),
        *_experiment(board),
        f'<script type="application/json" id="points">{_points_json(board)}</script>',
        f"<script>{_asset('dashboard.js')}</script>",
        "</body></html>",
    ]
    return "\n".join(page) + "\n"


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
    rows = [f"<li>#{i + 1} {html.escape(e.where)}: {html.escape(e.reason)}</li>" for i, e in found]
    title = f"Skipped, drawn as gaps ({len(found)})"
    return [f"<details class=gaps open><summary>{title}</summary><ul>", *rows, "</ul></details>"]


def _charts(board: Dashboard) -> list[str]:
    out = []
    gated = [s for s in board.series if s.gates]
    if gated:
        out += ["<h2>Gated</h2>", '<div class="grid wide">']
        out += [_chart(board, i, s, WIDE) for i, s in enumerate(board.series) if s.gates]
        out.append("</div>")
    metrics = dict.fromkeys(s.metric for s in board.series if not s.gates)
    for metric in metrics:
        out += [f"<h2>{html.escape(parse_metric(metric).label)}</h2>", '<div class="grid">']
        out += [
            _chart(board, i, s, SMALL)
            for i, s in enumerate(board.series)
            if s.metric == metric and not s.gates
        ]
        out.append("</div>")
    return out


def _chart(board: Dashboard, index: int, series: Series, size: tuple[int, int]) -> str:
    width, height = size
    left, right, top, bottom = PAD
    count = len(series.values)
    known = [v for v in series.values if v is not None]
    low, high = _range([*known, *(lim.value for lim in series.limits)])
    step = (width - left - right) / max(count - 1, 1)
    scale = (height - top - bottom) / (high - low)

    def x(i: int) -> float:
        return left + (i * step if count > 1 else (width - left - right) / 2)

    def y(v: float) -> float:
        return top + (high - v) * scale

    metric = series.metric
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" data-series="{index}" '
        f'data-metric="{html.escape(metric)}" data-slice="{html.escape(series.slice)}" '
        f'data-x0="{x(0):.2f}" '
        f'data-dx="{step if count > 1 else 0:.4f}" data-y0="{top + high * scale:.2f}" '
        f'data-ky="{scale:.4f}" data-expected="{len(known)}">',
        f"<title>{html.escape(_chart_title(series))}</title>",
        f'<text class="t" x="{left}" y="14">{html.escape(_chart_title(series))}</text>',
        f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{width - right}" '
        f'y2="{height - bottom}"/>',
        f'<text class="yl" x="{left - 4}" y="{top + 4}">{value(metric, high)}</text>',
        f'<text class="yl" x="{left - 4}" y="{height - bottom}">{value(metric, low)}</text>',
        *_dates(board, left, width - right, height - 6),
    ]
    for i, _ in gaps(board.entries):
        parts.append(
            f'<rect class="gap" x="{x(i) - 3:.1f}" y="{top}" width="6" '
            f'height="{height - top - bottom}"><title>gap: point {i + 1} skipped</title></rect>'
        )
    for limit in series.limits:  # floors labelled on the left, limits on the right
        at, anchor = (left + 4, "start") if limit.kind == "floor" else (width - right, "end")
        parts.append(
            f'<line class="{limit.kind}" x1="{left}" x2="{width - right}" '
            f'y1="{y(limit.value):.1f}" y2="{y(limit.value):.1f}"/>'
            f'<text class="ll" text-anchor="{anchor}" x="{at}" y="{y(limit.value) - 3:.1f}">'
            f"{html.escape(limit.label)} {value(metric, limit.value)}</text>"
        )
    parts.append(f'<path class="line" d="{_path(series.values, x, y)}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _dates(board: Dashboard, left: float, right: float, baseline: float) -> list[str]:
    """The first and the last entry's date under the axis."""
    dates = [(e.date or "")[:10] for e in board.entries]
    if not dates:
        return []
    first = f'<text class="xl" x="{left}" y="{baseline}">{html.escape(dates[0])}</text>'
    if len(dates) == 1:
        return [first]
    last = f'<text class="xl" text-anchor="end" x="{right}" y="{baseline}">'
    return [first, f"{last}{html.escape(dates[-1])}</text>"]


def _chart_title(series: Series) -> str:
    name = parse_metric(series.metric).label
    where = "all queries" if series.slice == "overall" else series.slice.replace(":", " ")
    gates = f" — gate {', '.join(series.gates)}" if series.gates else ""
    return f"{name}, {where}{gates}"


def _range(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    pad = max((high - low) * 0.1, 0.005 * max(abs(high), 1.0))
    return low - pad, high + pad


def _path(values: Sequence[float | None], x: Any, y: Any) -> str:
    """The line, broken at every gap (a new `M` after a missing value)."""
    parts, pen = [], "M"
    for i, v in enumerate(values):
        if v is None:
            pen = "M"
            continue
        parts.append(f"{pen}{x(i):.1f} {y(v):.1f}")
        pen = "L"
    return "".join(parts)


def _points_json(board: Dashboard) -> str:
    """What the script needs to draw the markers: per entry its commit and date, per
    series its values and how to print them. `</` is escaped for the script block."""
    data = {
        "base": board.commit_url,
        "commits": [[(e.commit or "")[:12], (e.date or "")[:10]] for e in board.entries],
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
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def _change(board: Dashboard) -> list[str]:
    change = board.change
    if change is None:
        return [
            "<h2>Latest change</h2><p>Fewer than two readable baselines: no change to show.</p>"
        ]
    head = (
        f"<h2>Latest change</h2><p>From {change.before[:7]} to {change.after[:7]}: "
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
        f"<tr><td><code>{html.escape(r.query_id)}</code></td>"
        f"<td>{html.escape(questions.get(r.query_id, ''))}</td>"
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
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_cell(v))}</td></tr>"
        for k, v in calibration.items()
    )
    model = html.escape(str(judge.get("model", "")))
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
        + html.escape(quality)
        + "</th><th>Δ vs reference</th><th>Front</th></tr>"
    )
    rows = []
    for variant in experiment.get("variants") or []:
        mean = (variant.get("values") or {}).get(quality)
        pair = (variant.get("versus_reference") or {}).get(quality) or {}
        rows.append(
            f"<tr><td>{html.escape(str(variant.get('name')))}</td>"
            f"<td>{_cell(mean)}</td><td>{_cell(pair.get('delta'))}</td>"
            f"<td>{'yes' if variant.get('pareto_front') else ''}</td></tr>"
        )
    words = html.escape(str(experiment.get("recommendation", "")))
    return ["<h2>Experiment</h2>", f"<p>{words}</p>", f"<table>{head}{''.join(rows)}</table>"]


def point_count(board: Dashboard) -> int:
    """Markers the page draws: one per known value of each series."""
    return sum(1 for s in board.series for v in s.values if v is not None)
