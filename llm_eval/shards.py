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
_WHAT = {"gold": "gold set", "corpus": "corpus", "retriever": "retriever configuration"}


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


def part_problem(
    parts: Sequence[Part],
    expected: Mapping[str, str | None] | None,
    gold_ids: Sequence[str] | None,
) -> tuple[str | None, str] | None:
    """(file, what is wrong) for the first reason the parts are not the N parts of one
    run: parts of different N, fingerprints that differ from `expected` (else from the
    first part's), a shard given twice or missing, a query in the wrong shard, a gold
    query (of `gold_ids`, when given) missing from its shard's part; the file is None
    for a shard that no file is. None when they are the whole run."""
    first = parts[0]
    reference = expected if expected is not None else first.header.fingerprints
    whose = "this config's" if expected is not None else f"{first.path}'s"
    for part in parts:
        problem = _header_problem(part, first, reference, whose)
        if problem is not None:
            return part.path, problem
    return _coverage_problem(parts, first.header.shard.count, gold_ids)


def _header_problem(
    part: Part, first: Part, reference: Mapping[str, str | None], whose: str
) -> str | None:
    shard = part.header.shard
    if shard.count != first.header.shard.count:
        return f"is shard {shard}, but {first.path} is {first.header.shard}: parts of another split"
    for name in PART_FINGERPRINTS:
        found, wanted = part.header.fingerprints.get(name), reference.get(name)
        if found != wanted:
            return (
                f"is a part of a run with another {_WHAT[name]} ({name} fingerprint {found}, "
                f"{whose} {wanted})"
            )
    return None


def _coverage_problem(
    parts: Sequence[Part], count: int, gold_ids: Sequence[str] | None
) -> tuple[str | None, str] | None:
    seen: dict[int, str] = {}
    # Each gold query's shard, hashed once for all the parts.
    owners = None if gold_ids is None else {q: shard_number(q, count) for q in gold_ids}
    for part in parts:
        shard = part.header.shard
        if shard.index in seen:
            return part.path, f"is shard {shard} again (also {seen[shard.index]})"
        seen[shard.index] = part.path
        stray = next((q for q in part.query_ids if not shard.holds(q)), None)
        if stray is not None:
            other = Shard(shard_number(stray, count), count)
            return part.path, f"holds query {stray!r}, which is shard {other}'s, not {shard}'s"
        if owners is not None:
            problem = _missing_problem(part, owners)
            if problem is not None:
                return part.path, problem
    missing = [index for index in range(1, count + 1) if index not in seen]
    if missing:
        given = ", ".join(f"{path} ({index}/{count})" for index, path in sorted(seen.items()))
        absent = " and ".join(f"{index}/{count}" for index in missing)
        said = "shard {} of the run is" if len(missing) == 1 else "shards {} of the run are"
        return None, f"{said.format(absent)} missing; given: {given}"
    return None


def _missing_problem(part: Part, owners: Mapping[str, int]) -> str | None:
    """What is wrong with a part lacking gold queries of its shard (`owners`: each gold
    query's shard); None when it lacks none."""
    shard = part.header.shard
    owned = [q for q, index in owners.items() if index == shard.index]
    held = set(part.query_ids)
    lacking = [q for q in owned if q not in held]
    if not lacking:
        return None
    return (
        f"lacks {len(lacking)} of shard {shard}'s {len(owned)} gold queries (first "
        f"{lacking[0]!r}): a part cut short?"
    )
