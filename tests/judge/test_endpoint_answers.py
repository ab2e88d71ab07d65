"""What a misbehaving OpenAI-compatible endpoint answers, checked once by the client
(llm_eval.endpoints.client) for every caller: vectors that are not finite, all zeros,
of another dimension, or answers with duplicate or missing `index` values fail their
call (the embedding retriever's query, answer relevance, gain) rather than score 0;
usage that is not a whole token count is ignored with a note; the API key an endpoint
echoes back is in no output; an answer over `max_answer_bytes` fails its call."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from conftest import Cli, gold_query, script
from test_gain import project, run_gain
from test_judge import gate, relevance_project, report, with_answers, write_project

from llm_eval.errors import ExternalError
from llm_eval.httpcall import Breaker, CallFailed, RetryPolicy, post_json
from llm_eval.retrievers import RetrieverContext, retriever_kind

stub = script("stub_openai")
test_gain = script("../tests/test_gain") if False else None

Rewrite = Callable[[str, dict[str, Any]], bytes]


def vectors(change: Callable[[list[dict[str, Any]]], None]) -> Rewrite:
    """A rewrite of every embeddings answer's rows; chat answers left sound."""

    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        if path.endswith("/embeddings"):
            change(answer["data"])
        return json.dumps(answer).encode()

    return rewrite


def _first(value: float) -> Callable[[list[dict[str, Any]]], None]:
    def change(rows: list[dict[str, Any]]) -> None:
        rows[0]["embedding"][0] = value

    return change


def _zero(rows: list[dict[str, Any]]) -> None:
    rows[0]["embedding"] = [0.0] * len(rows[0]["embedding"])


def _duplicate(rows: list[dict[str, Any]]) -> None:
    rows.append(dict(rows[0]))


def _missing(rows: list[dict[str, Any]]) -> None:
    rows.pop()


def _every_other_size() -> Callable[[list[dict[str, Any]]], None]:
    """Vectors of 64 dimensions, then 72, then 64: the model's size differs by request.
    (Longer, not cut short: a cut vector may be all zeros, another failure, and which
    request comes second depends on the order concurrent batches arrive in.)"""
    counter = itertools.count()

    def change(rows: list[dict[str, Any]]) -> None:
        if next(counter) % 2:
            for row in rows:
                row["embedding"] = row["embedding"] + [0.5] * 8

    return change


BAD_VECTORS: dict[str, tuple[Callable[[], Callable[[list[dict[str, Any]]], None]], str]] = {
    "nan": (lambda: _first(math.nan), "NaN or Infinity"),
    "infinity": (lambda: _first(math.inf), "NaN or Infinity"),
    "all-zero": (lambda: _zero, "an all-zero vector"),
    "duplicate-index": (lambda: _duplicate, "duplicate `index` values"),
    "missing-index": (lambda: _missing, "missing `index` values"),
    "dimension-differs": (_every_other_size, "dimensions from a model whose vectors have"),
}

DOCS = [
    {"_id": "sort", "title": "Sorting", "text": "sorted returns a new sorted list"},
    {"_id": "dict", "title": "Dictionaries", "text": "a dict maps keys to values"},
    {"_id": "files", "title": "Files", "text": "open a file and read its lines"},
]
QUERIES = [
    gold_query("q1", text="how to sort a list"),
    gold_query("q2", text="read lines of a file"),
]


def _retriever(url: str, tmp_path: Path) -> Any:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    values = {"base_url": url, "model": "stub-embed", "retries": 0, "batch_size": 8}
    return retriever_kind("embedding").create(values, RetrieverContext(corpus, tmp_path / "c"))


@pytest.mark.parametrize("case", sorted(BAD_VECTORS))
def test_a_bad_query_vector_fails_its_query_never_a_zero(tmp_path: Path, case: str) -> None:
    make, reason = BAD_VECTORS[case]
    change = make()
    queries_only = vectors(lambda rows: change(rows) if len(rows) == 1 else None)
    if case == "dimension-differs":  # the corpus (3 rows) sets 64; queries answer 32
        queries_only = vectors(lambda rows: _truncate(rows) if len(rows) == 1 else None)
    with stub.serve(stub.StubOpenAI(rewrite=queries_only)) as server:
        run = _retriever(server.url, tmp_path).retrieve(QUERIES, 2)
    for query in QUERIES:
        answer = run.queries[query.query_id]
        assert answer.error is not None and "malformed embeddings" in answer.error
        assert reason in answer.error or case == "dimension-differs"  # the retriever's check
        assert answer.results == ()


