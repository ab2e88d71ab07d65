"""`llm-eval experiment`'s results: experiment.md, .csv, .json, the terminal text and the
quality-versus-latency picture (matplotlib, from the `plots` extra).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_eval.experiment.latency_clock import label as label_of
from llm_eval.experiment.latency_ratio import Ratio, ratio_cell, times
from llm_eval.experiment.variants import (
    SERVICE,
    Experiment,
    VariantRow,
    tie_groups,
)
from llm_eval.formats._markup import escape_markdown
from llm_eval.formats._plot_layout import Box, nice_bounds, nice_log_bounds, place_labels
from llm_eval.metrics import parse_metric
from llm_eval.output import render_blocks, wrap
from llm_eval.stats import format_p
from llm_eval.textio import write_atomic
from llm_eval.wording.gates import delta, value

PICTURE = "experiment-pareto"


# --- the picture ----------------------------------------------------------------------


def draw_pareto(result: Experiment, folder: Path) -> Path | None:
    """experiment-pareto.png and .svg, when matplotlib is installed; None without it
    (or without a variant that has both a quality value and a latency)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    drawn = pareto_figure(result)
    if drawn is None:
        return None
    figure = drawn[0]
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"{PICTURE}.png"
    for suffix in (".png", ".svg"):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=suffix[1:], metadata=_fixed_metadata(suffix))
        write_atomic(png.with_suffix(suffix), buffer.getvalue())
    plt.close(figure)
    return png


LOG_RATIO = 20.0
"""Latencies spanning more than this factor are drawn on a logarithmic axis."""
INTERVAL_REACH = 1.5
"""How far beyond the outermost points the latency axis goes to show intervals whole."""
POINT_RADIUS = 4.0
"""The markers' radius in pixels (a scatter size of 40 points² at 120 dpi is about 4)."""


def pareto_figure(result: Experiment) -> tuple[Any, Any, list[Any]] | None:
    """The figure, its axes and the variants' name labels (matplotlib objects; needs the
    `plots` extra). Both axes are fitted to the data, with a margin and round ends, so
    that a spread of a few points fills the plot; latencies that span more than
    LOG_RATIO are on a logarithmic axis. Each p95 latency carries its 95% interval.
    Each name stands beside its point where it overlaps no other name and no point
    (`_plot_layout.place_labels`)."""
    import matplotlib.pyplot as plt

    q = result.quality
    scale = 100.0 if parse_metric(q).percent else 1.0
    points = []
    for r in result.rows:
        latency, quality = r.values.get("latency_p95"), r.values.get(q)
        if latency is not None and quality is not None:
            points.append((r, latency, quality * scale))
    if not points:
        return None
    groups = tie_groups(result.rows)
    figure, axes = plt.subplots(figsize=(8.4, 4.8), dpi=120)
    figure.subplots_adjust(left=0.11, right=0.97, top=0.88, bottom=0.12)
    left, right, log = latency_axis(result)
    if log:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        axes.set_xscale("log")
        axes.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axes.xaxis.set_minor_formatter(NullFormatter())
    for row, latency, quality in points:
        color = "#1f6feb" if row.on_front else "#8b949e"
        span = row.latency_interval
        if span is not None:
            low = left if span.low is None else span.low
            high = right if span.high is None else span.high
            axes.plot([low, high], [quality, quality], color=color, linewidth=1.5, alpha=0.6)
        axes.scatter(latency, quality, s=40, color=color, zorder=3)
    axes.set_xlim(left, right)
    axes.set_ylim(*quality_axis(q, scale, [quality for _, _, quality in points]))
    labels = _name_points(figure, axes, points, groups)
    where = ", log scale" if log else ""
    axes.set_xlabel(f"{result.latency_name} per query (ms{where}), with its 95% interval")
    unit = " (%)" if scale == 100.0 else ""
    axes.set_ylabel(f"{parse_metric(q).label}, {result.scope}{unit}")
    axes.set_title(
        f"{parse_metric(q).label} against {result.latency_name}\nblue: on the Pareto front; "
        "≈: tied within noise with another front variant",
        fontsize=10,
    )
    axes.grid(True, alpha=0.3)
    return figure, axes, labels


