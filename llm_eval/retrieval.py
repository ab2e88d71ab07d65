"""Running the configured retriever over the gold set: build it, cache it, repeat it.

    retrieval = obtain_retrieval(inputs, run_paths, options)

A precomputed run file (`--run`) is used as it is, and the parts of a sharded run
(`retrieve --shard`) are checked and joined into one; otherwise the configured
retriever answers every gold query, through the retrieval cache when the kind is
cached, and the run is refused (exit 4) when more queries failed than
`max_error_rate` allows (RetrieverFailed, with the failures summarised).
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from llm_eval.config import EvalConfig, RetrieverConfig
from llm_eval.errors import ExternalError, InputError, LlmEvalError, RetrieverFailed
from llm_eval.failures import CAUSES_SHOWN, FailureSummary, distinct_causes, error_kinds
from llm_eval.fingerprint_io import run_fingerprints
from llm_eval.gold import GoldQuery
from llm_eval.inputs import Inputs
from llm_eval.retrieval_cache import RetrievalCache, retriever_key
from llm_eval.retrievers import (
    BatchRetriever,
    Retriever,
    RetrieverContext,
    held,
    retriever_kind,
)
from llm_eval.runs import QueryResults, Run
from llm_eval.runs_io import load_run
from llm_eval.shards_io import expand_runs, is_part, join_parts
from llm_eval.textio import file_digest
from llm_eval.wording.english import listed, plural

QUERIES = ("query", "queries")


@dataclass(frozen=True, slots=True)
class RetrieveOptions:
    """How the configured retriever is run."""

    use_cache: bool | None = None
    """Answer from the retrieval cache (http and python retrievers), and fill it; None:
    as the config's `cache` says (off unless set: a gate never scores stale answers
    unless asked to)."""
    repeat: int = 1
    """Run every query this many times, bypassing the cache, to find unstable rankings."""
    progress: Callable[[int, int], None] | None = None
    """Called with (queries done, queries in all) as each query finishes; once a batch
    for a retriever that answers them all at once (`BatchRetriever`)."""
    builds: int | None = None
    """How many times to build the retriever (`--builds`), each build answering every
    query; None: as the config's `builds` says, else once."""
    on_build: Callable[[int, int], None] | None = None
    """Called with (build number from 1, builds in all) as each of several builds starts."""


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A run, and how it was obtained."""

    run: Run
    from_cache: int = 0
    """Queries answered from the retrieval cache."""
    repeat: int = 1
    unstable: tuple[str, ...] = ()
    """Queries whose rankings differed between the repeats, in gold order."""
    builds: tuple[Run, ...] = ()
    """Every build's run when the retriever was built more than once (`run` is the first)."""
    builds_asked: int = 1
    """The builds asked for: more than were run when the kind answers the same at every
    build (then one stands for all)."""
    run_file: Path | None = None
    """The run file read in the retriever's place; None when retrieved, or joined from
    parts (which were made by the configured retriever, as their headers say)."""
    parts: int = 0
    """How many parts of a sharded run were joined into `run`."""

    @property
    def each_build(self) -> tuple[Run, ...]:
        """Every build's run (`run` alone for one build)."""
        return self.builds or (self.run,)


def obtain_run(
    inputs: Inputs, run_path: Path | None, options: RetrieveOptions | None = None
) -> Run:
    """The precomputed run when given, else the configured retriever's results."""
    return obtain_retrieval(inputs, () if run_path is None else (run_path,), options).run


def obtain_retrieval(
    inputs: Inputs, run_paths: Sequence[Path] = (), options: RetrieveOptions | None = None
) -> Retrieval:
    """`obtain_run`, with what happened while retrieving: `run_paths` (globs expanded)
    are one run file, or the parts of a sharded run; none, and the retriever answers."""
    if not run_paths:
        return retrieve_gold(inputs.config, inputs.gold.queries, options or RetrieveOptions())
    files = expand_runs(run_paths)
    if len(files) == 1 and not is_part(files[0]):
        return Retrieval(checked_run(files[0], inputs), run_file=files[0])
    return _joined(inputs, files)


