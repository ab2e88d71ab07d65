"""What the gold set covers of the corpus, and where questions are missing (pure).

A corpus document is *labelled* when a gold question names it as relevant, and
*near* a question when it is labelled or among the question's lexical neighbours
(its top results by BM25 with default settings, whatever retriever is configured:
coverage should not move when the retriever is tuned). Documents group twice:

- *sections*: the document a chunk was cut from, its id before `#` (`re.sub#2` is
  in `re.sub`), or the `section` field of its metadata;
- *areas*: coarser, the section's first name before `.` or `:` (`re.sub` is in
  `re`, `topic:assignment` in `topic`), or the `area` field of its metadata.

Ids that name no groups (BEIR SciFact's `10015292`) would make most documents an
area of their own, and a plan would ask for questions "about: 10015292, 10017612".
When the ids and metadata leave most documents alone in their area, documents are
grouped by a title term instead (`title_term_areas`), and `Coverage.areas_by` says so.

An area or section nobody asks about is where new questions help most.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm_eval.gold import GoldQuery

if TYPE_CHECKING:  # the record only: its reader is file I/O
    from llm_eval.corpus import Document


NEIGHBOURS = 10
"""A document is near a question when it is among the question's top 10 by BM25."""


def section_of(document: Document) -> str:
    """The section a document belongs to: its metadata's `section`, else its id before `#`."""
    given = document.metadata.get("section")
    return given if isinstance(given, str) and given else document.doc_id.split("#", 1)[0]


def area_of(document: Document) -> str:
    """The area a document belongs to: its metadata's `area`, else its section's first name."""
    given = document.metadata.get("area")
    if isinstance(given, str) and given:
        return given
    return re.split(r"[.:/]", section_of(document), maxsplit=1)[0] or section_of(document)


BY_IDS = "the documents' ids (or their `area` metadata)"
BY_TITLE_TERMS = (
    "a term of each document's title (its ids and metadata name no groups): the "
    "commonest title term shared with other documents"
)

_STOPWORD_TEXT = """a about above after again against all also among an and any are as at be been
    before being between both but by can could did do does during each few for from
    further had has have how if in into is it its may might more most new no nor not of
    off on once only or other our out over own same should so some such than that the
    their them then there these they this those through to too under until up upon use
    used using very via was we were what when where which while who whom why will with
    within without would you your analysis based effect effects role study studies"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words, and words that start titles of every subject."""
_TERM = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
_NO_TERM = "(no shared title term)"


def _alone_share(areas: Mapping[str, str]) -> float:
    """Share of the documents that are alone in their area."""
    sizes = Counter(areas.values())
    return sum(1 for a in areas.values() if sizes[a] == 1) / len(areas) if areas else 0.0


def _title_terms(document: Document) -> set[str]:
    """The content words of its title (of its text's first 20 words when it has none)."""
    text = document.title or " ".join(document.text.split()[:20])
    return {w for w in _TERM.findall(text.lower()) if len(w) > 2 and w not in _STOPWORDS}