def latency_axis(result: Experiment) -> tuple[float, float, bool]:
    """The latency axis's ends, fitted to every p95 and to the closed ends of their
    intervals as far as INTERVAL_REACH times beyond the points (a longer interval runs
    off the edge), and whether it is logarithmic (spanning more than LOG_RATIO)."""
    points: list[float] = []
    for r in result.rows:
        p95 = r.values.get("latency_p95")
        points += [p95] if p95 is not None and p95 > 0 else []
    if not points:
        return 0.0, 1.0, False
    least, most = min(points), max(points)
    ends = list(points)
    for r in result.rows:
        span = r.latency_interval
        if span is not None and r.values.get("latency_p95"):
            ends += [
                min(max(e, least / INTERVAL_REACH), most * INTERVAL_REACH)
                for e in (span.low, span.high)
                if e is not None and e > 0
            ]
    low, high = min(ends), max(ends)
    if high / low > LOG_RATIO:
        return (*nice_log_bounds(low, high), True)
    return (*nice_bounds(low, high, floor=0.0), False)


def quality_axis(metric: str, scale: float, values: Sequence[float]) -> tuple[float, float]:
    """Fitted to the values with a margin and round ends, within the metric's range
    (0 to 100% for a share) when it has one."""
    parsed = parse_metric(metric)
    bounds = parsed.family.score_range
    if bounds is not None and parsed.pairable:
        floor, ceiling = bounds[0] * scale, bounds[1] * scale
        return nice_bounds(min(values), max(values), floor=floor, ceiling=ceiling)
    return nice_bounds(min(values), max(values))


NAMED = 40
"""The most variants named in the Pareto picture."""


def _name_points(
    figure: Any,
    axes: Any,
    points: Sequence[tuple[VariantRow, float, float]],
    groups: list[list[str]],
) -> list[Any]:
    """Each variant's name beside its point, front variants first, clear of the other
    names and of every point; joined to its point by a line when placed farther out.
    A large sweep names its first `NAMED` in that order (the table names them all): each
    name is placed clear of every name before it."""
    tied = {name for group in groups for name in group}
    renderer = figure.canvas.get_renderer()
    ordered = sorted(points, key=lambda p: (not p[0].on_front, -p[2], p[1], p[0].name))[:NAMED]
    texts, sizes, spots = [], [], []
    for row, latency, quality in ordered:
        text = axes.text(
            0,
            0,
            f"{row.name}{' ≈' if row.name in tied else ''}",
            fontsize=8,
            color="#1f6feb" if row.on_front else "#57606a",
            transform=None,
        )
        extent = text.get_window_extent(renderer)
        sizes.append((extent.width + 4.0, extent.height + 2.0))
        spots.append(tuple(axes.transData.transform((latency, quality))))
        texts.append(text)
    frame = axes.get_window_extent(renderer)
    bars = []
    for line in axes.get_lines():  # the intervals, as thin boxes to keep names off
        (x0, y0), (x1, y1) = axes.transData.transform(line.get_xydata())
        bars.append(Box(min(x0, x1), y0 - 2.0, max(x0, x1), y1 + 2.0))
    frame_box = Box(frame.x0, frame.y0, frame.x1, frame.y1)
    boxes = place_labels(spots, sizes, frame_box, POINT_RADIUS, obstacles=bars)
    to_axes = axes.transAxes.inverted()
    labels = []
    for text, box, (x, y) in zip(texts, boxes, spots, strict=True):
        label = text.get_text()
        color = text.get_color()
        text.remove()
        centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
        far = max(
            abs(centre[0] - x) - (box.x1 - box.x0) / 2, abs(centre[1] - y) - (box.y1 - box.y0) / 2
        )
        anchor = to_axes.transform(centre)
        labels.append(
            axes.annotate(
                label,
                xy=to_axes.transform((x, y)),
                xycoords="axes fraction",
                xytext=anchor,
                textcoords="axes fraction",
                ha="center",
                va="center",
                fontsize=8,
                color=color,
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
                arrowprops={"arrowstyle": "-", "color": "#c9d1d9", "linewidth": 0.8}
                if far > 2 * (POINT_RADIUS + 3.0)
                else None,
            )
        )
    return labels


