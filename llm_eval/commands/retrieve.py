"""`llm-eval retrieve --out run.jsonl`: run the configured retriever over the gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from llm_eval.config import EvalConfig
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.fingerprint_io import run_fingerprints
from llm_eval.gold_io import load_gold
from llm_eval.retrieval import RetrieveOptions, planned_builds, retrieval_notes, retrieve_gold
from llm_eval.runs import Run
from llm_eval.runs_io import dump_jsonl, dump_trec
from llm_eval.shards import PartHeader, Shard
from llm_eval.shards_io import header_line
from llm_eval.textio import write_together
from llm_eval.wording.english import plural


def retrieve(
    *,
    config_path: Path,
    out: Path,
    options: RetrieveOptions | None = None,
    run_format: Literal["jsonl", "trec"] = "jsonl",
    text: bool = True,
    shard: Shard | None = None,
) -> str:
    """Write the run of the configured retriever (JSONL, with or without the passage
    text, or TREC); return a summary. With `shard`, only that shard's queries, as a
    part: JSONL, its header first (`llm_eval.shards_io`).

    Nothing is written when more queries failed than the retriever's max_error_rate
    allows (ExternalError).
    """
    config = load_config(config_path)
    gold = load_gold(config.gold)
    options = options or RetrieveOptions()
    queries = gold.queries
    if shard is not None:
        _check_shardable(config, options, run_format)
        queries = tuple(q for q in queries if shard.holds(q.query_id))
    retrieval = retrieve_gold(config, queries, options)
    notes = retrieval_notes(retrieval)
    tag = config.retriever.kind if config.retriever is not None else "llm-eval"
    files = build_files(out, len(retrieval.each_build))
    written = []
    for path, run in zip(files, retrieval.each_build, strict=True):
        written.append((path, _body(run, run_format, tag, text, notes)))
    if shard is not None:
        header = PartHeader(shard, run_fingerprints(config, gold), retrieval.from_cache)
        written = [(out, header_line(header) + written[0][1])]
    write_together(written)
    run = retrieval.run
    counts = f"{len(run.queries)} queries, top {config.top_k}, {len(run.failed())} failed"
    if shard is not None:
        return "\n".join([f"Wrote {out}, shard {shard} ({counts}).", *dict.fromkeys(notes)])
    if len(files) == 1:
        return "\n".join([f"Wrote {out} ({counts}).", *dict.fromkeys(notes)])
    pattern = out.with_name(f"{out.stem}-build*{out.suffix}")
    head = (
        f"Wrote {len(files)} builds' runs, {files[0]} to {files[-1]} ({counts} in the "
        f"first); a `kind: run` retriever reads them all with `path: {pattern}`."
    )
    return "\n".join([head, *dict.fromkeys(notes)])


def _check_shardable(
    config: EvalConfig, options: RetrieveOptions, run_format: Literal["jsonl", "trec"]
) -> None:
    """InputError when a part cannot be written: a TREC file has no place for its header,
    and a retriever built several times writes a run per build, which parts do not hold."""
    if run_format == "trec":
        raise InputError("--shard writes JSONL: a TREC run file has no place for a part's header")
    _, count = planned_builds(config, options.builds)
    if count > 1:
        raise InputError(
            f"--shard cannot split a retriever built {count} times: run its builds "
            "unsharded, or shard with one build",
            path=config.path,
            key="retriever.builds",
        )


def build_files(out: Path, builds: int) -> list[Path]:
    """Where each build's run goes: `out` itself for one build, else `out`'s name with
    `-build1`, `-build2`, … before its suffix."""
    if builds == 1:
        return [out]
    return [out.with_name(f"{out.stem}-build{i}{out.suffix}") for i in range(1, builds + 1)]


def _body(
    run: Run, run_format: Literal["jsonl", "trec"], tag: str, text: bool, notes: list[str]
) -> str:
    """The run file's text; what the format could not keep goes into `notes`."""
    if run_format != "trec":
        return dump_jsonl(run, text=text)
    body, replaced = dump_trec(run, tag)
    if run.failed():
        notes.append("A TREC run file cannot say that a query failed: those have no line.")
    if replaced:
        notes.append(
            f"{plural(replaced, 'query', 'queries')} got rank-derived scores: the "
            "retriever's scores (or their absence) would not give back its ranking "
            "under trec_eval's rule (score descending, ties by doc id)."
        )
    return body
