"""An approximate index as teams run one: LanceDB's IVF-PQ over the demo corpus, built
(its k-means trained on a random sample) each time the class is made, so that every
build of a `python` retriever on it answers a little differently. The vectors are
hashed bags of words (256 numbers a passage), so that no model is needed, or read
from `vectors` (a .npz of `doc_ids`, `docs`, `queries` and `query_vectors`: a model's
embeddings of the corpus and of the gold set's questions, computed beforehand).

    retriever: {kind: python, target: ivf_index:Index, python_path: [tests/data]}
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import lancedb
import numpy as np

DIM = 256
MOST_RARE = 8.0


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def vector(text: str, idf: dict[str, float]) -> list[float]:
    """The passage's words, weighted by their inverse document frequency, hashed into
    DIM signed sums, of unit length."""
    sums = np.zeros(DIM, dtype=np.float32)
    for word in words(text):
        hashed = zlib.crc32(word.encode())
        weight = idf.get(word, MOST_RARE)
        sums[hashed % DIM] += weight if (hashed >> 16) & 1 else -weight
    norm = float(np.linalg.norm(sums))
    return (sums / norm if norm else sums).tolist()


class Index:
    """The corpus in a fresh LanceDB table with an IVF-PQ index, searched with `nprobes`
    of its `partitions` partitions."""

    def __init__(
        self,
        corpus: str = "gold/corpus.jsonl",
        partitions: int = 32,
        nprobes: int = 4,
        vectors: str | None = None,
    ):
        self.asked: dict[str, list[float]] | None = None
        self.answers: dict[int, dict[str, list[dict[str, object]]]] = {}
        if vectors is not None:
            self._from_vectors(vectors, partitions, nprobes)
            return
        with Path(corpus).open(encoding="utf-8") as lines:
            passages = [json.loads(line) for line in lines]
        texts = [p.get("title", "") + " " + p["text"] for p in passages]
        counts = Counter(word for text in texts for word in set(words(text)))
        self.idf = {word: math.log(len(texts) / count) for word, count in counts.items()}
        rows = [
            {"doc_id": p["_id"], "vector": vector(text, self.idf)}
            for p, text in zip(passages, texts, strict=True)
        ]
        self.folder = tempfile.TemporaryDirectory(prefix="ivf-index-")  # gone with the index
        table = lancedb.connect(self.folder.name).create_table("corpus", rows)
        table.create_index(
            metric="cosine",
            num_partitions=partitions,
            num_sub_vectors=DIM // 8,
            vector_column_name="vector",
        )
        self.table, self.nprobes = table, nprobes

    def _from_vectors(self, path: str, partitions: int, nprobes: int) -> None:
        saved = np.load(path)
        docs = saved["docs"].astype(np.float32)
        rows = [
            {"doc_id": str(d), "vector": v.tolist()}
            for d, v in zip(saved["doc_ids"], docs, strict=True)
        ]
        self.asked = {
            str(q): v.astype(np.float32).tolist()
            for q, v in zip(saved["queries"], saved["query_vectors"], strict=True)
        }
        self.folder = tempfile.TemporaryDirectory(prefix="ivf-index-")
        table = lancedb.connect(self.folder.name).create_table("corpus", rows)
        table.create_index(
            metric="cosine",
            num_partitions=partitions,
            num_sub_vectors=docs.shape[1] // 8,
            vector_column_name="vector",
        )
        self.table, self.nprobes = table, nprobes

    def retrieve(self, query: str, top_k: int) -> list[dict[str, object]]:
        if self.asked is not None:
            return self._answered(top_k)[query]
        asked = vector(query, self.idf)
        search = self.table.search(asked).distance_type("cosine").nprobes(self.nprobes)
        hits = search.limit(top_k).to_list()
        return [{"doc_id": h["doc_id"], "score": 1.0 - float(h["_distance"])} for h in hits]

    def _answered(self, top_k: int) -> dict[str, list[dict[str, object]]]:
        """Every question's hits from one batched search of the same index (a search
        per question costs LanceDB about 200 times more), made at the first question."""
        if top_k not in self.answers:
            assert self.asked is not None
            names = list(self.asked)
            search = self.table.search([self.asked[n] for n in names])
            found = search.distance_type("cosine").nprobes(self.nprobes).limit(top_k).to_arrow()
            hits: dict[str, list[dict[str, object]]] = {n: [] for n in names}
            for at, doc_id, distance in zip(
                found["query_index"].to_pylist(),
                found["doc_id"].to_pylist(),
                found["_distance"].to_pylist(),
                strict=True,
            ):
                hits[names[at]].append({"doc_id": doc_id, "score": 1.0 - float(distance)})
            for listed in hits.values():
                listed.sort(key=lambda hit: -float(hit["score"]))  # type: ignore[arg-type]
            self.answers[top_k] = hits
        return self.answers[top_k]