def _fixed_metadata(suffix: str) -> dict[str, Any]:
    """No creation date, so that the same experiment draws the same bytes."""
    return {"Date": None} if suffix == ".svg" else {"Software": None}


# --- the files ------------------------------------------------------------------------


def _ms(number: float | None) -> str:
    """Latency with two decimals below 10 ms, where variants differ in fractions."""
    if number is None:
        return "n/a"
    return f"{number:.2f} ms" if number < 10 else f"{number:.1f} ms"


def _p(p: float, method: str) -> str:
    """`format_p` in a table cell: `0.034` (exact), `≤ 0.035` (a bound), `> 0.5`, `< 0.001`."""
    return format_p(p, method).removeprefix("p = ").removeprefix("p ")


def _p_md(p: float, method: str) -> str:
    """`_p` in a Markdown cell: `<` and `>` as HTML entities."""
    return escape_markdown(_p(p, method))


def _front_cell(row: VariantRow, groups: Sequence[Sequence[str]]) -> str:
    if row.on_front and any(row.name in g for g in groups):
        return "yes, tied"
    return {True: "yes", False: "", None: "n/a"}[row.on_front]


def _clock_name(result: Experiment) -> str:
    """`p95 CPU time`, `p95 wall time`: which clock the p95 column is on."""
    return result.latency_name


def _latency_cell(row: VariantRow) -> str:
    """`0.27 ms (0.25–0.31)`: the p95 and its interval, open sides as `…`."""
    span = row.latency_interval
    if span is None:
        return "n/a"
    low = "…" if span.low is None else _ms(span.low).removesuffix(" ms")
    high = "…" if span.high is None else _ms(span.high).removesuffix(" ms")
    return f"{_ms(row.values.get('latency_p95'))} ({low}–{high})"


def _versus(row: VariantRow, metric: str) -> str:
    pair = row.pairs.get(metric)
    if pair is None:
        return "reference" if not row.pairs else ""
    mark = "" if pair.winner == "no significant difference" else " *"
    return f"{delta(metric, pair.row.delta)}{mark}"


def short_label(metric: str) -> str:
    """The metric's label, long ones by their initials: `score discrimination@10` is
    `SD@10` (the tables carry a legend)."""
    label = parse_metric(metric).label
    if len(label) <= 12:
        return label
    words, _, cutoff = label.partition("@")
    initials = "".join(w[0].upper() for w in words.split())
    return f"{initials}@{cutoff}" if cutoff else initials


def _legend(metrics: Sequence[str]) -> str:
    shortened = [m for m in metrics if short_label(m) != parse_metric(m).label]
    return "; ".join(f"{short_label(m)}: {parse_metric(m).label}" for m in shortened)


def _row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def to_markdown(result: Experiment, words: str, picture: Path | None) -> str:
    """The report: recommendation, the decision table, the other metrics, pairs, lifts,
    slices, picture. Tables are kept narrow enough for GitHub's 880-pixel column."""
    q, ref = result.quality, result.reference
    label = parse_metric(q).label
    groups = tie_groups(result.rows)
    lines = [
        f"## Experiment: {len(result.rows)} variants, reference `{ref}`",
        "",
        f"Every value is over {result.scope} ({result.queries} queries scored on {label}); "
        "`--tier` measures one tier, as a gate scoped to it does.",
        "",
        words,
        "",
        f"| variant | {label} ({result.scope}) | Δ | {_clock_name(result)} (95% CI) | front |",
        "|---|---:|---:|---:|:---:|",
    ]
    for row in result.rows:
        cells = [
            f"`{row.name}`",
            value(q, row.values.get(q)),
            _versus(row, q),
            _latency_cell(row),
            _front_cell(row, groups),
        ]
        lines.append(_row_line(cells))
    lines += [
        "",
        f"Δ: against `{ref}`; \\* significant at {result.alpha:g} after Holm across the "
        f"variants. Front: no other variant is better beyond the noise on {label} (paired "
        f"test) or {result.latency_name} (paired ratio's interval clear of 1) and not worse "
        "on the other; tied: within noise of another front variant on both. Latency: "
        f"{result.clock_reason or 'wall time'}.",
        "",
    ]
    if picture is not None:
        lines += [f"![{label} against {result.latency_name}]({picture.name})", ""]
    else:
        lines += [
            "_No picture: matplotlib is not installed "
            "(`pip install 'llm-eval-ci[plots]'` draws experiment-pareto.png)._",
            "",
        ]
    lines += _latency_markdown(result)
    lines += _other_metrics_markdown(result)
    lines += _pairs_markdown(result)
    if result.lifts:
        lines += _lifts_markdown(result)
    lines += _slices_markdown(result)
    return "\n".join(lines).rstrip("\n") + "\n"


