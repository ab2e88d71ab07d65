"""`llm-eval baseline refresh` and `llm-eval baseline show`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_eval import __version__
from llm_eval.against_baseline import decide_gates
from llm_eval.authoring.plan import scope_power_before_run, scored_ids
from llm_eval.baseline import Baseline
from llm_eval.baseline_io import load_baseline, save_baseline
from llm_eval.builds import BuildNoise, build_noise
from llm_eval.criteria import Gate
from llm_eval.errors import InputError
from llm_eval.fingerprint import diff_gold, query_fingerprints
from llm_eval.fingerprint_io import fingerprints
from llm_eval.gate import TOLERANCE, allowed_change, decide
from llm_eval.gitinfo import head_commit
from llm_eval.gold import GoldQuery
from llm_eval.inputs import Inputs, JudgeOptions
from llm_eval.metrics import families, parse_metric
from llm_eval.output import render_blocks, wrap
from llm_eval.pipeline import check_labels, load_inputs, measure_builds
from llm_eval.power_io import PowerCache
from llm_eval.progress import Progress
from llm_eval.retrieval import Retrieval, RetrieveOptions, obtain_retrieval, planned_builds
from llm_eval.scoring import Measurement
from llm_eval.slices import breakdown, members, value_over
from llm_eval.wording.builds import noise_sentence
from llm_eval.wording.english import plural
from llm_eval.wording.gates import (
    delta,
    gold_change_counts,
    limit,
    sentence,
    subject,
    value,
)
from llm_eval.wording.gates import gold_set_sight as sight_of


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    """The recomputed baseline, what moved, whether it was written, and the text to print."""

    baseline: Baseline
    moved: tuple[str, ...]
    """What differs from the baseline on disk, in words; empty when nothing moved."""
    written: bool
    """False when nothing moved (the file is left as it is, byte for byte) or when refused."""
    text: str
    sight: str | None = None
    """What the gold set can see (`gold_set_sight`), said when the first baseline is
    written; None otherwise."""

    @property
    def refused(self) -> bool:
        """Something moved, but an error gate's floor fails and `force` was not given."""
        return bool(self.moved) and not self.written


def refresh(
    *,
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None = None,
    run_paths: Sequence[Path] = (),
    force: bool = False,
    judge: JudgeOptions | None = None,
    builds: int | None = None,
    progress: Progress | None = None,
) -> RefreshOutcome:
    """Recompute the baseline and write it when something the gate reads moved; refuse
    to write one below an error gate's floor. `judge` says how the judge is asked for
    the judged metrics (the gate should ask as many repeats). `builds` (`--builds`)
    overrides the config's; a retriever not known to answer the same at every build,
    with none set, is built twice to see whether a rebuild alone moves the gates. The
    power statements of the baseline's own state (a run that equals it) are put in the
    output folder's cache, where the gate finds them."""
    inputs = load_inputs(config_path, criteria_path)
    check_labels(inputs)
    path = baseline_path or inputs.config.baseline
    old, unreadable = _previous(path)
    check = None if builds else _noise_check(inputs, run_paths)
    options = RetrieveOptions(
        builds=builds or check,
        progress=None if progress is None else progress.update,
        on_build=None if progress is None else progress.name_build,
    )
    retrieval = obtain_retrieval(inputs, run_paths, options)
    measurement = measure_builds(inputs, retrieval.each_build, judge)
    noise = _noise(inputs, retrieval, measurement)
    if check is not None:
        # The second build was only to see the noise: the baseline keeps one build, as
        # the gate runs one until `builds` is set (then both sides hold several).
        measurement = replace(measurement, per_query=measurement.builds[0], builds=())
    new = _baseline(inputs, measurement, retrieval.run_file)
    heard = "" if noise is None else "\n\n" + "\n".join(wrap(noise_sentence(noise), 80))
    scored = plural(len(measurement.per_query), "scored query", "scored queries")
    if old is not None:
        found = changes(old, new, inputs.gold.queries, inputs.criteria.gates)
        head = f"Wrote {path} ({scored}); moved: {', '.join(found)}."
    else:
        found = ("the file could not be read",) if unreadable else ("there was no baseline",)
        replaced = f", in place of a file that could not be read:\n  {unreadable}"
        head = f"Wrote {path} ({scored})" + (replaced if unreadable else ".")
    if not found:
        _keep_powers(inputs, measurement, new)
        text = f"Nothing moved: {path} already holds these scores ({scored}); left as it is."
        return RefreshOutcome(new, found, False, "\n".join(wrap(text, 80)) + heard)
    blocking = _floors_failed(inputs, measurement)
    if blocking and not force:
        lines = [f"Not writing {path}: an error gate's floor fails on this state."]
        lines += [f"✗ {s}" for s in blocking]
        lines.append("Fix the regression, or pass --force to accept it as the new baseline.")
        return RefreshOutcome(new, found, False, "\n".join(lines) + heard)
    save_baseline(path, new)
    _keep_powers(inputs, measurement, new)
    head = "\n".join(line for part in head.split("\n") for line in wrap(part, 80))
    text = f"{head}\n\n{moved(old, new)}".rstrip()
    sight = gold_set_sight(inputs, new) if old is None and unreadable is None else None
    if sight is not None:  # the first baseline: what the gold set can see, on day one
        text += "\n\n" + "\n".join(wrap(sight + ".", 80, ""))
    return RefreshOutcome(new, found, True, text + heard, sight)


