"""`llm-eval baseline refresh` and `llm-eval baseline show`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from llm_eval import __version__
from llm_eval.baseline import Baseline, load_baseline, save_baseline
from llm_eval.errors import InputError
from llm_eval.fingerprint import fingerprints, query_fingerprints
from llm_eval.gate import decide
from llm_eval.gitinfo import head_commit
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table
from llm_eval.pipeline import Inputs, load_inputs, measure
from llm_eval.retrieval import obtain_run
from llm_eval.scoring import Measurement
from llm_eval.slices import breakdown, members, value_over
from llm_eval.wording import delta, sentence, value


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    """The new baseline (written unless refused) and the text to print."""

    baseline: Baseline
    written: bool
    text: str


def refresh(
    *,
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None = None,
    run_path: Path | None = None,
    force: bool = False,
) -> RefreshOutcome:
    """Recompute the baseline; refuse to write one below an error gate's floor."""
    inputs = load_inputs(config_path, criteria_path)
    path = baseline_path or inputs.config.baseline
    old = load_baseline(path)
    measurement = measure(inputs, obtain_run(inputs, run_path))
    new = _baseline(inputs, measurement, run_path)
    blocking = _floors_failed(inputs, measurement)
    if blocking and not force:
        lines = [f"Not writing {path}: an error gate's floor fails on this state."]
        lines += [f"✗ {s}" for s in blocking]
        lines.append("Fix the regression, or pass --force to accept it as the new baseline.")
        return RefreshOutcome(new, False, "\n".join(lines))
    save_baseline(path, new)
    text = [f"Wrote {path} ({len(measurement.per_query)} scored queries).", ""]
    text.append(moved(old, new))
    return RefreshOutcome(new, True, "\n".join(text).rstrip())


def _baseline(inputs: Inputs, measurement: Measurement, run_path: Path | None) -> Baseline:
    metrics = inputs.metrics
    return Baseline(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        git_commit=head_commit(),
        tool_version=__version__,
        fingerprints=fingerprints(inputs, run_path),
        query_fingerprints=query_fingerprints(inputs.gold),
        relevance_level=inputs.config.relevance_level,
        gating_k=inputs.gating_k,
        metrics=metrics,
        per_query=measurement.per_query,
        first_relevant_rank=measurement.first_relevant_rank,
        aggregates=breakdown(inputs.gold.queries, measurement.table, metrics),
        service=measurement.service,
    )


def _floors_failed(inputs: Inputs, measurement: Measurement) -> list[str]:
    failed: list[str] = []
    for gate in inputs.criteria.gates:
        if gate.severity != "error":
            continue
        now = value_over(measurement.table, members(inputs.gold.queries, gate.scope), gate.metric)
        text = sentence(decide(gate, now.value, now.n, None))
        if text is not None:
            failed.append(text)
    return failed


def moved(old: Baseline | None, new: Baseline) -> str:
    """What changed between two baselines: overall and per tier, one row each."""
    header = ["slice", "n", *(parse_metric(m).label for m in new.metrics)]
    rows = []
    for slice_name, row in new.aggregates.items():
        if slice_name.startswith("tag:"):
            continue
        before = old.aggregates.get(slice_name, {}) if old is not None else {}
        cells = [slice_name, str(row["n"])]
        for metric in new.metrics:
            now_value = float(row[metric])
            cell = value(metric, now_value)
            if metric in before:
                cell += f" ({delta(metric, now_value - float(before[metric]))})"
            cells.append(cell)
        rows.append(cells)
    title = "What moved (new value, change):" if old is not None else "New values:"
    return title + "\n" + render_table(header, rows)


def show(baseline_path: Path) -> str:
    """A readable summary of a baseline file."""
    baseline = load_baseline(baseline_path)
    if baseline is None:
        raise InputError(
            "no baseline here; create one with `llm-eval baseline refresh`", path=baseline_path
        )
    head = [
        f"Baseline {baseline_path}",
        f"  created {baseline.created_at} at commit {baseline.git_commit or 'unknown'} "
        f"by llm-eval {baseline.tool_version}",
        f"  {len(baseline.per_query)} scored queries, relevance level "
        f"{baseline.relevance_level}, hits counted at top {baseline.gating_k}",
        "  fingerprints: " + ", ".join(f"{k} {v or '-'}" for k, v in baseline.fingerprints.items()),
        "",
    ]
    rows = [
        [name, str(row["n"]), *(value(m, float(row[m])) for m in baseline.metrics)]
        for name, row in baseline.aggregates.items()
    ]
    table = render_table(["slice", "n", *(parse_metric(m).label for m in baseline.metrics)], rows)
    return "\n".join(head) + table
