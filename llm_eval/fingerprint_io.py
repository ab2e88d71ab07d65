"""The fingerprints a baseline carries: what it depends on (gold set, corpus file,
retriever settings or run file, criteria, scoring), digested from the inputs and the
files they name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_eval.config import EvalConfig, RetrieverConfig
from llm_eval.digest import digest
from llm_eval.fingerprint import gold_fingerprint, query_fingerprints
from llm_eval.gold import GoldSet
from llm_eval.inputs import Inputs
from llm_eval.retrievers import retriever_kind
from llm_eval.retrievers.runfile import is_pattern, run_files
from llm_eval.textio import file_digest


def fingerprints(inputs: Inputs, run_path: Path | None) -> dict[str, str | None]:
    """Fingerprints of what a baseline depends on."""
    config = inputs.config
    gates = [
        {
            "name": g.name,
            "metric": g.metric,
            "threshold": g.threshold,
            "regression_max": g.regression_max,
            "severity": g.severity,
            "scope": g.scope.key(),
        }
        for g in inputs.criteria.gates
    ]
    scoring = {
        "relevance_level": config.relevance_level,
        "page_tolerance": config.matching.page_tolerance,
        "f1_threshold": config.matching.f1_threshold,
        "rejection_score_threshold": config.rejection_score_threshold,
    }
    return {
        **run_fingerprints(config, inputs.gold, run_path),
        "criteria": digest(gates),
        "scoring": digest(scoring),
        "versions": file_digest(config.versions) if config.versions is not None else None,
    }


def run_fingerprints(
    config: EvalConfig, gold: GoldSet, run_path: Path | None = None
) -> dict[str, str | None]:
    """The fingerprints of what a run depends on: the gold set, the corpus file and the
    retriever (`run_path`'s content when a run file stands for it); a part of a sharded
    run carries them in its header."""
    return {
        "gold": gold_fingerprint(query_fingerprints(gold)),
        "corpus": file_digest(config.corpus) if config.corpus is not None else None,
        "retriever": _retriever_fingerprint(config, run_path),
    }


def _retriever_fingerprint(config: EvalConfig, run_path: Path | None) -> str | None:
    """A run file counts by its content (also as `kind: run`); a retriever by its settings."""
    retriever = config.retriever
    if run_path is None and retriever is not None:
        kind = retriever_kind(retriever.kind)
        run_path = kind.answers_file(kind.record(retriever.settings))
    if run_path is not None and is_pattern(run_path):  # one run file per build
        return "run:" + digest([file_digest(path) for path in run_files(run_path)])
    if run_path is not None:
        return "run:" + file_digest(run_path)
    if retriever is None:
        return None
    settings = _by_model_contents({"kind": retriever.kind, **retriever.settings})
    return digest({"retriever": settings, "top_k": config.top_k})


def retriever_identity(retriever: RetrieverConfig) -> str:
    """A digest of the retriever: its kind and settings, each model folder by its files
    (top_k aside: what the caches under the output folder are made from)."""
    return digest(_by_model_contents({"kind": retriever.kind, **retriever.settings}))


def _by_model_contents(value: Any) -> Any:
    """Settings with each model folder (`model_path`, also inside a fusion or a rerank)
    replaced by the digest of its files, and an llm reranker's `prompt` file by its
    content's: the same model at another path (a laptop, a CI machine) is the same
    retriever, and a model replaced at the same path is another."""
    if not isinstance(value, dict):
        return value
    prompted = value.get("type") == "llm"  # an llm reranker's prompt file (a rerank kind)
    return {
        name: _model_files(setting)
        if name == "model_path" and isinstance(setting, str)
        else _prompt_file(setting)
        if prompted and name == "prompt" and isinstance(setting, str)
        else _by_model_contents(setting)
        for name, setting in value.items()
    }


def _prompt_file(path: str) -> str:
    """An llm reranker's prompt by its content: a prompt edited is a retriever changed."""
    return f"prompt:{file_digest(path)}" if Path(path).is_file() else path


def _model_files(path: str) -> str:
    """The digest of the folder's files; a `model_path` that is no folder (a model's
    name, passed to a python retriever's class) by itself, or every such name would
    look the same."""
    if not Path(path).is_dir():
        return path
    # Imported here: the endpoint client (httpx) costs a run with no model on disk more
    # than its fingerprints.
    from llm_eval.endpoints.local import model_digest

    return f"files:{model_digest(path)}"
