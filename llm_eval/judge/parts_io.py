"""Parts of the judge's answers: what `judge --shard I/N` writes, and the parts read back,
checked (`llm_eval.shards.part_problem`) and added to the judge's call cache by
`judge --merge`, so that the gate then finds every answer there and asks nothing.

A part is JSONL: its header first (`llm_eval.shards_io.header_line`, with the judge's
fingerprint beside the run's), then one line for each gold query of its shard, with the
call cache's entries of that query's calls (none for a query not judged):

    {"shard": "2/3", "fingerprints": {"gold": "…", …, "judge": "…"}, "from_cache": 4}
    {"query_id": "py-001", "answers": {"<cache key>": {…the cached entry…}}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_eval.endpoints.cache import write_entry
from llm_eval.errors import InputError
from llm_eval.runs_io import part_header
from llm_eval.shards import JUDGMENT_PARTS, Part, PartHeader, part_problem
from llm_eval.shards_io import header_line, parse_header
from llm_eval.textio import iter_lines, load_json

_KEY = re.compile(r"[0-9a-f]{16,64}")
"""A call cache key: hex digits (never a path)."""


def judgment_part_text(header: PartHeader, answers: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """The part's text: the header, then each (query id, {key: entry}) a line."""
    lines = [header_line(header, JUDGMENT_PARTS)]
    for query_id, entries in answers:
        record = {"query_id": query_id, "answers": dict(entries)}
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines)


def merge_judgment_parts(
    paths: Sequence[Path],
    expected: Mapping[str, str | None],
    gold_ids: Sequence[str],
    cache_dir: Path,
) -> int:
    """Write the parts' answers into the call cache at `cache_dir`; how many. InputError
    naming the first file that is not a part of judgments, or the part that keeps them
    from being the N parts of the judgments of these gold queries with the `expected`
    fingerprints."""
    read = [_read_part(path) for path in paths]
    problem = part_problem([part for part, _ in read], expected, gold_ids, JUDGMENT_PARTS)
    if problem is not None:
        raise InputError(problem[1], path=problem[0])
    written: set[str] = set()
    for _, answers in read:
        for key, entry in answers.items():
            if key not in written:
                write_entry(cache_dir, key, entry)
                written.add(key)
    return len(written)


def _read_part(path: Path) -> tuple[Part, dict[str, Any]]:
    """The part's header and queries, and its answers by key."""
    found = part_header(path)
    if found is None:
        raise InputError(
            "has no part header (`judge --shard I/N` writes one): not a part of judgments",
            path=path,
        )
    header = parse_header(found[1], path, found[0], JUDGMENT_PARTS)
    query_ids: list[str] = []
    answers: dict[str, Any] = {}
    for line, text in iter_lines(path):
        if line == found[0]:
            continue
        query_id, entries = _parse_line(load_json(text, path, line), path, line)
        query_ids.append(query_id)
        answers.update(entries)
    return Part(str(path), header, tuple(query_ids)), answers


def _parse_line(record: Any, path: Path, line: int) -> tuple[str, Mapping[str, Any]]:
    """A query's line: its id and its answers by key; InputError naming what is wrong."""
    if not isinstance(record, dict) or set(record) != {"query_id", "answers"}:
        raise InputError("expected an object of query_id and answers", path=path, line=line)
    query_id, entries = record["query_id"], record["answers"]
    if not isinstance(query_id, str):
        raise InputError("must be a string", path=path, line=line, key="query_id")
    if not isinstance(entries, dict):
        raise InputError("must be an object of answers by key", path=path, line=line, key="answers")
    bad = next((key for key in entries if not _KEY.fullmatch(key)), None)
    if bad is not None:
        raise InputError(f"{bad!r} is not a call cache key", path=path, line=line, key="answers")
    return query_id, entries
