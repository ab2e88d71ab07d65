"""Local HTTP servers for the retriever tests: real sockets on 127.0.0.1.

`serve(handler)` runs a `ThreadingHTTPServer` on a free port in a thread, speaking
HTTP/1.1 with keep-alive, and records every request it receives. A handler turns
a request into a `Reply`, which can also misbehave: wait, drop the connection
without answering, or send bytes that are not JSON.

`SearchService` is a small search service over the demo corpus (term overlap);
`Scripted` puts planned replies in front of it for chosen queries, to test
retries, timeouts and error accounting.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    """The decoded JSON body (None when it was not JSON)."""
    client_port: int
    at: float
    """time.monotonic() when it arrived."""

    @property
    def query(self) -> str | None:
        """The query text, in the default body or in `q`."""
        if not isinstance(self.body, dict):
            return None
        return self.body.get("query", self.body.get("q"))


@dataclass(frozen=True)
class Reply:
    """What to answer."""

    status: int = 200
    payload: Any = None
    """Sent as JSON."""
    raw: bytes | None = None
    """Sent as it is, instead of the payload."""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    """Close the connection without answering."""


Handler = Callable[[Received], Reply]


class LocalServer:
    """A running server: its URL and what it received."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.url = ""

    def record(self, request: Received) -> None:
        with self.lock:
            self.requests.append(request)

    def attempts(self, query: str) -> int:
        """How many requests asked this query."""
        return sum(1 for r in self.requests if r.query == query)

    def asked(self) -> Counter[str | None]:
        """Requests per query text."""
        return Counter(r.query for r in self.requests)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many clients connect at once; the default backlog is 5
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and left makes the late answer fail: expected here


def _handler_class(server: LocalServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so the client's pool is exercised
        disable_nagle_algorithm = True  # else the body, a second write, waits ~40 ms for an ACK

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length)
            try:
                body = json.loads(data)
            except ValueError:
                body = None
            received = Received(
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                self.client_address[1],
                time.monotonic(),
            )
            server.record(received)
            self.answer(server.handler(received))

        def answer(self, reply: Reply) -> None:
            time.sleep(reply.delay_s)
            if reply.drop:
                self.close_connection = True
                return
            content = reply.raw if reply.raw is not None else json.dumps(reply.payload).encode()
            self.send_response(reply.status)
            if "content-type" not in {name.lower() for name in reply.headers}:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(handler: Handler) -> Iterator[LocalServer]:
    """Run a server for `handler` on 127.0.0.1 until the block ends."""
    server = LocalServer(handler)
    httpd = _Server(("127.0.0.1", 0), _handler_class(server))
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/search"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# --- a search service over the demo corpus -------------------------------------------

_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "do", "for", "how", "i", "in", "is"}
    | {"it", "of", "on", "or", "the", "to", "what"}
)


