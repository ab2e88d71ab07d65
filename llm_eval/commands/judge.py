"""`llm-eval judge --run RUN --shard I/N --out FILE` and `judge --merge PART...`: the
judge asked about a run's queries in shards by the jobs of a CI matrix, and the
answers joined into its call cache, so that the gate judges from the cache alone and
gives the single process's values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from llm_eval.digest import digest
from llm_eval.endpoints.cache import read_entry
from llm_eval.endpoints.chat import ChatClient
from llm_eval.errors import InputError
from llm_eval.fingerprint_io import run_fingerprints
from llm_eval.inputs import Inputs
from llm_eval.judge.calls import call_keys, judge_run
from llm_eval.judge.parts_io import judgment_part_text, merge_judgment_parts
from llm_eval.judge.step import judge_client, judged_metrics
from llm_eval.pipeline import load_inputs
from llm_eval.progress import Progress
from llm_eval.runs import QueryResults, Run
from llm_eval.runs_io import load_run
from llm_eval.shards import PartHeader, Shard
from llm_eval.textio import write_atomic
from llm_eval.wording.english import plural


def judge_shard(
    *,
    config_path: Path,
    criteria_path: Path,
    run_paths: Sequence[Path],
    shard: Shard,
    out: Path,
    repeat: int = 1,
) -> str:
    """Ask the judge about the queries of `shard` in the run (`run_paths`: the whole run,
    or parts of it, the shard's among them), `repeat` times each, and write the answers
    as a part; return a summary (nothing is written without a judged metric).
    ExternalError when more calls failed than the judge's max_error_rate allows."""
    inputs = load_inputs(config_path, criteria_path)
    if not judged_metrics(inputs):  # a sharded workflow judges wherever a config asks
        return f"No judged metric is configured: nothing to judge, {out} not written."
    gold = replace(
        inputs.gold, queries=tuple(q for q in inputs.gold.queries if shard.holds(q.query_id))
    )
    run = _shard_run(run_paths, shard)
    client = judge_client(inputs)
    metrics = judged_metrics(inputs)
    with Progress(unit="judgments") as progress:
        judge_run(gold, run, metrics, client, lambda q, r: None, repeat, None, progress.update)
    keys = call_keys(gold, run, metrics, client, repeat)
    answers = [(q.query_id, _entries(client, keys.get(q.query_id, ()))) for q in gold.queries]
    header = PartHeader(shard, _fingerprints(inputs, client), client.usage.cached)
    write_atomic(out, judgment_part_text(header, answers))
    usage = client.usage
    queries = plural(len(gold.queries), "query", "queries")
    return (
        f"Wrote {out}, shard {shard} of the judgments ({queries}, {usage.calls:,} calls "
        f"asked, {usage.cached:,} answered by the cache, {usage.failed:,} failed)."
    )


def merge_judgments(*, config_path: Path, criteria_path: Path, parts: Sequence[Path]) -> str:
    """Check that `parts` are the N parts of this gold set's judgments and write their
    answers into the judge's call cache; return a summary."""
    if not parts:
        raise InputError("--merge needs the parts that `judge --shard I/N` wrote")
    inputs = _judged_inputs(config_path, criteria_path)
    client = judge_client(inputs)
    assert client.cache_dir is not None
    gold_ids = [q.query_id for q in inputs.gold.queries]
    added = merge_judgment_parts(parts, _fingerprints(inputs, client), gold_ids, client.cache_dir)
    return (
        f"Joined {plural(len(parts), 'part', 'parts')} into {client.cache_dir}: "
        f"{plural(added, 'answer', 'answers')} of the judge; the gate asks nothing it holds."
    )


def _judged_inputs(config_path: Path, criteria_path: Path) -> Inputs:
    """The inputs; InputError when no judged metric is configured."""
    inputs = load_inputs(config_path, criteria_path)
    if not judged_metrics(inputs):
        raise InputError(
            "no judged metric is configured (context_precision@k, context_recall, …): "
            "there is nothing to judge",
            path=inputs.config.path,
            key="metrics",
        )
    return inputs


def _shard_run(paths: Sequence[Path], shard: Shard) -> Run:
    """The queries of `shard` in the run files (a whole run, or parts)."""
    queries: dict[str, QueryResults] = {}
    for path in paths:
        run = load_run(path, "auto", part=True)
        queries.update((q, a) for q, a in run.queries.items() if shard.holds(q))
    return Run(queries)


def _entries(client: ChatClient, keys: Sequence[str]) -> dict[str, object]:
    """The cache's entries of these keys (a failed call has none)."""
    found = {key: read_entry(client.cache_dir, key) for key in dict.fromkeys(keys)}
    return {key: entry for key, entry in found.items() if entry is not None}


def _fingerprints(inputs: Inputs, client: ChatClient) -> dict[str, str | None]:
    """What a part's answers depend on: the run's inputs and the judge (its endpoint,
    model and sampling)."""
    settings = client.settings
    judge = {
        "url": client.url,
        "model": settings.model,
        "sampling": [settings.temperature, settings.seed, settings.max_tokens],
    }
    return {**run_fingerprints(inputs.config, inputs.gold), "judge": digest(judge)}
