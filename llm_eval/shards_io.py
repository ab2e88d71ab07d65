"""Part files of a sharded run: the header that `retrieve --shard` writes on a part's
first line, and the parts read back, checked (`llm_eval.shards.part_problem`) and
joined into the run a single process would have written.

    {"shard": "2/3", "fingerprints": {"gold": "…", "corpus": "…", "retriever": "…"},
     "from_cache": 0}
"""

from __future__ import annotations

import glob
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_eval.errors import InputError
from llm_eval.runs import QueryResults, Run
from llm_eval.runs_io import PART_KEY, load_run, part_header
from llm_eval.shards import RUN_PARTS, Part, PartHeader, PartKind, parse_shard, part_problem


def header_line(header: PartHeader, kind: PartKind = RUN_PARTS) -> str:
    """The header as the part's first line (with its newline): a run's part by default,
    else one of `kind`, with its fingerprints."""
    record = {
        PART_KEY: str(header.shard),
        "fingerprints": {name: header.fingerprints.get(name) for name in kind.fingerprints},
        "from_cache": header.from_cache,
    }
    return json.dumps(record, ensure_ascii=False) + "\n"


def expand_runs(values: Sequence[Path], what: str = "run file") -> tuple[Path, ...]:
    """The run files (or other `what`) given: each value as it is, or a glob's matches
    in sorted order (InputError naming a glob that matches nothing)."""
    found: list[Path] = []
    for value in values:
        if not glob.has_magic(str(value)):
            found.append(value)
            continue
        matches = sorted(Path(p) for p in glob.glob(str(value)))  # noqa: PTH207 (absolute too)
        if not matches:
            raise InputError(f"matches no {what}", path=value)
        found += matches
    return tuple(found)


def is_part(path: Path) -> bool:
    """Whether the file starts with a part's header."""
    return part_header(path) is not None


@dataclass(frozen=True, slots=True)
class JoinedRun:
    """The parts' runs as one, and what their headers add up to."""

    run: Run
    from_cache: int


def join_parts(
    paths: Sequence[Path],
    expected: Mapping[str, str | None] | None,
    gold_ids: Sequence[str] | None,
) -> JoinedRun:
    """The parts as one run, its queries in `gold_ids`' order (then the rest as read);
    InputError naming the first file that is not a part, or the part that keeps them
    from being the N parts of one run with the `expected` fingerprints (`part_problem`)."""
    read = [_read_part(path) for path in paths]
    problem = part_problem([part for part, _ in read], expected, gold_ids)
    if problem is not None:
        raise InputError(problem[1], path=problem[0])
    answers: dict[str, QueryResults] = {}
    for _, run in read:
        answers.update(run.queries)
    order = [q for q in gold_ids or () if q in answers]
    ordered = {q: answers[q] for q in [*order, *answers]}
    return JoinedRun(Run(ordered), sum(part.header.from_cache for part, _ in read))


def _read_part(path: Path) -> tuple[Part, Run]:
    found = part_header(path)
    if found is None:
        raise InputError(
            "has no part header (`retrieve --shard I/N` writes one): several run files are "
            "read as the parts of one sharded run",
            path=path,
        )
    line, record = found
    header = parse_header(record, path, line)
    run = load_run(path, "jsonl", part=True)
    return Part(str(path), header, tuple(run.queries)), run


def parse_header(
    record: Mapping[str, Any], path: Path, line: int, kind: PartKind = RUN_PARTS
) -> PartHeader:
    """A part's header (of a run's part by default) from its JSON; InputError naming the
    file, line and key of what is wrong."""

    def fail(key: str, reason: str) -> InputError:
        return InputError(reason, path=path, line=line, key=key)

    unknown = sorted(set(record) - {PART_KEY, "fingerprints", "from_cache"})
    if unknown:
        raise fail(unknown[0], "unknown key in a part's header")
    value = record.get(PART_KEY)
    try:
        shard = parse_shard(value if isinstance(value, str) else json.dumps(value))
    except ValueError as exc:
        raise fail(PART_KEY, str(exc)) from None
    prints = record.get("fingerprints")
    if not isinstance(prints, dict):
        raise fail("fingerprints", "missing or not an object")
    for name in kind.fingerprints:
        if name not in prints or not isinstance(prints[name], str | None):
            raise fail(f"fingerprints.{name}", "missing or not a string (or null)")
    from_cache = record.get("from_cache", 0)
    if isinstance(from_cache, bool) or not isinstance(from_cache, int) or from_cache < 0:
        raise fail("from_cache", f"must be a whole number of queries, got {from_cache!r}")
    return PartHeader(shard, {name: prints[name] for name in kind.fingerprints}, from_cache)
