"""`llm-eval gold validate` and `llm-eval gold stats`."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from llm_eval.authoring.plan import gated_scopes, scope_power_before_run, scored_ids
from llm_eval.baseline import Baseline
from llm_eval.baseline_io import load_baseline
from llm_eval.config import EvalConfig
from llm_eval.criteria import Gate, Scope
from llm_eval.gate import Power
from llm_eval.inputs import Inputs
from llm_eval.output import render_table, wrap
from llm_eval.pipeline import check_labels, load_inputs
from llm_eval.power import MOST_QUERIES
from llm_eval.power_io import PowerCache
from llm_eval.rejection import ThresholdSuggestion, suggest_threshold, top_scores
from llm_eval.retrieval import obtain_run
from llm_eval.wording.english import plural
from llm_eval.wording.gates import drop_size, power_statement


@dataclass(frozen=True, slots=True)
class Detectability:
    """What one gate's metric can detect on one scope it checks."""

    scope: Scope
    gate: Gate
    power: Power | None
    """`power.baseline_power` over the baseline's scores (None: no paired test against
    an absolute limit)."""

    @property
    def slice(self) -> str:
        """The scope's label: `tier A`, `tag howto`."""
        return self.scope.label()

    @property
    def short(self) -> bool:
        """Whether the scope cannot catch a drop of twice the limit 4 times in 5."""
        power = self.power
        return power is not None and (
            power.queries_needed is None or power.queries_needed > power.n
        )


def detectability(inputs: Inputs, baseline: Baseline) -> list[Detectability]:
    """For each scope a gate checks (its own, and each tag slice of a `per_tag` gate:
    `gold_plan.gated_scopes`), what its gate's test can catch there, from the baseline's
    per-query scores (`gold_plan.scope_power_before_run`, as `gold plan` and `gate`). A
    slice the gate never checks has no row: its power would answer a question nobody
    asks. The figures are read from, and kept in, the output folder's cache, as the
    gate's are (`power_io.py`)."""
    queries = inputs.gold.queries
    powers = PowerCache.under(inputs.config.output)
    rows = []
    for gate in inputs.criteria.gates:
        if gate.metric not in baseline.metrics:
            continue
        for scope in gated_scopes(gate, queries):
            ids = scored_ids(queries, scope, gate.metric)
            if any(gate.metric in baseline.per_query.get(q, {}) for q in ids):
                power = scope_power_before_run(
                    gate, ids, baseline.per_query, builds=baseline.builds, known=powers
                )
                rows.append(Detectability(scope, gate, power))
    return rows


def stats(
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None,
    run_path: Path | None = None,
) -> str:
    """Counts per tier and tag, the rejection threshold the run's top scores suggest, and
    what each gate can detect on the scopes it checks."""
    inputs = load_inputs(config_path, criteria_path)
    path = baseline_path or inputs.config.baseline
    baseline = load_baseline(path)
    text = [_counts(inputs), "", *_threshold_lines(inputs, run_path), ""]
    if baseline is None:  # the counts need no baseline; the detectable drops do
        text += wrap(
            f"No baseline at {path}: the smallest detectable drops are estimated from its "
            "per-query scores; run `llm-eval baseline refresh` to create one.",
            80,
            "",
        )
        return "\n".join(text)
    text += wrap(
        "The drop each gate catches 4 times in 5 on each scope it checks, and the queries "
        "that catch twice its limit, by its own test on the baseline's per-query scores "
        "(as `llm-eval gate` and `llm-eval gold plan` say them):",
        80,
        "",
    )
    found = detectability(inputs, baseline)
    for gate in dict.fromkeys(row.gate for row in found):
        text += ["", *_gate_section(gate, [row for row in found if row.gate is gate])]
    return "\n".join(text)


