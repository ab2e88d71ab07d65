"""`llm-eval gold validate` and `llm-eval gold stats`."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from llm_eval.baseline import Baseline
from llm_eval.baseline_io import load_baseline
from llm_eval.corpus import iter_corpus
from llm_eval.criteria import Gate
from llm_eval.english import plural
from llm_eval.errors import InputError
from llm_eval.gold_plan import gated_scopes
from llm_eval.inputs import Inputs
from llm_eval.output import render_table, wrap
from llm_eval.pipeline import load_inputs
from llm_eval.slices import members
from llm_eval.stats import detectable_drop, queries_to_catch
from llm_eval.wording import drop_size, power_statement


@dataclass(frozen=True, slots=True)
class Detectability:
    """What one gate's metric can detect on one slice of the gold set."""

    slice: str
    gate: Gate
    n: int
    drop: float
    """The drop the gate catches 4 times in 5 on this slice (NaN: no regression_max)."""
    needed: int | None
    """Queries that would catch a drop of twice regression_max 4 times in 5."""


def detectability(inputs: Inputs, baseline: Baseline) -> list[Detectability]:
    """For each scope a gate checks (its own, and each tag slice of a `per_tag` gate:
    `gold_plan.gated_scopes`), the smallest drop its metric could detect there. A slice
    the gate never checks has no row: its power would answer a question nobody asks."""
    queries = inputs.gold.queries
    rows = []
    for gate in inputs.criteria.gates:
        if gate.metric not in baseline.metrics:
            continue
        for scope in gated_scopes(gate, queries):
            ids = [
                q for q in members(queries, scope) if gate.metric in baseline.per_query.get(q, {})
            ]
            if ids:
                scores = [baseline.per_query[q][gate.metric] for q in ids]
                rows.append(_detectability(scope.label(), gate, scores))
    return rows


def _detectability(name: str, gate: Gate, scores: list[float]) -> Detectability:
    """The gate's own power statement (`stats.detectable_drop`) before any change: no
    churn yet, so the spread is that of the drop alone."""
    alpha, limit = gate.statistics.alpha, gate.regression_max
    if not limit or gate.regression_relative:
        return Detectability(name, gate, len(scores), math.nan, None)
    drop = detectable_drop(len(scores), 0.0, limit, alpha)
    needed = None
    if drop > 2 * limit and 2 * limit < 1:
        needed = queries_to_catch(2 * limit, 0.0, limit, alpha)
    return Detectability(name, gate, len(scores), drop, needed)


def stats(config_path: Path, criteria_path: Path, baseline_path: Path | None) -> str:
    """Counts per tier and tag, and the smallest drop each gate can detect there."""
    inputs = load_inputs(config_path, criteria_path)
    path = baseline_path or inputs.config.baseline
    baseline = load_baseline(path)
    text = [_counts(inputs), ""]
    if baseline is None:  # the counts need no baseline; the detectable drops do
        text += wrap(
            f"No baseline at {path}: the smallest detectable drops are estimated from its "
            "per-query scores; run `llm-eval baseline refresh` to create one.",
            80,
            "",
        )
        return "\n".join(text)
    text += wrap(
        "The drop each gate catches 4 times in 5 on each scope it checks, by its own test "
        "(normal approximation, before any churn between runs widens it):",
        80,
        "",
    )
    header = ["slice", "n", "drop caught 4 in 5", "to catch 2x the limit"]
    found = detectability(inputs, baseline)
    for gate in dict.fromkeys(row.gate for row in found):
        metric, limit = gate.metric, gate.regression_max
        shown = drop_size(metric, limit) if limit is not None else "none"
        rows = [
            [
                row.slice,
                str(row.n),
                drop_size(metric, row.drop),
                "" if row.needed is None else f"{row.needed - row.n} more queries",
            ]
            for row in found
            if row.gate is gate
        ]
        text += ["", f"{gate.name} (regression limit {shown})", render_table(header, rows)]
    return "\n".join(text)


def _counts(inputs: Inputs) -> str:
    queries = inputs.gold.queries
    tiers = Counter(q.tier for q in queries)
    tags = Counter(t for q in queries for t in q.tags)
    rejection = sum(1 for q in queries if q.is_rejection)
    rows = [[f"tier {t}", str(n)] for t, n in tiers.items()]
    rows += [[f"tag {t}", str(n)] for t, n in sorted(tags.items())]
    head = (
        f"{plural(len(queries), 'query', 'queries')}, "
        f"{plural(rejection, 'rejection query', 'rejection queries')} (no relevant document)"
    )
    return head + "\n" + render_table(["slice", "queries"], rows)


def validate(config_path: Path, criteria_path: Path, baseline_path: Path | None) -> list[str]:
    """Lint the gold set against the config, criteria and corpus; return warnings.

    Errors (a bad line, an unknown tag in a gate, a label naming a document the
    corpus does not have) raise InputError.
    """
    inputs = load_inputs(config_path, criteria_path)
    if inputs.config.corpus is not None:
        _check_labels(inputs, inputs.config.corpus)
    warnings = []
    baseline = load_baseline(baseline_path or inputs.config.baseline)
    if baseline is not None:
        rows = [r for r in detectability(inputs, baseline) if r.needed]
        warnings += [_power_warning(r) for r in rows if r.slice == r.gate.scope.label()]
        warnings += _tag_power_warnings(inputs, rows)
    answerable = sum(1 for q in inputs.gold.queries if not q.is_rejection)
    if answerable == 0:
        warnings.append("no gold query has a relevant document")
    return warnings


def _tag_power_warnings(inputs: Inputs, rows: list[Detectability]) -> list[str]:
    """One line per per_tag gate: how many of its judged tag slices cannot see the limit."""
    warnings = []
    for gate in inputs.criteria.gates:
        if not gate.per_tag:
            continue
        weak = [
            r
            for r in rows
            if r.gate is gate and r.slice != gate.scope.label() and r.n >= gate.statistics.min_n
        ]
        if weak:
            more = [(r.needed or 0) - r.n for r in weak]
            warnings.append(
                f"{gate.name} per tag: "
                f"{plural(len(weak), 'judged tag slice', 'judged tag slices')} "
                "cannot reliably catch a drop of twice the limit "
                f"({drop_size(gate.metric, 2 * (gate.regression_max or 0))}; "
                f"each needs {min(more)} "
                f"to {max(more)} more queries; see `llm-eval gold stats`)"
            )
    return warnings


def _check_labels(inputs: Inputs, corpus: Path) -> None:
    known = {document.doc_id for document in iter_corpus(corpus)}
    for query in inputs.gold.queries:
        for doc, _ in query.relevant:
            if doc not in known:
                raise InputError(
                    f"document {doc!r} is not in the corpus {corpus}",
                    path=query.path,
                    line=query.line,
                    key=f"relevant.{doc}",
                )


def _power_warning(row: Detectability) -> str:
    gate = row.gate
    twice = drop_size(gate.metric, 2 * (gate.regression_max or 0.0))
    return (
        f"{gate.name}: {power_statement(gate, row.slice, row.n, row.drop)}; about "
        f"{(row.needed or 0) - row.n} more queries would catch a drop of {twice}"
    )
