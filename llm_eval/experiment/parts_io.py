"""The part of a sweep one shard writes (`experiment --shard I/N`), and the parts read
back and checked for `experiment --merge`.

A part is JSON: a header (what it is, its shard, the fingerprints of the config and
options and of the gold set, the configs' paths and the options) and each variant's
per-query scores and latencies on both clocks, group by group. Floats are written as
Python's shortest repr, so a merged table holds the very numbers of a single run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eval.digest import digest
from llm_eval.errors import InputError
from llm_eval.experiment.sweep import Scored
from llm_eval.fingerprint import gold_fingerprint, query_fingerprints
from llm_eval.gold import GoldSet
from llm_eval.service_metrics import ServiceRecord
from llm_eval.shards import Shard, parse_shard
from llm_eval.textio import file_digest, read_json_file

KIND = "llm-eval experiment part"
VERSION = 1


def part_name(shard: Shard) -> str:
    """`experiment-part-2-of-4.json`."""
    return f"experiment-part-{shard.index}-of-{shard.count}.json"


def part_fingerprints(
    config_paths: Sequence[Path], options: Mapping[str, Any], gold: GoldSet
) -> dict[str, str]:
    """The config's (its files' bytes and the options) and the gold set's fingerprints."""
    files = [file_digest(p) for p in config_paths]
    return {
        "config": digest([files, sorted(options.items())]),
        "gold": gold_fingerprint(query_fingerprints(gold)),
    }


def part_header(
    config_paths: Sequence[Path], shard: Shard, options: Mapping[str, Any], gold: GoldSet
) -> dict[str, Any]:
    """A part's header; `options` are the sweep's (reference, quality, tier, latency,
    alpha, group_size), which every part must share."""
    return {
        "kind": KIND,
        "version": VERSION,
        "shard": str(shard),
        "fingerprints": part_fingerprints(config_paths, options, gold),
        "configs": [str(p) for p in config_paths],
        "options": dict(options),
    }


def part_text(
    header: Mapping[str, Any], scored: Sequence[Scored], timings: Mapping[str, float]
) -> str:
    """The part's JSON."""
    document = {
        **header,
        "groups": len({s.group for s in scored}),
        "timings": dict(timings),
        "scored": [_scored_json(s) for s in scored],
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n"


def _scored_json(scored: Scored) -> dict[str, Any]:
    return {
        "name": scored.name,
        "group": scored.group,
        "top_k": scored.top_k,
        # per query, a plain dict of its metrics (the scores may be held as columns)
        "per_query": {q: dict(row) for q, row in scored.per_query.items()},
        "wall": _service_json(scored.wall),
        "cpu": None if scored.cpu is None else _service_json(scored.cpu),
        "clocks": scored.clocks,
    }


def _service_json(records: Mapping[str, ServiceRecord]) -> dict[str, list[Any]]:
    return {q: [r.latency_ms, r.error] for q, r in records.items()}


@dataclass(frozen=True, slots=True)
class Merged:
    """The parts of one sweep, joined."""

    header: Mapping[str, Any]
    """The first part's header (every part's but for its shard)."""
    paths: tuple[Path, ...]
    """The parts, by shard."""
    scored: tuple[Scored, ...]
    """Every part's scores, groups numbered across the parts in shard order."""
    timings: Mapping[str, float]
    groups: int
    shards: int


def read_parts(paths: Sequence[Path]) -> Merged:
    """The parts read, checked against each other and joined; InputError naming a part
    that is unreadable, of another sweep, given twice, or missing."""
    if not paths:
        raise InputError("--merge needs the parts that `experiment --shard I/N` wrote")
    parts: dict[int, tuple[Path, dict[str, Any]]] = {}
    first_path, first = paths[0], _read_part(paths[0])
    count = parse_shard(first["shard"]).count
    for path in paths:
        document = first if path == first_path else _read_part(path)
        shard = parse_shard(document["shard"])
        _check_same_sweep(path, document, first_path, first, count)
        if shard.index in parts:
            raise InputError(
                f"part {shard} is given twice (also {parts[shard.index][0]})", path=path
            )
        parts[shard.index] = (path, document)
    missing = [n for n in range(1, count + 1) if n not in parts]
    if missing:
        name = part_name(Shard(missing[0], count))
        raise InputError(
            f"part {missing[0]}/{count} ({name}) is missing; --merge needs all {count}"
        )
    return _joined([parts[n] for n in range(1, count + 1)], count)


def _read_part(path: Path) -> dict[str, Any]:
    document = read_json_file(path)
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise InputError("not a part that `experiment --shard I/N` wrote", path=path)
    if document.get("version") != VERSION:
        raise InputError(
            f"a part of version {document.get('version')!r}; this llm-eval reads {VERSION}",
            path=path,
        )
    try:
        parse_shard(str(document["shard"]))
    except (KeyError, ValueError) as exc:
        raise InputError(f"shard: {exc}", path=path) from None
    return document


def _check_same_sweep(
    path: Path, document: Mapping[str, Any], first_path: Path, first: Mapping[str, Any], count: int
) -> None:
    shard = parse_shard(document["shard"])
    if shard.count != count:
        raise InputError(
            f"it is part {shard}, of {shard.count} parts; {first_path} is of {count}", path=path
        )
    for key in ("config", "gold"):
        if document.get("fingerprints", {}).get(key) != first.get("fingerprints", {}).get(key):
            raise InputError(
                f"its {key} fingerprint differs from {first_path}'s: the parts are of "
                "different sweeps",
                path=path,
            )


def _joined(parts: Sequence[tuple[Path, dict[str, Any]]], count: int) -> Merged:
    scored: list[Scored] = []
    timings: dict[str, float] = {}
    offset = 0
    for path, document in parts:
        try:
            found = [_scored(one, offset) for one in document["scored"]]
            groups = int(document["groups"])
            for name, seconds in document["timings"].items():
                timings[name] = timings.get(name, 0.0) + float(seconds)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"not a readable experiment part ({exc!r})", path=path) from None
        scored += found
        offset += groups
    return Merged(parts[0][1], tuple(p for p, _ in parts), tuple(scored), timings, offset, count)


def _scored(one: Mapping[str, Any], offset: int) -> Scored:
    cpu = one["cpu"]
    return Scored(
        name=str(one["name"]),
        group=offset + int(one["group"]),
        top_k=int(one["top_k"]),
        per_query={q: {m: float(v) for m, v in row.items()} for q, row in one["per_query"].items()},
        wall=_service(one["wall"]),
        cpu=None if cpu is None else _service(cpu),
        clocks={c: {p: float(v) for p, v in row.items()} for c, row in one["clocks"].items()},
    )


def _service(records: Mapping[str, Sequence[Any]]) -> dict[str, ServiceRecord]:
    return {
        q: ServiceRecord(None if latency is None else float(latency), bool(error))
        for q, (latency, error) in records.items()
    }


def check_part_inputs(merged: Merged, now: Mapping[str, str]) -> None:
    """InputError when the config or gold set read now is not the one the parts ran on."""
    for key, label in (("config", "the config or its options"), ("gold", "the gold set")):
        if merged.header["fingerprints"][key] != now[key]:
            raise InputError(
                f"{label} changed since this part was written; run the shards again",
                path=merged.paths[0],
            )
