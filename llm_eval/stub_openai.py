"""A local OpenAI-compatible server with deterministic, rule-based answers.

No model can be downloaded where llm-eval is tested, so the judge is tested against
this, and the tutorials' judged steps run against it where no model is at hand: a
real HTTP server on 127.0.0.1 that speaks `/v1/chat/completions` and
`/v1/embeddings` the way OpenAI, vLLM or Ollama do, and answers by simple rules:

- chunk_relevance: useful (1) when at least half of the question's words (three
  letters or more, a few common words left out) occur in the passage;
- statement_attribution: a statement is supported when at least 60% of its words
  occur in the context;
- question_generation: three questions, each made of every third word of the answer;
- context_sufficiency: the share of the expected answer's words found in the
  context, rounded to quarters;
- embeddings: hashed bag-of-words vectors of 64 dimensions, normalised.
- question writing: "In <title>, what about <the passage's three longest words>?";
  off-corpus questions: one of five fixed questions about cooking, gardening, travel.

Usage is counted as words. `faults` are answered before anything else, one per
request (a status, optional headers and body, or a delay), to test retries.

`response_format` is checked the way servers do: `accepts` names the shapes taken
(`json_schema`, OpenAI's, and `json_object` with an optional `schema`, llama-cpp-python's);
a shape not taken is refused as llama-cpp-python refuses it (HTTP 500 naming the field;
with no shape taken, a 400 as servers that know no such field answer), an ill-formed
one with a 400, and an answer asked for with a schema is checked against
its required keys. With `chatty`, an answer asked for without response_format comes
wrapped in prose and a ```json fence, as small models write it; `per_token` answers
embeddings one vector per word, as llama.cpp does for a decoder model without pooling.
`rewrite(path, answer)` turns a sound answer into the bytes sent instead (a misbehaving
server: NaN vectors, odd usage, the key echoed back; the fuzzer's mutations).

    python -m llm_eval.stub_openai --port 8765      # serves until Ctrl-C
    python -m llm_eval.stub_openai --port 0         # a free port, printed on the first line
    python -m llm_eval.stub_openai --delay-ms 200   # every answer after 200 ms, as a model's

It ships with the package, so an installed llm-eval runs it without a clone;
`scripts/stub_openai.py` runs the same.

With `delay_s`, every answer waits that long first (a model's latency, for
`scripts/bench_judge_wall.py`). `spans` records each request's path, start and end
(monotonic seconds), so that a test can check which requests were in flight together;
`hold` lets a test keep requests waiting until it says so.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"[a-z0-9_]{3,}")
_COMMON = frozenset({"the", "and", "for", "how", "what", "does", "with", "which", "this", "that"})


def words(text: str) -> set[str]:
    """The distinct lower-case words of three letters or more, common ones left out."""
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON}


def section(text: str, name: str) -> str:
    found = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.S)
    return found.group(1) if found else ""


def share_found(part: str, whole: str) -> float:
    wanted = words(part)
    return len(wanted & words(whole)) / len(wanted) if wanted else 0.0


def task_of(user: str) -> str:
    """The prompt's `task: <name>` line, looked for outside the tagged blocks (a passage
    may hold any line)."""
    outside = re.sub(r"<(\w+)>\n.*?\n</\1>", "", user, flags=re.S)
    found = re.search(r"^task: (\w+)\s*$", outside, re.M)
    return found.group(1) if found else ""


def judge(user: str) -> dict[str, Any]:
    """The rule-based answer to one of llm-eval's prompts."""
    task = task_of(user)
    if task == "chunk_relevance":
        useful = share_found(section(user, "question"), section(user, "passage")) >= 0.5
        return {"verdict": int(useful), "reason": "word overlap"}
    if task == "statement_attribution":
        listed = [re.sub(r"^\d+\.\s*", "", s) for s in section(user, "statements").splitlines()]
        context = section(user, "context")
        return {"attributed": [int(share_found(s, context) >= 0.6) for s in listed if s]}
    if task == "question_generation":
        answer = section(user, "answer")
        words_of = sorted(words(answer))
        asked = [f"what is {' '.join(words_of[i::3])}?" for i in range(3)]
        return {"questions": [q for q in asked if q != "what is ?"] or ["what is it?"]}
    if task == "context_sufficiency":
        found = share_found(section(user, "expected_answer"), section(user, "context"))
        return {"score": round(found * 4) / 4, "reason": "word overlap"}
    if task == "question_writing":
        title = section(user, "title").strip()
        longest = sorted(words(section(user, "passage")), key=lambda w: (-len(w), w))[:3]
        return {"question": f"In {title}, what about {' and '.join(sorted(longest))}?"}
    if task == "off_corpus_question":
        number = int(section(user, "number").strip() or 0)
        return {"question": OFF_CORPUS[number % len(OFF_CORPUS)]}
    return {"error": f"unknown task {task!r}"}


