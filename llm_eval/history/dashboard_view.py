"""The dashboard as one self-contained HTML page: no CDN, no request, opens from disk
and from GitHub Pages.

The first screen answers "is retrieval getting worse?": the gated metrics' trends with
their floors, regression and drift limits, each point's interval as a band and the
change points marked, and the latest change against the one before. Below, every
metric as a table of sparklines (overall in the design's order, then tiers, then
tags), each opening its full chart. The HTML is generated here and the SVG drawn by
`dashboard_svg.py`, with the numbers in the text, so the page reads with scripts off;
a small inline script (templates/dashboard.js) adds one linked marker per point to the
charts shown, from a compact JSON block, and sorts the tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from llm_eval.formats._markup import visible
from llm_eval.history.dashboard import (
    DESIGN_ORDER,
    Change,
    Dashboard,
    Series,
    gaps,
    metric_order,
)
from llm_eval.history.dashboard_svg import (
    FULL,
    NARROW,
    WIDE,
    chart,
    chart_title,
    escaped,
    slice_name,
    spark,
    step,
    triangle,
    whisker,
    with_builds,
)
from llm_eval.history.series import BuildRange, Point
from llm_eval.metrics import parse_metric
from llm_eval.wording.english import plural
from llm_eval.wording.gates import delta, value


def render_dashboard(board: Dashboard) -> str:
    """The page."""
    page = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>llm-eval dashboard</title>",
        f"<style>{_styles(board)}</style></head><body>",
        "<h1>Retrieval quality over time</h1>",
        f"<p class=sub>{escaped(_subtitle(board))}</p>",
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


def _styles(board: Dashboard) -> str:
    """The stylesheet; the whiskers' rules only on a page that draws one, so that a
    history measured on one build at a time gives the page it always gave."""
    builds = _asset("dashboard-builds.css") if _has_builds(board.series) else ""
    return _asset("dashboard.css") + builds


def _has_builds(series: Sequence[Series]) -> bool:
    """Some point of these series was measured on several builds of its retriever."""
    return any(b is not None for s in series for b in s.builds)


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
    rows = [f"<li>#{i + 1} {escaped(e.where)}: {escaped(e.reason)}</li>" for i, e in found]
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
    out += [chart(board, i, s, size) for i, s in gated]
    out.append("</div>")
    out.append(_legend([s for _, s in gated]))
    out += _builds_note(board)
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
    bad = [m for m in series.moves if _worse(metric, step(series, m))]
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
    name = escaped(chart_title(series).split(" — ")[0])
    return f'<b class="{mark}">{name}: {value(metric, newest)}</b> — {escaped(state)}'


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
        *([BUILDS_KEY] if _has_builds(gated) else []),
    }
    keys = [
        ('<path class="line" d="M2 8h26"/>', "value"),
        ('<rect class="band" x="2" y="3" width="26" height="10"/>', "95% interval"),
        ('<path class="floor" d="M2 8h26"/>', "floor"),
        ('<path class="limit" d="M2 8h26"/>', "next change's regression limit"),
        ('<path class="drift" d="M2 8h26"/>', "drift limit"),
        (f'<path class="cp down" d="{triangle(15, 8, True)}"/>', "moved beyond its interval"),
        (f'<path class="builds" d="{whisker(22, 2.5, 13.5)}"/>', BUILDS_KEY),
    ]
    items = "".join(
        f'<li><svg width="30" height="16" aria-hidden="true">{shape}</svg>{escaped(word)}</li>'
        for shape, word in keys
        if word in shown
    )
    return f'<ul class="legend" aria-label="Legend">{items}</ul>'


BUILDS_KEY = "lowest to highest build"


def _builds_note(board: Dashboard) -> list[str]:
    """One line on what a whisker means, on a page that draws one."""
    if not _has_builds(board.series):
        return []
    return [
        '<p class="builds-note">A whisker spans the lowest to the highest of the '
        "retriever's builds at that point: a rebuild alone, with nothing else changed, "
        "moves the value that much.</p>"
    ]


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
        subject = f' <span title="{escaped(entry.subject)}">“{escaped(short)}”</span>'

    out.append(
        f"<p>{_commit_link(board, entry.commit)}{subject} ({escaped((entry.date or '')[:10])}"
        f"), against {_commit_link(board, prior.commit)} "
        f"({escaped((prior.date or '')[:10])}):</p>"
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
            f"<tr><th scope=row>{escaped(chart_title(series).split(' — ')[0])}</th>"
            f"<td class=num>{escaped(with_builds(series.metric, then, _spread(series, before)))}"
            f"</td><td class=num>{escaped(with_builds(series.metric, now, _spread(series, after)))}"
            f"</td><td>{escaped(moved)}</td>"
            f"<td class=num>{escaped(band)}</td></tr>"
        )
    out.append(
        "<table><tr><th>Gated metric</th><th>Before</th><th>After</th><th>Change</th>"
        f"<th>95% interval</th></tr>{''.join(rows)}</table>"
    )
    change = board.change
    if change is not None:
        out.append(
            f"<p>Between the two newest baselines ({escaped(change.before[:7])} → "
            f"{escaped(change.after[:7])}): "
            f"{plural(len(change.lost), 'question', 'questions')} lost "
            f"{'its' if len(change.lost) == 1 else 'their'} relevant result from the top "
            f'{change.k}, {len(change.gained)} gained one (<a href="#questions">listed '
            "below</a>).</p>"
        )
    return [*out, "</div>"]


def _spread(series: Series, i: int) -> BuildRange | None:
    """The range of the entry's builds on the series (None: one build)."""
    return series.builds[i] if i < len(series.builds) else None


