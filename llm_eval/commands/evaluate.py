"""`llm-eval evaluate`: metrics of a run against a gold set or qrels, no gate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_eval.english import listed, plural
from llm_eval.evaluation import Scores, parse_metrics, score_judgments
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.judgments import Judgments, judge_ranked, judge_scored_chunks
from llm_eval.matching import match_run, needs_matching
from llm_eval.output import render_table
from llm_eval.qrels import load_qrels
from llm_eval.run_io import detect_format, iter_trec_scores, load_run
from llm_eval.runs import RunFormat


def evaluate_files(
    *,
    run_path: Path,
    metrics: Sequence[str],
    gold_paths: Sequence[Path] = (),
    qrels_path: Path | None = None,
    run_format: RunFormat = "auto",
    relevance_level: int = 1,
) -> Scores:
    """Load the judgments and the run from files and score them.

    A gold set labelled by pages or passages is matched as `matching: auto` matches it,
    with the default page tolerance and F1 threshold.
    """
    parsed = parse_metrics(metrics)
    gold = load_gold(gold_paths) if gold_paths else None
    if gold is not None and needs_matching(gold):
        return score_judgments(_judge_matched(gold, run_path, run_format, relevance_level), parsed)
    qrels = gold.qrels() if gold is not None else load_qrels(qrels_path or "")
    return score_judgments(_judge(qrels, run_path, run_format, relevance_level), parsed)


def _judge_matched(gold: GoldSet, run_path: Path, run_format: RunFormat, level: int) -> Judgments:
    """Judgments in units: each query's results credited by its matcher."""
    matched = match_run(gold, load_run(run_path, run_format))
    return judge_ranked(matched.qrels, matched.ranked, level)


def _judge(
    qrels: dict[str, dict[str, int]], run_path: Path, run_format: RunFormat, level: int
) -> Judgments:
    fmt = detect_format(run_path) if run_format == "auto" else run_format
    if fmt == "trec":
        # Chunk by chunk: the whole run is never held in memory.
        return judge_scored_chunks(qrels, iter_trec_scores(run_path), level)
    return judge_ranked(qrels, load_run(run_path, "jsonl").ranked(), level)


def to_json(scores: Scores, per_query: bool) -> dict[str, Any]:
    """The JSON document `--format json` prints."""
    document: dict[str, Any] = {
        "metrics": {name: _finite_or_none(v) for name, v in scores.means().items()}
    }
    if per_query:
        document["per_query"] = scores.to_dict()
    document["queries"] = {
        "evaluated": len(scores.query_ids),
        "missing_from_run": list(scores.missing),
        "not_in_gold": scores.not_in_gold,
        "rejection": len(scores.rejection),
    }
    return document


def to_table(scores: Scores, per_query: bool) -> str:
    """Aligned text: the means, optionally one row per query, then the query counts."""
    names = list(scores.metric_names)
    rows = [["all", *(_fmt(scores.mean(n)) for n in names)]]
    if per_query:
        rows += [[qid, *(_fmt(v[n]) for n in names)] for qid, v in scores.to_dict().items()]
    table = render_table(["query", *names], rows)
    return f"{table}\n\n{_summary(scores)}"


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


def _fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def _finite_or_none(value: float) -> float | None:
    """JSON has no NaN: a mean over no query is written as null."""
    return None if math.isnan(value) else value
