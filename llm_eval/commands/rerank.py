"""`llm-eval rerank consistency`: how steady an llm reranker's scores are, prompt by prompt.

The configured retriever (or each variant of the config's `variants:`) must be a
`rerank` with an `llm` reranker. Its first stage answers the first `--queries` gold
queries; each (query, candidate) pair is asked `--repeats` times, each repeat with its
own seed (the configured one plus the repeat's number) and cache entry, the first
repeat the same call a run makes. `--prompt FILE` measures the retriever again with
that prompt in place of its own, so that two prompts are compared on the same pairs.
The figures are `llm_eval.rerankers.consistency`'s, one line per reranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from llm_eval.config import EvalConfig, RetrieverConfig, Variant
from llm_eval.config_io import load_config
from llm_eval.endpoints.chat import ChatClient
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.gold_io import load_gold
from llm_eval.rerankers.consistency import (
    DEFAULT_MAX_FLIPS,
    Consistency,
    consistency,
    consistency_line,
)
from llm_eval.rerankers.llm import LlmReranker
from llm_eval.retrieval import build_retriever
from llm_eval.retrievers.rerank import RerankRetriever
from llm_eval.wording.english import plural

SEEDS = 2**31
"""Seeds wrap within the setting's range."""


def rerank_consistency(
    config_path: Path,
    *,
    repeats: int,
    queries: int,
    max_flips: float,
    prompts: Sequence[Path] = (),
) -> str:
    """One line of consistency figures per llm reranker measured."""
    config = load_config(config_path)
    asked = load_gold(config.gold).queries[:queries]
    lines = []
    for name, retriever in rerankers(config, prompts):
        figures = measure(config, retriever, asked, repeats, max_flips)
        lines.append(consistency_line(name, figures))
    return "\n".join(lines)


def experiment_section(
    config: EvalConfig,
    variants: Sequence[Variant],
    queries: Sequence[GoldQuery],
    repeats: int,
    max_flips: float = DEFAULT_MAX_FLIPS,
) -> str:
    """The consistency lines of an experiment's llm rerankers (`experiment --consistency`),
    under a heading that says what was asked; the other variants named as not measured."""
    lines = [
        f"Consistency ({repeats} repeats of each candidate pair of the first "
        f"{plural(len(queries), 'gold query', 'gold queries')}):"
    ]
    skipped = []
    for variant in variants:
        reranker = variant.retriever.settings.get("reranker")
        typed = reranker.get("type") if isinstance(reranker, dict) else None
        if variant.retriever.kind != "rerank" or typed != "llm":
            skipped.append(variant.name)
        else:
            figures = measure(config, variant.retriever, queries, repeats, max_flips)
            lines.append("  " + consistency_line(variant.name, figures))
    if skipped:
        lines.append(f"  not measured (no llm reranker): {', '.join(skipped)}")
    return "\n".join(lines)


def rerankers(config: EvalConfig, prompts: Sequence[Path]) -> list[tuple[str, RetrieverConfig]]:
    """(name, retriever) to measure: each variant, else the retriever and its prompts."""
    if config.variants:
        return [(v.name, v.retriever) for v in config.variants]
    if config.retriever is None:
        raise InputError("no retriever is configured; add `retriever:`", path=config.path)
    found = [("retriever", config.retriever)]
    for prompt in prompts:
        settings = dict(config.retriever.settings)
        reranker = settings.get("reranker")
        if config.retriever.kind != "rerank" or not isinstance(reranker, dict):
            raise InputError("--prompt needs a `rerank` retriever", path=config.path)
        settings["reranker"] = {**reranker, "prompt": str(prompt)}
        found.append((f"prompt {prompt}", replace(config.retriever, settings=settings)))
    return found


def measure(
    config: EvalConfig,
    retriever: RetrieverConfig,
    queries: Sequence[GoldQuery],
    repeats: int,
    max_flips: float,
) -> Consistency:
    """Every candidate pair of the queries asked `repeats` times."""
    built = build_retriever(replace(config, retriever=retriever))
    if not isinstance(built, RerankRetriever) or not isinstance(built.reranker, LlmReranker):
        raise retriever.locate(
            InputError(
                "the consistency of a reranker is measured on a `rerank` retriever with an "
                f"`llm` reranker, not a {retriever.kind} retriever"
            )
        )
    reranker = built.reranker
    first = built.first.retrieve(queries, built.candidates)
    pairs = [
        (query.query, result.text or "")
        for query in queries
        if query.query_id in first.queries
        for result in first.queries[query.query_id].results[: built.candidates]
    ]
    rounds = [_round(reranker, pairs, repeat) for repeat in range(repeats)]
    scores: dict[str, list[list[float | None]]] = {}
    for number, (query, _) in enumerate(pairs):
        scores.setdefault(query, []).append([answers[number] for answers in rounds])
    return consistency(scores, max_flips)


def _round(
    reranker: LlmReranker, pairs: Sequence[tuple[str, str]], repeat: int
) -> list[float | None]:
    """Every pair asked once more, with the repeat's seed."""
    chat = reranker.settings.chat
    client = ChatClient(replace(chat, seed=(chat.seed + repeat) % SEEDS), reranker.client.cache_dir)
    with client.session() as session, ThreadPoolExecutor(chat.concurrency) as pool:
        scored = pool.map(lambda pair: reranker.score(session, pair[0], pair[1], repeat), pairs)
        return [s.score for s in scored]
