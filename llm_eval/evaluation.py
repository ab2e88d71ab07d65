"""The public evaluation API: `evaluate(qrels, run, metrics)`, `evaluate_columns` for
runs given as columns, and their `Scores`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval import defaults
from llm_eval.columns import judge_columns, qrels_from_columns, run_from_columns
from llm_eval.judgments import (
    FloatArray,
    Judgments,
    Qrels,
    RankedRun,
    ScoredRun,
    judge_ranked,
    judge_scored,
)
from llm_eval.metrics import Metric, relevance_metric


@dataclass(frozen=True, slots=True, eq=False)
class Scores:
    """Per-query metric values over the evaluated queries (those with a relevant document)."""

    query_ids: tuple[str, ...]
    metrics: tuple[Metric, ...]
    values: FloatArray
    """Shape (len(metrics), len(query_ids))."""
    missing: tuple[str, ...]
    """Evaluated queries the run did not answer; they score 0 on every metric."""
    rejection: tuple[str, ...]
    """Qrels queries without a relevant document, left out of the means."""
    not_in_gold: int
    """Run queries absent from the qrels, ignored."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Canonical names, in the order asked for."""
        return tuple(m.name for m in self.metrics)

    def _row(self, metric: str) -> FloatArray:
        name = relevance_metric(metric).name
        try:
            return self.values[self.metric_names.index(name)]
        except ValueError:
            raise KeyError(f"{metric!r} was not computed; computed: {self.metric_names}") from None

    def mean(self, metric: str) -> float:
        """Mean over the evaluated queries (NaN when there are none)."""
        row = self._row(metric)
        return float(row.mean()) if row.size else float("nan")

    def means(self) -> dict[str, float]:
        """`{metric: mean}` for every computed metric."""
        return {name: self.mean(name) for name in self.metric_names}

    def per_query(self, metric: str) -> dict[str, float]:
        """`{query_id: value}` for one metric."""
        return dict(zip(self.query_ids, self._row(metric).tolist(), strict=True))

    def to_dict(self) -> dict[str, dict[str, float]]:
        """`{query_id: {metric: value}}`, pytrec_eval's result shape. Equal values (to
        the bit) share one float object: a metric takes few distinct values over many
        queries, and one object per score would cost 24 bytes each."""
        columns = [_shared_values(column) for column in self.values]
        rows = zip(*columns, strict=True) if columns else ([] for _ in range(self.values.shape[1]))
        names = self.metric_names
        return {
            qid: dict(zip(names, row, strict=True))
            for qid, row in zip(self.query_ids, rows, strict=True)
        }


def _shared_values(column: npt.NDArray[np.float64]) -> list[float]:
    """The column as floats, one object for each distinct bit pattern (so -0.0 and 0.0,
    and each NaN, stay as they are)."""
    if column.size == 0:
        return []
    bits, where = np.unique(column.view(np.int64), return_inverse=True)
    values = bits.view(np.float64).tolist()
    return [values[at] for at in where.tolist()]


def parse_metrics(names: Iterable[str]) -> tuple[Metric, ...]:
    """Parse and de-duplicate metric names, keeping their order."""
    unique: dict[str, Metric] = {}
    for name in names:
        metric = relevance_metric(name)
        unique.setdefault(metric.name, metric)
    return tuple(unique.values())


def score_judgments(judgments: Judgments, metrics: Sequence[Metric]) -> Scores:
    """Run each metric kernel over the judgments."""
    values = np.vstack([m.compute(judgments) for m in metrics]) if metrics else np.zeros((0, 0))
    return Scores(
        query_ids=judgments.query_ids,
        metrics=tuple(metrics),
        values=values.reshape(len(metrics), len(judgments.query_ids)),
        missing=judgments.missing,
        rejection=judgments.rejection,
        not_in_gold=judgments.not_in_gold,
    )


def _is_ranked(run: Mapping[str, object]) -> bool:
    first = next(iter(run.values()), None)
    return isinstance(first, Sequence) and not isinstance(first, str)


def evaluate(
    qrels: Qrels,
    run: ScoredRun | RankedRun,
    metrics: Iterable[str] = defaults.METRICS,
    *,
    relevance_level: int = 1,
) -> Scores:
    """Evaluate a run against qrels.

    `qrels` is `{query_id: {doc_id: grade}}`. `run` is `{query_id: {doc_id: score}}`
    (ranked as trec_eval ranks: score descending, ties by doc id descending) or
    `{query_id: [doc_id, ...]}` (list order is the ranking).
    """
    parsed = parse_metrics(metrics)
    if _is_ranked(run):
        judgments = judge_ranked(qrels, run, relevance_level)  # type: ignore[arg-type]
    else:
        judgments = judge_scored(qrels, run, relevance_level)  # type: ignore[arg-type]
    return score_judgments(judgments, parsed)


def evaluate_columns(
    qrels: Any,
    run: Any,
    metrics: Iterable[str] = defaults.METRICS,
    *,
    relevance_level: int = 1,
) -> Scores:
    """Evaluate a run given as columns: the fast way in for large runs.

    `run` is a `RunColumns` (`llm_eval.run_columns(query_ids, doc_ids, scores)`, or
    `llm_eval.read_trec_run(path)`), or a frame with `query_id`, `doc_id` and `score`
    columns: a pandas or pyarrow frame, a dict of numpy arrays. `qrels` is a
    `QrelsColumns` (`llm_eval.qrels_columns`, `llm_eval.read_qrels`), such a frame
    with a `grade` column, or `{query_id: {doc_id: grade}}`. Ranked as `evaluate`
    ranks scored runs (trec_eval's order); a document listed twice for one query is
    an error.
    """
    parsed = parse_metrics(metrics)
    judgments = judge_columns(qrels_from_columns(qrels), [run_from_columns(run)], relevance_level)
    return score_judgments(judgments, parsed)
