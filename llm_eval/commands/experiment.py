"""`llm-eval experiment CONFIG...`: run retriever variants over one gold set, compare
them (`llm_eval.experiment`) and write experiment.md, experiment.csv, experiment.json
and the Pareto picture.

Variants come from the `variants:` list of one config (each overriding the base
retriever's settings, or naming its own kind), or from several configs, one variant
each (named by file stem), which must share the gold set.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_eval.config import EvalConfig, Variant, load_config
from llm_eval.errors import ExternalError, InputError
from llm_eval.experiment import Experiment, Measured, VariantRow, compare_variants, recommendation
from llm_eval.gold_io import load_gold
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table, wrap
from llm_eval.pipeline import scoring_for
from llm_eval.retrieval import RetrieveOptions, retrieve_gold
from llm_eval.scoring import score_run
from llm_eval.textio import write_atomic
from llm_eval.wording import delta, value

PICTURE = "experiment-pareto"


@dataclass(frozen=True, slots=True)
class Plan:
    """What an experiment runs: the base config and its variants."""

    base: EvalConfig
    variants: tuple[Variant, ...]


def plan(config_paths: Sequence[Path]) -> Plan:
    """The variants of one config's `variants:`, or one variant per config."""
    configs = [load_config(p) for p in config_paths]
    base = configs[0]
    if len(configs) == 1:
        if not base.variants:
            raise InputError(
                "an experiment compares two or more variants: list `variants:` in the config, "
                "or give two or more configs",
                path=base.path,
            )
        return Plan(base, base.variants)
    variants = []
    names: set[str] = set()
    for config in configs:
        if config.gold != base.gold:
            raise InputError(
                f"its gold set differs from {base.path}'s; variants are compared on one gold set",
                path=config.path,
            )
        if config.retriever is None:
            raise InputError("no retriever is configured; add `retriever:`", path=config.path)
        name = Path(config.path).stem
        name = name if name not in names else config.path
        names.add(name)
        variants.append(Variant(name, config.retriever, config.top_k))
    return Plan(base, tuple(variants))


def run_experiment(
    config_paths: Sequence[Path],
    *,
    out_dir: Path | None = None,
    reference: str | None = None,
    quality: str | None = None,
    use_cache: bool | None = None,
    alpha: float = 0.05,
    progress: Callable[[int, int], None] | None = None,
    width: int = 80,
) -> str:
    """Retrieve and score every variant, compare, write the files; the terminal text."""
    started = time.perf_counter()
    experiment_plan = plan(config_paths)
    base = experiment_plan.base
    names = [v.name for v in experiment_plan.variants]
    reference = reference or base.experiment.reference or names[0]
    if reference not in names:
        raise InputError(f"no variant is named {reference!r} (variants: {', '.join(names)})")
    metrics = [m for m in base.metrics if parse_metric(m).kind != "judged"]
    quality = quality or base.experiment.quality or _first_relevance(metrics)
    quality = parse_metric(quality).name
    if quality not in metrics:
        metrics.append(quality)
    for variant in experiment_plan.variants:
        for name in metrics:
            k = parse_metric(name).k
            if k is not None and k > variant.top_k:
                raise InputError(
                    f"variant {variant.name!r} retrieves top_k {variant.top_k}, fewer than "
                    f"{name} needs",
                    path=base.path,
                )
    gold = load_gold(base.gold)
    scoring = scoring_for(base)
    measured = []
    timings = {}
    for variant in experiment_plan.variants:
        config = replace(base, retriever=variant.retriever, top_k=variant.top_k)
        began = time.perf_counter()
        try:
            retrieval = retrieve_gold(config, gold.queries, RetrieveOptions(use_cache, 1, progress))
        except InputError as exc:
            if exc.path is not None:  # it names the file and line already
                raise
            raise InputError(f"variant {variant.name!r}: {exc}", path=base.path) from None
        except ExternalError as exc:
            raise ExternalError(f"variant {variant.name!r}: {exc}") from None
        timings[variant.name] = time.perf_counter() - began
        m = score_run(gold, retrieval.run, metrics, base.relevance_level, scoring)
        measured.append(Measured(variant.name, m, variant.top_k))
    lifts = [(x.name, x.metric, x.base, x.variant) for x in base.experiment.lifts]
    result = compare_variants(gold, measured, metrics, reference, quality, lifts, alpha=alpha)
    folder = out_dir or base.output / "experiment"
    words = recommendation(result)
    picture = draw_pareto(result, folder)
    write_atomic(folder / "experiment.md", to_markdown(result, words, picture))
    write_atomic(folder / "experiment.csv", to_csv(result))
    write_atomic(folder / "experiment.json", to_json(result, words, timings))
    elapsed = time.perf_counter() - started
    return terminal_text(result, words, folder, picture, elapsed, width)


