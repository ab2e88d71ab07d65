"""TREC topics with a qrels file, read as a gold set.

Two topic formats: TREC's classic one (`<top> <num> Number: 401 <title> … </top>`,
the query is the title) and a two-column TSV `query_id<TAB>query` (MS MARCO's
queries files). The qrels are TREC's (`query_id 0 doc_id grade`) or a BEIR TSV. As
for a BEIR folder, the gold set is the judged topics with a relevant document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from llm_eval.beir_io import judged_queries
from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.qrels_io import load_qrels
from llm_eval.textio import iter_lines, read_text

_TOP = re.compile(r"<top>(.*?)</top>", re.S)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(\S+)")
_TITLE = re.compile(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<\w+>|$)", re.S)


def iter_trec_queries(
    topics: str | Path, qrels: str | Path, tier: str | None = None, matching: str = "auto"
) -> Iterator[GoldQuery]:
    """The gold queries of a topics file judged in a qrels file."""
    judged = load_qrels(qrels)
    texts = load_topics(topics)
    yield from judged_queries(texts, judged, topics, str(qrels), tier, matching)


def load_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """`{query_id: (query, line)}` from classic TREC topics or a `query_id<TAB>query` TSV."""
    text = read_text(path)
    topics = _classic(text, path) if "<top>" in text else _tsv(path)
    if not topics:
        raise InputError("the topics file has no topics", path=path)
    return topics


def _classic(text: str, path: str | Path) -> dict[str, tuple[str, int]]:
    topics: dict[str, tuple[str, int]] = {}
    for match in _TOP.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        number, title = _NUM.search(match.group(1)), _TITLE.search(match.group(1))
        if number is None or title is None or not title.group(1):
            missing = "<num>" if number is None else "<title>"
            raise InputError(f"topic without a {missing}", path=path, line=line)
        _add(topics, number.group(1), " ".join(title.group(1).split()), line, path)
    return topics


def _tsv(path: str | Path) -> dict[str, tuple[str, int]]:
    topics: dict[str, tuple[str, int]] = {}
    for line, text in iter_lines(path):
        fields = text.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise InputError(
                "expected `<top>` topics or 2 tab-separated columns `query_id query`",
                path=path,
                line=line,
            )
        _add(topics, fields[0].strip(), fields[1].strip(), line, path)
    return topics


def _add(
    topics: dict[str, tuple[str, int]], query_id: str, query: str, line: int, path: str | Path
) -> None:
    if query_id in topics:
        first = topics[query_id][1]
        raise InputError(f"topic {query_id!r} twice (first at line {first})", path=path, line=line)
    topics[query_id] = (query, line)
