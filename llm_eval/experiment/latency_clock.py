"""Which clock an experiment compares latencies on: CPU time or wall time (pure).

    clock, reason = choose_clock("auto", [("lucene", None), ("api", "an http retriever, …")])
    # ("wall", "wall time, since `api` is an http retriever, whose work happens in another
    #  process")

Wall time is what a user waits; for a retriever that does its work in this process it
also counts every moment the process was descheduled, about 4 ms each on a busy
2-core machine, so that a busy run measures the scheduler. CPU time
(`time.process_time`, every thread of this process, which torch and numpy use) is the
search's own cost and barely moves with the machine's load. So `auto` compares CPU
time when every variant runs in this process, and wall time otherwise:

- in this process: `bm25`; `embedding` with `model_path` (a model on disk); a
  `fusion` whose components all are;
- elsewhere: `http`, `mcp` (a server process), `embedding` with an endpoint, a run
  file; and `python`, whose function may call a service whose work no clock here
  sees. `--latency cpu` counts a python retriever as in-process when it is.

CPU time is only kept for a query answered one at a time (a pool of threads running
several queries at once would charge each the others' work); a variant without it
for every query falls back to wall time, and the reason says so. The wall-time
latency gates of `llm-eval gate` are not affected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from llm_eval.runs import QueryResults, Run

CLOCKS = ("auto", "cpu", "wall")


def choose_clock(requested: str, variants: Sequence[tuple[str, str | None]]) -> tuple[str, str]:
    """(`cpu` or `wall`, the reason in words) for `requested` (`auto`, `cpu` or `wall`)
    and the variants as (name, where it searches when not in this process: its kind's
    `searched_elsewhere`), before they run."""
    if requested not in CLOCKS:
        raise ValueError(f"latency clock must be one of {', '.join(CLOCKS)}, got {requested!r}")
    if requested == "wall":
        return "wall", "wall time, as asked (--latency wall)"
    if requested == "cpu":
        return "cpu", "CPU time of this process, as asked (--latency cpu)"
    for name, elsewhere in variants:
        if elsewhere is not None:
            return "wall", f"wall time, since `{name}` is {elsewhere}"
    return "cpu", (
        "CPU time of this process, since every variant searches in it (wall time would "
        "also count the moments the machine ran something else)"
    )


def without_cpu(runs: Mapping[str, Run]) -> str | None:
    """The first variant with an answered query but no CPU time for it (a pool of
    threads, a service, the cache), or None when every answered query has one."""
    for name, run in runs.items():
        if any(a.error is None and a.cpu_ms is None for a in run.queries.values()):
            return name
    return None


def fall_back(missing: str | None, clock: str, reason: str) -> tuple[str, str]:
    """The clock and reason after the run: CPU time only when every variant recorded it
    for every answered query (`missing` names the first that did not), else wall time
    saying why."""
    if clock != "cpu" or missing is None:
        return clock, reason
    return "wall", (
        f"wall time, since `{missing}` has no CPU time for every query (several queries at once "
        "on threads, whose process time would mix them, or answers from a service or "
        "the cache)"
    )


def on_clock(run: Run, clock: str) -> Run:
    """The run with each query's latency on `clock`: its CPU time for `cpu`, as it
    is for `wall`."""
    if clock == "wall":
        return run
    return Run({q: _cpu(a) for q, a in run.queries.items()})


def _cpu(answer: QueryResults) -> QueryResults:
    return replace(answer, latency_ms=answer.cpu_ms if answer.error is None else None)


def label(clock: str) -> str:
    """`CPU` or `wall`, for headers: `p95 CPU ms`."""
    return "CPU" if clock == "cpu" else "wall"
