"""PostgreSQL with pgvector as an llm-eval retriever.

Load the corpus once (all-MiniLM-L6-v2 vectors, unit length, with their corpus
position) into a table of a database that has the `vector` extension available:

    python examples/recipes/pgvector/pgvector_recipe.py \
        --corpus gold/corpus.jsonl --model models/all-MiniLM-L6-v2 --dsn "dbname=rag"

then `llm-eval gate --config examples/recipes/pgvector/llm-eval.yaml` calls
`PgvectorRetriever.retrieve(query, top_k)` for each gold query (`kind: python`).
The connection string is libpq's: what it leaves out comes from PGHOST, PGPORT,
PGUSER, PGPASSWORD and PGDATABASE, so the config needs no secret.

The search is exact: `ORDER BY embedding <=> query` with no ivfflat or hnsw index on
the table is a full scan that sorts every row by cosine distance. The score is the
cosine similarity, `1 - (embedding <=> query)`; documents at the same distance come
in corpus order (`position` is the second sort key), as with llm-eval's own
`kind: embedding`.

The corpus texts, the model and the unit vectors come from `llm_eval.adapters`: the
same ones `kind: embedding` uses. Needs
`pip install "psycopg[binary]" pgvector sentence-transformers` (and torch).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from llm_eval.adapters import corpus_texts, sentence_transformer, unit_rows

SEARCH = """
SELECT doc_id, 1 - (embedding <=> %(q)s) AS score
FROM {table}
ORDER BY embedding <=> %(q)s, position
LIMIT %(k)s
"""


def connect(dsn: str) -> Any:
    """A connection with the vector type registered (numpy arrays in and out)."""
    import psycopg
    from pgvector.psycopg import register_vector

    connection = psycopg.connect(dsn, autocommit=True)
    register_vector(connection)
    return connection


def load(corpus: str, model_path: str, dsn: str, table: str = "corpus") -> int:
    """Embed the corpus and (re)create the table; returns the number of documents."""
    import psycopg
    from psycopg import sql

    documents = corpus_texts(corpus)
    model = sentence_transformer(model_path)
    vectors = unit_rows(model.encode([text for _, text in documents], batch_size=32))
    rows = [
        (i, doc_id, v) for i, ((doc_id, _), v) in enumerate(zip(documents, vectors, strict=True))
    ]
    name = sql.Identifier(table)
    with psycopg.connect(dsn, autocommit=True) as setup:  # before the type is registered
        setup.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with connect(dsn) as connection:
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        create = (
            "CREATE TABLE {} (position integer PRIMARY KEY, doc_id text UNIQUE NOT NULL,"
            " embedding vector({}) NOT NULL)"
        )
        connection.execute(sql.SQL(create).format(name, sql.Literal(vectors.shape[1])))
        insert = "INSERT INTO {} (position, doc_id, embedding) VALUES (%s, %s, %s)"
        with connection.cursor() as cursor:
            cursor.executemany(sql.SQL(insert).format(name), rows)
    return len(rows)


class PgvectorRetriever:
    """Exact cosine top-k over the table `load` wrote."""

    def __init__(self, model_path: str, dsn: str = "", table: str = "corpus") -> None:
        from psycopg import sql

        self.connection = connect(dsn)
        self.search = sql.SQL(SEARCH).format(table=sql.Identifier(table))
        self.model = sentence_transformer(model_path)

    def retrieve(self, query: str, top_k: int) -> list[dict[str, Any]]:
        vector = np.asarray(self.model.encode([query], batch_size=32)[0], dtype=np.float32)
        rows = self.connection.execute(self.search, {"q": vector, "k": top_k}).fetchall()
        return [{"doc_id": doc_id, "score": float(score)} for doc_id, score in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description="Load a corpus into a pgvector table.")
    parser.add_argument("--corpus", required=True, help="BEIR JSONL corpus")
    parser.add_argument("--model", required=True, help="sentence-transformers model folder")
    parser.add_argument("--dsn", default="", help="libpq connection string (PG* env vars too)")
    parser.add_argument("--table", default="corpus")
    args = parser.parse_args()
    count = load(args.corpus, args.model, args.dsn, args.table)
    print(f"{count} documents in table {args.table}")


if __name__ == "__main__":
    main()
