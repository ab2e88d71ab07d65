"""`llm-eval dashboard`: the history as a static, self-contained page."""

from __future__ import annotations

import os
from pathlib import Path

from llm_eval.against_baseline import rank_changes
from llm_eval.criteria import Gate
from llm_eval.errors import InputError
from llm_eval.experiment_schema import read_experiment
from llm_eval.fingerprint import gold_fingerprint, query_fingerprints
from llm_eval.history.dashboard import Change, Dashboard, build_series
from llm_eval.history.dashboard_view import point_count, render_dashboard
from llm_eval.history.gates import gate_values
from llm_eval.history.series import Entry, Point, merge, of_gold
from llm_eval.history.series_io import (
    Revision,
    baseline_at,
    baseline_log,
    baseline_points,
    commit_url,
    is_shallow,
    newest_report_part,
    report_points,
    resolve_since,
)
from llm_eval.pipeline import load_inputs
from llm_eval.textio import write_atomic

DEFAULT_LAST = 1000
"""Points the dashboard reads at most (the newest)."""


def write_dashboard(
    *,
    config_path: Path,
    criteria_path: Path,
    out: Path | None = None,
    baseline_path: Path | None = None,
    history_file: Path | None = None,
    experiment: Path | None = None,
    show_experiment: bool = True,
    last: int = DEFAULT_LAST,
) -> str:
    """Write `index.html` into `out` (default: the config's output/dashboard); return
    what was written, in one line."""
    inputs = load_inputs(config_path, criteria_path)
    path = baseline_path or inputs.config.baseline
    revisions = baseline_log(path, last)
    values = gate_values(inputs)
    baselines = baseline_points(revisions, values, values.cache(inputs))
    reports: list[Entry] = []
    if history_file is not None:
        wanted = {g.name: (g.metric, g.scope.key()) for g in inputs.criteria.gates}
        reports = report_points(history_file, wanted)
    gold = gold_fingerprint(query_fingerprints(inputs.gold))
    entries = of_gold(merge(baselines, reports, last), gold)
    if experiment is None and show_experiment:  # the one `llm-eval experiment` wrote
        written = inputs.config.output / "experiment" / "experiment.json"
        experiment = written if written.is_file() else None
    board = Dashboard(
        entries,
        build_series(
            entries, inputs.criteria.gates, _drift_references(inputs.criteria.gates, path)
        ),
        _latest_change(entries, revisions),
        newest_report_part(history_file, "judge") if history_file is not None else None,
        read_experiment(experiment) if experiment is not None else None,
        len(revisions) < last and is_shallow(),
        commit_url(os.environ),
        {q.query_id: q.query for q in inputs.gold.queries},
    )
    folder = out or inputs.config.output / "dashboard"
    page = render_dashboard(board)
    write_atomic(folder / "index.html", page)
    gap_count = sum(1 for e in entries if not isinstance(e, Point))
    return (
        f"Wrote {folder / 'index.html'} ({len(page.encode()) / 1e6:.2f} MB): "
        f"{len(board.series)} charts, {point_count(board):,} points, {len(entries)} entries "
        f"({gap_count} skipped, drawn as gaps)."
    )


def _drift_references(gates: tuple[Gate, ...] | list[Gate], path: Path) -> dict[str, str]:
    """The commit each gate's drift limit is measured from, where `since` names a git
    ref (a number of refreshes back is counted on the page's own points); a ref git
    cannot see draws no drift limit."""
    found = {}
    for gate in gates:
        if gate.drift is None or isinstance(gate.drift.since, int):
            continue
        try:
            found[gate.name] = resolve_since(gate.drift.since, path).commit
        except InputError:
            continue
    return found


def _latest_change(entries: tuple[Entry, ...], revisions: tuple[Revision, ...]) -> Change | None:
    """Questions that crossed the gating cutoff between the two newest usable baselines."""
    usable = [e for e in entries if isinstance(e, Point) and e.source == "baseline"][-2:]
    if len(usable) < 2:
        return None
    paths = {r.commit: r.path for r in revisions}
    before, after = (baseline_at(p.commit, paths[p.commit]) for p in usable)
    lost, gained = rank_changes(
        before.first_relevant_rank, after.first_relevant_rank, after.gating_k
    )
    return Change(usable[0].commit, usable[1].commit, after.gating_k, tuple(lost), tuple(gained))