def terms(text: str) -> set[str]:
    """The distinct lower-case words of a text, without the commonest ones."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


class SearchService:
    """Ranks the corpus by how many of the query's words a passage shares (term overlap).

    Equal scores are ordered by doc id, or shuffled at random with `shuffle_ties`
    (an approximate index whose order among ties changes from call to call).
    """

    def __init__(self, corpus: Path, shuffle_ties: bool = False) -> None:
        self.docs: list[tuple[str, str]] = []
        self.postings: dict[str, list[int]] = {}
        for line in corpus.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            for term in terms(f"{doc['title']} {doc['text']}"):
                self.postings.setdefault(term, []).append(len(self.docs))
            self.docs.append((doc["_id"], doc["text"]))
        self.shuffle_ties = shuffle_ties
        self.nested = False
        """Answer `{"data": {"hits": [{"id", "_score", "body"}]}}` and read `q` and `size`
        instead of `{"results": [{"doc_id", "score", "text"}]}`, `query` and `top_k`."""

    def search(self, query: str, top_k: int) -> list[tuple[str, float, str]]:
        """(doc id, score, text), best first."""
        overlap: Counter[int] = Counter()
        for term in terms(query):
            overlap.update(self.postings.get(term, ()))
        order = sorted(overlap, key=lambda i: (-overlap[i], self.docs[i][0]))
        if self.shuffle_ties:
            order.sort(key=lambda i: (-overlap[i], random.random()))
        return [(self.docs[i][0], float(overlap[i]), self.docs[i][1]) for i in order[:top_k]]

    def __call__(self, request: Received) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        top_k = body.get("size" if self.nested else "top_k")
        if not isinstance(request.query, str) or not isinstance(top_k, int):
            return Reply(400, {"error": "expected a query and a whole top_k"})
        found = self.search(request.query, top_k)
        if self.nested:
            hits = [{"id": d, "_score": s, "body": t} for d, s, t in found]
            return Reply(payload={"data": {"hits": hits}, "took": 1})
        return Reply(
            payload={"results": [{"doc_id": d, "score": s, "text": t} for d, s, t in found]}
        )


class Scripted:
    """Planned replies for chosen queries, one per attempt; then the inner handler answers."""

    def __init__(self, inner: Handler, plans: Mapping[str, list[Reply]]) -> None:
        self.inner = inner
        self.plans = {query: list(replies) for query, replies in plans.items()}
        self.lock = threading.Lock()

    def __call__(self, request: Received) -> Reply:
        with self.lock:
            plan = self.plans.get(request.query or "")
            planned = plan.pop(0) if plan else None
        return planned if planned is not None else self.inner(request)


def always(reply: Reply, times: int = 20) -> list[Reply]:
    """A plan that gives the same reply to every attempt (more than any test retries)."""
    return [reply] * times


# --- projects that use them -----------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "gold" / "corpus.jsonl"
GOLD_A = REPO / "gold" / "python-docs-A.jsonl"
CRITERIA = """\
gates:
  - name: retrieval_recall_at_5
    threshold: 0.0
  - name: retrieval_error_rate
    threshold: 0.5
    severity: warning
"""


@dataclass(frozen=True)
class Project:
    """A config, criteria and gold set in a temporary folder, for one retriever."""

    root: Path
    queries: list[dict[str, Any]]
    """The gold queries, in file order."""

    @property
    def config(self) -> Path:
        return self.root / "llm-eval.yaml"

    @property
    def criteria(self) -> Path:
        return self.root / "ship-criteria.yaml"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def texts(self) -> list[str]:
        return [q["query"] for q in self.queries]

    def report(self) -> dict[str, Any]:
        return json.loads((self.out / "report.json").read_text(encoding="utf-8"))

    def cache_entries(self) -> list[Path]:
        return sorted((self.out / "cache" / "retrieval").glob("*/*.jsonl"))


def gold_texts(queries: int) -> list[str]:
    """The texts of the first gold queries of tier A (what `write_project` uses)."""
    lines = GOLD_A.read_text(encoding="utf-8").splitlines()[:queries]
    return [json.loads(line)["query"] for line in lines]


def write_project(root: Path, retriever: Mapping[str, Any], queries: int = 10) -> Project:
    """The first `queries` gold queries of tier A, the demo corpus and this retriever.

    The retriever section is written in block style, one setting a line, after the
    gold and corpus lines (so `kind` is on line 4).
    """
    lines = GOLD_A.read_text(encoding="utf-8").splitlines()[:queries]
    (root / "gold.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    section = yaml.safe_dump({"retriever": dict(retriever)}, sort_keys=False, width=1000)
    (root / "llm-eval.yaml").write_text(
        f"gold: [{{path: {root / 'gold.jsonl'}, tier: A}}]\n"
        f"corpus: {CORPUS}\n"
        f"{section}"
        "metrics: [recall@5, mrr, error_rate, latency_p50]\n"
        f"baseline: {root / 'baseline.json'}\n"
        f"output: {root / 'out'}\n",
        encoding="utf-8",
    )
    (root / "ship-criteria.yaml").write_text(CRITERIA, encoding="utf-8")
    return Project(root, [json.loads(line) for line in lines])
