"""How the judge's calls share the endpoints and their prompts: the shared part of a
query's prompts first (a prefix providers cache), embeddings alongside the chat calls,
never more requests in flight than each section's `concurrency`. Checked on what a
real local server (scripts/stub_openai.py) saw, by order of events, never by time."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conftest import script

from llm_eval.endpoints.chat import ChatClient
from llm_eval.endpoints.embeddings import EmbeddingClient
from llm_eval.endpoints.settings import (
    EMBEDDING_SETTINGS,
    SETTINGS,
    ChatSettings,
    EmbeddingSettings,
)
from llm_eval.gold_io import load_gold
from llm_eval.judge.calls import JudgeOutcome, judge_run
from llm_eval.metrics import parse_metric
from llm_eval.runs_io import load_run

stub = script("stub_openai")

METRICS = (
    "context_precision@3",
    "context_recall",
    "context_sufficiency",
    "faithfulness",
    "answer_relevance",
)
TEXTS = (
    "sorted() returns a new sorted list from the items in an iterable. " * 6,
    "list.sort() sorts the list in place, using only < comparisons between items. " * 6,
    "The key argument names a function of one argument that extracts a comparison key. " * 6,
    "operator.itemgetter returns a callable that fetches the given item from its operand.",
)


def project(tmp_path: Path, queries: int) -> tuple[Path, Path]:
    """A gold file and a run with `queries` queries, each with an expected answer, four
    retrieved passages and a generated answer of its own."""
    gold, run = [], []
    for number in range(1, queries + 1):
        gold.append(
            {
                "query_id": f"q{number}",
                "query": f"how do I sort a list of records n{number:03d}",
                "relevant": {"d1": 1},
                "expected_answer": "Use sorted with a key function. It returns a new list.",
            }
        )
        results = [{"doc_id": f"d{i}", "text": t} for i, t in enumerate(TEXTS, start=1)]
        run.append({"query_id": f"q{number}", "results": results, "answer": answer(number)})
    for path, lines in (("gold.jsonl", gold), ("run.jsonl", run)):
        (tmp_path / path).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path / "gold.jsonl", tmp_path / "run.jsonl"


def answer(number: int) -> str:
    return f"Call sorted with key k{number:03d}. Variant v{number:03d} keeps the list."


def judged(
    tmp_path: Path,
    url: str,
    queries: int,
    concurrency: int,
    progress: Callable[[int, int], None] | None = None,
    **embeddings: Any,
) -> JudgeOutcome:
    """The judge over the project, every judged metric, a fresh cache."""
    gold_path, run_path = project(tmp_path, queries)
    chat = {name: s.default for name, s in SETTINGS.items()}
    chat |= {"base_url": url, "model": "stub", "concurrency": concurrency}
    vectors = {name: s.default for name, s in EMBEDDING_SETTINGS.items()}
    vectors |= {"base_url": url, "model": "stub-embed", "concurrency": concurrency, **embeddings}
    return judge_run(
        load_gold([gold_path]),
        load_run(run_path),
        [parse_metric(m) for m in METRICS],
        ChatClient(ChatSettings.create(chat), tmp_path / "cache" / "judge"),
        lambda query_id, rank: None,
        1,
        EmbeddingClient(EmbeddingSettings.create(vectors), tmp_path / "cache" / "embeddings"),
        progress,
    )


def most_in_flight(spans: Sequence[tuple[str, float, float]], path: str) -> int:
    """The most requests to `path` the server was answering at one moment."""
    events = sorted(
        [(start, 1) for p, start, _ in spans if p.endswith(path)]
        + [(end, -1) for p, _, end in spans if p.endswith(path)],
        key=lambda event: (event[0], event[1]),  # an end before a start at the same instant
    )
    now = most = 0
    for _, change in events:
        now += change
        most = max(most, now)
    return most


def each_waits_for_the_other() -> Callable[[str], None]:
    """A hold under which the first chat request waits until an embeddings request has
    arrived and the first embeddings request until a chat request has: where the two
    kinds run one after the other, the wait runs out and they do not overlap."""
    arrived = {"chat": threading.Event(), "embeddings": threading.Event()}

    def hold(path: str) -> None:
        kind = "embeddings" if path.endswith("/embeddings") else "chat"
        arrived[kind].set()
        arrived["chat" if kind == "embeddings" else "embeddings"].wait(timeout=5)

    return hold


def test_embeddings_overlap_the_chat_calls_and_each_endpoint_keeps_its_concurrency(
    tmp_path: Path,
) -> None:
    state = stub.StubOpenAI(hold=each_waits_for_the_other(), delay_s=0.01)
    with stub.serve(state) as server:
        outcome = judged(tmp_path, server.url, queries=6, concurrency=2, batch_size=2)
    assert len(outcome.per_query) == 6 and not outcome.unscored
    chats = [(s, e) for p, s, e in state.spans if p.endswith("/chat/completions")]
    embeds = [(s, e) for p, s, e in state.spans if p.endswith("/embeddings")]
    # 6 queries x (3 chunks, recall, sufficiency, faithfulness, questions); the 6
    # questions and the distinct ones generated from the answers, embedded 2 a request.
    asked = [f"task: question_generation\n<answer>\n{answer(n)}\n</answer>" for n in range(1, 7)]
    generated = {q for user in asked for q in stub.judge(user)["questions"]}
    assert (len(chats), len(embeds)) == (42, math.ceil((6 + len(generated)) / 2))
    assert any(cs < ee and es < ce for cs, ce in chats for es, ee in embeds)
    assert most_in_flight(state.spans, "/chat/completions") <= 2
    assert most_in_flight(state.spans, "/embeddings") <= 2


def test_an_endpoint_never_has_more_requests_in_flight_than_its_concurrency(
    tmp_path: Path,
) -> None:
    # More threads ask than the limit allows (the judge's pool has twice as many):
    # the client keeps the rest waiting.
    state = stub.StubOpenAI(delay_s=0.005)
    with stub.serve(state) as server:
        judged(tmp_path, server.url, queries=8, concurrency=3, batch_size=1)
    assert most_in_flight(state.spans, "/chat/completions") <= 3
    assert most_in_flight(state.spans, "/embeddings") <= 3


def test_embedding_batches_go_out_concurrency_at_a_time(tmp_path: Path) -> None:
    # The first 3 batches wait for each other at the server: sent one at a time, the
    # first would wait alone until the barrier broke, and its request would fail.
    barrier = threading.Barrier(3, timeout=5)
    arrivals = iter(range(1_000))

    def hold(path: str) -> None:
        if next(arrivals) < 3:
            barrier.wait()

    state = stub.StubOpenAI(hold=hold)
    settings = {name: s.default for name, s in EMBEDDING_SETTINGS.items()}
    texts = [f"text number {i}" for i in range(7)]
    with stub.serve(state) as server:
        settings |= {"base_url": server.url, "model": "e", "concurrency": 3, "batch_size": 1}
        settings |= {"retries": 0}
        vectors = EmbeddingClient(EmbeddingSettings.create(settings), None).embed(texts)
    assert vectors == [stub.embed(t) for t in texts]
    assert len(state.spans) == 7 and not barrier.broken
    assert most_in_flight(state.spans, "/embeddings") == 3


def common_prefix(texts: Sequence[str]) -> str:
    """The longest text every one of `texts` begins with (that of the first and the
    last in sorted order is everyone's)."""
    first, last = min(texts), max(texts)
    same = (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b)
    return first[: next(same, len(first))]


def sent(request: dict[str, Any]) -> str:
    """A chat request's messages as a model reads them, in order."""
    return "".join(f"<{m['role']}>\n{m['content']}\n" for m in request["messages"])


def test_a_querys_calls_begin_with_the_same_long_prefix(tmp_path: Path) -> None:
    state = stub.StubOpenAI()
    with stub.serve(state) as server:
        judged(tmp_path, server.url, queries=1, concurrency=1)
    chats = [r for r in state.requests if r["path"].endswith("/chat/completions")]
    by_task = {}
    for request in chats:
        by_task.setdefault(stub.task_of(request["messages"][-1]["content"]), []).append(request)
    assert sorted((task, len(r)) for task, r in by_task.items()) == [
        ("chunk_relevance", 3),
        ("context_sufficiency", 1),
        ("question_generation", 1),
        ("statement_attribution", 2),
    ]
    context = "\n\n".join(f"[{i}] {t}" for i, t in enumerate(TEXTS, start=1))
    # The calls that read the whole context (recall, faithfulness, sufficiency) share
    # everything up to the end of it: the system message, the question, the context.
    reading = [sent(r) for r in by_task["statement_attribution"] + by_task["context_sufficiency"]]
    shared = common_prefix(reading)
    assert len(shared) >= len(context) and f"{context}\n</context>\n" in shared
    # The chunk verdicts share the system message, the question, the expected answer and
    # the task; only the passage differs.
    chunks = [sent(r) for r in by_task["chunk_relevance"]]
    assert common_prefix(chunks).endswith("<passage>\n")
    # Every call of the query begins with the same system message and question.
    system = chats[0]["messages"][0]["content"]
    assert common_prefix(reading + chunks).startswith(f"<system>\n{system}\n<user>\n<question>\n")


def test_each_judgment_is_told_to_the_progress_line_once(tmp_path: Path) -> None:
    """From several threads, one count at a time, up to every call (identical ones once)."""
    told: list[tuple[int, int]] = []
    with stub.serve() as server:
        judged(tmp_path, server.url, 5, 3, lambda done, total: told.append((done, total)))
    # 5 queries x (3 chunks, recall, sufficiency, faithfulness, questions)
    assert told == [(n, 35) for n in range(1, 36)]
