"""llm-eval: a retrieval-quality gate for RAG systems.

    import llm_eval
    scores = llm_eval.evaluate(qrels, run, ["recall@5", "mrr", "ndcg@10"])
    scores.mean("recall@5")

The API is imported on first use so that the command line starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Scores", "__version__", "evaluate"]

if TYPE_CHECKING:
    from llm_eval.evaluation import Scores, evaluate


def __getattr__(name: str) -> Any:
    if name in ("Scores", "evaluate"):
        from llm_eval import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'llm_eval' has no attribute {name!r}")
