"""LanceDB (embedded, a folder on disk) as an llm-eval retriever.

Load the corpus once (all-MiniLM-L6-v2 vectors, unit length, in corpus order):

    python examples/recipes/lancedb/lancedb_recipe.py \
        --corpus gold/corpus.jsonl --model models/all-MiniLM-L6-v2 --uri .lancedb

then `llm-eval gate --config examples/recipes/lancedb/llm-eval.yaml` calls
`LanceDBRetriever.retrieve(query, top_k)` for each gold query (`kind: python`).

The search is exact: no vector index is built, and `bypass_vector_index()` keeps it
a flat scan even on a table that has one. The score is the cosine similarity,
`1 - _distance` for `distance_type("cosine")`. Documents at the same distance come in
corpus order (the `position` column), as with llm-eval's own `kind: embedding`.

The corpus texts, the model and the unit vectors come from `llm_eval.adapters`: the
same ones `kind: embedding` uses. Needs `pip install lancedb sentence-transformers`
(and torch).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from llm_eval.adapters import corpus_texts, sentence_transformer, unit_rows


def load(corpus: str, model_path: str, uri: str, table: str = "corpus") -> int:
    """Embed the corpus and (re)write the table; returns the number of documents."""
    import lancedb

    documents = corpus_texts(corpus)
    model = sentence_transformer(model_path)
    vectors = unit_rows(model.encode([text for _, text in documents], batch_size=32))
    rows = [
        {"position": i, "doc_id": doc_id, "vector": vector.tolist()}
        for i, ((doc_id, _), vector) in enumerate(zip(documents, vectors, strict=True))
    ]
    lancedb.connect(uri).create_table(table, data=rows, mode="overwrite")
    return len(rows)


class LanceDBRetriever:
    """Exact cosine top-k over the table `load` wrote."""

    def __init__(self, uri: str, model_path: str, table: str = "corpus") -> None:
        import lancedb

        self.table = lancedb.connect(uri).open_table(table)
        self.model = sentence_transformer(model_path)

    def _nearest(self, vector: np.ndarray, limit: int, bounds: tuple[float, float] | None) -> list:
        query = self.table.search(vector).distance_type("cosine").bypass_vector_index()
        if bounds is not None:
            query = query.distance_range(*bounds)
        return query.select(["doc_id", "position", "_distance"]).limit(limit).to_list()

    def retrieve(self, query: str, top_k: int) -> list[dict[str, Any]]:
        vector = self.model.encode([query], batch_size=32)[0]
        rows = self._nearest(vector, top_k, None)
        if rows:
            # Every row at the k-th distance, not just those LanceDB kept, so that
            # corpus order decides which of them make the cut.
            last = np.float32(rows[-1]["_distance"])
            tied = (float(last), float(np.nextafter(last, np.float32(np.inf))))
            ties = self._nearest(vector, self.table.count_rows(), tied)
            rows = [r for r in rows if np.float32(r["_distance"]) < last] + ties
        rows.sort(key=lambda r: (np.float32(r["_distance"]), r["position"]))
        return [{"doc_id": r["doc_id"], "score": 1.0 - float(r["_distance"])} for r in rows[:top_k]]


def main() -> None:
    parser = argparse.ArgumentParser(description="Load a corpus into a LanceDB table.")
    parser.add_argument("--corpus", required=True, help="BEIR JSONL corpus")
    parser.add_argument("--model", required=True, help="sentence-transformers model folder")
    parser.add_argument("--uri", required=True, help="the LanceDB folder")
    parser.add_argument("--table", default="corpus")
    args = parser.parse_args()
    count = load(args.corpus, args.model, args.uri, args.table)
    print(f"{count} documents in {args.uri} (table {args.table})")


if __name__ == "__main__":
    main()
