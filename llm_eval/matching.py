"""Relevance beyond ids: crediting retrieved results against pages and passages.

A matcher turns one gold query and its ranked results into a qrels row over *units*
and a ranked list of unit ids, so that `judge_ranked` and every relevance metric run
unchanged on top of it:

- `id`: the units are the document ids themselves (the identity).
- `page`: the units are the query's `gold_references` (`ref:0`, `ref:1`, ... graded by
  their relevance). A result carrying `document` and `page` matches a reference when
  the normalised document names are equal (case-insensitive, whitespace trimmed, an
  extension such as `.pdf` stripped) and the pages differ by at most
  `page_tolerance`.
- `text`: the units are the query's `reference_passages` (grade 1). A chunk matches a
  passage when the F1 of their token sets is at least `f1_threshold`, or when one
  normalised text contains the other at word boundaries. Tokens are lowercased and
  punctuation is deleted, as SQuAD's answer normalisation does.

Each unit is credited at most once, to the first result in rank order that matches
it; a result is credited to at most one unit (a page to the nearest unmatched
reference, a chunk to the unmatched passage with the best F1). A result credited to
nothing gets a filler id of its own, which no qrels row holds, so ranks stay the
result positions.
"""

from __future__ import annotations

import array
import bisect
import re
import unicodedata
from collections.abc import (
    Collection,
    Container,
    ItemsView,
    Iterator,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from llm_eval.gold import LABEL_OF, GoldQuery, GoldReference, GoldSet, Labels
from llm_eval.runs import RankedResult, Rankings, Run, doc_ids_of
from llm_eval.score_columns import Column


@dataclass(frozen=True, slots=True)
class MatchSettings:
    """How close a result must come to a page or passage label to be credited."""

    page_tolerance: int = 1
    """Largest |result page − gold page| that still matches."""
    f1_threshold: float = 0.3
    """Smallest token-set F1 at which a chunk matches a reference passage."""


@dataclass(frozen=True, slots=True)
class Ambiguity:
    """A result within the page tolerance of two or more references of its query."""

    query_id: str
    rank: int
    document: str
    page: int
    references: tuple[int, ...]
    """Indices of the query's gold references the result is close enough to."""
    credited: int | None
    """The reference it was credited to; None when all of them were already taken."""


@dataclass(frozen=True, slots=True)
class MatchedQuery:
    """One query as `judge_ranked` reads it: a qrels row over units, and units in rank order."""

    grades: tuple[tuple[str, int], ...]
    ranked: tuple[str, ...]
    ambiguous: tuple[Ambiguity, ...] = ()

    @property
    def credited(self) -> int:
        """How many relevant units a result was credited to."""
        units = {unit for unit, grade in self.grades if grade > 0}
        return sum(1 for unit in dict.fromkeys(self.ranked) if unit in units)


class Matcher(Protocol):
    """Credits one query's ranked results against its labels."""

    def __call__(
        self, query: GoldQuery, results: Sequence[RankedResult], settings: MatchSettings
    ) -> MatchedQuery: ...


def match_ids(
    query: GoldQuery, results: Sequence[RankedResult], settings: MatchSettings
) -> MatchedQuery:
    """The identity: units are document ids, as trec_eval judges them (documents judged
    not relevant too, so that judged@k counts them as labelled)."""
    return MatchedQuery((*query.relevant, *query.non_relevant), doc_ids_of(results))


def reference_unit(index: int) -> str:
    """The unit id of a query's `index`-th page or passage label."""
    return f"ref:{index}"


def _filler(rank: int) -> str:
    """The unit id of a result credited to nothing: unique, and in no qrels row."""
    return f"unmatched:{rank}"


_EXTENSION = re.compile(r"\.[a-z][a-z0-9]{0,4}$")


def normalise_document(name: str) -> str:
    """`  Manual.PDF ` → `manual`: trimmed, lowercased, one extension stripped.

    An extension starts with a letter, so a version such as `v1.2` is kept.
    """
    return _EXTENSION.sub("", name.strip().lower()).strip()


@dataclass(frozen=True, slots=True)
class _Pages:
    """The references of one document, sorted by page, for range look-ups."""

    pages: tuple[int, ...]
    indices: tuple[int, ...]


def _page_index(references: Sequence[GoldReference]) -> dict[str, _Pages]:
    """References grouped by normalised document, each group sorted by page."""
    groups: dict[str, list[tuple[int, int]]] = {}
    for index, reference in enumerate(references):
        groups.setdefault(normalise_document(reference.document), []).append(
            (reference.page, index)
        )
    by_document = {}
    for name, pairs in groups.items():
        pairs.sort()
        by_document[name] = _Pages(tuple(p for p, _ in pairs), tuple(i for _, i in pairs))
    return by_document


def _near(index: Mapping[str, _Pages], result: RankedResult, tolerance: int) -> list[int]:
    """References within the tolerance of the result's page: nearest first, then gold order."""
    if result.document is None or result.page is None:
        return []
    group = index.get(normalise_document(result.document))
    if group is None:
        return []
    page = result.page
    low = bisect.bisect_left(group.pages, page - tolerance)
    high = bisect.bisect_right(group.pages, page + tolerance)
    found = zip(group.pages[low:high], group.indices[low:high], strict=True)
    return [i for _, i in sorted(found, key=lambda pair: (abs(pair[0] - page), pair[1]))]


def match_pages(
    query: GoldQuery, results: Sequence[RankedResult], settings: MatchSettings
) -> MatchedQuery:
    """Credit results carrying `document` and `page` to the query's gold references.

    References are indexed by normalised document and sorted by page, so each result
    costs a dictionary look-up and a binary search: linear in results and references.
    """
    index = _page_index(query.gold_references)
    taken: set[int] = set()
    ranked: list[str] = []
    ambiguous: list[Ambiguity] = []
    for rank, result in enumerate(results, 1):
        near = _near(index, result, settings.page_tolerance)
        chosen = next((i for i in near if i not in taken), None)
        if chosen is not None:
            taken.add(chosen)
        ranked.append(_filler(rank) if chosen is None else reference_unit(chosen))
        if len(near) > 1:
            assert result.document is not None and result.page is not None
            ambiguous.append(
                Ambiguity(
                    query.query_id, rank, result.document, result.page, tuple(sorted(near)), chosen
                )
            )
    grades = tuple(
        (reference_unit(i), ref.relevance) for i, ref in enumerate(query.gold_references)
    )
    return MatchedQuery(grades, tuple(ranked), tuple(ambiguous))


@dataclass(frozen=True, slots=True)
class _Text:
    """A text normalised for matching: its words, and their set."""

    words: str
    tokens: frozenset[str]


def tokens(text: str) -> list[str]:
    """Lowercased words with punctuation deleted (SQuAD's normalisation, articles kept)."""
    kept = "".join(c for c in text.lower() if not unicodedata.category(c).startswith("P"))
    return kept.split()


def _text(text: str) -> _Text:
    words = tokens(text)
    return _Text(" ".join(words), frozenset(words))


def token_f1(a: frozenset[str], b: frozenset[str]) -> float:
    """F1 of two token sets: 2·|a ∩ b| / (|a| + |b|); 0 when both are empty."""
    if not a and not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def _contains(outer: _Text, inner: _Text) -> bool:
    """Whether `inner`'s words appear in `outer` in order, at word boundaries."""
    return f" {inner.words} " in f" {outer.words} "


def _credit_f1(chunk: _Text, reference: _Text, threshold: float) -> float | None:
    """The F1 when the chunk matches the reference (by F1 or substring), else None."""
    if not chunk.tokens or not reference.tokens:
        return None
    f1 = token_f1(chunk.tokens, reference.tokens)
    if f1 >= threshold or _contains(chunk, reference) or _contains(reference, chunk):
        return f1
    return None


def match_passages(
    query: GoldQuery, results: Sequence[RankedResult], settings: MatchSettings
) -> MatchedQuery:
    """Credit retrieved chunks (`text`) to the query's reference passages."""
    references = [_text(p) for p in query.reference_passages]
    taken: set[int] = set()
    ranked: list[str] = []
    for rank, result in enumerate(results, 1):
        chunk = _text(result.text or "")
        best: tuple[float, int] | None = None
        for i, reference in enumerate(references):
            f1 = None if i in taken else _credit_f1(chunk, reference, settings.f1_threshold)
            if f1 is not None and (best is None or f1 > best[0]):
                best = (f1, i)
        if best is None:
            ranked.append(_filler(rank))
            continue
        taken.add(best[1])
        ranked.append(reference_unit(best[1]))
    grades = tuple((reference_unit(i), 1) for i in range(len(references)))
    return MatchedQuery(grades, tuple(ranked))


MATCHERS: dict[str, Matcher] = {"id": match_ids, "page": match_pages, "text": match_passages}
"""The matchers by the name a gold file's `matching` gives."""


def matcher_for(query: GoldQuery) -> str | None:
    """The matcher that credits the query's results; None for a rejection query.

    `auto` takes the first of `relevant`, `gold_references`, `reference_passages` the
    query has.
    """
    if query.is_rejection:
        return None
    if query.matching != "auto":
        return query.matching
    if query.relevant:  # the first of LABEL_OF's, and most queries': without a search
        return "id"
    return next((name for name, field in LABEL_OF.items() if getattr(query, field)), "id")


@dataclass(frozen=True, slots=True)
class MatchedRun:
    """A run and gold set in units: the input of `judge_ranked`, and who credited what."""

    qrels: GoldQrels
    """Per gold query its units and grades (`{}` for a rejection query)."""
    ranked: Rankings
    """Per run query that did not fail, its units in rank order (other run queries
    keep their doc ids, so that they are counted as not in the gold set)."""
    matched_by: Mapping[str, str]
    """Per labelled gold query: the matcher that credits it."""
    credited: Mapping[str, int]
    """Per labelled gold query the run answered: how many of its units were credited."""
    ambiguous: tuple[Ambiguity, ...]


def match_run(gold: GoldSet, run: Run, settings: MatchSettings = MatchSettings()) -> MatchedRun:
    """Every gold query's results in units, by the matcher each query resolves to.

    A query matched by its ids is its own units: its qrels row and ranking are read
    from the gold query and the run when they are looked up, so a gold set of a million
    such queries holds no copy of either."""
    units: dict[str, tuple[str, ...]] = {}
    rows: dict[str, dict[str, int]] = {}
    # Per labelled query, in gold order: its matcher's place in `MATCHERS` and how many
    # units were credited (-1: not answered). Columns of them, not dicts: a million
    # queries' two dicts would hold 70 MB at the gate's peak.
    labelled: list[str] = []
    matchers = array.array("B")
    credits = array.array("q")
    ambiguous: list[Ambiguity] = []
    for query in gold.queries:
        name = matcher_for(query)
        if name is None:
            continue
        labelled.append(query.query_id)
        matchers.append(_MATCHER_PLACE[name])
        answer = run.queries.get(query.query_id)
        answered = answer is not None and answer.error is None
        results = answer.results if answer is not None and answered else ()
        if name == "id":  # its own units: only the count credited is kept
            credits.append(_credited_ids(query, results) if answered else -1)
            continue
        matched = MATCHERS[name](query, results, settings)
        rows[query.query_id] = dict(matched.grades)
        if answered:
            units[query.query_id] = matched.ranked
        credits.append(matched.credited if answered else -1)
        ambiguous += matched.ambiguous
    credited_column = np.frombuffer(credits, dtype=np.int64)
    answered_all = bool((credited_column >= 0).all())
    return MatchedRun(
        GoldQrels(gold.queries, rows),
        Rankings(run.queries, units),
        Column(labelled, np.frombuffer(matchers, dtype=np.uint8), _MATCHER_NAMES.__getitem__),
        Column(labelled, credited_column, int)
        if answered_all
        else {q: c for q, c in zip(labelled, credits, strict=True) if c >= 0},
        tuple(ambiguous),
    )


def _credited_ids(query: GoldQuery, results: Sequence[RankedResult]) -> int:
    """`match_ids(query, results, ...).credited`, without the matched query: how many of
    the query's relevant ids were retrieved."""
    relevant = query.relevant
    ids = relevant.ids() if type(relevant) is Labels else [d for d, g in relevant if g > 0]
    return len(set(ids).intersection(doc_ids_of(results)))


_MATCHER_NAMES = tuple(MATCHERS)
_MATCHER_PLACE = {name: place for place, name in enumerate(_MATCHER_NAMES)}


class GoldQrels(Mapping[str, Mapping[str, int]]):
    """`{query_id: {unit: grade}}` of every gold query (`{}` for a rejection query), in
    gold order: `rows` for the queries a matcher turned into units, and for the others
    their ids and grades, read from the gold query when it is looked up."""

    __slots__ = ("_position", "_queries", "_rows")

    def __init__(self, queries: Sequence[GoldQuery], rows: Mapping[str, dict[str, int]]) -> None:
        self._queries = queries
        self._rows = rows
        self._position: dict[str, int] | None = None

    def without(self, left_out: Container[str]) -> GoldQrels:
        """These qrels but for the queries `left_out` holds."""
        kept = [q for q in self._queries if q.query_id not in left_out]
        return GoldQrels(kept, self._rows)

    def _row(self, query: GoldQuery) -> dict[str, int]:
        row = self._rows.get(query.query_id)
        if row is not None:
            return row
        if query.is_rejection:  # no matcher: `matcher_for` says None
            return {}
        if not query.non_relevant:
            relevant = query.relevant
            return relevant.row() if type(relevant) is Labels else dict(relevant)
        return dict((*query.relevant, *query.non_relevant))

    def __getitem__(self, query_id: str) -> dict[str, int]:
        if self._position is None:
            self._position = {q.query_id: i for i, q in enumerate(self._queries)}
        return self._row(self._queries[self._position[query_id]])

    def __iter__(self) -> Iterator[str]:
        return (q.query_id for q in self._queries)

    def __len__(self) -> int:
        return len(self._queries)

    def values(self) -> ValuesView[Mapping[str, int]]:  # in order, without a lookup each
        return _Rows(self)

    def _compact(self, query: GoldQuery) -> Labels | None:
        """The query's labels when they are its whole row (`_row` would make a dict of
        them), else None."""
        relevant = query.relevant
        if type(relevant) is not Labels or query.non_relevant or query.is_rejection:
            return None
        return None if query.query_id in self._rows else relevant

    def sizes_and_grades(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per query (in gold order) its row's length, and every row's grades one
        after the other: a compact row's read from its string, without its dict."""
        sizes, grades = array.array("q"), array.array("q")
        for query in self._queries:
            labels = self._compact(query)
            if labels is not None:
                sizes.append(len(labels))
                grades.extend(labels.grades())
            else:
                row = self._row(query)
                sizes.append(len(row))
                grades.extend(row.values())
        return np.frombuffer(sizes, np.int64), np.frombuffer(grades, np.int64)

    def unit_rows(self) -> Iterator[Collection[str]]:
        """Per query (in gold order) its row's units in order: a compact row's ids (each
        once, as a row's keys are), any other row as it is."""
        for query in self._queries:
            labels = self._compact(query)
            yield self._row(query) if labels is None else labels.ids()

    def items(self) -> ItemsView[str, Mapping[str, int]]:
        return _Items(self)


class _Rows(ValuesView[Mapping[str, int]]):
    def __init__(self, qrels: GoldQrels) -> None:
        super().__init__(qrels)
        self._qrels = qrels

    def __iter__(self) -> Iterator[Mapping[str, int]]:
        return map(self._qrels._row, self._qrels._queries)


class _Items(ItemsView[str, Mapping[str, int]]):
    def __init__(self, qrels: GoldQrels) -> None:
        super().__init__(qrels)
        self._qrels = qrels

    def __iter__(self) -> Iterator[tuple[str, Mapping[str, int]]]:
        return ((q.query_id, self._qrels._row(q)) for q in self._qrels._queries)


def needs_matching(gold: GoldSet) -> bool:
    """Whether any query is matched by something other than its ids."""
    return any(matcher_for(q) not in (None, "id") for q in gold.queries)
