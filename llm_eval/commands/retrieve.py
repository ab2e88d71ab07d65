"""`llm-eval retrieve --out run.jsonl`: run the configured retriever over the gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from llm_eval.config_io import load_config
from llm_eval.gold_io import load_gold
from llm_eval.retrieval import RetrieveOptions, retrieval_notes, retrieve_gold
from llm_eval.runs_io import dump_jsonl, dump_trec
from llm_eval.textio import write_atomic
from llm_eval.wording.english import plural


def retrieve(
    *,
    config_path: Path,
    out: Path,
    options: RetrieveOptions | None = None,
    run_format: Literal["jsonl", "trec"] = "jsonl",
    text: bool = True,
) -> str:
    """Write the run of the configured retriever (JSONL, with or without the passage
    text, or TREC); return a summary.

    Nothing is written when more queries failed than the retriever's max_error_rate
    allows (ExternalError).
    """
    config = load_config(config_path)
    gold = load_gold(config.gold)
    retrieval = retrieve_gold(config, gold.queries, options or RetrieveOptions())
    run = retrieval.run
    notes = retrieval_notes(retrieval)
    if run_format == "trec":
        tag = config.retriever.kind if config.retriever is not None else "llm-eval"
        body, replaced = dump_trec(run, tag)
        if run.failed():
            notes.append("A TREC run file cannot say that a query failed: those have no line.")
        if replaced:
            notes.append(
                f"{plural(replaced, 'query', 'queries')} got rank-derived scores: the "
                "retriever's scores (or their absence) would not give back its ranking "
                "under trec_eval's rule (score descending, ties by doc id)."
            )
    else:
        body = dump_jsonl(run, text=text)
    write_atomic(out, body)
    counts = f"{len(run.queries)} queries, top {config.top_k}, {len(run.failed())} failed"
    head = f"Wrote {out} ({counts})."
    return "\n".join([head, *notes])