def title_term_areas(documents: Sequence[Document]) -> dict[str, str]:
    """`{doc_id: area}`: each document in the group of its commonest title term shared
    with another document, among the terms in at most half the titles (a term in most
    titles says nothing); ties go to the alphabetically first term."""
    terms = {d.doc_id: _title_terms(d) for d in documents}
    frequency = Counter(t for found in terms.values() for t in found)
    cap = max(2, len(documents) // 2)
    areas = {}
    for doc_id, found in terms.items():
        shared = [t for t in found if 2 <= frequency[t] <= cap]
        areas[doc_id] = min(shared, key=lambda t: (-frequency[t], t)) if shared else _NO_TERM
    return areas


def document_areas(documents: Sequence[Document]) -> tuple[dict[str, str], str]:
    """`{doc_id: area}` and how the areas were made: by `area_of`, or by title terms
    when that leaves more than half the documents alone and title terms do better."""
    by_ids = {d.doc_id: area_of(d) for d in documents}
    alone = _alone_share(by_ids)
    if alone <= 0.5:
        return by_ids, BY_IDS
    by_terms = title_term_areas(documents)
    ungrouped = sum(1 for a in by_terms.values() if a == _NO_TERM) / len(by_terms)
    if _alone_share(by_terms) + ungrouped < alone:
        return by_terms, BY_TITLE_TERMS
    return by_ids, BY_IDS


@dataclass(frozen=True, slots=True)
class SectionCoverage:
    """One section: its documents and how many of them questions reach."""

    name: str
    documents: int
    labelled: int
    near: int
    questions: int
    """Gold questions with a labelled document in this section."""

    @property
    def uncovered(self) -> int:
        """Documents no question is near."""
        return self.documents - self.near


@dataclass(frozen=True, slots=True)
class TagCoverage:
    """One tag: its questions, and the areas their labels fall in."""

    tag: str
    questions: int
    tiers: Mapping[str, int]
    areas: tuple[str, ...]
    """Most labels first."""
    sections: tuple[str, ...] = ()
    """The sections its labels fall in, most labels first."""


@dataclass(frozen=True, slots=True)
class MissingLabel:
    """A label naming a document the corpus does not have."""

    query_id: str
    path: str
    line: int
    doc_id: str


@dataclass(frozen=True, slots=True)
class Coverage:
    """The whole picture."""

    documents: int
    labelled: int
    sections: tuple[SectionCoverage, ...]
    """Most uncovered documents first."""
    areas: tuple[SectionCoverage, ...]
    """The same by area, most uncovered documents first."""
    tags: tuple[TagCoverage, ...]
    missing: tuple[MissingLabel, ...]
    near_ids: frozenset[str]
    """Every document near some question (what `gold synthesize` skips)."""
    area_of: Mapping[str, str]
    """`{doc_id: area}` of every document."""
    areas_by: str = BY_IDS
    """How documents were grouped into areas (`BY_IDS` or `BY_TITLE_TERMS`)."""

    @property
    def near(self) -> int:
        """Documents near some question."""
        return len(self.near_ids)

    @property
    def uncovered_share(self) -> float:
        """Share of the corpus no question is near."""
        return 1.0 - self.near / self.documents if self.documents else 0.0

    @property
    def untouched_sections(self) -> tuple[SectionCoverage, ...]:
        """Sections no question is near at all."""
        return tuple(s for s in self.sections if s.near == 0)


def _groups(
    documents: Sequence[Document],
    key: Callable[[Document], str],
    labelled: set[str],
    near: set[str],
    questions: Mapping[str, set[str]],
) -> list[SectionCoverage]:
    members: dict[str, list[str]] = defaultdict(list)
    for document in documents:
        members[key(document)].append(document.doc_id)
    return [
        SectionCoverage(
            name,
            len(ids),
            sum(1 for d in ids if d in labelled),
            sum(1 for d in ids if d in near),
            len(questions.get(name, ())),
        )
        for name, ids in members.items()
    ]


def coverage(
    documents: Sequence[Document],
    queries: Sequence[GoldQuery],
    neighbours: Mapping[str, Sequence[str]],
) -> Coverage:
    """Coverage of `documents` by `queries`, with each query's lexical `neighbours`."""
    known = {d.doc_id: d for d in documents}
    area, areas_by = document_areas(documents)
    labelled: set[str] = set()
    near: set[str] = set()
    missing = []
    questions_in: dict[str, set[str]] = defaultdict(set)
    tag_areas: dict[str, Counter[str]] = defaultdict(Counter)
    tag_sections: dict[str, Counter[str]] = defaultdict(Counter)
    tag_tiers: dict[str, Counter[str]] = defaultdict(Counter)
    tag_questions: Counter[str] = Counter()
    for query in queries:
        for tag in query.tags:
            tag_questions[tag] += 1
            tag_tiers[tag][query.tier] += 1
        for doc_id, _ in query.relevant:
            document = known.get(doc_id)
            if document is None:
                missing.append(MissingLabel(query.query_id, query.path, query.line, doc_id))
                continue
            labelled.add(doc_id)
            section = section_of(document)
            questions_in[section].add(query.query_id)
            for tag in query.tags:
                tag_areas[tag][area[doc_id]] += 1
                tag_sections[tag][section] += 1
        near.update(d for d in neighbours.get(query.query_id, ()) if d in known)
    near |= labelled
    sections = _groups(documents, section_of, labelled, near, questions_in)
    sections.sort(key=lambda s: (-s.uncovered, -s.documents, s.name))
    area_questions: dict[str, set[str]] = defaultdict(set)
    for document in documents:
        area_questions[area[document.doc_id]] |= questions_in.get(section_of(document), set())
    areas = _groups(documents, lambda d: area[d.doc_id], labelled, near, area_questions)
    areas.sort(key=lambda s: (-s.uncovered, s.near / s.documents, s.name))
    tags = tuple(
        TagCoverage(
            tag,
            count,
            dict(sorted(tag_tiers[tag].items())),
            tuple(name for name, _ in tag_areas[tag].most_common()),
            tuple(name for name, _ in tag_sections[tag].most_common()),
        )
        for tag, count in sorted(tag_questions.items(), key=lambda item: (item[1], item[0]))
    )
    return Coverage(
        len(documents),
        len(labelled),
        tuple(sections),
        tuple(areas),
        tags,
        tuple(missing),
        frozenset(near),
        area,
        areas_by,
    )