def _truncate(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["embedding"] = row["embedding"][:32]


@pytest.mark.parametrize("case", sorted(BAD_VECTORS))
def test_a_bad_corpus_vector_fails_the_corpus(tmp_path: Path, case: str) -> None:
    make, reason = BAD_VECTORS[case]
    with stub.serve(stub.StubOpenAI(rewrite=vectors(make()))) as server:
        url = server.url
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
        values = {"base_url": url, "model": "stub-embed", "retries": 0, "batch_size": 2}
        context = RetrieverContext(corpus, tmp_path / "c")
        with pytest.raises(ExternalError, match="embedding the corpus failed") as failed:
            retriever_kind("embedding").create(values, context).retrieve(QUERIES, 2)
    assert reason in str(failed.value)


@pytest.mark.parametrize("case", sorted(BAD_VECTORS))
def test_answer_relevance_fails_on_a_bad_vector_never_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, case: str
) -> None:
    make, reason = BAD_VECTORS[case]
    with stub.serve(stub.StubOpenAI(rewrite=vectors(make()))) as server:
        root = relevance_project(tmp_path, server.url, batch_size=2)
        code, _, err = gate(cli, root, monkeypatch)
    assert code == 4
    assert err.count("\n") == 1 and reason in err and "Traceback" not in err
    assert not (root / "out" / "report.json").exists()


@pytest.mark.parametrize("case", sorted(BAD_VECTORS))
def test_gain_fails_on_a_bad_vector_without_a_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
    recwarn: pytest.WarningsRecorder,
    case: str,
) -> None:
    make, reason = BAD_VECTORS[case]
    with stub.serve(stub.StubOpenAI(rewrite=vectors(make()))) as server:
        root = project(tmp_path, server.url)
        code, _, err = run_gain(cli, root, monkeypatch)
    assert code == 4
    assert err.count("\n") == 1 and reason in err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def _usage(value: Any) -> Rewrite:
    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        answer["usage"] = {"prompt_tokens": value, "completion_tokens": value}
        text = json.dumps(answer)
        return text.replace('"__HUGE__"', "1e400").encode()

    return rewrite


@pytest.mark.parametrize("value", ["__HUGE__", -100000000, "12", 1.5, True, [3]])
def test_usage_that_is_not_a_token_count_is_ignored_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli, value: Any
) -> None:
    with stub.serve(stub.StubOpenAI(rewrite=_usage(value))) as server:
        embeddings = {"base_url": server.url, "model": "stub-embed"}
        root = with_answers(
            write_project(tmp_path, server.url, price_per_1k_input=1.0, price_per_1k_output=1.0),
            server.url,
            ["answer_relevance"],
            embeddings=embeddings,
        )
        code, _, err = gate(cli, root, monkeypatch)
    assert code == 0
    assert "not a whole number of tokens" in err and "Traceback" not in err
    judged = report(root)["judge"]
    assert _no_negative(judged)


def _no_negative(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_no_negative(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_negative(v) for v in value)
    return not isinstance(value, int | float) or (math.isfinite(value) and value >= 0)


KEY = "sk-echo/secret+key&1"
"""A key with characters that JSON, URLs and HTML escape."""


def _echo_key(path: str, answer: dict[str, Any]) -> bytes:
    """Each verdict replaced by one quoting the key, raw and escaped."""
    if path.endswith("/chat/completions"):
        echoed = f"you sent {KEY} ({quote(KEY, safe='')}, {json.dumps(KEY)})"
        escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)  # JSON's other way to write it
        content = f'{{"verdict": "you sent {escaped}", "questions": {json.dumps(echoed)}}}'
        answer["choices"][0]["message"]["content"] = content
    return json.dumps(answer).encode()


def test_an_echoed_key_is_in_no_output_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.setenv("JUDGE_KEY", KEY)
    with stub.serve(stub.StubOpenAI(rewrite=_echo_key)) as server:
        root = write_project(tmp_path, server.url, api_key="${JUDGE_KEY}", max_error_rate=1.0)
        status, out, err = gate(cli, root, monkeypatch)
    assert status == 0, err
    unscored = report(root)["judge"]["unscored"]
    assert unscored and any("***" in reason for reason in unscored.values())
    forms = {KEY, quote(KEY, safe=""), json.dumps(KEY)[1:-1]}
    files = [p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()]
    for form in forms:
        assert form not in out and form not in err
        assert not any(form in text for text in files)


def test_an_answer_over_max_answer_bytes_fails_its_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    def huge(path: str, answer: dict[str, Any]) -> bytes:
        answer["choices"][0]["message"]["content"] += " " * 4096
        return json.dumps(answer).encode()

    with stub.serve(stub.StubOpenAI(rewrite=huge)) as server:
        root = write_project(tmp_path, server.url, max_answer_bytes=2048, max_error_rate=1.0)
        assert gate(cli, root, monkeypatch)[0] == 0
    unscored = report(root)["judge"]["unscored"]
    failed = [r for r in unscored.values() if "answer over 2,048 bytes" in r]
    assert len(failed) == 2  # q1 and q2 (q3 has nothing to judge)
    assert not list((root / "out" / "cache" / "judge").rglob("*.json"))


class _Endless(BaseHTTPRequestHandler):
    """Answers 200 with no Content-Length and a body that streams 64 KiB chunks until
    the client hangs up (at most 64 MiB)."""

    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(1024):
                self.wfile.write(b" " * 65536)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_answer_without_a_length_is_cut_at_the_cap() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    try:
        with httpx.Client(timeout=10) as client, pytest.raises(CallFailed) as failed:
            post_json(client, url, {}, RetryPolicy(retries=0), Breaker(3), None, 100_000)
    finally:
        server.shutdown()
        server.server_close()
    assert str(failed.value) == "answer over 100,000 bytes (max_answer_bytes)"
