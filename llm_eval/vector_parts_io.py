"""Parts of the corpus's vectors: what `embed --shard I/N` writes, and the parts read
back, checked (`llm_eval.shards.part_problem`) and added to the vector store by
`embed --merge`, so that the retriever then embeds nothing.

A part is a folder: the vectors of its shard's documents (those whose id hashes to it)
in batch files of the store's own format (`llm_eval.retrievers.vector_store`), and
`part.json`, written last, its header:

    {"shard": "2/3", "fingerprints": {"corpus": "…", "embedding": "…"}, "from_cache": 120}

`embedding` is the digest that names the store's folder (the model, the fields, the
document prefix, the cache key); `from_cache` counts the shard's documents whose
vectors the store already held when the part was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from llm_eval.errors import InputError
from llm_eval.retrievers.embedding import BATCH_FILE_ROWS, Corpus
from llm_eval.retrievers.vector_store import VectorStore
from llm_eval.shards import VECTOR_PARTS, Part, PartHeader, part_problem
from llm_eval.shards_io import header_line, parse_header
from llm_eval.textio import read_json_file, write_atomic

PART_FILE = "part.json"


def check_part_folder(folder: Path) -> None:
    """InputError unless `folder` is new or empty: a part's batch files are all its own."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError("is not empty: a part is written into a folder of its own", path=folder)


def write_vector_part(
    folder: Path, header: PartHeader, store: VectorStore, keys: Sequence[bytes]
) -> None:
    """The vectors of `keys` (all in `store`) as a part in `folder` (`check_part_folder`),
    its header last; InputError when a file cannot be written."""
    check_part_folder(folder)
    part = VectorStore(folder)
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), BATCH_FILE_ROWS):
        chunk = unique[start : start + BATCH_FILE_ROWS]
        part.add(chunk, np.stack([store.vector(key) for key in chunk]))
    if any(key not in VectorStore.open(folder) for key in unique):
        raise InputError("could not write every batch file of the part", path=folder)
    write_atomic(folder / PART_FILE, header_line(header, VECTOR_PARTS))


def merge_vector_parts(
    folders: Sequence[Path],
    expected: Mapping[str, str | None],
    corpus: Corpus,
    store: VectorStore,
) -> int:
    """Add the parts' vectors to `store`: the vectors it lacks of the corpus's documents;
    how many it added. InputError naming the first folder that is not a part, or the
    part that keeps them from being the N parts of the corpus's vectors with the
    `expected` fingerprints (a shard missing or twice, a document without its vector)."""
    read = [_read_part(folder, corpus) for folder in folders]
    problem = part_problem([part for part, _ in read], expected, corpus.doc_ids, VECTOR_PARTS)
    if problem is not None:
        raise InputError(problem[1], path=problem[0])
    rows = dict(zip(corpus.doc_ids, corpus.keys, strict=True))
    added = 0
    for part, vectors in read:
        keys = list(dict.fromkeys(k for d in part.query_ids if (k := rows[d]) not in store))
        for start in range(0, len(keys), BATCH_FILE_ROWS):
            chunk = keys[start : start + BATCH_FILE_ROWS]
            store.add(chunk, np.stack([vectors.vector(key) for key in chunk]))
        added += len(keys)
    return added


def _read_part(folder: Path, corpus: Corpus) -> tuple[Part, VectorStore]:
    """The part's header, the documents of its shard whose vectors it holds, and its
    vectors."""
    path = folder / PART_FILE
    if not path.is_file():
        raise InputError(
            f"holds no {PART_FILE} (`embed --shard I/N` writes it last): not a part of the "
            "vectors, or one cut short",
            path=folder,
        )
    record = read_json_file(path)
    if not isinstance(record, dict):
        raise InputError("a part's header must be a JSON object", path=path)
    header = parse_header(record, path, 1, VECTOR_PARTS)
    vectors = VectorStore.open(folder)
    shard = header.shard
    held = tuple(
        doc_id
        for doc_id, key in zip(corpus.doc_ids, corpus.keys, strict=True)
        if key in vectors and shard.holds(doc_id)
    )
    return Part(str(folder), header, held), vectors
