"""Asking the judge about every query of a run, and turning its answers into metrics.

For each answered gold query with a reference (`expected_answer`, else its
`reference_passages`): one chunk-relevance call per chunk in the top k of the largest
`context_precision@k`, one statement-attribution call for `context_recall`, one
sufficiency call for `context_sufficiency`. A query whose results carry no text, or
whose calls failed or came back unreadable, is left unscored with the reason; it is
never scored 0. More failed calls than the judge's `max_error_rate` stop the run
(exit 4), as a failing retriever does.

The calls go out together: every repeat's calls in one pool, the client keeping the
judge's `concurrency` on the wire, and the embeddings of answer relevance batch by
batch alongside them (the embeddings section's own `concurrency`), not after them.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from llm_eval.endpoints.chat import ChatClient, Session
from llm_eval.endpoints.client import EndpointFailed, Usage, price
from llm_eval.endpoints.embeddings import Embedder
from llm_eval.errors import ExternalError
from llm_eval.gold import GoldQuery, GoldSet
from llm_eval.judge.prompts import prompt
from llm_eval.judged.arithmetic import (
    BadVerdict,
    Calibration,
    Readability,
    answer_relevance,
    attributions,
    calibration,
    context_precision,
    questions,
    score,
    statements,
    verdict,
)
from llm_eval.metrics import Metric
from llm_eval.runs import Run
from llm_eval.wording.english import plural


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """The judged values per query, what the judge cost, and how far to trust it."""

    per_query: Mapping[str, Mapping[str, float]]
    """Per judged query, each judged metric's mean over the repeats."""
    unscored: Mapping[str, str]
    """Per query left unscored: why."""
    usage: Usage
    calibration: Calibration | None
    repeats: int = 1
    spread: Mapping[str, float] = field(default_factory=dict)
    """Per metric, the mean over queries of the range (max − min) across the repeats."""
    flips: tuple[tuple[str, int], ...] = ()
    """(query_id, rank) of the chunks whose verdict changed between repeats."""
    labels: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per judged query a person labelled (`reviewed`, every judged chunk labelled or
    beyond the results), the judged metrics the gold labels also give: context
    precision@k from the labels of the same chunks (`llm_eval.judged.correction`)."""
    readability: Mapping[str, Readability] = field(default_factory=dict)
    """Per prompt, the answers it got and how many of them were unreadable."""


@dataclass(frozen=True, slots=True)
class JudgePlan:
    """The calls a run would make (identical calls once, as they are asked), before any
    is made."""

    calls: int
    cached: int
    """Of them, the ones the call cache already answers."""
    prompt_tokens: int
    """Estimated over the calls not cached: their characters at the endpoint's own
    tokens per character, measured on the cached calls' counted tokens (4 characters a
    token when nothing is cached yet)."""
    answer_tokens: int
    """Estimated: per prompt, the cached answers' mean length (else ANSWER_TOKENS)."""
    cost: float
    measured: bool = False
    """Whether the tokens per character were measured on cached calls."""


ANSWER_TOKENS = 40
"""The estimated length of one answer: the verdicts asked for are short JSON objects."""
CHARACTERS_PER_TOKEN = 4
"""Without a counted call to measure by: about 4 characters a token for English."""


def estimated_tokens(characters: int) -> int:
    """Tokens in a prompt before it is sent: about 4 characters a token."""
    return math.ceil(characters / CHARACTERS_PER_TOKEN)


@dataclass(frozen=True, slots=True, eq=False)
class _Call:
    """One planned call (compared and hashed by identity)."""

    query_id: str
    what: str
    """`chunk:<rank>`, `recall` or `sufficiency`."""
    prompt: str
    parse: Callable[[str], object]
    values: Mapping[str, str]


def reference_of(query: GoldQuery) -> str | None:
    """What the retrieved context should support: the expected answer, else the passages."""
    if query.expected_answer and query.expected_answer.strip():
        return query.expected_answer.strip()
    passages = " ".join(p.strip() for p in query.reference_passages if p.strip())
    return passages or None


