"""The gate's pipeline as library functions: load and validate, retrieve, measure, compare.

    inputs = load_inputs(config_path, criteria_path)          # here
    run = obtain_run(inputs, run_path)                         # llm_eval.retrieval
    measurement = measure(inputs, run)                         # here (llm_eval.scoring)
    comparison = compare(inputs, measurement, baseline)        # llm_eval.against_baseline

Each step takes records and returns records; only `load_inputs` and the retrieval
step touch files or the retriever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from llm_eval.builds import averaged
from llm_eval.config import EvalConfig
from llm_eval.config_io import load_config
from llm_eval.corpus_io import corpus_ids
from llm_eval.criteria_io import check_against_config, check_against_gold, load_criteria
from llm_eval.errors import InputError
from llm_eval.gold import labels_not_in
from llm_eval.gold_io import load_gold
from llm_eval.inputs import Inputs, JudgeOptions
from llm_eval.metrics import parse_metric
from llm_eval.runs import Run
from llm_eval.scoring import Measurement, Scoring, score_run
from llm_eval.versions_io import load_versions
from llm_eval.wording.english import plural


def load_inputs(config_path: str | Path, criteria_path: str | Path) -> Inputs:
    """Read config, criteria and gold set; check them against each other before any work."""
    config = load_config(config_path)
    criteria = load_criteria(criteria_path)
    check_against_config(criteria, config)
    gold = load_gold(config.gold)
    check_against_gold(criteria, gold)
    return Inputs(config, criteria, gold, scoring_for(config))


def check_labels(inputs: Inputs) -> None:
    """Stop on a gold label naming a document the config's corpus lacks (such a question
    can never be answered and scores 0 forever), naming the first and counting the rest;
    nothing to check without a corpus or with `labels_in_corpus: off`."""
    config = inputs.config
    if config.corpus is None or not config.labels_in_corpus:
        return
    ids = corpus_ids(config.corpus)
    if not ids:  # an empty corpus is its own error, said where the corpus is read
        return
    missing = labels_not_in(inputs.gold.queries, ids)
    if not missing:
        return
    (query, doc), rest = missing[0], len(missing) - 1
    more = f", nor {'is' if rest == 1 else 'are'} {plural(rest, 'other label', 'other labels')}"
    raise InputError(
        f"document {doc!r} is not in the corpus {config.corpus}{more if rest else ''} (when "
        f"the retriever's ids are not the corpus's, say so with `labels_in_corpus: off` in "
        f"{config.path})",
        path=query.path,
        line=query.line,
        key=f"relevant.{doc}",
    )


def measure(inputs: Inputs, run: Run, judge: JudgeOptions | None = None) -> Measurement:
    """Score every gold query on every metric the report and the gates need, asking the
    judge model for the judged ones."""
    metrics = tuple(dict.fromkeys([*inputs.metrics, *inputs.coverage_metrics]))
    measurement = score_run(
        inputs.gold, run, metrics, inputs.config.relevance_level, inputs.scoring
    )
    judged = [m for m in map(parse_metric, inputs.metrics) if m.kind == "judged"]
    if not judged:
        return measurement
    from llm_eval.judge.step import judged_measurement

    return judged_measurement(inputs, run, measurement, judged, judge or JudgeOptions())


def measure_builds(
    inputs: Inputs, runs: Sequence[Run], judge: JudgeOptions | None = None
) -> Measurement:
    """`measure` of a retriever built once per run: each query's scores are the mean
    over the builds, each build's own kept (`Measurement.builds`) for the gate's test;
    the rest (ranks, latencies, failures) is the first build's."""
    if len(runs) == 1:
        return measure(inputs, runs[0], judge)
    each = [measure(inputs, run, judge) for run in runs]
    tables = tuple(m.per_query for m in each)
    return replace(each[0], per_query=averaged(tables), builds=tables)


def scoring_for(config: EvalConfig) -> Scoring:
    """The config's matching settings, rejection threshold and versions sidecar."""
    versions = load_versions(config.versions) if config.versions is not None else None
    return Scoring(config.matching, config.rejection_score_threshold, versions)
