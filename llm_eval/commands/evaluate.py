"""`llm-eval evaluate`: metrics of a run against a gold set or qrels, no gate.

Relevance metrics are scored as `llm_eval.evaluate` scores them. The ranking metrics
(`score_discrimination@k`, `rank_correlation@k`) and, with a gold set, the rejection
metrics (`rejection_accuracy`, `false_confidence_rate`) need nothing else but the run:
they are computed by the gate's own code (`llm_eval.scoring.score_run`), with the
gate's defaults: a rejection query counts as rejected when the run abstains or returns
nothing, and, given `--rejection-score-threshold` (the config's
`rejection_score_threshold`, unset by default), when its top score is below it.
Context, judged and service metrics need the config, so only the gate computes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eval.columns import judge_columns
from llm_eval.errors import InputError
from llm_eval.evaluation import Scores, parse_metrics, score_judgments
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.judgments import Judgments, judge_ranked
from llm_eval.matching import match_run, needs_matching
from llm_eval.metrics import Metric, parse_metric
from llm_eval.output import render_table
from llm_eval.qrels_io import load_qrels
from llm_eval.ranking import ranking_values
from llm_eval.runs import Run, RunFormat
from llm_eval.runs_io import detect_format, load_run
from llm_eval.scoring import Scoring, score_run
from llm_eval.shards_io import expand_runs, is_part, join_parts
from llm_eval.trec_columns_io import iter_trec_columns
from llm_eval.wording.english import listed, plural

_FROM_THE_RUN = ("ranking", "rejection")
"""Kinds evaluate computes besides relevance: they need only the run and the labels."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What `evaluate` computed: relevance scores, and the metrics read from the run."""

    scores: Scores
    """The relevance metrics, over the queries with a relevant document."""
    from_run: Mapping[str, Mapping[str, float]]
    """`{metric: {query_id: value}}` of the ranking and rejection metrics, over the
    queries where each is defined (rejection metrics: the rejection queries)."""
    names: tuple[str, ...]
    """Every metric asked for, canonical, in the order asked."""
    rejection_score_threshold: float | None = None

    def mean(self, name: str) -> float:
        """Mean over the queries the metric is defined on (NaN when there are none)."""
        if name not in self.from_run:
            return self.scores.mean(name)
        values = list(self.from_run[name].values())
        return sum(values) / len(values) if values else float("nan")

    def means(self) -> dict[str, float]:
        """`{metric: mean}` in the order asked."""
        return {name: self.mean(name) for name in self.names}

    def to_dict(self) -> dict[str, dict[str, float]]:
        """`{query_id: {metric: value}}`, each query with the metrics it has a value of."""
        rows = self.scores.to_dict()
        for name, values in self.from_run.items():
            for query_id, value in values.items():
                rows.setdefault(query_id, {})[name] = value
        return {q: {n: row[n] for n in self.names if n in row} for q, row in rows.items()}


def evaluate_files(
    *,
    run_paths: Sequence[Path],
    metrics: Sequence[str],
    gold_paths: Sequence[Path] = (),
    qrels_path: Path | None = None,
    run_format: RunFormat = "auto",
    relevance_level: int = 1,
    rejection_score_threshold: float | None = None,
) -> Evaluation:
    """Load the judgments and the run from files and score them.

    A gold set labelled by pages or passages is matched as `matching: auto` matches it,
    with the default page tolerance and F1 threshold. `run_paths` (globs expanded) are
    one run file or the parts of a sharded run, checked against each other and joined.
    """
    run_path = _run_source(run_paths)
    wanted = _evaluable(metrics)
    relevance = parse_metrics(m.name for m in wanted if m.kind == "relevance")
    from_run = [m.name for m in wanted if m.kind in _FROM_THE_RUN]
    gold = load_gold(gold_paths) if gold_paths else None
    if gold is not None and needs_matching(gold):
        judgments = _judge_matched(gold, run_path, run_format, relevance_level)
    else:
        qrels = gold.qrels() if gold is not None else load_qrels(qrels_path or "")
        judgments = _judge(qrels, run_path, run_format, relevance_level)
    values: dict[str, dict[str, float]] = {}
    if from_run:
        values = _values_from_run(
            gold, qrels_path, run_path, run_format, relevance_level, from_run,
            rejection_score_threshold,
        )  # fmt: skip
    return Evaluation(
        score_judgments(judgments, relevance),
        values,
        tuple(m.name for m in wanted),
        rejection_score_threshold,
    )


def _evaluable(metrics: Sequence[str]) -> list[Metric]:
    """The metrics parsed and de-duplicated; one evaluate cannot compute is an error."""
    unique: dict[str, Metric] = {}
    for name in metrics:
        metric = parse_metric(name)
        if metric.kind not in ("relevance", *_FROM_THE_RUN):
            raise InputError(
                f"evaluate computes relevance, ranking and rejection metrics; {metric.name} "
                "is computed by `llm-eval gate`, which reads the config"
            )
        unique.setdefault(metric.name, metric)
    return list(unique.values())


