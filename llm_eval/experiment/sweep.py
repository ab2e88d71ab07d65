"""A large sweep: variants run in groups of bounded size, and split into shards (pure).

Every variant of a group is built before the group takes turns (so that a burst of
load falls on all of them alike), and dropped, scores kept, before the next group is
built: memory holds one group's retrievers and runs, whatever the sweep's size. The
reference takes turns in every group, so that every variant's latency is paired with
the reference's measured under the same load; latencies are compared only within a
group, never across groups that ran at other times.

A shard (`--shard I/N`, `llm_eval.shards`) is the variants whose name hashes to it,
with the reference always; `--merge` joins the shards' parts
(`llm_eval.experiment.parts_io`) into the one table a single run writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_eval.scoring import Measurement
from llm_eval.service_metrics import ServiceRecord
from llm_eval.shards import Shard


def in_shard(names: Sequence[str], reference: str, shard: Shard | None) -> list[str]:
    """The variants a shard runs, in sweep order: those whose name hashes to it (as a
    query's id does, `llm_eval.shards`), and the reference."""
    if shard is None:
        return list(names)
    return [n for n in names if n == reference or shard.holds(n)]


def turn_groups(names: Sequence[str], reference: str, size: int) -> list[tuple[str, ...]]:
    """The groups that take turns: the variants other than the reference, `size` at a
    time in sweep order, each group led by the reference (alone when it is the only one)."""
    if size < 1:
        raise ValueError(f"a group holds one variant or more, got {size}")
    others = [n for n in names if n != reference]
    chunks = [others[start : start + size] for start in range(0, len(others), size)] or [[]]
    return [(reference, *chunk) for chunk in chunks]


@dataclass(frozen=True, slots=True)
class Scored:
    """One variant's run in one group, reduced to what the comparison reads."""

    name: str
    group: int
    """The group it took turns in (numbered across the sweep, and across merged parts)."""
    top_k: int
    per_query: Mapping[str, Mapping[str, float]]
    wall: Mapping[str, ServiceRecord]
    """Per gold query answered: its wall time and whether it failed."""
    cpu: Mapping[str, ServiceRecord] | None
    """The same on the CPU clock; None when an answered query has no CPU time."""
    clocks: Mapping[str, Mapping[str, float]]
    """`{"wall": {"p50": ms, "p95": ms}, "cpu": {...}}`, each clock recorded whole."""

    def measurement(self, clock: str) -> Measurement:
        """Its scores with the latencies on `clock` (`cpu` or `wall`)."""
        service = self.cpu if clock == "cpu" and self.cpu is not None else self.wall
        return Measurement(
            per_query=self.per_query,
            service=service,
            first_relevant_rank={},
            missing=(),
            rejection=(),
            not_in_gold=0,
            failed={},
            matched_by={},
            credited={},
            ambiguous=(),
            rejections=(),
            context=None,
        )


def without_cpu_time(scored: Sequence[Scored]) -> str | None:
    """The first variant with no CPU time for an answered query, or None."""
    return next((s.name for s in scored if s.cpu is None), None)


def split_reference(
    scored: Sequence[Scored], reference: str
) -> tuple[list[Scored], dict[int, Scored]]:
    """Each variant once, in the order met (the reference from its first group), and the
    reference's run in every group, by group: the anchor its latencies are paired with."""
    variants: dict[str, Scored] = {}
    anchors: dict[int, Scored] = {}
    for one in scored:
        variants.setdefault(one.name, one)
        if one.name == reference:
            anchors[one.group] = one
    return list(variants.values()), anchors


def grouping_words(groups: int, size: int, shards: int = 1) -> str:
    """How the variants took turns, for the clock's reason; empty for one group."""
    if groups <= 1:
        return ""
    across = f", over {shards} shards run apart" if shards > 1 else ""
    return (
        f"the variants took turns in {groups} groups of up to {size}{across}, the reference "
        "in every group; latencies, their ratios and the front compare variants within a "
        "group only"
    )
