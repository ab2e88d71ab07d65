"""Reading gold JSONL files into a `GoldSet`, every field checked (file, line, key)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.gold import (
    DEFAULT_TIER,
    LABEL_OF,
    MATCHINGS,
    MAX_GRADE,
    SOURCES,
    GoldQuery,
    GoldReference,
    GoldSet,
    GoldSource,
    compact_grades,
    compact_labels,
)
from llm_eval.qrels_io import BEIR_HEADER
from llm_eval.slotted import positional
from llm_eval.textio import iter_lines, json_type, parse_json_object
from llm_eval.wording.english import plural

_FIELDS = {
    "query_id",
    "query",
    "tier",
    "tags",
    "relevant",
    "gold_references",
    "reference_passages",
    "is_rejection",
    "expected_answer",
    "notes",
    "source",
    "reviewed",
    "prompt_version",
    "category",
    "difficulty",
    "expected_answer_gist",
}

SLICE_FIELDS = ("category", "difficulty")
"""Fields of the design documents' seed schema that slice the gold set as tags do: a
query with `"category": "lookup"` is in the slice `category:lookup`."""


def load_gold(sources: Iterable[GoldSource | str | Path]) -> GoldSet:
    """Read gold JSONL files; query ids must be unique across all of them."""
    seen: dict[str, GoldQuery] = {}
    queries: list[GoldQuery] = []
    for source in sources:
        if not isinstance(source, GoldSource):
            source = GoldSource(str(source))
        if source.matching not in MATCHINGS:
            raise InputError(
                f"matching: expected one of {', '.join(MATCHINGS)}, got {source.matching!r}",
                path=source.path,
            )
        count = len(queries)
        for query in _iter_source(source):
            first = seen.get(query.query_id)
            if first is not None:
                raise InputError(
                    f"duplicate query_id {query.query_id!r} (first at {first.path}:{first.line})",
                    path=query.path,
                    line=query.line,
                    key="query_id",
                )
            seen[query.query_id] = query
            queries.append(query)
        if len(queries) == count:
            what = "the gold file has no queries"
            if source.split is not None:
                what = f"split {source.split!r} has no query with a relevant document"
            elif source.qrels is not None:
                what = f"no topic has a relevant document in {source.qrels}"
            raise InputError(what, path=source.path)
    return GoldSet(tuple(queries))


def _iter_source(source: GoldSource) -> Iterator[GoldQuery]:
    if source.split is not None:
        from llm_eval.beir_io import iter_beir_queries

        return iter_beir_queries(source.path, source.split, source.tier, source.matching)
    if source.qrels is not None:
        from llm_eval.trec_topics_io import iter_trec_queries

        return iter_trec_queries(source.path, source.qrels, source.tier, source.matching)
    return iter_gold_file(source.path, source.tier, source.matching)


def iter_gold_file(
    path: str | Path, tier: str | None = None, matching: str = "auto"
) -> Iterator[GoldQuery]:
    """Stream the queries of one gold file, failing on the first bad line."""
    name = str(path)
    for line, text in iter_lines(path):
        if line == 1:
            _refuse_qrels(path, line, text)
        record = parse_json_object(text, path, line, strict=True)
        yield _parse_query(record, name, line, tier, matching)


def _refuse_qrels(path: str | Path, line: int, text: str) -> None:
    """A qrels file given as gold JSONL (its first line tells): say which setting reads it."""
    if tuple(f.strip() for f in text.split("\t")) == BEIR_HEADER:
        file = Path(path)
        folder = file.parent.parent if file.parent.name == "qrels" else Path("FOLDER")
        raise InputError(
            "a BEIR qrels file, not gold JSONL: list its dataset folder in the config as "
            f"`gold: [{{beir: {folder.as_posix()}, split: {file.stem}}}]` (the folder of "
            "corpus.jsonl, queries.jsonl and qrels/)",
            path=path,
            line=line,
        )
    fields = text.split()
    if len(fields) == 4 and fields[3].lstrip("-").isdigit():
        raise InputError(
            "TREC qrels (`query_id 0 doc_id grade`), not gold JSONL: a gold set needs the "
            "queries' text too: list it with its topics as `gold: [{topics: TOPICS, "
            f"qrels: {Path(path).as_posix()}}}]`, or score a run against it with "
            "`llm-eval evaluate --qrels`",
            path=path,
            line=line,
        )


_USUAL_FIELDS = frozenset({"query_id", "query", "tier", "tags", "relevant", "is_rejection"})
"""The fields of most gold records, which `_usual_query` reads."""
_STR = frozenset({str})
_GOLD_QUERY = positional(GoldQuery)
_USUAL_TAGS: dict[tuple[str, ...], tuple[str, ...]] = {}
"""A record's list of tags, as given, and the shared tuple of its tags (each once): a
gold set's queries share a few lists, checked once each."""