def judge_run(
    gold: GoldSet,
    run: Run,
    metrics: Sequence[Metric],
    client: ChatClient,
    gold_relevant: Callable[[str, int], bool | None],
    repeats: int = 1,
    embeddings: Embedder | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> JudgeOutcome:
    """Judge every answered gold query on the judged `metrics`, `repeats` times.

    `gold_relevant(query_id, rank)` says whether the gold labels call the result at that
    rank relevant (None when the query has no labels): the calibration's other side.
    Each repeat is its own call (and cache entry); values are the mean over repeats.
    `progress` is told (judgments answered, judgments in all) as each call ends.
    """
    chunks = _chunks(metrics)
    calls, unscored = _plan(gold, run, chunks, {m.family.name for m in metrics})
    queries = {q.query_id: q.query for q in gold.queries}
    asked = [queries[c.query_id] for c in calls if c.what == "questions"]
    with _Vectors(embeddings if asked else None) as vectors:
        vectors.add(asked)
        rounds = _ask(client, calls, repeats, vectors.add, progress)
        readable = readability([(c.prompt, answers[c]) for answers in rounds for c in calls])
        _check_failures(client, [a for answers in rounds for a in answers.values()])
        relevance = vectors.relevance()
    by_id = {q.query_id: q for q in gold.queries}
    per_query: dict[str, dict[str, float]] = {}
    labels: dict[str, dict[str, float]] = {}
    ranges: dict[str, list[float]] = {}
    flips: list[tuple[str, int]] = []
    pairs: list[tuple[int, bool]] = []
    for query_id, mine in _by_query(calls).items():
        problems = [a for answers in rounds for c in mine if isinstance(a := answers[c], str)]
        if problems:
            unscored[query_id] = problems[0]
            continue
        rows, verdict_rounds = [], []
        for answers in rounds:
            got = {c.what: answers[c] for c in mine}
            verdicts = [
                v for r in range(1, chunks + 1) if isinstance(v := got.get(f"chunk:{r}"), int)
            ]
            verdict_rounds.append(verdicts)
            rows.append(_values(metrics, verdicts, got, chunks, relevance, queries[query_id]))
        # Each chunk counts once in the calibration, with its first repeat's verdict: the
        # repeats' disagreement is reported as flips, not as more labelled chunks.
        gold_verdicts = [gold_relevant(query_id, r) for r in range(1, len(verdict_rounds[0]) + 1)]
        pairs += [
            (j, g) for j, g in zip(verdict_rounds[0], gold_verdicts, strict=True) if g is not None
        ]
        if by_id[query_id].reviewed and gold_verdicts and None not in gold_verdicts:
            labels[query_id] = _label_values(metrics, [int(bool(g)) for g in gold_verdicts], chunks)
        per_query[query_id] = {m: sum(r[m] for r in rows) / len(rows) for m in rows[0]}
        for metric in rows[0]:
            values = [r[metric] for r in rows]
            ranges.setdefault(metric, []).append(max(values) - min(values))
        flips += [
            (query_id, rank)
            for rank, seen in enumerate(zip(*verdict_rounds, strict=True), start=1)
            if len(set(seen)) > 1
        ]
    spread = {m: sum(r) / len(r) for m, r in ranges.items()} if repeats > 1 else {}
    return JudgeOutcome(
        per_query,
        unscored,
        client.usage,
        calibration(pairs),
        repeats,
        spread,
        tuple(flips),
        labels,
        readable,
    )


def _label_values(
    metrics: Sequence[Metric], relevant: Sequence[int], chunks: int
) -> dict[str, float]:
    """The judged metrics the gold labels give too, from the labels of the judged chunks."""
    return {
        m.name: context_precision(relevant, m.k or chunks)
        for m in metrics
        if m.family.name in CORRECTABLE
    }


CORRECTABLE = {"context_precision"}
"""Judged metrics built from chunk verdicts, which the gold labels give as well; the
others (statements, answers, scores) have no human counterpart to correct them by."""

UNREADABLE = "judge answer unreadable: "
FAILED = "judge call failed: "


def readability(answers: Sequence[tuple[str, object]]) -> dict[str, Readability]:
    """Per prompt, of the (prompt, parsed answer or why there is none) pairs: the
    answers received and how many were unreadable (failed calls are no answer)."""
    counts: dict[str, tuple[int, int]] = {}
    for name, answer in answers:
        if isinstance(answer, str) and answer.startswith(FAILED):
            continue
        got, bad = counts.get(name, (0, 0))
        unreadable = isinstance(answer, str) and answer.startswith(UNREADABLE)
        counts[name] = (got + 1, bad + unreadable)
    return {name: Readability(got, bad) for name, (got, bad) in sorted(counts.items())}


class _Vectors:
    """Texts embedded as they come, in batches of the embedder's `batch_size`, up to its
    `concurrency` batches at once (one at a time for a model on disk), while the chat
    calls go on: the generated questions of answer relevance are embedded as soon as a
    batch of them is there, not after the last chat call."""

    def __init__(self, embeddings: Embedder | None) -> None:
        self._embeddings = embeddings
        settings = embeddings.settings if embeddings is not None else None
        self._size = settings.batch_size if settings is not None else 32
        # one at a time for a model on disk (and when nothing is embedded at all)
        workers = 1 if settings is None or settings.model_path is not None else settings.concurrency
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="llm-eval-embed")
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._pending: list[str] = []
        self._batches: list[tuple[list[str], Future[list[list[float]]]]] = []

    def __enter__(self) -> _Vectors:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def add(self, texts: Sequence[str]) -> None:
        """Embed these texts too (each text once); a full batch is sent at once."""
        if self._embeddings is None:
            return
        with self._lock:
            new = [t for t in dict.fromkeys(texts) if t not in self._seen]
            self._seen.update(new)
            self._pending += new
            while len(self._pending) >= self._size:
                self._send(self._pending[: self._size])
                del self._pending[: self._size]

    def _send(self, batch: list[str]) -> None:
        assert self._embeddings is not None
        self._batches.append((batch, self._pool.submit(self._embeddings.embed, batch)))

    def relevance(self) -> Callable[[str, Sequence[str]], float]:
        """Answer relevance from the vectors, once every text sent is embedded (NaN
        without an embedder); ExternalError when the endpoint failed."""
        if self._embeddings is None:
            return lambda query, generated: math.nan
        with self._lock:
            if self._pending:
                self._send(self._pending)
                self._pending = []
        vectors: dict[str, list[float]] = {}
        try:
            for batch, future in self._batches:
                vectors.update(zip(batch, future.result(), strict=True))
        except EndpointFailed as failure:
            raise ExternalError(f"the embeddings endpoint failed: {failure}") from None
        return lambda query, generated: answer_relevance(
            vectors[query], [vectors[g] for g in generated]
        )


