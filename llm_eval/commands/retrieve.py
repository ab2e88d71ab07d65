"""`llm-eval retrieve --out run.jsonl`: run the configured retriever over the gold set."""

from __future__ import annotations

from pathlib import Path

from llm_eval.config_io import load_config
from llm_eval.gold_io import load_gold
from llm_eval.retrieval import RetrieveOptions, retrieval_notes, retrieve_gold
from llm_eval.run_io import dump_jsonl
from llm_eval.textio import write_atomic


def retrieve(*, config_path: Path, out: Path, options: RetrieveOptions | None = None) -> str:
    """Write the run of the configured retriever; return a summary.

    Nothing is written when more queries failed than the retriever's max_error_rate
    allows (ExternalError).
    """
    config = load_config(config_path)
    gold = load_gold(config.gold)
    retrieval = retrieve_gold(config, gold.queries, options or RetrieveOptions())
    run = retrieval.run
    write_atomic(out, dump_jsonl(run))
    counts = f"{len(run.queries)} queries, top {config.top_k}, {len(run.failed())} failed"
    head = f"Wrote {out} ({counts})."
    return "\n".join([head, *retrieval_notes(retrieval)])
