"""Growing the gold set: which documents are near a question (default BM25), what the
gold set covers of the corpus, and the questions each gated scope still needs."""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

from llm_eval.authoring.corpus_coverage import NEIGHBOURS, Coverage, coverage
from llm_eval.authoring.plan import Need, plan
from llm_eval.config import EvalConfig
from llm_eval.corpus import Document
from llm_eval.corpus_io import iter_corpus
from llm_eval.errors import InputError
from llm_eval.gate import Power
from llm_eval.gold import GoldQuery
from llm_eval.inputs import Inputs
from llm_eval.retrievers import Retriever, RetrieverContext, retriever_kind


def corpus_documents(config: EvalConfig) -> list[Document]:
    """The configured corpus; InputError without one."""
    if config.corpus is None:
        raise InputError(
            "coverage needs the corpus: add `corpus:` (BEIR JSONL) to the config",
            path=config.path,
        )
    return list(iter_corpus(config.corpus))


def _default_bm25(corpus: Path, cache: Path) -> Retriever:
    """BM25 with default settings over the corpus, built (or read from its cache) once
    per corpus file as it is now: the key is the absolute paths and the file's size and
    modification time, so a process that changes folder or corpus never reuses a stale
    index (`gold review` asks for one search per unrecognised answer)."""
    stat = corpus.stat()
    return _bm25_for(corpus.resolve(), cache.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _bm25_for(corpus: Path, cache: Path, size: int, modified: int) -> Retriever:
    """The index for one state of one corpus file (the size and time are the key)."""
    return retriever_kind("bm25").create({}, RetrieverContext(corpus, cache))


def lexical_neighbours(
    config: EvalConfig, queries: Sequence[GoldQuery], k: int = NEIGHBOURS
) -> dict[str, tuple[str, ...]]:
    """Each question's top k documents by BM25 with default settings."""
    assert config.corpus is not None
    run = _default_bm25(config.corpus, config.output / "cache").retrieve(queries, k)
    return {q: answer.doc_ids for q, answer in run.queries.items()}


def neighbours_of(config: EvalConfig, text: str, k: int) -> tuple[str, ...]:
    """The top k documents by default BM25 for one question's text."""
    query = GoldQuery("asked", text, "", (), (), True, None, None, "", 0)
    return lexical_neighbours(config, [query], k).get("asked", ())


def measure_coverage(inputs: Inputs) -> tuple[list[Document], Coverage]:
    """The corpus and the gold set's coverage of it."""
    documents = corpus_documents(inputs.config)
    queries = inputs.gold.queries
    return documents, coverage(documents, queries, lexical_neighbours(inputs.config, queries))


def make_plan(
    inputs: Inputs,
    catch: float,
    scores: Mapping[str, Mapping[str, float]] | None,
    builds: Sequence[Mapping[str, Mapping[str, float]]] = (),
    known: MutableMapping[str, Power] | None = None,
) -> tuple[list[Need], Coverage]:
    """The plan for the loaded inputs, and the coverage it was made from; `scores` are
    the baseline's per-query scores (None: no baseline), `builds` its builds' when it
    holds several, `known` the power figures already computed."""
    _, found = measure_coverage(inputs)
    queries = inputs.gold.queries
    needs = plan(inputs.criteria, queries, found, catch, scores=scores, builds=builds, known=known)
    return needs, found