def _joined(inputs: Inputs, files: Sequence[Path]) -> Retrieval:
    """The parts of a sharded run as one, checked against this config and gold set."""
    queries = inputs.gold.queries
    expected = run_fingerprints(inputs.config, inputs.gold)
    joined = join_parts(files, expected, [q.query_id for q in queries])
    retriever = inputs.config.retriever
    limit = retriever.max_error_rate if retriever is not None else 0.0
    check_error_rate(joined.run, queries, limit, f"{len(files)} parts joined")
    return Retrieval(joined.run, joined.from_cache, parts=len(files))


def retrieve_gold(
    config: EvalConfig, queries: Sequence[GoldQuery], options: RetrieveOptions
) -> Retrieval:
    """Run the configured retriever over the queries; ExternalError when too many fail."""
    asked, count = planned_builds(config, options.builds)
    if count > 1:
        return _built_times(config, queries, options, asked, count)
    retriever = build_retriever(config)
    assert config.retriever is not None  # build_retriever says so otherwise
    wanted = config.cache if options.use_cache is None else options.use_cache
    use_cache = wanted and options.repeat == 1
    cache = _retrieval_cache(config, retriever) if use_cache else None
    finished = _counter(options.progress, len(queries) * options.repeat)
    runs = [
        _answered(retriever, queries, config.top_k, cache, finished) for _ in range(options.repeat)
    ]
    check_error_rate(runs[0], queries, config.retriever.max_error_rate)
    hits = cache.hits if cache is not None else 0
    return Retrieval(runs[0], hits, options.repeat, unstable_queries(runs), builds_asked=asked)


def planned_builds(config: EvalConfig, wanted: int | None) -> tuple[int, int]:
    """(builds asked for, builds to run): `wanted` (`--builds`), else the config's
    `builds`, else as many as the run files a `kind: run` glob names, else one; one is
    run when the kind answers the same at every build."""
    retriever = config.retriever
    if retriever is None:
        return 1, 1
    kind = retriever_kind(retriever.kind)
    settings = kind.record(retriever.settings)
    asked = wanted or retriever.builds or kind.builds_held(settings) or 1
    return asked, 1 if kind.deterministic(settings) else asked


def _counter(progress: Callable[[int, int], None] | None, total: int) -> Callable[..., None]:
    """`finished(count=1)`: `count` more of `total` queries are done, as `progress`
    is told (with the total)."""
    done = 0

    def finished(count: int = 1) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    return finished


def _answered(
    retriever: Retriever,
    queries: Sequence[GoldQuery],
    top_k: int,
    cache: RetrievalCache | None,
    finished: Callable[..., None],
) -> Run:
    """`retriever.retrieve(...)` with `finished()` after each query; a retriever that
    answers them all at once (`BatchRetriever`) counts them in one step: a million
    progress updates for one event would be CPU spent for nothing."""
    if isinstance(retriever, BatchRetriever):
        run = retriever.retrieve(queries, top_k, cache)
        finished(len(queries))
        return run
    return retriever.retrieve(queries, top_k, cache, finished)


def _built_times(
    config: EvalConfig,
    queries: Sequence[GoldQuery],
    options: RetrieveOptions,
    asked: int,
    count: int,
) -> Retrieval:
    """The retriever built `count` times, each build answering every query afresh (no
    cache: a cached answer is another build's); ExternalError when too many of any
    build's queries fail."""
    assert config.retriever is not None  # planned_builds gave more than one build
    kind = retriever_kind(config.retriever.kind)
    finished = _counter(options.progress, len(queries) * count)
    runs = []
    for number in range(count):
        if options.on_build is not None:
            options.on_build(number + 1, count)
        if kind.fresh_process:
            run = _in_fresh_process(config, queries, number)
            finished(len(queries))
        else:
            retriever = build_retriever(config, number)
            run = _answered(retriever, queries, config.top_k, None, finished)
        where = f"build {number + 1} of {count}"
        check_error_rate(run, queries, config.retriever.max_error_rate, where)
        runs.append(run)
    return Retrieval(runs[0], builds=tuple(runs), builds_asked=asked)


