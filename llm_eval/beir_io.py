"""A BEIR dataset folder read as a gold set: `queries.jsonl` and `qrels/<split>.tsv`.

BEIR's layout (Thakur et al., 2021): `corpus.jsonl` (`{"_id", "title", "text"}`, the
corpus format llm-eval reads anyway), `queries.jsonl` (`{"_id", "text"}`) and one
qrels TSV per split with the header `query-id corpus-id score`. The gold set is the
split's queries, in the order of `queries.jsonl`, with their judged documents; as in
BEIR's loader, a query of `queries.jsonl` the split does not judge is not part of it.
Unlike BEIR, neither is one whose judgments are all 0: it has no relevant document,
which would make it a rejection query, and it is not a question the retriever should
decline (BEIR's averages count it as 0).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.gold import DEFAULT_TIER, GoldQuery, compact_labels
from llm_eval.qrels_io import load_qrels
from llm_eval.textio import iter_unique_records

QUERIES = "queries.jsonl"
CORPUS = "corpus.jsonl"


def qrels_path(folder: str | Path, split: str) -> Path:
    """The split's qrels file; an InputError listing the splits there are when it is missing."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError("no such folder, expected a BEIR dataset folder", path=folder)
    path = root / "qrels" / f"{split}.tsv"
    if not path.is_file():
        splits = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        there = f"splits there: {', '.join(splits)}" if splits else "the folder has none"
        raise InputError(f"no qrels for split {split!r} ({there})", path=path)
    return path


def iter_beir_queries(
    folder: str | Path, split: str, tier: str | None = None, matching: str = "auto"
) -> Iterator[GoldQuery]:
    """The gold queries of a BEIR folder's split (see the module's docstring)."""
    qrels = load_qrels(qrels_path(folder, split))
    queries_path = Path(folder) / QUERIES
    texts = {
        query_id: (text, line)
        for query_id, text, line in iter_unique_records(
            queries_path, _parse_query, lambda q: q[0], "_id"
        )
    }
    yield from judged_queries(texts, qrels, queries_path, f"split {split!r}", tier, matching)


def judged_queries(
    texts: Mapping[str, tuple[str, int]],
    qrels: Mapping[str, Mapping[str, int]],
    queries_path: str | Path,
    judged_in: str,
    tier: str | None,
    matching: str,
) -> Iterator[GoldQuery]:
    """Gold queries from `{query_id: (text, line)}` and qrels, in the texts' order: the
    judged ones with a relevant document (grade > 0), with their non-relevant judgments
    (grade 0 or below) kept for judged@k. A query judged in `judged_in` but without a
    text is an error."""
    unknown = sorted(set(qrels) - set(texts))
    if unknown:
        name = Path(queries_path).name
        raise InputError(
            f"query {unknown[0]!r} is judged in {judged_in} but not in {name}",
            path=queries_path,
        )
    for query_id, (text, line) in texts.items():
        judged = qrels.get(query_id, {})
        relevant = tuple((doc, grade) for doc, grade in judged.items() if grade > 0)
        if not relevant:
            continue
        yield GoldQuery(
            query_id=query_id,
            query=text,
            tier=tier or DEFAULT_TIER,
            tags=(),
            relevant=compact_labels(relevant),
            is_rejection=False,
            expected_answer=None,
            notes=None,
            path=str(queries_path),
            line=line,
            matching=matching,
            non_relevant=tuple((doc, grade) for doc, grade in judged.items() if grade <= 0),
        )


def _parse_query(record: Mapping[str, Any], path: str | Path, line: int) -> tuple[str, str, int]:
    query_id, text = record.get("_id"), record.get("text")
    if isinstance(query_id, int) and not isinstance(query_id, bool):
        query_id = str(query_id)
    if not isinstance(query_id, str) or not query_id:
        raise InputError("missing or not a non-empty string", path=path, line=line, key="_id")
    if not isinstance(text, str) or not text.strip():
        raise InputError("missing or not a non-empty string", path=path, line=line, key="text")
    return query_id, text, line