def _run_source(run_paths: Sequence[Path]) -> Path | Run:
    """The one run file, or the parts joined (nothing holds them to a config here)."""
    files = expand_runs(run_paths)
    if len(files) == 1 and not is_part(files[0]):
        return files[0]
    return join_parts(files, None, None).run


def _load(source: Path | Run, run_format: RunFormat) -> Run:
    return source if isinstance(source, Run) else load_run(source, run_format)


def _values_from_run(
    gold: GoldSet | None,
    qrels_path: Path | None,
    run_path: Path | Run,
    run_format: RunFormat,
    level: int,
    names: list[str],
    threshold: float | None,
) -> dict[str, dict[str, float]]:
    """`{metric: {query_id: value}}` of ranking and rejection metrics, as the gate scores them."""
    run = _load(run_path, run_format)
    if gold is not None:
        per_query = score_run(gold, run, names, level, Scoring(rejection_score_threshold=threshold))
        rows: Mapping[str, Mapping[str, float]] = per_query.per_query
    else:
        rejection = [n for n in names if parse_metric(n).kind == "rejection"]
        if rejection:
            raise InputError(
                f"{rejection[0]} needs a gold set (--gold): qrels do not mark rejection queries"
            )
        rows = ranking_values(run, load_qrels(qrels_path or ""), run.ranked(), names)
    return {n: {q: row[n] for q, row in rows.items() if n in row} for n in names}


def _judge_matched(
    gold: GoldSet, run_path: Path | Run, run_format: RunFormat, level: int
) -> Judgments:
    """Judgments in units: each query's results credited by its matcher."""
    matched = match_run(gold, _load(run_path, run_format))
    return judge_ranked(matched.qrels, matched.ranked, level)


def _judge(
    qrels: dict[str, dict[str, int]], run_path: Path | Run, run_format: RunFormat, level: int
) -> Judgments:
    if isinstance(run_path, Run):
        return judge_ranked(qrels, run_path.ranked(), level)
    fmt = detect_format(run_path) if run_format == "auto" else run_format
    if fmt == "trec":
        # Read as columns, a block at a time: the whole run is never held in memory.
        return judge_columns(qrels, iter_trec_columns(run_path), level)
    return judge_ranked(qrels, load_run(run_path, "jsonl").ranked(), level)


def to_json(evaluation: Evaluation, per_query: bool) -> dict[str, Any]:
    """The JSON document `--format json` prints."""
    scores = evaluation.scores
    document: dict[str, Any] = {
        "metrics": {name: _finite_or_none(v) for name, v in evaluation.means().items()}
    }
    if per_query:
        document["per_query"] = evaluation.to_dict()
    document["queries"] = {
        "evaluated": len(scores.query_ids),
        "missing_from_run": list(scores.missing),
        "not_in_gold": scores.not_in_gold,
        "rejection": len(scores.rejection),
    }
    if _has_rejection(evaluation):
        document["rejection_score_threshold"] = evaluation.rejection_score_threshold
    return document


def to_table(evaluation: Evaluation, per_query: bool) -> str:
    """Aligned text: the means, optionally one row per query, then the query counts."""
    names = list(evaluation.names)
    means = evaluation.means()
    rows = [["all", *(_fmt(means[n]) for n in names)]]
    if per_query:
        rows += [
            [qid, *(_fmt(v.get(n, math.nan)) for n in names)]
            for qid, v in evaluation.to_dict().items()
        ]
    table = render_table(["query", *names], rows)
    return "\n\n".join([table, *_notes(evaluation)])


def _notes(evaluation: Evaluation) -> list[str]:
    notes = [_summary(evaluation.scores)]
    if _has_rejection(evaluation):
        threshold = evaluation.rejection_score_threshold
        rule = "abstained or returned nothing"
        if threshold is not None:
            rule += f", or its top score was below {threshold:g}"
        notes.append(f"A rejection query counts as rejected when the run {rule}.")
    return notes


def _summary(scores: Scores) -> str:
    parts = [plural(len(scores.query_ids), "query", "queries") + " evaluated"]
    if scores.missing:
        missing = listed(scores.missing)
        parts.append(f"{len(scores.missing)} missing from the run, scored 0 ({missing})")
    if scores.rejection:
        parts.append(f"{len(scores.rejection)} without a relevant document, left out")
    if scores.not_in_gold:
        parts.append(
            plural(scores.not_in_gold, "run query", "run queries") + " not in the gold set, ignored"
        )
    return "; ".join(parts)


def _has_rejection(evaluation: Evaluation) -> bool:
    return any(parse_metric(n).kind == "rejection" for n in evaluation.from_run)


def _fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def _finite_or_none(value: float) -> float | None:
    """JSON has no NaN: a mean over no query is written as null."""
    return None if math.isnan(value) else value