OFF_CORPUS = (
    "How long should sourdough bread proof at room temperature?",
    "Which fertilizer suits tomato seedlings best?",
    "What is the visa fee for a two-week trip to Brazil?",
    "How do I replace the chain on a mountain bike?",
    "When does the ferry to the north island leave on Sundays?",
)


def embed(text: str, size: int = 64) -> list[float]:
    vector = [0.0] * size
    for word in words(text):
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vector[bucket % size] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


@dataclass
class Fault:
    """One planned misbehaviour."""

    status: int = 500
    body: bytes = b'{"error": {"message": "planned failure"}}'
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class StubOpenAI:
    """The server's state: planned faults, and what it was asked."""

    faults: list[Fault] = field(default_factory=list)
    flaky: bool = False
    """Turn a chunk-relevance verdict around every second time the same prompt is asked
    (a judge that is not steady; by prompt, so whatever order concurrent calls come in)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    url: str = ""
    relevance_calls: int = 0
    times_asked: dict[str, int] = field(default_factory=dict)
    """How often each chunk-relevance prompt was asked."""
    accepts: tuple[str, ...] = ("json_schema", "json_object")
    """The response_format shapes taken; others are refused."""
    chatty: bool = False
    per_token: bool = False
    rewrite: Callable[[str, dict[str, Any]], bytes] | None = None
    delay_s: float = 0.0
    """Every answer waits this long first (a model's latency)."""
    spans: list[tuple[str, float, float]] = field(default_factory=list)
    """(path, start, end) of every request answered, in monotonic seconds: from its
    arrival to just before its answer is sent."""
    hold: Callable[[str], None] | None = None
    """Called with the path of each request before it is answered (a test's barrier)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_fault(self) -> Fault | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


def _handler(state: StubOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        # Headers and body go out in two writes: with Nagle's algorithm the body waits
        # for the client's delayed ACK (~40 ms). Real servers set TCP_NODELAY too.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.started = time.monotonic()
            if state.hold is not None:
                state.hold(self.path)
            time.sleep(state.delay_s)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with state.lock:
                state.authorizations.append(self.headers.get("Authorization"))
            fault = state.next_fault()
            if fault is not None:
                time.sleep(fault.delay_s)
                self.reply(fault.status, fault.body, fault.headers)
                return
            request = json.loads(raw or b"{}")
            with state.lock:
                state.requests.append({"path": self.path, **request})
            if self.path.endswith("/chat/completions"):
                refusal = refused(request.get("response_format"), state.accepts)
                if refusal is not None:
                    self.reply(refusal[0], json.dumps({"error": {"message": refusal[1]}}).encode())
                else:
                    self.reply(200, self.encoded(self.completion(request)))
            elif self.path.endswith("/embeddings"):
                self.reply(200, self.encoded(self.embeddings(request)))
            else:
                self.reply(404, b'{"error": {"message": "not found"}}')

        def completion(self, request: dict[str, Any]) -> dict[str, Any]:
            messages = request.get("messages") or []
            user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
            answer = judge(user)
            with state.lock:
                state.relevance_calls += "verdict" in answer
                if "verdict" in answer:
                    state.times_asked[user] = asked = state.times_asked.get(user, 0) + 1
                    if state.flaky and asked % 2 == 0:
                        answer["verdict"] = 1 - answer["verdict"]
            wanted = request.get("response_format")
            if wanted is not None:
                schema = wanted.get("json_schema", {}).get("schema") or wanted.get("schema") or {}
                missing = set(schema.get("required", ())) - set(answer)
                assert not missing, f"the stub's answer lacks {missing}"
            content = json.dumps(answer)
            if state.chatty and wanted is None:
                content = f"Sure! Here is my answer:\n```json\n{content}\n```\nHope it helps {{:"
            prompt_tokens = sum(len(m["content"].split()) for m in messages)
            return {
                "id": "stub",
                "object": "chat.completion",
                "model": request.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(content.split()),
                    "total_tokens": prompt_tokens + len(content.split()),
                },
            }

        def embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
            inputs = request.get("input") or []
            inputs = [inputs] if isinstance(inputs, str) else inputs
            return {
                "object": "list",
                "data": [
                    {
                        "index": i,
                        "embedding": [embed(w) for w in t.split()] if state.per_token else embed(t),
                    }
                    for i, t in enumerate(inputs)
                ],
                "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs)},
            }

        def encoded(self, answer: dict[str, Any]) -> bytes:
            if state.rewrite is not None:
                return state.rewrite(self.path, answer)
            return json.dumps(answer).encode()

        def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            # The span ends before the answer goes out: a request the client sends once it
            # has this answer starts after this one ended, in `spans` as on the wire.
            with state.lock:
                state.spans.append((self.path, self.started, time.monotonic()))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


def refused(wanted: Any, accepts: tuple[str, ...]) -> tuple[int, str] | None:
    """The status and message refusing a response_format, or None when it is taken."""
    if wanted is None:
        return None
    kind = wanted.get("type") if isinstance(wanted, dict) else None
    if not accepts:  # as OpenAI-compatible servers that know no such field answer
        return 400, "Unrecognized request argument supplied: response_format"
    if kind not in accepts:
        return 500, f"response_format type must be one of {list(accepts)}, got {kind!r}"
    inner = wanted.get("json_schema") if kind == "json_schema" else wanted
    schema = inner.get("schema") if isinstance(inner, dict) else None
    name = inner.get("name", "") if kind == "json_schema" and isinstance(inner, dict) else "x"
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(name)) or not isinstance(schema, dict | None):
        return 400, f"invalid response_format: {wanted!r}"
    if kind == "json_schema" and not isinstance(schema, dict):
        return 400, "response_format.json_schema.schema is required"
    return None


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many clients connecting at once are queued, not refused

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and left makes the late answer fail: expected here


@contextmanager
def serve(state: StubOpenAI | None = None, port: int = 0) -> Iterator[StubOpenAI]:
    """Run the stub on 127.0.0.1 until the block ends; `state.url` is its /v1 root."""
    state = state or StubOpenAI()
    httpd = _Server(("127.0.0.1", port), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=8765, help="Port on 127.0.0.1; 0 picks a free one."
    )
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="Answer every request after this long."
    )
    args = parser.parse_args()
    port = args.port
    with contextlib.ExitStack() as stack:
        try:
            state = stack.enter_context(serve(StubOpenAI(delay_s=args.delay_ms / 1000), port))
        except OSError as error:
            message = f"cannot listen on 127.0.0.1:{port}: {error.strerror}"
            parser.exit(2, f"stub_openai: {message}; pass --port 0 for a free port\n")
        bound = state.url.rsplit(":", 1)[1].split("/")[0]
        print(
            f"stub OpenAI-compatible server at {state.url} (port {bound}; Ctrl-C stops it)",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