def _usual_query(
    record: Mapping[str, Any], path: str, line: int, file_tier: str | None, matching: str
) -> GoldQuery | None:
    """The query of a record of the usual shape: no field beyond `_USUAL_FIELDS`, text
    ids and tags, grades of 1 to `MAX_GRADE` by document id, and nothing `_parse_query`
    would refuse; None for any other record, which `_parse_query` reads (and names what
    is wrong with). Half the time of `_parse_query`, which a million queries feel."""
    if matching not in ("auto", "id") or not _USUAL_FIELDS.issuperset(record):
        return None
    query_id, query = record.get("query_id"), record.get("query")
    if type(query_id) is not str or type(query) is not str:
        return None
    tier, tags = record.get("tier", file_tier), record.get("tags", [])
    relevant, is_rejection = record.get("relevant", {}), record.get("is_rejection", False)
    if type(tier) is not str or (file_tier is not None and tier != file_tier):
        return None
    if type(relevant) is not dict or type(is_rejection) is not bool or type(tags) is not list:
        return None
    if (is_rejection and relevant) or not (query_id.strip() and query.strip() and tier.strip()):
        return None
    for grade in relevant.values():
        if type(grade) is not int or not 0 < grade <= MAX_GRADE:
            return None
    if "" in relevant:
        return None
    if not _STR.issuperset(map(type, tags)):
        return None
    shared = _USUAL_TAGS.get(listed := tuple(tags))
    if shared is None:  # tags not met before: checked, and their one tuple found
        if "" in listed:
            return None
        shared = _shared_tags(tuple(dict.fromkeys(map(sys.intern, listed))))
        if len(_USUAL_TAGS) < _SHARED_TAGS_MAX:
            _USUAL_TAGS[listed] = shared
    return _GOLD_QUERY(  # by position: a million queries feel the keywords
        query_id,
        query,
        sys.intern(tier),
        shared,
        compact_grades(relevant),
        not relevant,
        None,
        None,
        path,
        line,
        (),
        (),
        matching,
    )


def _parse_query(
    record: Mapping[str, Any], path: str, line: int, file_tier: str | None, matching: str
) -> GoldQuery:
    usual = _usual_query(record, path, line, file_tier, matching)
    if usual is not None:
        return usual

    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    if not _FIELDS.issuperset(record):
        unknown = sorted(set(record) - _FIELDS)
        raise fail(unknown[0], f"unknown key (valid keys: {', '.join(sorted(_FIELDS))})")
    for key in ("query_id", "query"):
        if key not in record:
            raise fail(key, "missing required key")
        if not isinstance(record[key], str) or not record[key].strip():
            raise fail(key, "must be a non-empty string")
    tier = _tier(record.get("tier"), file_tier, fail)
    relevant, non_relevant = _relevant(record.get("relevant", {}), fail)
    references = _references(record.get("gold_references", ()), fail)
    passages = _passages(record.get("reference_passages", ()), fail)
    is_rejection = record.get("is_rejection", False)
    if not isinstance(is_rejection, bool):
        raise fail("is_rejection", "must be true or false")
    labels = {"relevant": relevant, "gold_references": references, "reference_passages": passages}
    labelled = _check_labels(is_rejection, labels, matching, fail)
    source = record.get("source", "human")
    if source not in SOURCES:
        raise fail("source", f"expected one of {', '.join(SOURCES)}, got {source!r}")
    reviewed = record.get("reviewed", source == "human")
    if not isinstance(reviewed, bool):
        raise fail("reviewed", "must be true or false")
    return GoldQuery(
        query_id=record["query_id"],
        query=record["query"],
        tier=tier,
        tags=_query_tags(record, fail),
        relevant=compact_labels(relevant),
        is_rejection=is_rejection or not labelled,
        expected_answer=_optional_text(record, "expected_answer", fail)
        or _optional_text(record, "expected_answer_gist", fail),
        notes=_optional_text(record, "notes", fail),
        path=path,
        line=line,
        gold_references=references,
        reference_passages=passages,
        matching=matching,
        source=source,
        reviewed=reviewed,
        prompt_version=_optional_text(record, "prompt_version", fail),
        non_relevant=non_relevant,
    )


_NOUNS = {
    "relevant": ("document", "documents"),
    "gold_references": ("reference", "references"),
    "reference_passages": ("passage", "passages"),
}


def _check_labels(
    is_rejection: bool, labels: Mapping[str, tuple[Any, ...]], matching: str, fail: Any
) -> bool:
    """Whether the query is labelled; labels must fit the rejection flag and the file's matcher."""
    given = {key: len(value) for key, value in labels.items() if value}
    if is_rejection and given:
        key, count = next(iter(given.items()))
        raise fail("is_rejection", f"is true but `{key}` lists {plural(count, *_NOUNS[key])}")
    needed = LABEL_OF.get(matching)
    if given and needed is not None and needed not in given:
        raise fail(needed, f"missing: the config matches this file by {matching}")
    return bool(given)


def _tier(value: Any, file_tier: str | None, fail: Any) -> str:
    if value is None:
        return file_tier or DEFAULT_TIER
    if not isinstance(value, str) or not value.strip():
        raise fail("tier", "must be a non-empty string")
    if file_tier is not None and value != file_tier:
        raise fail("tier", f"is {value!r} but the config lists this file as tier {file_tier!r}")
    return sys.intern(value)