def plan_calls(
    gold: GoldSet, run: Run, metrics: Sequence[Metric], client: ChatClient, repeats: int = 1
) -> JudgePlan:
    """What judging this run would ask, and an estimate of its tokens and cost."""
    calls, _ = _plan(gold, run, _chunks(metrics), {m.family.name for m in metrics})
    unique = list(_first_of_each(calls).values())
    new_chars = seen_chars = seen_tokens = 0
    new: dict[str, int] = {}
    answers: dict[str, list[int]] = {}
    for repeat in range(repeats):
        for call in unique:
            template = prompt(call.prompt)
            messages = template.messages(**call.values)
            chars = sum(len(m.content) for m in messages)
            schema = template.schema(**call.values)
            answer = client.cached_answer(template.key, messages, repeat, schema)
            if answer is None:
                new_chars += chars
                new[call.prompt] = new.get(call.prompt, 0) + 1
            else:
                seen_chars += chars
                seen_tokens += answer.prompt_tokens
                answers.setdefault(call.prompt, []).append(answer.completion_tokens)
    measured = seen_chars > 0 and seen_tokens > 0
    prompt_tokens = (
        math.ceil(new_chars * seen_tokens / seen_chars) if measured else estimated_tokens(new_chars)
    )
    answer_tokens = sum(
        math.ceil(count * (sum(answers[p]) / len(answers[p]) if p in answers else ANSWER_TOKENS))
        for p, count in new.items()
    )
    cost = price(client.settings, prompt_tokens, answer_tokens)
    total = len(unique) * repeats
    cached = total - sum(new.values())
    return JudgePlan(total, cached, prompt_tokens, answer_tokens, cost, measured)


