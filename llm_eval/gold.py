"""The gold set: JSONL files of queries with graded relevant documents, in tiers.

A query is labelled by document ids (`relevant`), by pages of source documents
(`gold_references`) or by the text of the passages that answer it
(`reference_passages`); `llm_eval.matching` credits retrieved results against
whichever the query's file is matched by. A query with none of them is a rejection
query: the retriever should decline to answer it.

These are the records; `llm_eval.gold_io` reads and checks the files.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

DEFAULT_TIER = "A"
MATCHINGS = ("auto", "id", "page", "text")
"""How a gold file's labels meet the results; `auto` takes, per query, the first of
`relevant` (id), `gold_references` (page) and `reference_passages` (text) it has."""
MAX_GRADE = 100
"""The largest relevance grade: grades are small scales (trec_eval's qrels use 0-4), and
nDCG's exponential gain 2^grade − 1 and the metric arrays need them bounded."""
LABEL_OF = {"id": "relevant", "page": "gold_references", "text": "reference_passages"}
"""The gold field each matcher reads."""


_JOIN = "\x00"
"""What `Labels` joins its ids with; ids that hold it are kept as pairs instead."""
_MOST_LABELS = 127
"""The most labels `Labels` holds (their count is one ASCII character)."""


class Labels(Sequence[tuple[str, int]]):
    """A query's (doc_id, grade) pairs held as one string: their count as a character,
    each grade as a character, then the ids joined by a character no id holds. A gold
    set of a million queries of three or four labels would otherwise hold a tuple, a
    pair and a string per label, about 440 bytes a query against 120 here. Made by
    `compact_labels`, which keeps the pairs as a tuple when they cannot be held so;
    reads as that tuple would."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def _labels(self) -> Iterator[tuple[str, int]]:
        """The (doc_id, grade) pairs, decoded from the string as they are read."""
        return zip(self.ids(), self.grades(), strict=True)

    def _pairs(self) -> tuple[tuple[str, int], ...]:
        return tuple(self._labels())

    def _grade_text(self) -> str:
        """The grades as the characters the string holds them as (`chr(grade)`)."""
        text = self._text
        return text[1 : ord(text[0]) + 1]

    def grades(self) -> Iterator[int]:
        """The labels' grades, in order, without their pairs."""
        return map(ord, self._grade_text())

    def ids(self) -> list[str]:
        """The labels' ids, in order, without their pairs."""
        text = self._text
        return text[ord(text[0]) + 1 :].split(_JOIN)

    def sorted_pairs(self) -> list[tuple[str, str]]:
        """`sorted(labels)` with each grade as its character (`chr(grade)`, which sorts
        as the grade does), without the pairs of ints between: a gold query's
        fingerprint sorts its labels, and a million queries feel it."""
        return sorted(zip(self.ids(), self._grade_text(), strict=True))

    def row(self) -> dict[str, int]:
        """`{doc_id: grade}`, as `dict(labels)` but without the pairs between."""
        return dict(self._labels())

    @overload
    def __getitem__(self, index: int) -> tuple[str, int]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[str, int], ...]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._pairs()[index]

    def __len__(self) -> int:
        return ord(self._text[0])

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._pairs())

    def __add__(self, other: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
        return self._pairs() + tuple(other)

    def __radd__(self, other: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
        return tuple(other) + self._pairs()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Labels):
            return self._text == other._text
        return isinstance(other, Sequence) and self._pairs() == tuple(other)

    def __hash__(self) -> int:
        return hash(self._pairs())

    def __repr__(self) -> str:
        return repr(self._pairs())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Labels, (self._text,))


def compact_labels(pairs: Sequence[tuple[str, int]]) -> Sequence[tuple[str, int]]:
    """The pairs as `Labels` when there are 1 to `_MOST_LABELS` of them, each id a
    non-empty string without the joining character and each grade 1 to `MAX_GRADE`;
    as a tuple otherwise."""
    if not 0 < len(pairs) <= _MOST_LABELS or not all(
        type(doc) is str and doc and type(grade) is int and 0 < grade <= MAX_GRADE
        for doc, grade in pairs
    ):
        return tuple(pairs)
    ids, grades = zip(*pairs, strict=True)
    if len(set(ids)) < len(ids):  # a `Labels` holds each id once, as a row's keys do
        return tuple(pairs)
    return _joined(ids, grades, len(pairs)) or tuple(pairs)


def compact_grades(relevant: dict[str, int]) -> Sequence[tuple[str, int]]:
    """`compact_labels` of `{doc_id: grade}` whose ids are non-empty and whose grades
    are 1 to `MAX_GRADE` (the caller made sure), made from the dict without its pairs:
    a gold file's reading makes one per query."""
    if 0 < len(relevant) <= _MOST_LABELS:
        return _joined(relevant, relevant.values(), len(relevant)) or tuple(relevant.items())
    return tuple(relevant.items())