_SHARED_TAGS: dict[tuple[str, ...], tuple[str, ...]] = {}
"""One tuple per set of tags the gold queries name, as `sys.intern` keeps one string per
name: a million queries name a few hundred sets of a few dozen tags."""
_SHARED_TAGS_MAX = 1 << 16
"""Sets of tags kept at most (beyond, each query keeps its own tuple)."""


def _query_tags(record: Mapping[str, Any], fail: Any) -> tuple[str, ...]:
    """The query's tags, then its slice fields as tags, each once, in that order."""
    tags = _tags(record.get("tags", []), fail)
    if not _HAS_SLICE_FIELD.isdisjoint(record):
        tags = tuple(dict.fromkeys(tags + _slice_fields(record, fail)))
    return _shared_tags(tags)


def _shared_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    """The one tuple of these tags (`_SHARED_TAGS`)."""
    shared = _SHARED_TAGS.get(tags)
    if shared is None and len(_SHARED_TAGS) < _SHARED_TAGS_MAX:
        shared = _SHARED_TAGS[tags] = tags
    return shared or tags


_HAS_SLICE_FIELD = frozenset(SLICE_FIELDS)


def _tags(value: Any, fail: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise fail("tags", "must be a list of non-empty strings")
    # One string per tag name, not one per query naming it: a million queries name a
    # few dozen tags.
    return tuple(dict.fromkeys(map(sys.intern, value)))


def _slice_fields(record: Mapping[str, Any], fail: Any) -> tuple[str, ...]:
    """`category` and `difficulty` as the tags `category:<value>`, `difficulty:<value>`,
    so every per-tag breakdown, scope and Holm family reads them as it reads tags."""
    slices = []
    for key in SLICE_FIELDS:
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise fail(key, f"must be a non-empty string or a whole number, got {value!r}")
        slices.append(f"{key}:{value.strip()}")
    return tuple(slices)


def _relevant(
    value: Any, fail: Any
) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """The (doc_id, grade) pairs judged relevant, and those judged not (grade 0)."""
    if isinstance(value, list):
        if not all(isinstance(doc, str) and doc for doc in value):
            raise fail("relevant", "a list must hold document ids (non-empty strings)")
        return tuple((doc, 1) for doc in dict.fromkeys(value)), ()
    if not isinstance(value, dict):
        raise fail(
            "relevant",
            f"must be an object {{doc_id: grade}} or a list of doc ids, got {json_type(value)}",
        )
    pairs: list[tuple[str, int]] = []
    negatives: list[tuple[str, int]] = []
    for doc, grade in value.items():
        if not doc:
            raise fail("relevant", "document ids must be non-empty")
        if not _whole(grade, 0, MAX_GRADE):
            shown = json.dumps(grade)
            raise fail(
                f"relevant.{doc}",
                f"grade must be a whole number from 0 to {MAX_GRADE}, got {shown}",
            )
        (pairs if grade > 0 else negatives).append((doc, grade))
    return tuple(pairs), tuple(negatives)


_REFERENCE_KEYS = ("document", "page", "relevance")


def _references(value: Any, fail: Any) -> tuple[GoldReference, ...]:
    if value == ():  # the key is absent: the usual case
        return ()
    if not isinstance(value, list):
        raise fail(
            "gold_references",
            f"must be a list of {{document, page, relevance}} objects, got {json_type(value)}",
        )
    return tuple(_reference(item, f"gold_references[{i}]", fail) for i, item in enumerate(value))


def _reference(item: Any, key: str, fail: Any) -> GoldReference:
    if not isinstance(item, dict):
        raise fail(key, f"must be an object {{document, page, relevance}}, got {json_type(item)}")
    unknown = sorted(set(item) - set(_REFERENCE_KEYS))
    if unknown:
        raise fail(f"{key}.{unknown[0]}", f"unknown key (valid keys: {', '.join(_REFERENCE_KEYS)})")
    for required in ("document", "page"):
        if required not in item:
            raise fail(f"{key}.{required}", "missing required key")
    document, page, relevance = item["document"], item["page"], item.get("relevance", 1)
    if not isinstance(document, str) or not document.strip():
        raise fail(f"{key}.document", "must be a non-empty string")
    if not _whole(page, 0):
        raise fail(f"{key}.page", f"must be a whole number >= 0, got {json.dumps(page)}")
    if not _whole(relevance, 1, MAX_GRADE):
        shown = json.dumps(relevance)
        raise fail(f"{key}.relevance", f"must be a whole number from 1 to {MAX_GRADE}, got {shown}")
    return GoldReference(document, page, relevance)


def _whole(value: Any, minimum: int, maximum: int | None = None) -> bool:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return False
    return maximum is None or value <= maximum


def _passages(value: Any, fail: Any) -> tuple[str, ...]:
    if value == ():  # the key is absent: the usual case
        return ()
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise fail("reference_passages", "must be a list of non-empty strings")
    return tuple(dict.fromkeys(value))


def _optional_text(record: Mapping[str, Any], key: str, fail: Any) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(key, "must be a string")
    return value