def _threshold_lines(inputs: Inputs, run_path: Path | None) -> list[str]:
    """The rejection_score_threshold that best separates the top scores of answerable
    and rejection questions in a run (`--run`, else the configured retriever's), with how
    many of each it classifies right; or why there is none."""
    config = inputs.config
    if not any(q.is_rejection for q in inputs.gold.queries):
        said = "No rejection question in the gold set: no rejection_score_threshold to suggest."
    elif run_path is None and config.retriever is None:
        said = (
            "No run to suggest a rejection_score_threshold from: pass --run, or configure "
            "a retriever."
        )
    else:
        run = obtain_run(inputs, run_path)
        kind = config.retriever.kind if config.retriever is not None else ""
        source = str(run_path) if run_path is not None else f"the {kind} retriever"
        said = _threshold_sentence(suggest_threshold(*top_scores(inputs.gold, run)), source, config)
    return wrap(said, 80, "")


def _threshold_sentence(found: ThresholdSuggestion, source: str, config: EvalConfig) -> str:
    if found.threshold is None:
        return (
            f"No rejection_score_threshold to suggest from the top scores of {source}: "
            f"{found.reason}."
        )
    said = (
        f"rejection_score_threshold: {found.threshold} separates the top scores of {source} "
        "best: of the questions with scored results, it keeps "
        f"{found.answerable_kept} of {found.answerable} answerable ones confident and rejects "
        f"{found.unanswerable_rejected} of "
        f"{plural(found.unanswerable, 'rejection question', 'rejection questions')}."
    )
    current = config.rejection_score_threshold
    if current is None:
        return said + f" {config.path} sets none."
    return said + f" {config.path} sets {current}."


def _gate_section(gate: Gate, rows: list[Detectability]) -> list[str]:
    """The gate's table, then its own scope's figures in the sentence every surface uses."""
    metric, limit = gate.metric, gate.regression_max
    shown = drop_size(metric, limit) if limit is not None else "none"
    header = ["slice", "n", "drop caught 4 in 5", "queries to catch 2x the limit"]
    table = [[row.slice, *_figures(metric, row)] for row in rows]
    lines = [f"{gate.name} (regression limit {shown})", render_table(header, table)]
    own = next((row for row in rows if row.scope == gate.scope), None)
    if own is not None and own.power is not None:
        lines += wrap(power_statement(gate, own.slice, own.power) + ".", 80, "  ")
    return lines


def _figures(metric: str, row: Detectability) -> list[str]:
    """n, the drop caught 4 times in 5, and the queries that catch twice the limit."""
    power = row.power
    if power is None:
        return ["", "n/a", ""]
    drop = math.inf if power.detectable_drop is None else power.detectable_drop
    needed = power.queries_needed
    if needed is None:
        wanted = f"over {MOST_QUERIES:,}"
    else:
        wanted = f"{needed:,}" + (f" ({needed - power.n:,} more)" if needed > power.n else "")
    return [str(power.n), drop_size(metric, drop), wanted]


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
    check_labels(inputs)
    warnings = []
    baseline = load_baseline(baseline_path or inputs.config.baseline)
    if baseline is not None:
        rows = [r for r in detectability(inputs, baseline) if r.short]
        warnings += [_power_warning(r) for r in rows if r.scope == r.gate.scope]
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
            r.power
            for r in rows
            if r.gate is gate
            and r.scope != gate.scope
            and r.power is not None
            and r.power.n >= gate.statistics.min_n
        ]
        if weak:
            needs = [p.queries_needed for p in weak]
            more = [n - p.n for n, p in zip(needs, weak, strict=True) if n is not None]
            span = f"each needs {min(more)} to {max(more)} more queries" if more else "none can"
            warnings.append(
                f"{gate.name} per tag: "
                f"{plural(len(weak), 'judged tag slice', 'judged tag slices')} "
                "cannot reliably catch a drop of twice the limit "
                f"({drop_size(gate.metric, 2 * (gate.regression_max or 0))}; "
                f"{span}; see `llm-eval gold stats`)"
            )
    return warnings


def _power_warning(row: Detectability) -> str:
    assert row.power is not None
    return f"{row.gate.name}: {power_statement(row.gate, row.slice, row.power)}"
