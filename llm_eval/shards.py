"""Shards: one stable part of the queries for each job of a CI matrix, and the check
that a run's parts join into the whole run.

Shard I of N holds the queries whose id hashes to I (`shard_number`): a shard's queries
depend on nothing but their ids and N, never on the gold file's order or on what
another shard did. `llm_eval.shards_io` writes and reads the parts' headers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_eval.digest import digest

PART_FINGERPRINTS = ("gold", "corpus", "retriever")
"""What a part's run depends on, named as in a baseline's fingerprints."""
_WHAT = {
    "gold": "gold set",
    "corpus": "corpus",
    "retriever": "retriever configuration",
    "judge": "judge configuration",
    "embedding": "embedding model or document fields",
}


@dataclass(frozen=True, slots=True)
class PartKind:
    """What the parts of one kind split, and what their work depends on: the words and
    the fingerprints their checks use."""

    item: str
    """One unit of the work (`query`)."""
    items: str
    """All of them (`gold queries`)."""
    one: str
    """What one set of parts makes together (`a run`)."""
    the: str
    """The same, named (`the run`)."""
    fingerprints: tuple[str, ...]


RUN_PARTS = PartKind("query", "gold queries", "a run", "the run", PART_FINGERPRINTS)
JUDGMENT_PARTS = PartKind(
    "query", "gold queries", "judgments", "the judgments", (*PART_FINGERPRINTS, "judge")
)
VECTOR_PARTS = PartKind(
    "document", "corpus documents", "vectors", "the vectors", ("corpus", "embedding")
)


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` (from 1) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, query_id: str) -> bool:
        """Whether the query is this shard's."""
        return shard_number(query_id, self.count) == self.index


def shard_number(query_id: str, count: int) -> int:
    """The shard (from 1) of `count` that holds the query: its id's digest modulo `count`."""
    return int(digest(query_id), 16) % count + 1


_SHARD = re.compile(r"([0-9]+)/([0-9]+)")


def parse_shard(text: str) -> Shard:
    """`I/N` as a Shard; ValueError saying what is expected otherwise."""
    match = _SHARD.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected I/N (shard I of N, e.g. 2/3), got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: I must be from 1 to N")
    return Shard(index, count)


@dataclass(frozen=True, slots=True)
class PartHeader:
    """The first line of a part: which shard it is and what its run depends on."""

    shard: Shard
    fingerprints: Mapping[str, str | None]
    """`PART_FINGERPRINTS`' digests, as a baseline carries them."""
    from_cache: int = 0
    """Queries of the part answered from the retrieval cache."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part file of a sharded run, as read."""

    path: str
    header: PartHeader
    query_ids: tuple[str, ...]
    """The items it holds: queries' ids (documents' for vectors)."""


def part_problem(
    parts: Sequence[Part],
    expected: Mapping[str, str | None] | None,
    gold_ids: Sequence[str] | None,
    kind: PartKind = RUN_PARTS,
) -> tuple[str | None, str] | None:
    """(file, what is wrong) for the first reason the parts are not the N parts of one
    whole (a run, by default): parts of different N, fingerprints that differ from
    `expected` (else from the first part's), a shard given twice or missing, an item in
    the wrong shard, an item (of `gold_ids`, when given) missing from its shard's part;
    the file is None for a shard that no file is. None when they are the whole."""
    first = parts[0]
    reference = expected if expected is not None else first.header.fingerprints
    whose = "this config's" if expected is not None else f"{first.path}'s"
    for part in parts:
        problem = _header_problem(part, first, reference, whose, kind)
        if problem is not None:
            return part.path, problem
    return _coverage_problem(parts, first.header.shard.count, gold_ids, kind)


def _header_problem(
    part: Part, first: Part, reference: Mapping[str, str | None], whose: str, kind: PartKind
) -> str | None:
    shard = part.header.shard
    if shard.count != first.header.shard.count:
        return f"is shard {shard}, but {first.path} is {first.header.shard}: parts of another split"
    for name in kind.fingerprints:
        found, wanted = part.header.fingerprints.get(name), reference.get(name)
        if found != wanted:
            return (
                f"is a part of {kind.one} with another {_WHAT[name]} "
                f"({name} fingerprint {found}, {whose} {wanted})"
            )
    return None


def _coverage_problem(
    parts: Sequence[Part], count: int, gold_ids: Sequence[str] | None, kind: PartKind
) -> tuple[str | None, str] | None:
    seen: dict[int, str] = {}
    # Each item's shard, hashed once for all the parts.
    owners = None if gold_ids is None else {q: shard_number(q, count) for q in gold_ids}
    for part in parts:
        shard = part.header.shard
        if shard.index in seen:
            return part.path, f"is shard {shard} again (also {seen[shard.index]})"
        seen[shard.index] = part.path
        stray = next((q for q in part.query_ids if not shard.holds(q)), None)
        if stray is not None:
            other = Shard(shard_number(stray, count), count)
            return part.path, (
                f"holds {kind.item} {stray!r}, which is shard {other}'s, not {shard}'s"
            )
        if owners is not None:
            problem = _missing_problem(part, owners, kind)
            if problem is not None:
                return part.path, problem
    missing = [index for index in range(1, count + 1) if index not in seen]
    if missing:
        given = ", ".join(f"{path} ({index}/{count})" for index, path in sorted(seen.items()))
        absent = " and ".join(f"{index}/{count}" for index in missing)
        said = (
            f"shard {{}} of {kind.the} is"
            if len(missing) == 1
            else f"shards {{}} of {kind.the} are"
        )
        return None, f"{said.format(absent)} missing; given: {given}"
    return None


def _missing_problem(part: Part, owners: Mapping[str, int], kind: PartKind) -> str | None:
    """What is wrong with a part lacking items of its shard (`owners`: each item's
    shard); None when it lacks none."""
    shard = part.header.shard
    owned = [q for q, index in owners.items() if index == shard.index]
    held = set(part.query_ids)
    lacking = [q for q in owned if q not in held]
    if not lacking:
        return None
    return (
        f"lacks {len(lacking)} of shard {shard}'s {len(owned)} {kind.items} (first "
        f"{lacking[0]!r}): a part cut short?"
    )
