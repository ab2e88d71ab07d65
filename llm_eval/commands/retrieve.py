"""`llm-eval retrieve --out run.jsonl`: run the configured retriever over the gold set."""

from __future__ import annotations

from pathlib import Path

from llm_eval.config import load_config
from llm_eval.gold import load_gold
from llm_eval.pipeline import build_retriever
from llm_eval.runs import dump_jsonl
from llm_eval.textio import write_atomic


def retrieve(*, config_path: Path, out: Path) -> str:
    """Write the run of the configured retriever; return a one-line summary."""
    config = load_config(config_path)
    gold = load_gold(config.gold)
    run = build_retriever(config).retrieve(gold.queries, config.top_k)
    write_atomic(out, dump_jsonl(run))
    return f"Wrote {out} ({len(run.queries)} queries, top {config.top_k})."
