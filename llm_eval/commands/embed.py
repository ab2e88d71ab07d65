"""`llm-eval embed --shard I/N --out DIR` and `embed --merge DIR...`: the corpus's
vectors of the configured `embedding` retriever, embedded in shards by the jobs of a CI
matrix and joined into its vector store, so that the gate embeds nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_eval.config import EvalConfig
from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.progress import Progress
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.retrievers.embedding import CorpusVectors, corpus_vectors, embed_missing
from llm_eval.shards import PartHeader, Shard
from llm_eval.textio import file_digest
from llm_eval.vector_parts_io import check_part_folder, merge_vector_parts, write_vector_part
from llm_eval.wording.english import plural


def embed_shard(*, config_path: Path, shard: Shard, out: Path) -> str:
    """Embed the documents of `shard` that the vector store lacks, add them to it, and
    write the shard's vectors as a part in `out`; return a summary."""
    check_part_folder(out)
    config = load_config(config_path)
    source = _source(config)
    corpus = source.corpus
    keys = [k for d, k in zip(corpus.doc_ids, corpus.keys, strict=True) if shard.holds(d)]
    cached = sum(key in source.store for key in keys)
    with Progress(unit="documents") as progress:
        embedding = source.embedding(progress)
        embed_missing(source.path, corpus, embedding, source.store, source.written, keys)
    header = PartHeader(shard, _fingerprints(config, source), cached)
    write_vector_part(out, header, source.store, keys)
    return (
        f"Wrote {out}, shard {shard} of the vectors ({plural(len(keys), 'document', 'documents')}, "
        f"{cached:,} of them already in the store)."
    )


def merge_vectors(*, config_path: Path, parts: Sequence[Path]) -> str:
    """Check that `parts` are the N parts of this corpus's vectors and add them to the
    vector store; return a summary."""
    if not parts:
        raise InputError("--merge needs the folders that `embed --shard I/N` wrote")
    config = load_config(config_path)
    source = _source(config)
    expected = _fingerprints(config, source)
    added = merge_vector_parts(parts, expected, source.corpus, source.store)
    documents = plural(len(source.corpus.doc_ids), "document", "documents")
    return (
        f"Joined {plural(len(parts), 'part', 'parts')} into {source.store.folder}: "
        f"{plural(added, 'vector', 'vectors')} added, {documents} in the corpus."
    )


def _source(config: EvalConfig) -> CorpusVectors:
    """The configured embedding retriever's corpus and vector store; InputError for
    another kind."""
    retriever = config.retriever
    if retriever is None or retriever.kind != "embedding":
        raise InputError(
            "embed needs `retriever: {kind: embedding, …}`: it embeds that retriever's corpus",
            path=config.path,
            key="retriever.kind",
        )
    kind = retriever_kind("embedding")
    context = RetrieverContext(config.corpus, config.output / "cache")
    try:
        return corpus_vectors(kind.record(retriever.settings), context)
    except InputError as exc:
        raise retriever.locate(exc) from None


def _fingerprints(config: EvalConfig, source: CorpusVectors) -> dict[str, str | None]:
    """What a part's vectors depend on: the corpus file and the store's key."""
    return {
        "corpus": file_digest(config.corpus) if config.corpus is not None else None,
        "embedding": source.store.folder.name,
    }