def _first_relevance(metrics: Sequence[str]) -> str:
    for name in metrics:
        if parse_metric(name).kind == "relevance":
            return name
    return "recall@5"


# --- the picture ----------------------------------------------------------------------


def draw_pareto(result: Experiment, folder: Path) -> Path | None:
    """experiment-pareto.png and .svg, when matplotlib is installed; None without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    q = result.quality
    points: list[tuple[str, float, float, bool]] = []
    for r in result.rows:
        latency, quality = r.values.get("latency_p95"), r.values.get(q)
        if latency is not None and quality is not None:
            points.append((r.name, latency, quality, bool(r.on_front)))
    if not points:
        return None
    scale = 100.0 if parse_metric(q).percent else 1.0
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for name, latency, quality, front in points:
        axes.scatter(
            latency,
            quality * scale,
            s=60 if front else 36,
            color="#1f6feb" if front else "#8b949e",
            zorder=3,
        )
        axes.annotate(
            name, (latency, quality * scale), textcoords="offset points", xytext=(6, 4), fontsize=8
        )
    line = sorted((lat, qual * scale) for _, lat, qual, front in points if front)
    if len(line) > 1:
        axes.plot(*zip(*line, strict=True), color="#1f6feb", linewidth=1.2, zorder=2)
    axes.set_xlabel("p95 latency per query (ms)")
    unit = " (%)" if scale == 100.0 else ""
    axes.set_ylabel(f"{parse_metric(q).label}{unit}")
    axes.set_title(f"{parse_metric(q).label} against p95 latency; blue: the Pareto front")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"{PICTURE}.png"
    for suffix in (".png", ".svg"):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=suffix[1:], metadata=_fixed_metadata(suffix))
        write_atomic(png.with_suffix(suffix), buffer.getvalue())
    plt.close(figure)
    return png


def _fixed_metadata(suffix: str) -> dict[str, Any]:
    """No creation date, so that the same experiment draws the same bytes."""
    return {"Date": None} if suffix == ".svg" else {"Software": None}


# --- the files ------------------------------------------------------------------------


def _ms(number: float | None) -> str:
    """Latency with two decimals below 10 ms, where variants differ in fractions."""
    if number is None:
        return "n/a"
    return f"{number:.2f} ms" if number < 10 else f"{number:.1f} ms"


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _front_cell(row: VariantRow) -> str:
    return {True: "yes", False: "", None: "n/a"}[row.on_front]


def _versus(row: VariantRow, metric: str) -> str:
    pair = row.pairs.get(metric)
    if pair is None:
        return "reference" if not row.pairs else ""
    mark = "" if pair.winner == "no significant difference" else " *"
    return f"{delta(metric, pair.row.delta)}{mark}"


def to_markdown(result: Experiment, words: str, picture: Path | None) -> str:
    """The report: recommendation, table, pairs, lifts, slices, picture."""
    q, ref = result.quality, result.reference
    metrics = [m for m in result.metrics if m not in ("latency_p50", "latency_p95", "error_rate")]
    header = [
        "variant",
        f"Δ {parse_metric(q).label}",
        "front",
        *(parse_metric(m).label for m in metrics),
        "latency p50 / p95",
        "errors",
    ]
    lines = [
        f"## Experiment: {len(result.rows)} variants, reference `{ref}`",
        "",
        words,
        "",
        "| " + " | ".join(header) + " |",
        "|---|---:|:---:|" + "---:|" * (len(header) - 3),
    ]
    for row in result.rows:
        cells = [
            f"`{row.name}`",
            _versus(row, q),
            _front_cell(row),
            *(value(m, row.values.get(m)) for m in metrics),
            f"{_ms(row.values.get('latency_p50')).removesuffix(' ms')} / "
            f"{_ms(row.values.get('latency_p95'))}",
            value("error_rate", row.values.get("error_rate")),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += [
        "",
        f"Δ: against `{ref}`; \\* significant at {result.alpha:g} after Holm across the "
        f"variants. Front: no other variant has both a better {parse_metric(q).label} and a "
        "lower p95 latency.",
        "",
    ]
    if picture is not None:
        lines += [f"![{parse_metric(q).label} against p95 latency]({picture.name})", ""]
    else:
        lines += [
            "_No picture: matplotlib is not installed "
            "(`pip install 'llm-eval[plots]'` draws experiment-pareto.png)._",
            "",
        ]
    lines += _pairs_markdown(result)
    if result.lifts:
        lines += _lifts_markdown(result)
    lines += _slices_markdown(result)
    return "\n".join(lines).rstrip("\n") + "\n"


def _pairs_markdown(result: Experiment) -> list[str]:
    lines = [
        f"### Paired differences to `{result.reference}`",
        "",
        "The gate's paired tests, as `llm-eval compare` runs them (Tango's score test for "
        "0/1 scores, bootstrap-t for graded ones); p Holm-adjusted across the variants.",
        "",
        "| variant | metric | n | Δ | 95% CI | p | p (Holm) | better |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in result.rows:
        for metric, pair in row.pairs.items():
            r = pair.row
            low = delta(metric, r.ci_low).removesuffix(" pp")
            better = {"reference": f"`{result.reference}`", "variant": f"`{row.name}`"}
            lines.append(
                f"| `{row.name}` | {parse_metric(metric).label} | {r.n} | {delta(metric, r.delta)} "
                f"| {low} to {delta(metric, r.ci_high)} | {_p(r.p_value)} "
                f"| {_p(pair.p_holm)} | {better.get(pair.winner, 'neither')} |"
            )
    return [*lines, ""]


def _lifts_markdown(result: Experiment) -> list[str]:
    lines = [
        "### Lift",
        "",
        "| lift | metric | base | variant | lift | CI | p | p95 latency |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lift in result.lifts:
        if lift.row is None:
            lines.append(f"| {lift.name} | | | | too few queries | | | |")
            continue
        r, m = lift.row, lift.row.metric
        ratio = "n/a" if lift.latency_ratio is None else f"{lift.latency_ratio:.1f}×"
        lines.append(
            f"| {lift.name} | {parse_metric(m).label} | {value(m, r.mean_a)} "
            f"| {value(m, r.mean_b)} | {delta(m, r.delta)} "
            f"| {delta(m, r.ci_low).removesuffix(' pp')} to {delta(m, r.ci_high)} "
            f"| {_p(r.p_value)} | {ratio} |"
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
                f"| {r.slice} | {r.n} | {value(q, r.mean_a)} | {value(q, r.mean_b)} "
                f"| {delta(q, r.delta)} | {_p(r.p_value)} |"
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
    writer.writerow(["variant", "top_k", *result.metrics, *paired, "pareto_front"])
    for row in result.rows:
        cells: list[Any] = [row.name, row.top_k]
        cells += ["" if row.values.get(m) is None else row.values[m] for m in result.metrics]
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
        writer.writerow(cells)
    return out.getvalue()


def to_json(result: Experiment, words: str, timings: dict[str, float]) -> str:
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
        "alpha": result.alpha,
        "recommendation": words,
        "variants": [
            {
                "name": row.name,
                "top_k": row.top_k,
                "values": dict(row.values),
                "pareto_front": row.on_front,
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
                **(row_json(lift.row) if lift.row is not None else {}),
            }
            for lift in result.lifts
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


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
    header = ["variant", parse_metric(q).label, "Δ", "p (Holm)", "p95", "front"]
    rows = []
    for row in result.rows:
        pair = row.pairs.get(q)
        rows.append(
            [
                row.name,
                value(q, row.values.get(q)),
                "reference" if pair is None else _versus(row, q),
                "" if pair is None else _p(pair.p_holm),
                _ms(row.values.get("latency_p95")),
                _front_cell(row),
            ]
        )
    written = [folder / "experiment.md", folder / "experiment.csv", folder / "experiment.json"]
    if picture is not None:
        written += [picture, picture.with_suffix(".svg")]
    lines = [
        f"llm-eval experiment: {len(result.rows)} variants in {seconds:.1f} s, "
        f"reference {result.reference}",
        "",
        render_table(header, rows),
        "",
        *wrap(words, width, ""),
        "",
        "* significant after Holm across the variants.",
        "Wrote:",
        *(f"  {p}" for p in written),
    ]
    if picture is None:
        lines.append("No picture: pip install 'llm-eval[plots]' to draw the Pareto front.")
    return "\n".join(lines)
