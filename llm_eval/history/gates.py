"""Each gate's series: its metric over the committed baselines and kept reports
(`read_gate_history`), and the newest baselines a gate report draws its trend
from."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llm_eval.baseline import Baseline
from llm_eval.criteria import Gate
from llm_eval.digest import digest
from llm_eval.errors import InputError
from llm_eval.fingerprint import gold_fingerprint, query_fingerprints
from llm_eval.history.series import (
    TREND_POINTS,
    BuildRange,
    GateFigures,
    History,
    build_range,
    merge,
    of_gold,
)
from llm_eval.history.series_io import (
    PointCache,
    baseline_log,
    baseline_points,
    is_shallow,
    report_points,
)
from llm_eval.inputs import Inputs
from llm_eval.pipeline import load_inputs
from llm_eval.slices import ScoreTable, members, value_over


@dataclass(frozen=True, slots=True)
class GateHistory:
    """The history and the gates whose series it holds."""

    history: History
    gates: tuple[Gate, ...]
    baseline_path: str
    history_file: str | None


def read_gate_history(
    *,
    config_path: Path,
    criteria_path: Path,
    baseline_path: Path | None = None,
    history_file: Path | None = None,
    last: int = 20,
) -> GateHistory:
    """The newest `last` points of the default branch, each gate's value at each."""
    inputs = load_inputs(config_path, criteria_path)
    path = baseline_path or inputs.config.baseline
    revisions = baseline_log(path, last)
    values = gate_values(inputs)
    baselines = baseline_points(revisions, values, values.cache(inputs))
    reports = []
    if history_file is not None:
        wanted = {g.name: (g.metric, g.scope.key()) for g in inputs.criteria.gates}
        reports = report_points(history_file, wanted)
    gold = gold_fingerprint(query_fingerprints(inputs.gold))
    entries = of_gold(merge(baselines, reports, last), gold)
    shallow = len(revisions) < last and is_shallow()
    return GateHistory(
        History(entries, shallow),
        inputs.criteria.gates,
        str(path),
        None if history_file is None else str(history_file),
    )


def recent_baselines(inputs: Inputs, path: Path, last: int = TREND_POINTS) -> History | None:
    """The newest `last` committed baselines, for a gate report's trend line; None
    outside a git checkout (no history to show)."""
    try:
        revisions = baseline_log(path, last)
    except InputError:
        return None
    values = gate_values(inputs)
    entries = baseline_points(revisions, values, values.cache(inputs))
    gold = gold_fingerprint(query_fingerprints(inputs.gold))
    return History(of_gold(entries, gold), len(revisions) < last and is_shallow())


def gate_values(inputs: Inputs) -> _GateValues:
    """Each gate's metric over its scope's queries, in a baseline."""
    scopes = {
        g.name: (g.metric, members(inputs.gold.queries, g.scope)) for g in inputs.criteria.gates
    }
    return _GateValues(scopes)


@dataclass(frozen=True, slots=True)
class _GateValues:
    scopes: Mapping[str, tuple[str, list[str]]]

    def cache(self, inputs: Inputs) -> PointCache:
        """Where the points of these gates are kept: under the output folder, by what
        the values depend on (each gate's name, metric and scope members)."""
        gates = sorted((name, metric, sorted(ids)) for name, (metric, ids) in self.scopes.items())
        return PointCache(inputs.config.output / "cache" / "history", digest(gates))

    def __call__(self, baseline: Baseline) -> GateFigures:
        values: dict[str, float | None] = {}
        builds: dict[str, BuildRange] = {}
        for name, (metric, ids) in self.scopes.items():
            if metric not in baseline.metrics:
                values[name] = None
                continue
            values[name] = _value(baseline.table, ids, metric)
            # Each build's per-query scores alone; service metrics have no builds.
            each = [_value(ScoreTable(build), ids, metric) for build in baseline.builds]
            spread = build_range([v for v in each if v is not None])
            if spread is not None:
                builds[name] = spread
        return GateFigures(values, builds)


def _value(table: ScoreTable, ids: list[str], metric: str) -> float | None:
    """The metric over the queries `ids` in `table`; None when none of them has it."""
    mean = value_over(table, ids, metric)
    return mean.value if mean.n and math.isfinite(mean.value) else None
