"""Content fingerprints: a baseline is only comparable with the inputs it was made from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

import numpy as np

from llm_eval.digest import digest, digest_number
from llm_eval.gold import GoldQuery, GoldSet, Labels
from llm_eval.score_columns import Column, hex_fingerprint


def query_fingerprint(query: GoldQuery) -> str:
    """What makes a gold query the same query: its text, tier, tags and labels."""
    return hex_fingerprint(_fingerprint_number(query))


def _fingerprint_number(query: GoldQuery) -> int:
    """`query_fingerprint` as the integer of its 16 hex digits."""
    text = _usual_text(query)
    return int(digest(_fields(query)), 16) if text is None else digest_number(text)


def _usual_text(query: GoldQuery) -> str | None:
    """The canonical JSON `digest` makes of `_fields(query)` (keys sorted, no spaces, text
    as it is), written out for a query labelled by ids alone, or None for any other.
    A million-query gate fingerprints every query, and the encoder's walk of the dict
    cost four times this."""
    if (
        query.gold_references
        or query.reference_passages
        or query.non_relevant
        or query.matching != "auto"
        or type(query.tier) is not str
        or type(query.query) is not str
        or type(query.is_rejection) is not bool
    ):
        return None
    try:
        tags = _TAGS_TEXT.get(query.tags)
    except TypeError:  # a tag that cannot be hashed: not text
        return None
    if tags is None:  # a tuple of tags not met before (a gold set holds a few)
        if not _STR.issuperset(map(type, query.tags)):
            return None
        tags = ",".join(map(encode_basestring, sorted(query.tags)))
        if len(_TAGS_TEXT) < _TAGS_TEXT_MAX:
            _TAGS_TEXT[query.tags] = tags
    if type(query.relevant) is Labels:  # ids and grades as its string holds them
        pairs = query.relevant.sorted_pairs()
        relevant = ",".join([f"[{encode_basestring(doc)},{ord(grade)}]" for doc, grade in pairs])
    else:
        labels = sorted(query.relevant)
        for doc, grade in labels:
            if type(doc) is not str or type(grade) is not int:
                return None
        relevant = ",".join([f"[{encode_basestring(doc)},{grade}]" for doc, grade in labels])
    return (
        f'{{"is_rejection":{"true" if query.is_rejection else "false"},'
        f'"query":{encode_basestring(query.query)},"relevant":[{relevant}],'
        f'"tags":[{tags}],'
        f'"tier":{encode_basestring(query.tier)}}}'
    )


_STR = frozenset({str})
_TAGS_TEXT: dict[tuple[str, ...], str] = {}
"""A query's tags and their text in its fingerprint's JSON (sorted, encoded, joined)."""
_TAGS_TEXT_MAX = 1 << 16


def _fields(query: GoldQuery) -> dict[str, Any]:
    """The fields a query's fingerprint is the digest of."""
    fields: dict[str, Any] = {
        "query": query.query,
        "tier": query.tier,
        "tags": sorted(query.tags),
        "relevant": sorted(query.relevant),
        "is_rejection": query.is_rejection,
    }
    # Labels beyond ids join only when present: id-labelled queries keep their fingerprints.
    if query.gold_references:
        fields["gold_references"] = [
            [r.document, r.page, r.relevance] for r in query.gold_references
        ]
    if query.reference_passages:
        fields["reference_passages"] = list(query.reference_passages)
    if query.non_relevant:
        fields["non_relevant"] = sorted(query.non_relevant)
    if query.matching != "auto":
        fields["matching"] = query.matching
    return fields


def query_fingerprints(gold: GoldSet) -> Mapping[str, str]:
    """`{query_id: fingerprint}` over the gold set: a `Column` of their integers.

    The last gold set's are kept: a gate asks for them twice (the comparison with the
    baseline, the report's fingerprints), and each is a JSON text and a hash per query.
    """
    if _last_fingerprinted[0] is not gold.queries:
        queries = gold.queries
        fingerprinted = Column(
            [q.query_id for q in queries],
            np.fromiter(map(_fingerprint_number, queries), np.uint64, len(queries)),
            hex_fingerprint,
        )
        _last_fingerprinted[:] = [gold.queries, fingerprinted]
    fingerprints: Mapping[str, str] = _last_fingerprinted[1]
    return fingerprints


_last_fingerprinted: list[Any] = [None, {}]
"""The queries last fingerprinted (held, so that their identity stays theirs) and
their fingerprints."""


def gold_fingerprint(per_query: Mapping[str, str]) -> str:
    """One fingerprint for the whole gold set (independent of file order)."""
    return digest(sorted(per_query.items()))


@dataclass(frozen=True, slots=True)
class GoldDiff:
    """How the gold set differs from the one a baseline was made with."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @property
    def empty(self) -> bool:
        """True when the gold sets are the same."""
        return not (self.added or self.removed or self.changed)

    def unchanged(self, current: Mapping[str, str]) -> set[str]:
        """Query ids present and identical in both."""
        return set(current) - set(self.added) - set(self.changed)


def diff_gold(baseline: Mapping[str, str], current: Mapping[str, str]) -> GoldDiff:
    """Added, removed and changed query ids, sorted."""
    if (
        isinstance(baseline, Column)
        and isinstance(current, Column)
        and baseline.places is current.places  # the same queries in the same order
    ):
        differ = np.flatnonzero(baseline.array != current.array).tolist()
        ids = current.places.query_ids
        return GoldDiff((), (), tuple(sorted(ids[i] for i in differ)))
    return GoldDiff(
        added=tuple(sorted(set(current) - set(baseline))),
        removed=tuple(sorted(set(baseline) - set(current))),
        changed=tuple(sorted(q for q in current if q in baseline and baseline[q] != current[q])),
    )
