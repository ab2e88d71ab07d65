"""`llm-eval gold synthesize --n N`: draft questions with the judge model, for review.

Chunks come from the areas `gold plan` says are short (`llm_eval.authoring.synthesis`); the
model writes one question per chunk (prompt `question_writing`), the chunk is
labelled relevant, near-duplicates of existing questions are dropped, and the rest
are appended to a candidates file in tier `candidate` with `source: synthetic`,
`reviewed: false` and the prompt's version. `--rejection M` adds questions the corpus
should not answer (prompt `off_corpus_question`), kept only when the judge finds
none of the top 5 BM25 results useful. Nothing here can gate: `llm-eval gold review`
is where a person accepts a candidate into a tier.

The cost controls are the judge's: every call is cached, `--dry-run` says what would
be asked, `--max-cost` refuses before the first call, and more failed calls than the
judge's max_error_rate stop the run (exit 4).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_eval import defaults
from llm_eval.authoring.neighbours import lexical_neighbours, measure_coverage, neighbours_of
from llm_eval.authoring.plan import plan
from llm_eval.authoring.synthesis import (
    Deduplicator,
    MeaningDeduplicator,
    Target,
    choose_chunks,
    targets,
)
from llm_eval.baseline_io import load_baseline
from llm_eval.config import EvalConfig
from llm_eval.corpus import Document
from llm_eval.digest import digest
from llm_eval.endpoints.chat import ChatClient, Message, Session
from llm_eval.endpoints.client import EndpointFailed, price
from llm_eval.endpoints.embedders import embedder
from llm_eval.errors import ExternalError, InputError
from llm_eval.gold import GoldQuery
from llm_eval.gold_io import iter_gold_file
from llm_eval.inputs import Inputs
from llm_eval.judge.calls import ANSWER_TOKENS, estimated_tokens
from llm_eval.judge.prompts import prompt
from llm_eval.judged.arithmetic import BadVerdict, answer_json, verdict
from llm_eval.output import wrap
from llm_eval.pipeline import load_inputs
from llm_eval.power_io import PowerCache
from llm_eval.progress import Progress
from llm_eval.retrieval import count_errors, first_causes
from llm_eval.textio import append_atomic, exclusive_lock
from llm_eval.wording.english import plural

CANDIDATE_TIER = "candidate"
MAX_SIMILARITY = 0.9
"""The embedding cosine at or above which a drafted question is a paraphrase of one
already in the gold set or drafted before (with `embeddings:` in the config)."""


PASSAGE_CHARS = 4000
"""The longest passage sent to the model (longer chunks are cut)."""
CHECKED = 5
"""A rejection question is checked against this many top BM25 results."""
TAG_DEPTH = 50
"""How deep BM25 looks for uncovered chunks on a tag's topics."""
CHECK_TOKENS = 500
"""Estimated prompt tokens of one relevance check (its passage is not known yet)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One planned call to the model."""

    prompt: str
    values: dict[str, str]
    chunk: Document | None
    target: Target | None

    def messages(self) -> list[Message]:
        """The filled-in template."""
        return prompt(self.prompt).messages(**self.values)

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the answer."""
        return prompt(self.prompt).schema(**self.values)

    @property
    def key(self) -> str:
        """The prompt's name and version."""
        return prompt(self.prompt).key


def _candidates(path: Path) -> list[GoldQuery]:
    if not path.is_file():
        return []
    return list(iter_gold_file(path, CANDIDATE_TIER))