def _in_fresh_process(config: EvalConfig, queries: Sequence[GoldQuery], number: int) -> Run:
    """One build answering every query in a process of its own (spawned: nothing the
    modules of this one hold, no seed fixed at import, is shared with it)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        outcome = pool.apply(_build_and_answer, (config, tuple(queries), number))
    if isinstance(outcome, Run):
        return outcome
    error, message = outcome
    raise (InputError(message) if error == "input" else ExternalError(message))


def _build_and_answer(
    config: EvalConfig, queries: tuple[GoldQuery, ...], number: int
) -> Run | tuple[str, str]:
    """In the spawned process: build `number` of the retriever and its run, or the
    failure as (kind, one line), which crosses back whole where an exception might not."""
    try:
        return build_retriever(config, number).retrieve(queries, config.top_k, None, None)
    except InputError as exc:
        return "input", str(exc)
    except LlmEvalError as exc:
        return "external", str(exc)


@dataclass(frozen=True, slots=True)
class Contender:
    """One retriever of several run side by side (`retrieve_interleaved`)."""

    name: str
    config: EvalConfig


def interleaved_order(variants: int, queries: int, block: int, seed: int) -> list[list[int]]:
    """The turns of an interleaved run: per round, the round's block of query positions
    (`block` consecutive gold queries) and then each variant in an order shuffled with
    `seed`, as a list of variant numbers. Round r covers queries r*block onward; every
    variant answers every query once, in gold order."""
    if variants < 1 or block < 1:
        raise ValueError(f"needs a variant and a block of one or more, got {variants}, {block}")
    shuffle = random.Random(seed)
    rounds = []
    for _ in range(0, queries, block):
        order = list(range(variants))
        shuffle.shuffle(order)
        rounds.append(order)
    return rounds


def retrieve_interleaved(
    contenders: Sequence[Contender],
    queries: Sequence[GoldQuery],
    options: RetrieveOptions,
    seed: int = 0,
    timings: dict[str, float] | None = None,
) -> dict[str, Retrieval]:
    """Every contender's run over the queries, taken in turns so that a burst of load on
    the machine falls on all of them alike: all retrievers are built first (index builds,
    model loads), then round by round each answers the round's queries, in an order
    shuffled per round with `seed`. A round is one query, or as many as the largest
    `concurrency` among them, so that a pooled retriever still has that many in flight.

    Each retriever answers every query exactly as a run of it alone would (a query's
    results never depend on the others asked with it) and each latency is that query's
    own search time. `timings` receives each contender's seconds, building included.
    ExternalError when too many of a contender's queries fail, as `retrieve_gold`."""
    with ExitStack() as stack:
        return _interleave(stack, contenders, queries, options, seed, timings)


def _interleave(
    stack: ExitStack,
    contenders: Sequence[Contender],
    queries: Sequence[GoldQuery],
    options: RetrieveOptions,
    seed: int,
    timings: dict[str, float] | None,
) -> dict[str, Retrieval]:
    """`retrieve_interleaved`, with every retriever's session held open on `stack` (an
    http connection pool, an MCP server) across its turns."""
    clock = timings if timings is not None else {}
    built: list[tuple[Retriever, RetrievalCache | None]] = []
    for contender in contenders:
        began = time.perf_counter()
        with _blame(contender):
            retriever = build_retriever(contender.config)
            wanted = contender.config.cache if options.use_cache is None else options.use_cache
            cache = _retrieval_cache(contender.config, retriever) if wanted else None
            built.append((stack.enter_context(held(retriever)), cache))
        clock[contender.name] = time.perf_counter() - began
    block = max(getattr(r, "concurrency", 1) for r, _ in built)
    finished = _counter(options.progress, len(queries) * len(contenders))
    answers: list[dict[str, QueryResults]] = [{} for _ in contenders]
    for number, order in enumerate(interleaved_order(len(contenders), len(queries), block, seed)):
        chunk = queries[number * block : (number + 1) * block]
        for index in order:
            contender, (retriever, cache) = contenders[index], built[index]
            began = time.perf_counter()
            with _blame(contender):
                run = _answered(retriever, chunk, contender.config.top_k, cache, finished)
            clock[contender.name] += time.perf_counter() - began
            answers[index].update(run.queries)
    out = {}
    for contender, (_, cache), found in zip(contenders, built, answers, strict=True):
        run = Run({q.query_id: found[q.query_id] for q in queries})
        limit = contender.config.retriever.max_error_rate if contender.config.retriever else 0.0
        with _blame(contender):
            check_error_rate(run, queries, limit)
        out[contender.name] = Retrieval(run, cache.hits if cache is not None else 0)
    return out