def call_keys(
    gold: GoldSet, run: Run, metrics: Sequence[Metric], client: ChatClient, repeats: int = 1
) -> dict[str, list[str]]:
    """Per judged query, the call cache's keys of its calls, every repeat's (a call two
    queries share is under both): where judging this run keeps its answers."""
    calls, _ = _plan(gold, run, _chunks(metrics), {m.family.name for m in metrics})
    keys: dict[str, list[str]] = {}
    for call in calls:
        template = prompt(call.prompt)
        messages = template.messages(**call.values)
        schema = template.schema(**call.values)
        keys.setdefault(call.query_id, []).extend(
            client.key(template.key, messages, repeat, schema) for repeat in range(repeats)
        )
    return keys


def _chunks(metrics: Sequence[Metric]) -> int:
    """How many top chunks get a relevance verdict: the largest context_precision@k."""
    return max((m.k or 0 for m in metrics if m.family.name == "context_precision"), default=0)


def _check_failures(client: ChatClient, answers: Sequence[object]) -> None:
    """ExternalError when more calls failed than the judge's max_error_rate allows."""
    failed = [a.removeprefix(FAILED) for a in answers if isinstance(a, str)]
    limit = client.settings.max_error_rate
    if answers and len(failed) / len(answers) > limit:
        raise ExternalError(
            f"the judge failed on {len(failed)} of {plural(len(answers), 'call', 'calls')} "
            f"(more than max_error_rate {limit * 100:g}%): {', '.join(sorted(set(failed))[:3])}"
        )


def _values(
    metrics: Sequence[Metric],
    verdicts: Sequence[int],
    got: Mapping[str, object],
    chunks: int,
    relevance: Callable[[str, Sequence[str]], float],
    query: str,
) -> dict[str, float]:
    """One query's judged values from its parsed answers (a metric whose calls were not
    made for the query, e.g. faithfulness without an answer, has no value)."""
    row: dict[str, float] = {}
    for metric in metrics:
        name = metric.family.name
        if name == "context_precision" and "chunk:1" in got:
            row[metric.name] = context_precision(verdicts, metric.k or chunks)
        elif name in _ATTRIBUTED and isinstance(marks := got.get(_ATTRIBUTED[name]), list):
            row[metric.name] = sum(marks) / len(marks)
        elif name == "context_sufficiency" and isinstance(value := got.get("sufficiency"), float):
            row[metric.name] = value
        elif name == "answer_relevance" and isinstance(asked := got.get("questions"), list):
            row[metric.name] = relevance(query, asked)
    return row


def _plan(
    gold: GoldSet, run: Run, chunks: int, names: set[str]
) -> tuple[list[_Call], dict[str, str]]:
    calls: list[_Call] = []
    unscored: dict[str, str] = {}
    for query in gold.queries:
        answer = run.queries.get(query.query_id)
        if answer is None or answer.error is not None or query.is_rejection:
            continue  # missing, failed and rejection queries are accounted for elsewhere
        texts = [r.text for r in answer.results]
        if not texts or any(t is None for t in texts[: max(chunks, 1)]):
            unscored[query.query_id] = "the results carry no text for the judge to read"
            continue
        context = "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts, start=1))
        why = []
        reference = reference_of(query)
        if reference is None and names & _NEED_REFERENCE:
            why.append("no expected_answer or reference_passages to judge against")
        elif reference is not None:
            calls += _reference_calls(query, reference, texts, context, chunks, names)
        generated = (answer.answer or "").strip()
        if not generated and names & _NEED_ANSWER:
            why.append("the run has no answer to judge")
        elif generated:
            calls += _answer_calls(query, generated, context, names)
        if why:
            unscored[query.query_id] = "; ".join(why)
    return calls, unscored


_ATTRIBUTED = {"context_recall": "recall", "faithfulness": "faithfulness"}
"""Metrics that are the share of attributed statements, and the call that attributes."""
_NEED_REFERENCE = {"context_precision", "context_recall", "context_sufficiency"}
_NEED_ANSWER = {"faithfulness", "answer_relevance"}


def _reference_calls(
    query: GoldQuery,
    reference: str,
    texts: Sequence[str | None],
    context: str,
    chunks: int,
    names: set[str],
) -> list[_Call]:
    """The calls that judge the context against the reference answer."""
    calls = []
    base = {"question": query.query, "reference": reference}
    for rank, text in enumerate(texts[:chunks], start=1):
        values = {**base, "passage": str(text)}
        calls.append(_Call(query.query_id, f"chunk:{rank}", "chunk_relevance", verdict, values))
    if "context_recall" in names:
        calls.append(_attribution(query, "recall", reference, context))
    if "context_sufficiency" in names:
        values = {**base, "context": context}
        calls.append(_Call(query.query_id, "sufficiency", "context_sufficiency", score, values))
    return calls