def _joined(ids: Iterable[str], grades: Iterable[int], count: int) -> Labels | None:
    """`Labels` of `count` ids and their grades; None when an id holds `_JOIN`."""
    joined = _JOIN.join(ids)
    if joined.count(_JOIN) != count - 1:
        return None
    return Labels("".join([chr(count), *map(chr, grades), joined]))


@dataclass(frozen=True, slots=True)
class GoldReference:
    """A page of a source document that answers a query."""

    document: str
    """The document's name as results carry it (e.g. `Manual.pdf`)."""
    page: int
    relevance: int = 1
    """The grade, >= 1."""


@dataclass(frozen=True, slots=True)
class GoldQuery:
    """One reviewed question and the documents that answer it."""

    query_id: str
    query: str
    tier: str
    tags: tuple[str, ...]
    relevant: Sequence[tuple[str, int]]
    """(doc_id, grade) pairs; grade >= 1. Empty for rejection queries. A tuple, or
    `Labels` when the gold file's reading made them compact."""
    is_rejection: bool
    expected_answer: str | None
    notes: str | None
    path: str
    """The gold file this query was read from."""
    line: int
    """Its line in that file (annotations point here)."""
    gold_references: tuple[GoldReference, ...] = ()
    """Pages that answer the query, for results that carry `document` and `page`."""
    reference_passages: tuple[str, ...] = ()
    """Texts that answer the query, for gold sets without ids."""
    matching: str = "auto"
    """How its file is matched: one of `MATCHINGS`."""
    source: str = "human"
    """`human` (written by a person) or `synthetic` (written by a model from a chunk)."""
    reviewed: bool = True
    """A person has checked it; a synthetic question is not until `gold review`
    accepts it, and may not gate before."""
    prompt_version: str | None = None
    """The prompt that wrote a synthetic question (`question_writing@1`)."""
    non_relevant: tuple[tuple[str, int], ...] = ()
    """(doc_id, grade) pairs judged not relevant (grade 0, or negative in TREC qrels):
    they count as labelled for `judged@k`. BEIR and TREC qrels often list none, and
    then judged@k cannot tell holes in the labels from misses (`has_negatives`)."""

    @property
    def grades(self) -> dict[str, int]:
        """`{doc_id: grade}`: this query's row of the qrels, non-relevant judgments too."""
        return dict(self.non_relevant) | dict(self.relevant)


def has_negatives(queries: Iterable[GoldQuery]) -> bool:
    """Whether any of the queries' labels judge a document not relevant. Without one
    (positive-only qrels) judged@k is the share of relevant results, so it falls with
    every drop in recall and says nothing about holes in the labels."""
    return any(query.non_relevant for query in queries)


SOURCES = ("human", "synthetic")


@dataclass(frozen=True, slots=True)
class GoldSource:
    """A gold file (or a BEIR folder) and the tier its queries belong to unless they
    say otherwise."""

    path: str
    tier: str | None = None
    matching: str = "auto"
    """One of `MATCHINGS`: which labels of its queries the results are matched against."""
    split: str | None = None
    """Set when `path` is a BEIR dataset folder: the qrels split (`qrels/<split>.tsv`)
    whose queries are the gold set. None: `path` is a gold JSONL file."""
    qrels: str | None = None
    """Set when `path` is a TREC topics file: the qrels file that judges its topics."""


@dataclass(frozen=True, slots=True)
class GoldSet:
    """All gold queries, in file order."""

    queries: tuple[GoldQuery, ...]

    def qrels(self) -> dict[str, dict[str, int]]:
        """`{query_id: {doc_id: grade}}` over every query (queries without ids map to `{}`)."""
        return {q.query_id: q.grades for q in self.queries}

    def by_id(self) -> dict[str, GoldQuery]:
        """`{query_id: query}`."""
        return {q.query_id: q for q in self.queries}

    def tiers(self) -> tuple[str, ...]:
        """Tier names in order of first appearance."""
        return tuple(dict.fromkeys(q.tier for q in self.queries))

    def tags(self) -> tuple[str, ...]:
        """Tag names, sorted."""
        return tuple(sorted({t for q in self.queries for t in q.tags}))


def labels_not_in(
    queries: Iterable[GoldQuery], known: Container[str]
) -> tuple[tuple[GoldQuery, str], ...]:
    """Each (query, doc_id) of a `relevant` label naming a document `known` lacks, in
    file order: a question whose only answer is not in the corpus scores 0 forever."""
    return tuple((q, doc) for q in queries for doc, _ in q.relevant if doc not in known)