@contextmanager
def _blame(contender: Contender) -> Iterator[None]:
    """ExternalError and InputError (unless already located in a file) saying which
    variant they come from."""
    try:
        yield
    except InputError as exc:
        if exc.path is not None:  # it names the file and line already
            raise
        raise InputError(f"variant {contender.name!r}: {exc}", path=contender.config.path) from None
    except ExternalError as exc:
        raise ExternalError(f"variant {contender.name!r}: {exc}") from None


def _retrieval_cache(config: EvalConfig, retriever: Retriever) -> RetrievalCache | None:
    """The cache of a retriever whose answers are cached (the others have none)."""
    identity = retriever.cache_identity
    if identity is None:
        return None
    corpus = file_digest(config.corpus) if config.corpus is not None else None
    key = retriever_key(identity, corpus)
    return RetrievalCache(config.output / "cache" / "retrieval" / key)


def checked_run(path: Path, inputs: Inputs) -> Run:
    """A precomputed run, held to the rules of a live one: it must answer some gold
    query (else InputError), and its recorded failures to the retriever's
    `max_error_rate` (0 without a retriever in the config; else ExternalError)."""
    queries = inputs.gold.queries
    run = load_run(path, query_ids=(q.query_id for q in queries))
    if not any(q.query_id in run.queries for q in queries):
        raise InputError(
            f"shares no query id with the gold set ({plural(len(run.queries), 'query', 'queries')}"
            f" in the run, {len(queries)} in the gold set): is it a run of another gold set?",
            path=path,
        )
    retriever = inputs.config.retriever
    limit = retriever.max_error_rate if retriever is not None else 0.0
    check_error_rate(run, queries, limit, str(path))
    return run


def check_error_rate(
    run: Run, queries: Sequence[GoldQuery], limit: float, where: str | None = None
) -> None:
    """RetrieverFailed summarising the errors when more queries failed than `limit`
    allows; `where` names the run (a run file, a build) at the head of the message."""
    answers = [(q.query_id, run.queries.get(q.query_id)) for q in queries]
    failed = tuple((q, a.error) for q, a in answers if a is not None and a.error is not None)
    summary = FailureSummary(len(queries), limit, failed, where)
    if summary.share > limit:
        raise RetrieverFailed(failure_line(summary), summary)


def failure_line(summary: FailureSummary) -> str:
    """`retriever failed on 3 of 10 queries (30% > max_error_rate 20%): 2 http 503, …`."""
    errors = [error for _, error in summary.failed]
    shown = f"{summary.share * 100:.1f}".removesuffix(".0")
    head = f"{summary.where}: " if summary.where else ""
    return (
        f"{head}retriever failed on {len(errors)} of "
        f"{plural(summary.queries, 'query', 'queries')} "
        f"({shown}% > max_error_rate {summary.max_error_rate * 100:g}%): {count_errors(errors)}"
        f"{first_causes(errors, summary.queries)}"
    )


def count_errors(errors: Iterable[str]) -> str:
    """`9 timeout, 3 http 503`: failures by kind (the text before ': '), most first."""
    return ", ".join(f"{count} {kind}" for kind, count in error_kinds(errors))