def _commit_link(board: Dashboard, commit: str | None) -> str:
    short = escaped((commit or "?")[:7])
    if board.commit_url and commit:
        return f'<a href="{escaped(board.commit_url + commit)}"><code>{short}</code></a>'
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
            f'<p class="nodata">no data yet: {escaped(labels)} '
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
        label = escaped(parse_metric(series.metric).label)
        where = escaped(slice_name(series.slice))
        if series.empty:
            body.append(
                f'<tr class="empty" data-change="" data-order="{order}"><th scope=row>{label}'
                f'</th><td>{where}</td><td colspan=4 class="nodata">no data yet: no point has '
                f"{label} on {where}</td></tr>"
            )
            continue
        known = [(i, v) for i, v in enumerate(series.values) if v is not None]
        newest, last = known[-1]
        good = _goodness(series)
        change = "" if len(known) < 2 else delta(series.metric, last - known[-2][1])
        cls = "down" if good is not None and good < 0 else "up" if good else ""
        shown = with_builds(series.metric, last, _spread(series, newest))
        body.append(
            f'<tr id="{_anchor(series)}" '
            f'data-change="{"" if good is None else f"{good:.6f}"}" data-order="{order}">'
            f"<th scope=row>{label}</th><td>{where}</td><td>{spark(series)}</td>"
            f"<td class=num>{escaped(shown)}</td>"
            f'<td class="num {cls}">{escaped(change)}</td>'
            f"<td><details><summary>chart</summary>{chart(board, index, series, FULL)}"
            "</details></td></tr>"
        )
    return [head, *body, "</tbody></table>"]


def _anchor(series: Series) -> str:
    """The row's id: `#s-tag-x-recall-5` opens its chart."""
    words = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{series.slice}-{series.metric}").strip("-")
    return f"s-{words}"


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
        f"<p>From {escaped(change.before[:7])} to {escaped(change.after[:7])}: "
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
        f"<tr><td><code>{escaped(r.query_id)}</code></td>"
        f"<td>{escaped(questions.get(r.query_id, ''))}</td>"
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
        f"<tr><th>{escaped(str(k))}</th><td>{escaped(_cell(v))}</td></tr>"
        for k, v in calibration.items()
    )
    model = escaped(str(judge.get("model", "")))
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
        + escaped(quality)
        + "</th><th>Δ vs reference</th><th>Front</th></tr>"
    )
    rows = []
    for variant in experiment.get("variants") or []:
        mean = (variant.get("values") or {}).get(quality)
        pair = (variant.get("versus_reference") or {}).get(quality) or {}
        rows.append(
            f"<tr><td>{escaped(str(variant.get('name')))}</td>"
            f"<td>{_cell(mean)}</td><td>{_cell(pair.get('delta'))}</td>"
            f"<td>{'yes' if variant.get('pareto_front') else ''}</td></tr>"
        )
    words = escaped(str(experiment.get("recommendation", "")))
    return ["<h2>Experiment</h2>", f"<p>{words}</p>", f"<table>{head}{''.join(rows)}</table>"]


def point_count(board: Dashboard) -> int:
    """Markers the page draws: one per known value of each series."""
    return sum(1 for s in board.series for v in s.values if v is not None)