def _ratio_md(ratio: Ratio | None) -> str:
    """The point ratio, then the interval in words: `1.61× (1.42–1.87× slower)`,
    `0.99× (0.93–1.05×, as fast)`."""
    if ratio is None:
        return ""
    words = ratio_cell(ratio)
    if ratio.tied:
        words = f"{times(ratio.low, ratio.high)}–{times(ratio.high, ratio.low)}×, {words}"
    return f"{times(ratio.ratio)}× ({words})"


def _latency_markdown(result: Experiment) -> list[str]:
    ref = result.reference
    clock = label_of(result.clock)
    lines = [
        f"### Latency against `{ref}` ({clock} time)",
        "",
        f"Latency: {result.clock_reason or 'wall time'}. Each query's own time; the "
        "variants answered every query in turn, so the load of the moment fell on all "
        f"alike. The ratio to `{ref}`'s is paired over the queries, with its "
        f"{1 - result.alpha:.0%} bootstrap interval: *as fast* when it covers 1.",
        "",
        f"| variant | p50 {clock} | p50 ÷ `{ref}` | p95 {clock} | p95 ÷ `{ref}` |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in result.rows:
        reference = row.name == ref
        lines.append(
            _row_line(
                [
                    f"`{row.name}`",
                    _ms(row.values.get("latency_p50")),
                    "reference" if reference else _ratio_md(row.latency_ratios.get("p50")),
                    _ms(row.values.get("latency_p95")),
                    "reference" if reference else _ratio_md(row.latency_ratios.get("p95")),
                ]
            )
        )
    return [*lines, ""]


def _other_metrics_markdown(result: Experiment) -> list[str]:
    metrics = [m for m in result.metrics if m not in (*SERVICE, result.quality)]
    lines = [
        f"### Every metric ({result.scope})",
        "",
        "| variant | "
        + " | ".join(short_label(m) for m in metrics)
        + f" | p50 {label_of(result.clock)} | errors |",
        "|---|" + "---:|" * (len(metrics) + 2),
    ]
    for row in result.rows:
        cells = [
            f"`{row.name}`",
            *(value(m, row.values.get(m)) for m in metrics),
            _ms(row.values.get("latency_p50")),
            value("error_rate", row.values.get("error_rate")),
        ]
        lines.append(_row_line(cells))
    legend = _legend(metrics)
    median = f"p50: median {label_of(result.clock)} time."
    return [*lines, "", *([f"{legend}; {median}", ""] if legend else [])]


def _pairs_markdown(result: Experiment) -> list[str]:
    lines = [
        f"### Paired differences to `{result.reference}` ({result.scope})",
        "",
        "The gate's paired tests, as `llm-eval compare` runs them (Tango's exact test for "
        "0/1 scores, the betting test for graded ones); p Holm-adjusted across the "
        "variants, \\* where that stays significant.",
        "",
        "| variant | metric | n | Δ | 95% CI | p | p Holm |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result.rows:
        for metric, pair in row.pairs.items():
            r = pair.row
            low = delta(metric, r.ci_low).removesuffix(" pp")
            lines.append(
                f"| `{row.name}` | {short_label(metric)} | {r.n} | {_versus(row, metric)} "
                f"| {low} to {delta(metric, r.ci_high)} | {_p_md(r.p_value, r.method)} "
                f"| {_p_md(pair.p_holm, r.method)} |"
            )
    legend = _legend(result.pairable)
    return [*lines, "", *([legend, ""] if legend else [])]


def _lifts_markdown(result: Experiment) -> list[str]:
    lines = [
        "### Lift",
        "",
        "| lift | metric | base | variant | lift | CI | p | p95 latency |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lift in result.lifts:
        if lift.row is None:
            lines.append(f"| {escape_markdown(lift.name)} | | | | too few queries | | | |")
            continue
        r, m = lift.row, lift.row.metric
        ratio = "n/a" if lift.latency is None else _ratio_md(lift.latency)
        lines.append(
            f"| {escape_markdown(lift.name)} | {short_label(m)} | {value(m, r.mean_a)} "
            f"| {value(m, r.mean_b)} | {delta(m, r.delta)} "
            f"| {delta(m, r.ci_low).removesuffix(' pp')} to {delta(m, r.ci_high)} "
            f"| {_p_md(r.p_value, r.method)} | {ratio} |"
        )
    return [*lines, ""]


def _slices_markdown(result: Experiment, shown: int = 8) -> list[str]:
    q = result.quality
    lines = [
        f"### Tiers and tags against `{result.reference}`, worst first ({parse_metric(q).label})",
        "",
    ]
    for row in result.rows:
        slices = [r for r in row.slices if r.metric == q]
        if not slices:
            continue
        lines += [
            f"`{row.name}`:",
            "",
            "| slice | n | reference | variant | Δ | p (Holm: tags) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in slices[:shown]:
            lines.append(
                f"| {escape_markdown(r.slice)} | {r.n} | {value(q, r.mean_a)} "
                f"| {value(q, r.mean_b)} | {delta(q, r.delta)} | {_p_md(r.p_value, r.method)} |"
            )
        if len(slices) > shown:
            lines.append(f"| … {len(slices) - shown} more in experiment.json | | | | | |")
        lines.append("")
    return lines


def to_csv(result: Experiment) -> str:
    """One line per variant: every metric, latency, errors, and per pairable metric the
    paired difference to the reference (delta, CI, p, Holm p)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    paired = [
        f"{m}_{part}"
        for m in result.pairable
        for part in ("delta", "ci_low", "ci_high", "p", "p_holm")
    ]
    writer.writerow(
        [
            "variant",
            "top_k",
            *result.metrics,
            "latency_p95_low",
            "latency_p95_high",
            *(f"latency_{p}_ratio{part}" for p in ("p50", "p95") for part in ("", "_low", "_high")),
            "latency_clock",
            *(f"{c}_latency_{p}" for c in ("wall", "cpu") for p in ("p50", "p95")),
            *paired,
            "pareto_front",
            "tied_with",
        ]
    )
    for row in result.rows:
        cells: list[Any] = [row.name, row.top_k]
        cells += ["" if row.values.get(m) is None else row.values[m] for m in result.metrics]
        span = row.latency_interval
        cells += ["", ""] if span is None else [_blank(span.low), _blank(span.high)]
        for label in ("p50", "p95"):
            ratio = row.latency_ratios.get(label)
            cells += ["", "", ""] if ratio is None else [ratio.ratio, ratio.low, ratio.high]
        cells.append(result.clock)
        cells += [row.clocks.get(c, {}).get(p, "") for c in ("wall", "cpu") for p in ("p50", "p95")]
        for metric in result.pairable:
            pair = row.pairs.get(metric)
            cells += (
                ["", "", "", "", ""]
                if pair is None
                else [
                    pair.row.delta,
                    pair.row.ci_low,
                    pair.row.ci_high,
                    pair.row.p_value,
                    pair.p_holm,
                ]
            )
        cells.append("" if row.on_front is None else str(row.on_front).lower())
        cells.append(";".join(row.ties))
        writer.writerow(cells)
    return out.getvalue()


def _blank(number: float | None) -> float | str:
    return "" if number is None else number


def to_json(result: Experiment, words: str, timings: Mapping[str, float]) -> str:
    """Everything, raw numbers."""

    def row_json(r: Any) -> dict[str, Any]:
        return {
            "slice": r.slice,
            "metric": r.metric,
            "n": r.n,
            "reference": r.mean_a,
            "variant": r.mean_b,
            "delta": r.delta,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "p_value": r.p_value,
        }

    document = {
        "reference": result.reference,
        "quality": result.quality,
        "scope": result.scope,
        "queries": result.queries,
        "alpha": result.alpha,
        "latency_clock": result.clock,
        "latency_clock_reason": result.clock_reason,
        "recommendation": words,
        "variants": [
            {
                "name": row.name,
                "top_k": row.top_k,
                "values": dict(row.values),
                "latency_p95_interval": None
                if row.latency_interval is None
                else {"low": row.latency_interval.low, "high": row.latency_interval.high},
                "latency_versus_reference": {
                    label: _ratio_json(ratio) for label, ratio in row.latency_ratios.items()
                },
                "latency_by_clock": {c: dict(v) for c, v in row.clocks.items()},
                "pareto_front": row.on_front,
                "tied_with": list(row.ties),
                "seconds": round(timings.get(row.name, 0.0), 3),
                "versus_reference": {
                    m: {**row_json(p.row), "p_holm": p.p_holm, "better": p.winner}
                    for m, p in row.pairs.items()
                },
                "slices": [row_json(r) for r in row.slices],
            }
            for row in result.rows
        ],
        "lifts": [
            {
                "name": lift.name,
                "base": lift.base,
                "variant": lift.variant,
                "latency_ratio": lift.latency_ratio,
                "latency_p95_versus_base": None
                if lift.latency is None
                else _ratio_json(lift.latency),
                **(row_json(lift.row) if lift.row is not None else {}),
            }
            for lift in result.lifts
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _ratio_json(ratio: Ratio) -> dict[str, Any]:
    return {
        "ratio": ratio.ratio,
        "low": ratio.low,
        "high": ratio.high,
        "queries": ratio.n,
        "tied": ratio.tied,
    }


def terminal_text(
    result: Experiment,
    words: str,
    folder: Path,
    picture: Path | None,
    seconds: float,
    width: int,
) -> str:
    """A narrow table and the recommendation, wrapped to the terminal."""
    q = result.quality
    clock = label_of(result.clock)
    header = [
        "variant",
        parse_metric(q).label,
        "Δ",
        "p (Holm)",
        f"{clock} ms",
        "p95 vs ref",
        "front",
    ]
    groups = tie_groups(result.rows)
    rows = []
    for row in result.rows:
        pair = row.pairs.get(q)
        rows.append(
            [
                row.name,
                value(q, row.values.get(q)),
                "reference" if pair is None else _versus(row, q),
                "" if pair is None else _p(pair.p_holm, pair.row.method),
                _ms(row.values.get("latency_p95")).removesuffix(" ms"),
                "" if pair is None else ratio_cell(row.latency_ratios.get("p95")),
                _front_cell(row, groups).replace("yes, tied", "yes ≈"),
            ]
        )
    written = [folder / "experiment.md", folder / "experiment.csv", folder / "experiment.json"]
    if picture is not None:
        written += [picture, picture.with_suffix(".svg")]
    lines = [
        *wrap(
            f"llm-eval experiment: {len(result.rows)} variants over {result.scope} in "
            f"{seconds:.1f} s, reference {result.reference}",
            width,
            "",
        ),
        "",
        render_blocks(header, rows, width),
        "",
        *wrap(words, width, ""),
        "",
        "* significant after Holm across the variants.",
        *wrap(f"{clock} ms: the p95 latency in {result.clock_reason or 'wall time'}.", width, ""),
        *wrap(
            f"p95 vs ref: the {1 - result.alpha:.0%} interval of the p95 ratio, paired over "
            "the queries; as fast when it covers 1. ≈: on the front, tied within noise with "
            "another front variant.",
            width,
            "",
        ),
        "Wrote:",
        *(f"  {p}" for p in written),
    ]
    if picture is None:
        lines.append("No picture: pip install 'llm-eval-ci[plots]' to draw the Pareto front.")
    return "\n".join(lines)
