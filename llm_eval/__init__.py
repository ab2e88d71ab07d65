"""llm-eval: a retrieval-quality gate for RAG systems.

    import llm_eval
    scores = llm_eval.evaluate(qrels, run, ["recall@5", "mrr", "ndcg@10"])
    scores.mean("recall@5")

Large runs are faster given as columns (numpy arrays, a pandas or pyarrow frame):

    run = llm_eval.run_columns(query_ids, doc_ids, scores)   # or read_trec_run(path)
    scores = llm_eval.evaluate_columns(qrels, run, ["ndcg@10"])

The API is imported on first use so that the command line starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
DISTRIBUTION = "llm-eval-ci"
"""The name pip installs llm-eval by (pyproject's `[project].name`; the index refuses
`llm-eval` as too close to `llmeval`): every install line llm-eval writes names it."""

__all__ = [
    "QrelsColumns",
    "RunColumns",
    "Scores",
    "__version__",
    "evaluate",
    "evaluate_columns",
    "qrels_columns",
    "read_qrels",
    "read_trec_run",
    "run_columns",
]

if TYPE_CHECKING:
    from llm_eval.columns import QrelsColumns, RunColumns, qrels_columns, run_columns
    from llm_eval.evaluation import Scores, evaluate, evaluate_columns
    from llm_eval.trec_columns_io import read_qrels, read_trec_run

# Where each public name lives.
_HOMES = {
    "Scores": "evaluation",
    "evaluate": "evaluation",
    "evaluate_columns": "evaluation",
    "QrelsColumns": "columns",
    "RunColumns": "columns",
    "qrels_columns": "columns",
    "run_columns": "columns",
    "read_qrels": "trec_columns_io",
    "read_trec_run": "trec_columns_io",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"llm_eval.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'llm_eval' has no attribute {name!r}")