def _append_new(path: Path, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append the records whose query id the candidates file does not hold yet, under
    the lock its other writers take (`exclusive_lock`, as the history file's): another
    run into the same file may have written the same questions since this one read it
    (an id is the question's digest). The records written."""
    if not records:
        return []
    with exclusive_lock(path):
        taken = {q.query_id for q in _candidates(path)}
        fresh = [r for r in records if r["query_id"] not in taken]
        if fresh:
            append_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fresh))
    return fresh


def run_synthesize(
    config_path: Path,
    criteria_path: Path,
    *,
    n: int,
    tag: str | None = None,
    rejection: int = 0,
    out: Path | None = None,
    seed: int = 0,
    max_overlap: float = 0.7,
    max_similarity: float = MAX_SIMILARITY,
    max_cost: float | None = None,
    dry_run: bool = False,
    width: int = 80,
    baseline: Path | None = None,
) -> str:
    """Plan (from the baseline's per-query scores: `baseline`, else the config's), ask,
    filter, append to the candidates file; the terminal text."""
    inputs = load_inputs(config_path, criteria_path)
    config = inputs.config
    if config.judge is None:
        raise InputError(
            "synthesize asks the judge model: add a `judge:` section (an OpenAI-compatible "
            "endpoint) to the config",
            path=config.path,
        )
    documents, found = measure_coverage(inputs)
    known_tags = {t.tag for t in found.tags}
    if tag is not None and tag not in known_tags:
        raise InputError(
            f"--tag {tag!r} is on no gold question (tags: {', '.join(sorted(known_tags))})"
        )
    path = out or config.output / "candidates.jsonl"
    existing = _candidates(path)
    rng = random.Random(seed)
    used = set(found.near_ids) | {d for c in existing for d, _ in c.relevant}
    calls: list[Call] = []
    known = load_baseline(baseline or config.baseline)
    scores = None if known is None else known.per_query
    powers = PowerCache.under(config.output)
    needs = plan(inputs.criteria, inputs.gold.queries, found, scores=scores, known=powers)
    for target in targets(needs, found, n, tag):
        if target.tag is not None:
            target = replace(target, pool=_tag_pool(inputs, target.tag, used))
        for chunk in choose_chunks(documents, target, used, rng, found.area_of):
            used.add(chunk.doc_id)
            values = {"title": chunk.title or chunk.doc_id, "passage": chunk.text[:PASSAGE_CHARS]}
            calls.append(Call("question_writing", values, chunk, target))
    titles = sorted({d.title for d in documents if d.title})
    avoid = [q.query for q in (*inputs.gold.queries, *existing) if q.is_rejection][:20]
    for number in range(rejection):
        shown = "\n".join(rng.sample(titles, min(40, len(titles))))
        values = {"titles": shown, "avoid": "\n".join(avoid), "number": str(number + len(existing))}
        calls.append(Call("off_corpus_question", values, None, Target(tag, (), 1)))
    client = ChatClient(config.judge, config.output / "cache" / "judge")
    estimate = _estimate(client, calls, rejection)
    if dry_run:
        return "\n".join(wrap(f"synthesize --dry-run: {estimate}; nothing was asked.", width, ""))
    if max_cost is not None and estimate.cost > max_cost:
        raise InputError(
            f"synthesizing would cost about {estimate.cost:.4f} ({estimate}), more than "
            f"--max-cost {max_cost:g}; nothing was asked"
        )
    asked, report = _ask(inputs, client, calls, existing, max_overlap, documents, max_similarity)
    written = _append_new(path, asked)
    usage = client.usage
    spent = usage.cost(config.judge)
    summary = (
        f"synthesize: {plural(len(written), 'candidate', 'candidates')} written to {path} "
        f"({report}). Judge: {usage.calls} calls, {usage.cached} answered from the cache, "
        f"{usage.prompt_tokens + usage.completion_tokens:,} tokens, cost {spent:.4f}."
    )
    option = "" if Path(config_path) == defaults.CONFIG else f" --config {config_path}"
    advice = (
        f"Nothing gates until a person accepts it: llm-eval gold review {path} --tier A{option}"
        if written
        else "Nothing new to review."
    )
    return "\n".join([*wrap(summary, width, ""), *wrap(advice, width, "")])


@dataclass(frozen=True, slots=True)
class Estimate:
    """What the calls would cost, before any is made."""

    calls: int
    cached: int
    checks: int
    tokens: int
    cost: float

    def __str__(self) -> str:
        return (
            f"{plural(self.calls, 'call', 'calls')} ({self.cached} answered from the cache) "
            f"and up to {self.checks} relevance checks of rejection questions, about "
            f"{self.tokens:,} tokens, cost about {self.cost:.4f}"
        )


def _tag_pool(inputs: Inputs, tag: str, used: set[str]) -> tuple[str, ...]:
    """Documents BM25 finds for the tag's questions down to rank TAG_DEPTH that no
    question is near yet, the best ranks first: material on the tag's topics that no
    question covers."""
    asked = [q for q in inputs.gold.queries if tag in q.tags and not q.is_rejection]
    found = lexical_neighbours(inputs.config, asked, TAG_DEPTH)
    ranked = sorted(
        (rank, i, d)
        for i, q in enumerate(asked)
        for rank, d in enumerate(found.get(q.query_id, ()))
        if d not in used
    )
    return tuple(dict.fromkeys(d for _, _, d in ranked))


def _estimate(client: ChatClient, calls: Sequence[Call], rejection: int) -> Estimate:
    """Tokens at 4 characters each; answers ANSWER_TOKENS long; each rejection question
    checked against CHECKED passages of CHECK_TOKENS tokens."""
    cached = chars = 0
    for call in calls:
        messages = call.messages()
        if client.is_cached(call.key, messages, schema=call.schema()):
            cached += 1
        else:
            chars += sum(len(m.content) for m in messages)
    checks = rejection * CHECKED
    asked = len(calls) - cached + checks
    prompt_tokens = estimated_tokens(chars) + checks * CHECK_TOKENS
    cost = price(client.settings, prompt_tokens, asked * ANSWER_TOKENS)
    return Estimate(len(calls), cached, checks, prompt_tokens + asked * ANSWER_TOKENS, cost)


def _question(session: Session, call: Call) -> str:
    """The question the model wrote; EndpointFailed or BadVerdict when it wrote none."""
    answer = session.ask(call.key, call.messages(), schema=call.schema())
    value = answer_json(answer.content).get("question")
    if not isinstance(value, str) or not value.strip():
        raise BadVerdict(f"question must be a non-empty string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadVerdict("the question holds a lone UTF-16 surrogate") from None
    return " ".join(value.split())


def _ask(
    inputs: Inputs,
    client: ChatClient,
    calls: Sequence[Call],
    existing: Sequence[GoldQuery],
    max_overlap: float,
    documents: Sequence[Document],
    max_similarity: float = MAX_SIMILARITY,
) -> tuple[list[dict[str, Any]], str]:
    config = inputs.config
    questions = [q.query for q in (*inputs.gold.queries, *existing)]
    dedupe = Deduplicator(questions, max_overlap)
    meaning = _meaning_deduplicator(config, questions, max_similarity)
    paraphrases = 0
    texts = {d.doc_id: d.text for d in documents}
    duplicates = answered = 0
    failures: list[str] = []  # why each failed call failed, as `kind: detail`
    written: list[dict[str, Any]] = []
    finished, told = itertools.count(1), threading.Lock()
    with (
        client.session() as session,
        ThreadPoolExecutor(client.settings.concurrency) as pool,
        Progress(unit="questions") as progress,
    ):

        def attempt(call: Call) -> str | Exception:
            try:
                return _question(session, call)
            except (EndpointFailed, BadVerdict) as exc:
                return exc
            finally:
                with told:  # one line at a time, in order
                    progress.update(next(finished), len(calls))

        results = list(pool.map(attempt, calls))
        unreadable = sum(1 for r in results if isinstance(r, BadVerdict))
        received = sum(1 for r in results if not isinstance(r, EndpointFailed))
        for call, question in zip(calls, results, strict=True):
            if isinstance(question, Exception):
                failures.append(_why(question))
                continue
            if not dedupe.admit(question):
                duplicates += 1
                continue
            if meaning is not None:
                try:
                    if not meaning.admit(question):
                        paraphrases += 1
                        continue
                except EndpointFailed as exc:
                    failures.append(f"embeddings {exc}")
                    continue
            if call.chunk is None:
                verdicts = _check_rejection(inputs, session, question, texts)
                failures += [v for v in verdicts if isinstance(v, str)]
                if any(isinstance(v, str) for v in verdicts):
                    continue
                if any(verdicts):
                    answered += 1
                    continue
            written.append(_record(question, call))
    limit = client.settings.max_error_rate
    asked, failed = len(calls), len(failures)
    if asked and failed / asked > limit:
        raise ExternalError(
            f"the judge failed on {failed} of {plural(asked, 'call', 'calls')} (more than "
            f"max_error_rate {limit * 100:g}%): {count_errors(failures)}"
            f"{first_causes(failures, asked, ('call', 'calls'))}; "
            f"{len(written)} candidates were not written"
        )
    parts = [f"{plural(len(calls), 'question', 'questions')} asked for"]
    if duplicates:
        parts.append(f"{duplicates} dropped as near-duplicates (token F1 >= {max_overlap:g})")
    if paraphrases:
        parts.append(
            f"{paraphrases} dropped as paraphrases (embedding cosine >= {max_similarity:g})"
        )
    if answered:
        parts.append(f"{answered} rejection questions dropped: the corpus answers them")
    if failed:
        parts.append(f"{failed} failed calls ({count_errors(failures)})")
    if received:
        parts.append(
            f"{unreadable} of {plural(received, 'answer', 'answers')} unreadable "
            f"({unreadable / received * 100:.0f}%)"
        )
    return written, "; ".join(parts)


def _meaning_deduplicator(
    config: EvalConfig, questions: Sequence[str], limit: float
) -> MeaningDeduplicator | None:
    """With `embeddings:` in the config, paraphrases are caught by meaning as well as by
    shared words; the gold set's questions are embedded once (and cached)."""
    if config.embeddings is None:
        return None
    client = embedder(config.embeddings, config.output / "cache" / "embeddings")
    try:
        return MeaningDeduplicator(questions, limit, client.embed)
    except EndpointFailed as exc:
        raise ExternalError(
            f"embeddings: the gold set's questions could not be embedded to find paraphrases: {exc}"
        ) from None


def _why(failure: Exception) -> str:
    """`kind: detail` of a failed call: the endpoint's failure, or an answer that is not
    what was asked for."""
    return str(failure) if isinstance(failure, EndpointFailed) else f"unreadable answer: {failure}"


def _check_rejection(
    inputs: Inputs, session: Session, question: str, texts: dict[str, str]
) -> list[int | str]:
    """The judge's verdict on each of the question's top BM25 results, or why it failed."""
    top = neighbours_of(inputs.config, question, CHECKED)
    template = prompt("chunk_relevance")
    verdicts: list[int | str] = []
    for doc_id in top:
        values = {"question": question, "reference": "(none given)", "passage": texts[doc_id]}
        try:
            schema = template.schema(**values)
            answer = session.ask(template.key, template.messages(**values), schema=schema)
            verdicts.append(verdict(answer.content))
        except (EndpointFailed, BadVerdict) as exc:
            verdicts.append(_why(exc))
    return verdicts


def _record(question: str, call: Call) -> dict[str, Any]:
    """A candidate gold line."""
    record: dict[str, Any] = {
        "query_id": f"syn-{digest({'question': question})[:10]}",
        "query": question,
        "tier": CANDIDATE_TIER,
        "tags": [call.target.tag] if call.target is not None and call.target.tag else [],
    }
    if call.chunk is not None:
        record["relevant"] = {call.chunk.doc_id: 1}
        record["notes"] = f"written from {call.chunk.doc_id}"
    else:
        record["is_rejection"] = True
        record["notes"] = "the judge found none of the top 5 BM25 results useful"
    record |= {"source": "synthetic", "reviewed": False, "prompt_version": call.key}
    return record
