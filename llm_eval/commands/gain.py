"""`llm-eval gain NEW_DOCS.jsonl`: what new documents would add to the corpus.

Novelty of each new document against the corpus (with `embeddings:` only), and the
change in recall@k (and, with a judge, context recall) on the gold set once they are
added.
A retriever that reads the corpus (bm25) is run again over the corpus with the new
documents; any other needs `--run-after`, a run made with them added.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_eval.corpus import Document
from llm_eval.corpus_io import iter_corpus
from llm_eval.endpoints.client import EndpointFailed
from llm_eval.endpoints.embedders import embedder
from llm_eval.endpoints.embeddings import Embedder
from llm_eval.errors import ExternalError, InputError
from llm_eval.gain import gain, novelty, pieces, unit_rows
from llm_eval.inputs import Inputs
from llm_eval.metrics import parse_metric
from llm_eval.output import render_table
from llm_eval.pipeline import load_inputs, measure
from llm_eval.retrieval import RetrieveOptions, retrieve_gold
from llm_eval.retrievers import retriever_kind
from llm_eval.runs import Run
from llm_eval.runs_io import load_run
from llm_eval.textio import read_text, write_atomic
from llm_eval.wording.english import plural


def _text(document: Document) -> str:
    return f"{document.title} {document.text}".strip()


def _embed(client: Embedder, texts: Sequence[str]) -> list[list[float]]:
    try:
        return client.embed(texts)
    except EndpointFailed as failure:
        raise ExternalError(f"the embeddings endpoint failed: {failure}") from None


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _scores(inputs: Inputs, run: Run, metrics: Sequence[str]) -> dict[str, float]:
    """Each metric's mean over the gold queries it scores."""
    measured = measure(replace(inputs, config=replace(inputs.config, metrics=tuple(metrics))), run)
    rows = measured.per_query.values()
    return {m: _mean([row[m] for row in rows if m in row]) for m in metrics}


def _run_after(inputs: Inputs, new: list[Document], folder: Path, run_after: Path | None) -> Run:
    if run_after is not None:
        return load_run(run_after)
    config = inputs.config
    retriever = config.retriever
    if retriever is None or not retriever_kind(retriever.kind).needs_corpus:
        kind = "no" if retriever is None else f"the {retriever.kind}"
        raise InputError(
            f"{kind} retriever cannot index new documents itself; pass --run-after RUN, a run "
            "made with them added"
        )
    combined = folder / "corpus.jsonl"
    lines = [] if config.corpus is None else [read_text(config.corpus).rstrip("\n")]
    lines += [
        json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}, ensure_ascii=False)
        for d in new
    ]
    write_atomic(combined, "\n".join(line for line in lines if line) + "\n")
    return retrieve_gold(
        replace(config, corpus=combined), inputs.gold.queries, RetrieveOptions()
    ).run


def _novelties(inputs: Inputs, corpus: list[Document], new: list[Document]) -> dict[str, float]:
    """Each new document's novelty against the corpus, in the embeddings model."""
    config = inputs.config
    assert config.embeddings is not None
    client = embedder(config.embeddings, config.output / "cache" / "embeddings")
    corpus_matrix = unit_rows(_embed(client, [_text(d) for d in corpus])) if corpus else None
    novelties = {}
    for document in new:
        vectors = _embed(client, pieces(_text(document), config.gain.chunk_words))
        novelties[document.doc_id] = (
            1.0 if corpus_matrix is None else novelty(unit_rows(vectors), corpus_matrix)
        )
    return novelties


def knowledge_gain(
    *,
    config_path: Path,
    criteria_path: Path,
    new_docs: Path,
    run_before: Path | None = None,
    run_after: Path | None = None,
    out_dir: Path | None = None,
) -> str:
    """Measure, write gain.json, return the terminal summary."""
    inputs = load_inputs(config_path, criteria_path)
    config = inputs.config
    weights = config.gain
    new = list(iter_corpus(new_docs))
    if not new:
        raise InputError("no documents to measure", path=new_docs)
    corpus = [] if config.corpus is None else list(iter_corpus(config.corpus))
    known = {d.doc_id for d in corpus}
    clash = [d.doc_id for d in new if d.doc_id in known]
    if clash:
        raise InputError(f"document {clash[0]!r} is already in the corpus", path=new_docs)
    novelties = None if config.embeddings is None else _novelties(inputs, corpus, new)
    folder = out_dir or config.output / "gain"
    before = (
        load_run(run_before)
        if run_before is not None
        else retrieve_gold(config, inputs.gold.queries, RetrieveOptions()).run
    )
    after = _run_after(inputs, new, folder, run_after)
    recall = f"recall@{weights.k}"
    metrics = [recall, *(["context_recall"] if config.judge is not None else [])]
    scores_before, scores_after = _scores(inputs, before, metrics), _scores(inputs, after, metrics)
    deltas = {m: scores_after[m] - scores_before[m] for m in metrics}
    mean_novelty = None if novelties is None else _mean(list(novelties.values()))
    total = gain(weights, deltas[recall], deltas.get("context_recall"), mean_novelty)
    result: dict[str, Any] = {
        "documents": len(new),
        "novelty": novelties,
        "mean_novelty": mean_novelty,
        "before": scores_before,
        "after": scores_after,
        "delta": deltas,
        "weights": {"alpha": weights.alpha, "beta": weights.beta, "gamma": weights.gamma},
        "gain": total,
    }
    write_atomic(folder / "gain.json", json.dumps(result, indent=2) + "\n")
    return _summary(result, recall, folder / "gain.json")


def _summary(result: dict[str, Any], recall: str, path: Path) -> str:
    lines = [
        f"llm-eval gain: {plural(result['documents'], 'new document', 'new documents')}, "
        f"gain {result['gain']:+.4f}",
        "",
    ]
    if result["novelty"] is not None:
        rows = [[doc_id, f"{value:.3f}"] for doc_id, value in sorted(result["novelty"].items())]
        lines += [render_table(["document", "novelty"], rows), ""]
    for metric, delta in result["delta"].items():
        label = parse_metric(metric).label
        lines.append(
            f"{label}: {result['before'][metric]:.4f} → {result['after'][metric]:.4f} "
            f"({delta:+.4f})"
        )
    weights = result["weights"]
    judged = "context_recall" in result["delta"]
    formula = f"{weights['alpha']:g}·Δ{parse_metric(recall).label}"
    formula += f" + {weights['beta']:g}·Δcontext recall" if judged else ""
    missing = [] if judged else ["no judge, so no Δcontext recall"]
    if result["mean_novelty"] is None:
        missing.append("no `embeddings:`, so no novelty")
    else:
        formula += f" + {weights['gamma']:g}·mean novelty ({result['mean_novelty']:.3f})"
    lines.append(f"Gain = {formula}" + "".join(f"; {m}" for m in missing))
    lines.append(f"Wrote {path}")
    return "\n".join(lines)