def _answer_calls(query: GoldQuery, answer: str, context: str, names: set[str]) -> list[_Call]:
    """The calls that judge the generated answer: its faithfulness to the context, and
    the questions it answers (for answer relevance)."""
    calls = []
    if "faithfulness" in names:
        calls.append(_attribution(query, "faithfulness", answer, context))
    if "answer_relevance" in names:
        values = {"answer": answer, "count": str(QUESTIONS)}
        calls.append(
            _Call(
                query.query_id,
                "questions",
                "question_generation",
                partial(questions, count=QUESTIONS),
                values,
            )
        )
    return calls


def _attribution(query: GoldQuery, what: str, text: str, context: str) -> _Call:
    """Which sentences of `text` the context supports."""
    said = statements(text)
    listed = "\n".join(f"{i}. {s}" for i, s in enumerate(said, start=1))
    values = {"question": query.query, "context": context, "statements": listed}
    return _Call(
        query.query_id,
        what,
        "statement_attribution",
        partial(attributions, count=len(said)),
        {**values, "count": str(len(said))},
    )


QUESTIONS = 3
"""Questions generated from an answer for answer relevance (RAGAS's default)."""


def _ask(
    client: ChatClient,
    calls: Sequence[_Call],
    repeats: int,
    generated: Callable[[Sequence[str]], None],
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[_Call, object]]:
    """Per repeat, every call's parsed answer, or the text of why there is none; each
    list of generated questions is handed to `generated` as it comes.

    All repeats' calls share one pool. It has twice the endpoint's `concurrency` in
    threads, while the client keeps `concurrency` requests on the wire: a thread builds
    its prompt, reads the cache and writes the answer outside that limit, so the
    endpoint is never left waiting for them. The question generation calls go first,
    so that the embeddings of their questions overlap the other calls."""

    finished = itertools.count(1)
    told = threading.Lock()

    def one(session: Session, call: _Call, repeat: int) -> object:
        answer = asked(session, call, repeat)
        if progress is not None:
            with told:  # one line at a time, in order
                progress(next(finished), len(jobs))
        return answer

    def asked(session: Session, call: _Call, repeat: int) -> object:
        template = prompt(call.prompt)
        messages = template.messages(**call.values)
        try:
            answer = session.ask(template.key, messages, repeat, template.schema(**call.values))
            parsed = call.parse(answer.content)
        except EndpointFailed as failure:
            return f"{FAILED}{failure}"
        except BadVerdict as bad:
            return f"{UNREADABLE}{bad}"
        if call.what == "questions":
            generated(cast(list[str], parsed))
        return parsed

    if not calls:
        return [{} for _ in range(repeats)]
    first = _first_of_each(calls)
    unique = list(first.values())
    jobs = [(call, repeat) for repeat in range(repeats) for call in unique]
    jobs.sort(key=lambda job: job[0].what != "questions")
    workers = 2 * client.settings.concurrency
    with (
        client.session() as session,
        ThreadPoolExecutor(workers, thread_name_prefix="llm-eval-judge") as pool,
    ):
        answered = dict(zip(jobs, pool.map(lambda job: one(session, *job), jobs), strict=True))
    return [
        {c: answered[(first[_identity(c)], repeat)] for c in calls} for repeat in range(repeats)
    ]


def _identity(call: _Call) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What makes two calls the same call: the prompt and its values."""
    return call.prompt, tuple(sorted(call.values.items()))


def _first_of_each(calls: Sequence[_Call]) -> dict[tuple[str, tuple[tuple[str, str], ...]], _Call]:
    """Identical calls (the same passage for the same question in two queries) are asked
    once: the first of each, by prompt and values."""
    first: dict[tuple[str, tuple[tuple[str, str], ...]], _Call] = {}
    for call in calls:
        first.setdefault(_identity(call), call)
    return first


def _by_query(calls: Sequence[_Call]) -> dict[str, list[_Call]]:
    grouped: dict[str, list[_Call]] = {}
    for call in calls:
        grouped.setdefault(call.query_id, []).append(call)
    return grouped
