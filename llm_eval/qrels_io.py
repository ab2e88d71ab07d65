"""Relevance judgments in TREC (`qid 0 docid grade`) and BEIR (`query-id corpus-id score`) files.

Negative grades (e.g. -2 for spam in TREC Web track qrels) are accepted and, as in
trec_eval, count as judged non-relevant.
"""

from __future__ import annotations

from pathlib import Path

from llm_eval.errors import InputError
from llm_eval.gold import MAX_GRADE
from llm_eval.textio import iter_lines

BEIR_HEADER = ("query-id", "corpus-id", "score")


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file or a BEIR qrels TSV (told apart by BEIR's header line)."""
    qrels: dict[str, dict[str, int]] = {}
    lines = iter_lines(path)
    first = next(lines, None)
    if first is None:
        raise InputError("the qrels file has no judgments", path=path)
    beir = tuple(first[1].strip().split("\t")) == BEIR_HEADER
    if not beir:
        _add_trec(qrels, path, *first)
    for line, text in lines:
        if beir:
            _add_beir(qrels, path, line, text)
        else:
            _add_trec(qrels, path, line, text)
    if not qrels:
        raise InputError("the qrels file has no judgments, only BEIR's header line", path=path)
    return qrels


def _add_trec(qrels: dict[str, dict[str, int]], path: str | Path, line: int, text: str) -> None:
    fields = text.split()
    if len(fields) != 4:
        raise InputError(
            f"expected 4 columns `query_id iteration doc_id grade`, got {len(fields)}",
            path=path,
            line=line,
        )
    _add(qrels, path, line, fields[0], fields[2], fields[3])


def _add_beir(qrels: dict[str, dict[str, int]], path: str | Path, line: int, text: str) -> None:
    fields = text.split("\t")
    if len(fields) != 3:
        raise InputError(
            f"expected 3 tab-separated columns `query-id corpus-id score`, got {len(fields)}",
            path=path,
            line=line,
        )
    _add(qrels, path, line, *(f.strip() for f in fields))


def _add(
    qrels: dict[str, dict[str, int]],
    path: str | Path,
    line: int,
    query_id: str,
    doc_id: str,
    grade_text: str,
) -> None:
    try:
        grade = int(grade_text)
    except ValueError:
        raise InputError(
            f"grade must be a whole number, got {grade_text!r}", path=path, line=line
        ) from None
    if abs(grade) > MAX_GRADE:
        raise InputError(
            f"grade must be from -{MAX_GRADE} to {MAX_GRADE}, got {grade_text!r}",
            path=path,
            line=line,
        )
    judged = qrels.setdefault(query_id, {})
    if doc_id in judged:
        raise InputError(
            f"document {doc_id!r} is judged twice for query {query_id!r}", path=path, line=line
        )
    judged[doc_id] = grade