def first_causes(errors: Sequence[str], total: int, unit: tuple[str, str] = QUERIES) -> str:
    """`; the cause: 29 of 29 queries: malformed result: hits[].doc_id missing (…)`, to
    follow `count_errors`: `distinct_causes`, the first `CAUSES_SHOWN` in full. Empty
    when no error says more than its kind (`3 timeout`)."""
    ordered = distinct_causes(errors)
    if not ordered:
        return ""
    shown = [f"{n} of {plural(total, *unit)}: {cause}" for cause, n in ordered[:CAUSES_SHOWN]]
    if len(ordered) > CAUSES_SHOWN:
        shown.append(plural(len(ordered) - CAUSES_SHOWN, "other cause", "other causes"))
    return f"; {'the cause' if len(ordered) == 1 else 'the causes'}: {'; '.join(shown)}"


def unstable_queries(runs: Sequence[Run]) -> tuple[str, ...]:
    """Queries whose ranked doc ids differ between runs (failed answers left out)."""
    if len(runs) < 2:  # one run: nothing to differ from
        return ()
    unstable = []
    for query_id in runs[0].queries:
        answers = [run.queries.get(query_id) for run in runs]
        rankings = {a.doc_ids for a in answers if a is not None and a.error is None}
        if len(rankings) > 1:
            unstable.append(query_id)
    return tuple(unstable)


def retrieval_notes(retrieval: Retrieval) -> list[str]:
    """Sentences about failed queries, the cache and the repeats, for the commands' output."""
    total = len(retrieval.run.queries)
    failed = retrieval.run.failed()
    notes = []
    if failed:
        notes.append(
            f"The retriever failed on {len(failed)} of {plural(total, 'query', 'queries')} "
            f"({count_errors(failed.values())}): {listed(list(failed), 20)}; they are not "
            f"scored, and count in error_rate{first_causes(list(failed.values()), total)}."
        )
    if retrieval.from_cache:
        notes.append(
            f"{retrieval.from_cache} of {plural(total, 'query', 'queries')} answered from the "
            "retrieval cache (--no-cache asks the retriever again)."
        )
    if retrieval.repeat > 1:
        notes.append(_repeat_note(retrieval.unstable, retrieval.repeat, total))
    if retrieval.parts:
        notes.append(f"Joined {retrieval.parts} parts of a sharded run into one run.")
    if retrieval.builds:
        notes.append(
            f"The retriever was built {len(retrieval.builds)} times, each build answering "
            "every query; each query's scores are the builds' mean, and the gate's test "
            "holds the variance between builds."
        )
    elif retrieval.builds_asked > 1:
        notes.append(
            f"This retriever answers the same at every build: one build stands for the "
            f"{retrieval.builds_asked} asked."
        )
    return notes


def _repeat_note(unstable: Sequence[str], repeat: int, total: int) -> str:
    if not unstable:
        return f"Rankings were the same in all {repeat} runs of every query."
    return (
        f"Rankings differed between {repeat} runs on {len(unstable)} of "
        f"{plural(total, 'query', 'queries')}: {listed(unstable, 20)}."
    )


def build_retriever(config: EvalConfig, build: int = 0) -> Retriever:
    """The configured retriever, ready to answer queries (`build`: which of several)."""
    if config.retriever is None:
        raise InputError(
            "no retriever is configured; add `retriever:` or pass --run", path=config.path
        )
    kind = retriever_kind(config.retriever.kind)
    context = RetrieverContext(config.corpus, config.output / "cache", build)
    try:
        # Checked, and their ${VAR} read, when the config was loaded: checking them again
        # would read a `${` inside a variable's value as another variable.
        return kind.build(kind.record(config.retriever.settings), context)
    except InputError as exc:
        raise config.retriever.locate(exc) from None


def searched_elsewhere(retriever: RetrieverConfig) -> str | None:
    """None when the configured retriever searches in this process, else where it does,
    in words (its kind's `searched_elsewhere`)."""
    kind = retriever_kind(retriever.kind)
    return kind.searched_elsewhere(kind.record(retriever.settings))