def _keep_powers(inputs: Inputs, measurement: Measurement, baseline: Baseline) -> None:
    """The gates decided on this measurement against `baseline`, only for their power
    statements' figures, which go to the output folder's cache (`power_io.py`); none
    for a baseline of several builds, whose figures are computed every time."""
    if measurement.builds:
        return
    queries, gates = inputs.gold.queries, inputs.criteria.gates
    powers = PowerCache.under(inputs.config.output)
    decide_gates(queries, gates, measurement.table, baseline, None, powers=powers)


def gold_set_sight(inputs: Inputs, baseline: Baseline) -> str | None:
    """What the gold set can see, by the power model over the baseline's scores: the
    first blocking gate's own scope (else the first gate's) that runs a paired test;
    None when no gate does."""
    gates = sorted(inputs.criteria.gates, key=lambda gate: gate.severity != "error")
    powers = PowerCache.under(inputs.config.output)
    for gate in gates:
        ids = scored_ids(inputs.gold.queries, gate.scope, gate.metric)
        power = scope_power_before_run(gate, ids, baseline.per_query, known=powers)
        if power is not None:
            return sight_of(gate, power)
    return None


def _previous(path: Path) -> tuple[Baseline | None, str | None]:
    """The baseline on disk (None when there is none), or why it cannot be read: an
    unreadable file (another schema version, a broken merge) is what a refresh repairs."""
    try:
        return load_baseline(path), None
    except InputError as exc:
        if Path(path).is_dir():
            raise
        return None, str(exc)


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
        judge_repeats=None if measurement.judge is None else measurement.judge.repeats,
        builds=measurement.builds,
    )


def _noise_check(inputs: Inputs, run_paths: Sequence[Path]) -> int | None:
    """2 when the retriever should be built twice to see whether a rebuild alone moves
    the gates: no `builds` set and a kind not known to answer the same at every build;
    else None (as configured)."""
    retriever = inputs.config.retriever
    if run_paths or retriever is None or retriever.builds is not None:
        return None
    _, count = planned_builds(inputs.config, 2)
    asked, _ = planned_builds(inputs.config, None)
    return 2 if count == 2 and asked == 1 else None


