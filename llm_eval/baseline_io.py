"""The baseline file (`gold/baseline.json`): read and checked against its schema, or
written atomically (temp file + rename), and only when something the gate reads moved
(`llm_eval.commands.baseline.changes`): the per-query latencies are those of the
refresh that last wrote the file, so that an unchanged retriever, whose latency
differs on every run, leaves the file as it is.
"""

from __future__ import annotations

import itertools
import math
from datetime import datetime
from pathlib import Path
from typing import Any

from llm_eval.baseline import SCHEMA_VERSION, Baseline
from llm_eval.errors import InputError
from llm_eval.json_indented import iter_indented
from llm_eval.schema import (
    Check,
    Fail,
    boolean,
    list_of,
    map_of,
    number,
    optional,
    record,
    shown,
    text,
    whole,
)
from llm_eval.score_columns import ScoreColumns
from llm_eval.service_metrics import ServiceRecord
from llm_eval.textio import (
    json_type,
    read_json_file,
    require_file,
    sweep_stale_temporaries,
    write_atomic,
)


def save_baseline(path: str | Path, baseline: Baseline) -> None:
    """Write the baseline atomically: `json.dumps(baseline.to_json(), indent=1)` and a
    line end, written in pieces as they are made."""
    write_atomic(path, itertools.chain(iter_indented(baseline.json_fields()), ["\n"]))


def load_baseline(path: str | Path) -> Baseline | None:
    """Read a baseline; None when the file does not exist; InputError when it is corrupt.

    The whole document is checked against its schema here, so that nothing downstream
    (the statistics, the report) meets a NaN, a string rank or a missing `n`.
    """
    file = Path(path)
    if not file.exists() and not file.is_symlink():
        return None
    sweep_stale_temporaries(file.parent)
    require_file(file)
    try:
        data = read_json_file(file)
    except InputError as exc:
        raise InputError(
            f"corrupt baseline: {exc.reason}", path=exc.path, line=exc.line, key=exc.key
        ) from None
    return parse_baseline(data, str(path))


def parse_baseline(data: Any, path: str) -> Baseline:
    """A parsed baseline document checked against its schema (InputError naming `path`
    and the key when it does not fit)."""

    def fail(key: str, reason: str) -> InputError:
        return InputError(f"corrupt baseline: {reason}", path=path, key=key)

    if not isinstance(data, dict):
        raise InputError(
            f"corrupt baseline: expected a JSON object, got {json_type(data)}", path=path
        )
    version = data.get("schema_version")
    if isinstance(version, int) and version != SCHEMA_VERSION:
        raise fail(
            "schema_version",
            f"version {version} is not supported (expected {SCHEMA_VERSION}); "
            "run `llm-eval baseline refresh`",
        )
    for key, check in _SCHEMA.items():
        if key not in data:
            if key in _OPTIONAL:
                continue
            raise fail(key, "missing required key")
        check(data[key], key, fail)
    return Baseline(
        created_at=data["created_at"],
        git_commit=data.get("git_commit"),
        tool_version=data["tool_version"],
        fingerprints=data["fingerprints"],
        query_fingerprints=data["query_fingerprints"],
        relevance_level=data["relevance_level"],
        gating_k=data["gating_k"],
        metrics=tuple(data["metrics"]),
        per_query=ScoreColumns.from_rows(data["per_query"]),
        first_relevant_rank=data["first_relevant_rank"],
        aggregates=data["aggregates"],
        service={
            qid: ServiceRecord(row.get("latency_ms"), row.get("error", False))
            for qid, row in data.get("service", {}).items()
        },
        judge_repeats=data.get("judge_repeats"),
        builds=tuple(data.get("builds", ())),
        source=path,
    )


def _timestamp(value: Any, key: str, fail: Fail) -> None:
    text(value, key, fail)
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise fail(key, f"expected an ISO 8601 time, got {shown(value)}") from None


def _mean(value: Any, key: str, fail: Fail) -> None:
    """A slice's mean: NaN is what `baseline refresh` writes for a metric that scores none
    of the slice's queries (a slice of rejection queries has no recall), so it passes."""
    if not (isinstance(value, float) and math.isnan(value)):
        optional(number)(value, key, fail)


def _aggregate_row(value: Any, key: str, fail: Fail) -> None:
    """`{"n": n, metric: mean}`."""
    record({"n": whole(0)}, frozenset({"n"}))(value, key, fail)
    map_of(_mean)({m: v for m, v in value.items() if m != "n"}, key, fail)


_SCHEMA: dict[str, Check] = {
    "schema_version": whole(1),
    "created_at": _timestamp,
    "git_commit": optional(text),
    "tool_version": text,
    "fingerprints": map_of(optional(text)),
    "relevance_level": whole(1),
    "gating_k": whole(1),
    "metrics": list_of(text),
    "aggregates": map_of(_aggregate_row),
    "query_fingerprints": map_of(text),
    "first_relevant_rank": map_of(whole(0)),
    "per_query": map_of(map_of(number)),
    "service": map_of(record({"latency_ms": optional(number), "error": boolean})),
    "judge_repeats": whole(1),
    "builds": list_of(map_of(map_of(number))),
}
"""Every key of the document and how its value is checked."""

_OPTIONAL = frozenset({"git_commit", "service", "judge_repeats", "builds"})