def _noise(inputs: Inputs, retrieval: Retrieval, measurement: Measurement) -> BuildNoise | None:
    """What the builds' differences were, when there were several."""
    if len(retrieval.builds) < 2:
        return None
    rankings = [run.ranked() for run in retrieval.builds]
    gates, k = inputs.criteria.gates, inputs.gating_k
    return build_noise(inputs.gold.queries, gates, measurement.builds, rankings, k)


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


TIMED = frozenset(f.name for f in families() if f.unit == "ms")
"""Latency metrics: measured in time, so they differ on every run of the same retriever."""

_SETTINGS = {
    "metrics": "the metrics",
    "relevance_level": "the relevance level",
    "gating_k": "the hit cutoff",
}
"""The settings a baseline records, in the words that say they moved."""


def changes(
    old: Baseline, new: Baseline, queries: Sequence[GoldQuery], gates: Sequence[Gate]
) -> tuple[str, ...]:
    """What moved from `old` to `new`, in words; empty when nothing the gate reads moved.

    Everything but the provenance (when, at which commit, by which version) and the
    latencies is compared exactly: fingerprints, settings, each query's scores, first
    relevant rank and failure, and (on the same gold set) the slice values. A latency
    moves only when a gate with a regression limit reads it and it changed by more than
    that limit allows.
    """
    found = []
    names = dict.fromkeys([*old.fingerprints, *new.fingerprints])
    differ = [n for n in names if old.fingerprints.get(n) != new.fingerprints.get(n)]
    if differ:
        found.append(f"fingerprints ({', '.join(differ)})")
    found += [words for key, words in _SETTINGS.items() if getattr(old, key) != getattr(new, key)]
    count = _queries_moved(old, new)
    if count:
        found.append(f"the scores of {plural(count, 'query', 'queries')}")
    elif "gold" not in differ and not _same(_untimed(old.aggregates), _untimed(new.aggregates)):
        found.append("the slice values")  # over another gold set they differ as it does
    return tuple(found + _latencies_moved(old, new, queries, gates))


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (NaN, which a slice without scores has, equals NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _untimed(aggregates: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The slice values without the latencies."""
    return {s: {m: v for m, v in row.items() if m not in TIMED} for s, row in aggregates.items()}


def _queries_moved(old: Baseline, new: Baseline) -> int:
    """The queries whose scores, first relevant rank or failure differ, among those in
    both gold sets (a query added or removed moves the gold fingerprint, not its scores).
    A measurement kept beside the gated metrics (judged@k) that the old baseline never
    had does not by itself move it: the file takes it at the next refresh that writes."""
    had = {m for scores in old.per_query.values() for m in scores}
    extra = {m for scores in new.per_query.values() for m in scores} - had - set(new.metrics)

    def row(baseline: Baseline, query_id: str) -> Any:
        scores = baseline.per_query.get(query_id)
        record = baseline.service.get(query_id)
        return (
            {m: v for m, v in scores.items() if m not in extra} if scores is not None else None,
            baseline.first_relevant_rank.get(query_id),
            record is not None and record.error,
        )

    ids = {*old.per_query, *new.per_query, *old.first_relevant_rank, *new.first_relevant_rank}
    ids |= {*old.service, *new.service}
    gold = diff_gold(old.query_fingerprints, new.query_fingerprints)
    ids -= {*gold.added, *gold.removed}
    return sum(1 for q in ids if not _same(row(old, q), row(new, q)))


def _latencies_moved(
    old: Baseline, new: Baseline, queries: Sequence[GoldQuery], gates: Sequence[Gate]
) -> list[str]:
    found = []
    for gate in gates:
        if gate.metric not in TIMED or gate.regression_max is None:
            continue
        ids = members(queries, gate.scope)
        before = value_over(old.table, ids, gate.metric).value
        after = value_over(new.table, ids, gate.metric).value
        if _beyond(gate, before, after):
            allowed = limit(gate.metric, gate.regression_max, gate.regression_relative)
            found.append(
                f"{subject(gate.metric, gate.scope.label())} from {value(gate.metric, before)} "
                f"to {value(gate.metric, after)}, more than the {allowed} its gate allows"
            )
    return found


def _beyond(gate: Gate, before: float, after: float) -> bool:
    """Whether a latency moved, either way, by more than the gate allows a rise."""
    if math.isnan(before) or math.isnan(after):
        return math.isnan(before) != math.isnan(after)
    return abs(after - before) > allowed_change(gate, before) + TOLERANCE


def moved(old: Baseline | None, new: Baseline) -> str:
    """What changed between two baselines: one row per metric with a value, one column
    per slice (overall and each tier), cut into blocks of columns to stay within 80
    columns. Changes are shown only against a baseline of the same gold set: over other
    queries they mean nothing, and the text says the gold set changed instead."""
    gold_changed = _gold_changed(old, new)
    comparable = None if gold_changed else old
    slices = [name for name in new.aggregates if not name.startswith("tag:")]
    header = ["metric", *(f"{name} ({new.aggregates[name]['n']})" for name in slices)]
    rows = [
        [parse_metric(metric).label, *(_cell(metric, name, new, comparable) for name in slices)]
        for metric in new.metrics
        if any(not math.isnan(float(new.aggregates[name][metric])) for name in slices)
    ]  # a metric no query scores (rejection accuracy without rejection queries) has no row
    title = "What moved (new value, change):" if comparable is not None else "New values:"
    lead = "\n".join([*wrap(gold_changed, 80), "", ""]) if gold_changed else ""
    return lead + title + "\n" + render_blocks(header, rows)


def _gold_changed(old: Baseline | None, new: Baseline) -> str | None:
    """A sentence when `old` was made from another gold set (other query fingerprints,
    of which the gold fingerprint is the digest); None when it was not, or is none."""
    if old is None:
        return None
    diff = diff_gold(old.query_fingerprints, new.query_fingerprints)
    if diff.empty:
        return None
    counts = gold_change_counts(len(diff.added), len(diff.removed), len(diff.changed))
    return (
        f"The gold set changed since the old baseline ({counts}): its values are not over "
        "the same queries, so no change is shown."
    )


def _cell(metric: str, name: str, new: Baseline, old: Baseline | None) -> str:
    """`95.8% (+1.2 pp)`: a slice's new value, and its change when both are known."""
    now = float(new.aggregates[name][metric])
    before = float((old.aggregates.get(name, {}) if old is not None else {}).get(metric, math.nan))
    change = now - before
    return value(metric, now) + ("" if math.isnan(change) else f" ({delta(metric, change)})")


def show(baseline_path: Path) -> str:
    """A readable summary of a baseline file."""
    baseline = load_baseline(baseline_path)
    if baseline is None:
        raise InputError(
            "no baseline here; create one with `llm-eval baseline refresh`", path=baseline_path
        )
    fingerprints = ", ".join(f"{k} {v or '-'}" for k, v in baseline.fingerprints.items())
    head = [
        f"Baseline {baseline_path}",
        *wrap(
            f"  created {baseline.created_at} at commit {(baseline.git_commit or 'unknown')[:12]} "
            f"by llm-eval {baseline.tool_version}",
            80,
            "    ",
        ),
        *wrap(
            f"  {len(baseline.per_query)} scored queries, relevance level "
            f"{baseline.relevance_level}, hits counted at top {baseline.gating_k}",
            80,
            "    ",
        ),
        *wrap(f"  fingerprints: {fingerprints}", 80, "    "),
        "",
    ]
    rows = [
        [name, str(row["n"]), *(value(m, float(row[m])) for m in baseline.metrics)]
        for name, row in baseline.aggregates.items()
    ]
    header = ["slice", "n", *(parse_metric(m).label for m in baseline.metrics)]
    return "\n".join(head) + render_blocks(header, rows, keep=2)
