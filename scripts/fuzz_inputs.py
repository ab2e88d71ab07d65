"""Fuzz every loader with mutated copies of the demo files; count the exit codes.

A small project is cut from the demo (the first queries of each gold file, the
corpus passages they need plus some others, the demo's criteria, the examples'
versions sidecar), committed to a new git repository, and its run, TREC run, qrels,
baseline, report, history file (the report kept by `history --record` as if at six
commits) and experiment.json (`llm-eval experiment` over three BM25 variants) are
made with llm-eval itself. Then, in a loop bounded by `--count` and `--seconds`, one of those
files is mutated (bytes flipped, cut, repeated; hostile tokens put in: NaN,
Infinity, lone surrogates, deep brackets, NUL, BOM, YAML aliases and tags; a JSON
value swapped for a hostile one) and the command that reads it is run in-process
through `llm_eval.cli.main`, the command line's own error handler. Exit 5 means a
bug: its input is kept under `--keep` and the traceback's last line is printed.

The `mcp answer` inputs are messages rather than files: a streamable-HTTP MCP server
in this process answers `initialize`, `tools/list` and `tools/call` soundly except
for the one method an input chooses, whose JSON-RPC answer it mutates as above, while
`llm-eval retrieve` asks it three questions through the mcp retriever (the SDK's
client). A traceback printed, even with another exit code, is counted too.

The `embeddings answer` and `judge answer` inputs are the answers of a local fake
OpenAI-compatible server (scripts/stub_openai.py) in this process: every answer is
mutated as above (a judge answer's verdict inside its content, half the time), or given
one of the faults a misbehaving endpoint commits (a NaN, an all-zero vector, a
duplicate or missing `index`, a query vector of another dimension, usage of 1e400,
negative or as text, the API key echoed back). `gate` runs the embedding retriever, or
the judge on the run, with the API key set. Besides exit 5 and tracebacks, these
count: a key in any form in what was printed or in any file written (`key in
output`), and a run scored silently (exit 0 after a fault that must fail every query,
or a report holding NaN, Infinity, or negative tokens or cost).

The config is also read by `cache-key`, whose output a workflow appends to
$GITHUB_OUTPUT: besides exit 5 and tracebacks, a run that ends with exit 0 and prints
anything but its three `key=`, `restore-key=` and `path=` lines (or nothing) counts as
a forged output line (`_forged`); `\nkey=forged-key/cache` is among the tokens put in.

The embedding retriever's vector store (`embedding cache`) is read by `retrieve` over
the fake endpoint: one batch file of the store the first retrieval wrote is mutated as
bytes, or, a quarter of the time, replaced by a FIFO, a folder, a symbolic link to
itself or a dangling one; the store is put back after each input.

Every input runs under a watchdog (`CASE_SECONDS`): SIGALRM interrupts a command still
running then, and the input is counted as a hang.

The history file is read by `history` and `dashboard`, and recorded into; besides
exit 5 and tracebacks, these count a line lost (`_lines_lost`): read, every non-blank
line must be an entry, a point or a gap, and the command must end with exit 0; recorded
into, the file must keep its bytes and gain one line, and the count printed must be its
own. The dashboard's other input, `--experiment` experiment.json, and the experiment's
config (its `variants:`) are mutated as the other files.

Usage: python scripts/fuzz_inputs.py [--count 10000] [--seconds 7200] [--seed 0]
       [--keep fuzz-crashes] [--only 'embeddings answer' --only 'judge answer']
Prints the number of inputs per exit code (and per file kind), of printed tracebacks
and of history files with a line lost; exits 1 when any input ended in exit 5, printed
a traceback or lost a line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from llm_eval.cli import main

ROOT = Path(__file__).resolve().parent.parent
QUERIES_PER_FILE = 25
EXTRA_DOCUMENTS = 150
GATE = ["gate", "--run", "run.jsonl", "--out", "out"]
EVALUATE = ["evaluate", "--qrels", "qrels.trec", "--run", "run.trec"]
LAST = 1000
"""Points `history` is asked for, and the most the dashboard draws: every line of the
history file is then an entry of both."""
HISTORY = ["history", "--history-file", "history.jsonl", "--last", str(LAST)]
DASHBOARD = ["dashboard", "--out", "site", "--history-file", "history.jsonl"]
EXPERIMENT = ["config/experiment.yaml", "--out", "exp"]
KEPT_REPORTS = 6
"""Lines of the history file: the gate's report kept as if at so many commits."""
STORE = Path("out-endpoint/cache/embedding")
"""Where the embedding retriever of config/embedding.yaml keeps its vector stores."""
STORE_COPY = "embedding-store"
"""A copy of that folder as the first retrieval left it, put back before each case."""
SPECIALS = ("fifo", "folder", "symlink loop", "dangling symlink")
"""What the `embedding cache` inputs put in place of a batch file, a quarter of the time."""
CASE_SECONDS = 60.0
"""How long one input may run in this process before it is counted as a hang (a FIFO
opened for reading waits for a writer forever): a guard, not a measure."""


@dataclass(frozen=True)
class Target:
    """A file of the project and the command that reads it."""

    kind: str
    path: str
    argv: tuple[str, ...]
    json_lines: bool = False
    """JSONL: a line can be parsed, mutated as a value and written back."""
    json_document: bool = False
    served: bool = False
    """An answer of the fake MCP server (`path` names the method), not a file."""
    endpoint: bool = False
    """An answer of the fake OpenAI-compatible server (`path` names the endpoint)."""
    store: bool = False
    """A batch file of the embedding retriever's vector store (`path` names the folder
    of the store's pristine copy), mutated or put in place of by a special file."""


TARGETS = (
    Target("gold", "gold-A.jsonl", tuple(GATE), json_lines=True),
    Target("run", "run.jsonl", tuple(GATE), json_lines=True),
    Target("trec run", "run.trec", tuple(EVALUATE)),
    Target("qrels", "qrels.trec", tuple(EVALUATE)),
    Target("corpus", "corpus.jsonl", ("gate", "--out", "out"), json_lines=True),
    Target("versions", "versions.jsonl", tuple(GATE), json_lines=True),
    Target("config", "config/llm-eval.yaml", tuple(GATE)),
    Target("cache-key config", "config/llm-eval.yaml", ("cache-key",)),
    Target("criteria", "config/ship-criteria.yaml", tuple(GATE)),
    Target("baseline", "baseline.json", tuple(GATE), json_document=True),
    Target(
        "report",
        "report.json",
        ("comment", "--dry-run", "--report", "report.json"),
        json_document=True,
    ),
    Target("history", "history.jsonl", tuple(HISTORY), json_lines=True),
    Target(
        "history record",
        "history.jsonl",
        ("history", "--record", "report.json", "--history-file", "history.jsonl"),
        json_lines=True,
    ),
    Target("dashboard history", "history.jsonl", tuple(DASHBOARD), json_lines=True),
    Target(
        "dashboard experiment",
        "experiment.json",
        ("dashboard", "--out", "site", "--experiment", "experiment.json"),
        json_document=True,
    ),
    Target("experiment config", "config/experiment.yaml", ("experiment", *EXPERIMENT)),
    Target(
        "mcp answer",
        "tools/call",
        ("retrieve", "--config", "config/mcp.yaml", "--out", "out/mcp-run.jsonl"),
        json_document=True,
        served=True,
    ),
    Target(
        "embeddings answer",
        "embeddings",
        (
            "gate",
            "--config",
            "config/embedding.yaml",
            "--criteria",
            "config/endpoint-criteria.yaml",
            "--out",
            "out-endpoint",
        ),
        json_document=True,
        endpoint=True,
    ),
    Target(
        "judge answer",
        "chat/completions",
        (
            "gate",
            "--config",
            "config/judge.yaml",
            "--criteria",
            "config/endpoint-criteria.yaml",
            "--run",
            "run.jsonl",
            "--out",
            "out-endpoint",
        ),
        json_document=True,
        endpoint=True,
    ),
    Target(
        "embedding cache",
        STORE_COPY,
        ("retrieve", "--config", "config/embedding.yaml", "--out", "out-endpoint/run.jsonl"),
        store=True,
    ),
)
FUZZ_KEY = "sk-fuzz/key+echo&0123456789"
"""The API key the endpoint targets run with, which no output may hold in any form."""
MCP_METHODS = ("initialize", "tools/list", "tools/call", "tools/call")
"""The answer an `mcp answer` input mutates (the search answers twice as often)."""
MCP_QUERIES = 3

TOKENS = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b'"\\ud800"',
    b"\\udfff",
    b"[" * 5000,
    b"{" * 200,
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\r\n",
    b"\n",
    b'"',
    b"null",
    b"true",
    b"[]",
    b"{}",
    b"-1",
    b"0",
    b"9" * 5000,
    b"&a ",
    b"*a",
    b"!!python/object:os.system ",
    b"!!timestamp ",
    b"<<: ",
    b"\t",
    b": ",
    b"- ",
    "\u202e".encode(),
    "é".encode(),
    b"\xed\xa0\x80",  # a UTF-16 surrogate written as UTF-8 (CESU-8)
    b"<!--<script>",
    "\u2028".encode(),
    b"\nkey=forged-key/cache",  # a step output of its own, if cache-key printed it
    b'"out\\nkey=forged-key/cache"',  # the same as a YAML escape
]
HOSTILE_VALUES: list[Any] = [
    None,
    "",
    "\ud800",
    -1,
    0,
    1.5,
    float("nan"),
    float("inf"),
    True,
    [],
    {},
    [[[[["deep"]]]]],
    "x" * 10_000,
    10**30,
    {"\udc80": 1},
    f"you sent {FUZZ_KEY}",
    "<!--<script>",
    "0123abc",
]


def build_project(folder: Path) -> None:
    """The small project cut from the demo, with its run, qrels, baseline and report."""
    (folder / "config").mkdir(parents=True)
    gold = _cut_gold(folder)
    _cut_corpus(folder, gold)
    shutil.copy(ROOT / "gold/examples/versions.jsonl", folder / "versions.jsonl")
    shutil.copy(ROOT / "config/ship-criteria.yaml", folder / "config/ship-criteria.yaml")
    (folder / "config/llm-eval.yaml").write_text(
        "gold:\n  - {path: gold-A.jsonl, tier: A}\n  - {path: gold-B.jsonl, tier: B}\n"
        "corpus: corpus.jsonl\nretriever: {kind: bm25, k1: 0.9, b: 0.4}\n"
        "metrics: [recall@5, mrr, ndcg@10]\ntop_k: 10\nversions: versions.jsonl\n"
        "baseline: baseline.json\noutput: out\n",
        encoding="utf-8",
    )
    (folder / "config/experiment.yaml").write_text(
        (folder / "config/llm-eval.yaml").read_text(encoding="utf-8")
        + "variants:\n  - name: lucene\n  - name: textbook\n    retriever: {k1: 1.2, b: 0.75}\n"
        "  - name: text only\n    retriever: {fields: [text]}\n",
        encoding="utf-8",
    )
    with contextlib.chdir(folder), _quiet():
        for argv in (
            ["retrieve", "--out", "run.jsonl"],
            ["baseline", "refresh", "--run", "run.jsonl", "--force"],
        ):
            _build(argv)
        _commit(folder)  # `history` and `dashboard` read the baseline's git log
        main(GATE)
        shutil.copy(folder / "out/report.json", folder / "report.json")
        _keep_reports(folder)
        _build(["experiment", *EXPERIMENT])
        shutil.copy(folder / "exp/experiment.json", folder / "experiment.json")
    _write_trec(folder, gold)
    lines = (folder / "gold-A.jsonl").read_text(encoding="utf-8").splitlines()[:MCP_QUERIES]
    (folder / "gold-mcp.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _build(argv: list[str]) -> None:
    if main(argv) != 0:
        raise SystemExit(f"could not build the fuzz project: llm-eval {' '.join(argv)}")


def _commit(folder: Path) -> None:
    """The project as the first commit of a new git repository."""
    name = ["-c", "user.name=fuzz", "-c", "user.email=fuzz@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], [*name, "commit", "-qm", "fuzz project"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def _keep_reports(folder: Path) -> None:
    """history.jsonl: the gate's report kept by `history --record` as if made at
    `KEPT_REPORTS` later commits, a day apart."""
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    for day in range(1, KEPT_REPORTS + 1):
        report["provenance"]["head_commit"] = f"{day:07x}" * 5
        report["provenance"]["generated_at"] = f"2030-01-{day:02d}T12:00:00+00:00"
        (folder / "kept.json").write_text(json.dumps(report), encoding="utf-8")
        _build(["history", "--record", "kept.json", "--history-file", "history.jsonl"])
    (folder / "kept.json").unlink()


def write_endpoint_configs(folder: Path, url: str) -> None:
    """The embedding retriever's and the judge's configs, on the three MCP queries."""
    common = (
        "gold:\n  - {path: gold-mcp.jsonl, tier: A}\ncorpus: corpus.jsonl\noutput: out-endpoint\n"
    )
    endpoint = (
        f"base_url: {url}, model: fuzz, api_key: '${{FUZZ_API_KEY}}', retries: 0, "
        "timeout_s: 5, max_error_rate: 0.5"
    )
    (folder / "config/embedding.yaml").write_text(
        f"{common}retriever: {{kind: embedding, {endpoint}, batch_size: 64}}\n"
        "metrics: [recall@5, mrr]\n",
        encoding="utf-8",
    )
    (folder / "config/judge.yaml").write_text(
        f"{common}judge: {{{endpoint}}}\nmetrics: [recall@5, context_precision@5]\n",
        encoding="utf-8",
    )
    (folder / "config/endpoint-criteria.yaml").write_text(
        "gates:\n  - name: recall\n    metric: recall@5\n    threshold: 0\n", encoding="utf-8"
    )


def write_mcp_config(folder: Path, url: str) -> None:
    """The mcp retriever's config: three queries, asked of the fake server at `url`."""
    (folder / "config/mcp.yaml").write_text(
        "gold:\n  - {path: gold-mcp.jsonl, tier: A}\n"
        f"retriever:\n  kind: mcp\n  url: {url}\n  timeout_s: 1\n  concurrency: 3\n"
        "  results_path: hits\n  fields: {doc_id: id}\n"
        "metrics: [recall@5, mrr]\nbaseline: baseline.json\noutput: out\n",
        encoding="utf-8",
    )


@dataclass
class FakeMcp:
    """A streamable-HTTP MCP server with one search tool, whose answer to `method` goes
    through `mutate` (JSON responses, no sessions, no event streams)."""

    method: str = ""
    mutate: Callable[[bytes], bytes] = field(default=lambda data: data)
    url: str = ""

    def answer(self, request: dict[str, Any]) -> bytes:
        """The JSON-RPC answer to one request, mutated when it is for `method`."""
        method = request.get("method")
        params = request.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fuzz-search", "version": "1"},
            }
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"query": {"type": "string"}}}
            result = {"tools": [{"name": "search", "inputSchema": schema}]}
        elif method == "tools/call":
            query = str((params.get("arguments") or {}).get("query", ""))
            hits = [{"id": f"doc-{len(query) + i}", "score": 1.0 / (i + 1)} for i in range(5)]
            result = {
                "content": [{"type": "text", "text": json.dumps({"hits": hits})}],
                "structuredContent": {"hits": hits},
                "isError": False,
            }
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            return json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode()
        sound = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result}).encode()
        return self.mutate(sound) if method == self.method else sound


@contextlib.contextmanager
def serve_mcp(fake: FakeMcp) -> Iterator[FakeMcp]:
    """`fake` on 127.0.0.1 until the block ends; its URL set."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                request = json.loads(body)
            except ValueError:
                request = {}
            if not isinstance(request, dict) or "id" not in request:  # a notification
                self._send(202, b"")
                return
            self._send(200, fake.answer(request))

        def do_GET(self) -> None:  # no event stream: the client lives without one
            self._send(405, b"")

        def do_DELETE(self) -> None:
            self._send(200, b"")

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hung up on a mutated answer: nothing to report

    server = Server(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _cut_gold(folder: Path) -> list[dict[str, Any]]:
    queries = []
    for tier in ("A", "B"):
        lines = (ROOT / f"gold/python-docs-{tier}.jsonl").read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if line.strip()][:QUERIES_PER_FILE]
        (folder / f"gold-{tier}.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
        queries += [json.loads(line) for line in kept]
    return queries


def _cut_corpus(folder: Path, gold: list[dict[str, Any]]) -> None:
    wanted = {doc for query in gold for doc in query.get("relevant", {})}
    kept = []
    with (ROOT / "gold/corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            doc_id = json.loads(line)["_id"]
            if doc_id in wanted or len(kept) < EXTRA_DOCUMENTS:
                kept.append(line)
    (folder / "corpus.jsonl").write_text("".join(kept), encoding="utf-8")


def _write_trec(folder: Path, gold: list[dict[str, Any]]) -> None:
    lines = []
    for text in (folder / "run.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(text)
        for rank, result in enumerate(record["results"], 1):
            lines.append(
                f"{record['query_id']} Q0 {result['doc_id']} {rank} {result['score']} fuzz"
            )
    (folder / "run.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")
    qrels = [
        f"{query['query_id']} 0 {doc} {grade}"
        for query in gold
        for doc, grade in (query.get("relevant") or {}).items()
    ]
    (folder / "qrels.trec").write_text("\n".join(qrels) + "\n", encoding="utf-8")


# --- mutations ---------------------------------------------------------------------


def _flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    at = rng.randrange(len(data))
    return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]


def _insert_token(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(TOKENS) + data[at:]


def _cut(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data) + 1)
    return data[:start] + data[start + rng.randrange(1, 200) :]


def _repeat(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data) + 1)
    piece = data[start : start + rng.randrange(1, 300)]
    return data[:start] + piece * rng.randrange(2, 5) + data[start:]


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


BYTE_MUTATIONS: tuple[Callable[[bytes, random.Random], bytes], ...] = (
    _flip,
    _insert_token,
    _insert_token,
    _cut,
    _repeat,
    _truncate,
    _swap_lines,
)


def _mutate_value(value: Any, rng: random.Random) -> Any:
    """The value with one node (or key) replaced by a hostile value, or removed."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        if rng.random() < 0.2:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: _mutate_value(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], _mutate_value(value[index], rng), *value[index + 1 :]]
    return rng.choice(HOSTILE_VALUES)


def _mutate_json(data: bytes, target: Target, rng: random.Random) -> bytes:
    if target.json_document:
        value = _mutate_value(json.loads(data), rng)
        return json.dumps(value, indent=1).encode()
    lines = data.split(b"\n")
    index = rng.randrange(len(lines))
    try:
        value = json.loads(lines[index])
    except ValueError:
        return data
    lines[index] = json.dumps(_mutate_value(value, rng)).encode()
    return b"\n".join(lines)


def mutate(data: bytes, target: Target, rng: random.Random) -> bytes:
    """One to three mutations; a value mutation first, half the time, for JSON files."""
    if (target.json_lines or target.json_document) and rng.random() < 0.5:
        data = _mutate_json(data, target, rng)
    for _ in range(rng.randrange(1, 4) if rng.random() < 0.7 else 0):
        data = rng.choice(BYTE_MUTATIONS)(data, rng)
    return data


def _zero(rows: list[Any]) -> None:
    rows[0]["embedding"] = [0.0] * len(rows[0]["embedding"])


def _nan(rows: list[Any]) -> None:
    rows[-1]["embedding"][0] = float("nan")


def _duplicate(rows: list[Any]) -> None:
    rows.append(dict(rows[0]))


def _missing(rows: list[Any]) -> None:
    rows.pop()


def _query_size(rows: list[Any]) -> None:
    if len(rows) == 1:  # a query: the corpus's batches stay at the model's size
        rows[0]["embedding"] = rows[0]["embedding"][:32]


FAILING_FAULTS: dict[str, Callable[[list[Any]], None]] = {
    "nan": _nan,
    "all-zero": _zero,
    "duplicate index": _duplicate,
    "missing index": _missing,
    "query dimension": _query_size,
}
"""Faults of every embeddings answer that must fail every query (never exit 0)."""
USAGE_FAULTS: tuple[bytes, ...] = (b"1e400", b"-100000000", b'"12"', b"1.5", b"[1]")


def _endpoint_answer(
    target: Target, answer: dict[str, Any], fault: str, rng: random.Random
) -> bytes:
    """A mutated answer of the fake endpoint: a named fault, or random mutations (of
    the verdict inside a judge answer's content, half the time)."""
    if fault in FAILING_FAULTS:
        FAILING_FAULTS[fault](answer["data"])
        return json.dumps(answer).encode()
    if fault.startswith("usage "):
        answer["usage"] = {"prompt_tokens": "@", "completion_tokens": "@"}
        return json.dumps(answer).encode().replace(b'"@"', fault[6:].encode())
    if fault == "key":
        echoed = f"you sent {FUZZ_KEY} ({json.dumps(FUZZ_KEY)})"
        if "choices" in answer:
            answer["choices"][0]["message"]["content"] = json.dumps({"verdict": echoed})
        else:
            answer["error"] = echoed
        return json.dumps(answer).encode()
    if "choices" in answer and rng.random() < 0.5:
        inner = answer["choices"][0]["message"]["content"].encode()
        mutated = mutate(inner, target, rng).decode("utf-8", errors="replace")
        answer["choices"][0]["message"]["content"] = mutated
        return json.dumps(answer).encode()
    return mutate(json.dumps(answer).encode(), target, rng)


def _endpoint_fault(target: Target, rng: random.Random) -> str:
    """A named fault a quarter of the time, else `random` (mutations)."""
    if rng.random() >= 0.25:
        return "random"
    faults = ["key", *(f"usage {u.decode()}" for u in USAGE_FAULTS)]
    if target.path == "embeddings":
        faults += list(FAILING_FAULTS)
    return rng.choice(faults)


def _key_forms() -> tuple[str, ...]:
    from urllib.parse import quote, quote_plus

    return (FUZZ_KEY, json.dumps(FUZZ_KEY)[1:-1], quote(FUZZ_KEY, safe=""), quote_plus(FUZZ_KEY))


def _silently_scored(folder: Path) -> bool:
    """A report holding NaN, Infinity, or negative tokens or cost."""
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False

    def bad(value: Any, key: str) -> bool:
        if isinstance(value, dict):
            return any(bad(v, str(k)) for k, v in value.items())
        if isinstance(value, list):
            return any(bad(v, key) for v in value)
        if isinstance(value, float) and not math.isfinite(value):
            return True
        counted = "token" in key or "cost" in key
        return counted and isinstance(value, int | float) and value < 0

    return bad(report, "")


def _key_in_files(folder: Path) -> bool:
    forms = _key_forms()
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            if any(form in text for form in forms):
                return True
    return False


# --- the loop ------------------------------------------------------------------------


@dataclass
class Tally:
    """Inputs per exit code, overall and per file kind, and where the exit-5s are kept."""

    codes: Counter[int]
    by_kind: dict[str, Counter[int]]
    crashes: list[str]
    tracebacks: int = 0
    """Inputs that printed a traceback, whatever their exit code."""
    silently_scored: int = 0
    """Endpoint answers scored although they must fail, or a report with NaN or
    negative tokens."""
    key_shown: int = 0
    """Endpoint runs that printed the API key or wrote it into a file."""
    lines_lost: int = 0
    """History files read with a line that became no entry (or a reading that failed),
    or recorded into with a line lost, changed or miscounted."""
    forged: int = 0
    """`cache-key` runs that printed a line other than its three `name=value` outputs."""
    hangs: int = 0
    """Inputs still running after `CASE_SECONDS` (stopped by the watchdog)."""

    @property
    def total(self) -> int:
        """Inputs run."""
        return sum(self.codes.values())


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """Capture what a command prints (stdout and stderr together)."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        yield captured


def fuzz(
    count: int, seconds: float, seed: int, keep: Path | None, only: Sequence[str] = ()
) -> Tally:
    """Run up to `count` mutated inputs (for at most `seconds`), of the kinds in `only`
    (all when empty); the tally of exit codes."""
    targets = [t for t in TARGETS if not only or t.kind in only]
    for name in [name for name in os.environ if name.startswith("GITHUB_")]:
        del os.environ[name]  # no job summary or PR comment from the fuzzed gates
    rng = random.Random(seed)
    tally = Tally(Counter(), {t.kind: Counter() for t in targets}, [])
    os.environ["FUZZ_API_KEY"] = FUZZ_KEY
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-eval-fuzz-"))
        mcp = stack.enter_context(serve_mcp(FakeMcp()))
        openai = stack.enter_context(_stub().serve())
        project = Path(tmp)
        build_project(project)
        write_mcp_config(project, mcp.url)
        write_endpoint_configs(project, openai.url)
        files = [t for t in TARGETS if not (t.served or t.endpoint or t.store)]
        originals = {t.path: (project / t.path).read_bytes() for t in files}
        deadline = time.monotonic() + seconds
        with contextlib.chdir(project):
            with _quiet():  # the vector store the `embedding cache` inputs break
                _build(list(TARGETS[-1].argv))
            shutil.copytree(STORE, STORE_COPY)
            for number in range(count):
                if time.monotonic() > deadline:
                    break
                target = targets[number % len(targets)]
                if target.endpoint:
                    data, code, printed = _run_endpoint(target, openai, rng, tally)
                elif target.served:
                    data, code, printed = _run_served(target, mcp, rng)
                elif target.store:
                    data, code, printed = _run_store(target, rng)
                else:
                    data = mutate(originals[target.path], target, rng)
                    code, printed, lost = _run(target, data, originals)
                    tally.lines_lost += lost
                    if _forged(target, code, printed):
                        tally.forged += 1
                        print(f"a forged output line on {target.kind}", file=sys.stderr)
                        tally.crashes.append(_keep(keep, number, target, data))
                    if lost:
                        print(f"a history line lost on {target.kind}: exit {code}", file=sys.stderr)
                        tally.crashes.append(_keep(keep, number, target, data))
                if code == HUNG:
                    tally.hangs += 1
                    print(f"a hang on {target.kind}", file=sys.stderr)
                    tally.crashes.append(_keep(keep, number, target, data))
                tally.codes[code] += 1
                tally.by_kind[target.kind][code] += 1
                tally.tracebacks += "Traceback" in printed
                if code == 5 or "Traceback" in printed:
                    lines = printed.strip().splitlines()
                    print(
                        f"exit {code} on {target.kind}: {' | '.join(lines[-3:])}", file=sys.stderr
                    )
                    tally.crashes.append(_keep(keep, number, target, data))
    return tally


HUNG = -1
"""The exit code counted for an input stopped by the watchdog."""


class _Hung(BaseException):
    """Raised by SIGALRM in a command past `CASE_SECONDS`; not an Exception, so that the
    command line's own handler lets it through."""


def _watched(argv: Sequence[str]) -> int:
    """`llm-eval ARGV` in this process, its exit code; `HUNG` when still running after
    `CASE_SECONDS`."""

    def expired(signum: int, frame: Any) -> None:
        raise _Hung

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        return main(list(argv))
    except _Hung:
        return HUNG
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_store(target: Target, rng: random.Random) -> tuple[bytes, int, str]:
    """`retrieve` with one batch file of the pristine store mutated, or a special file
    in its place; the store is put back afterwards. What is kept: the mutated bytes, or
    the special file's name."""
    shutil.rmtree(STORE, ignore_errors=True)
    shutil.copytree(target.path, STORE)
    batch = rng.choice(sorted(STORE.glob("*/batch-*.npz")))
    if rng.random() < 0.25:
        special = rng.choice(SPECIALS)
        data = special.encode()
        batch.unlink()
        if special == "fifo":
            os.mkfifo(batch)
        elif special == "folder":
            batch.mkdir()
        elif special == "symlink loop":
            batch.symlink_to(batch.name)
        else:
            batch.symlink_to(batch.parent / "gone" / batch.name)
    else:
        data = mutate(batch.read_bytes(), target, rng)
        batch.write_bytes(data)
    try:
        with _quiet() as captured:
            code = _watched(target.argv)
    finally:
        shutil.rmtree(STORE, ignore_errors=True)
        shutil.copytree(target.path, STORE)
    return data, code, captured.getvalue()


def _run(target: Target, data: bytes, originals: dict[str, bytes]) -> tuple[int, str, bool]:
    """The target's command on `data`: its exit code, what it printed, and whether it
    lost a line of the history file (`_lines_lost`)."""
    path = Path(target.path)
    path.write_bytes(data)
    try:
        with _quiet() as captured:
            code = _watched(target.argv)
        lost = _lines_lost(target, data, code, captured.getvalue())
    finally:
        path.write_bytes(originals[target.path])
    return code, captured.getvalue(), lost


ENTRIES = {
    "history": re.compile(r"history\.jsonl: (\d+) points?,"),
    "dashboard history": re.compile(r" (\d+) entries \("),
}
"""Where `history` and `dashboard` say how many entries (points and gaps) they read."""


def _lines_lost(target: Target, data: bytes, code: int, printed: str) -> bool:
    """Whether the command lost a line of the history file `data`. Reading it, every
    non-blank line is an entry (a point or a gap) beside the one baseline, and the
    command ends with exit 0. Recording the sound report, the file afterwards is `data`
    (with a newline at its end) and one line more, and the count printed is the file's
    (on a refusal, the file is as it was)."""
    if target.kind == "history record":
        after = Path(target.path).read_bytes()
        if code != 0:
            return after != data
        kept = data + b"\n" if data and not data.endswith(b"\n") else data
        added = after[len(kept) :]
        count = re.search(r"\((\d+) in all\)", printed)
        return not (
            after.startswith(kept)
            and added.endswith(b"\n")
            and added.count(b"\n") == 1
            and count is not None
            and int(count.group(1)) == _non_blank(after)
        )
    pattern = ENTRIES.get(target.kind)
    if pattern is None:
        return False
    found = pattern.search(printed)
    return code != 0 or found is None or int(found.group(1)) != min(LAST, 1 + _non_blank(data))


OUTPUTS = ("key", "restore-key", "path")


def _forged(target: Target, code: int, printed: str) -> bool:
    """Whether `cache-key` printed what a workflow would take for another step output:
    on exit 0, anything but nothing or its three `name=value` lines, once each."""
    if target.kind != "cache-key config" or code != 0:
        return False
    lines = printed.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    names = [line.partition("=")[0] for line in lines]
    split = any(mark in printed for mark in "\r\x00")
    return split or (bool(lines) and sorted(names) != sorted(OUTPUTS))


def _non_blank(data: bytes) -> int:
    """Non-blank lines, as the history file's reader splits them."""
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    return sum(1 for line in lines if line.strip())


def _run_served(target: Target, mcp: FakeMcp, rng: random.Random) -> tuple[bytes, int, str]:
    """The retrieve command against the fake server mutating one method's answers (the
    same mutation for each answer, by a seed of its own); the first answer mutated is
    what is kept."""
    mcp.method, seed = rng.choice(MCP_METHODS), rng.randrange(2**32)
    first: list[bytes] = []

    def mutated(data: bytes) -> bytes:
        changed = mutate(data, target, random.Random(seed))
        first.append(first[0] if first else changed)
        return changed

    mcp.mutate = mutated
    try:
        with _quiet() as captured:
            code = _watched(target.argv)
    finally:
        mcp.method = ""
    return (first[0] if first else b""), code, captured.getvalue()


def _stub() -> Any:
    """scripts/stub_openai.py, imported from beside this script."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import stub_openai

    return stub_openai


def _run_endpoint(
    target: Target, openai: Any, rng: random.Random, tally: Tally
) -> tuple[bytes, int, str]:
    """`gate` against the fake endpoint mutating each answer to `target.path` (the same
    fault, each by a seed of its own); the first answer mutated is what is kept."""
    fault, seed = _endpoint_fault(target, rng), rng.randrange(2**32)
    first: list[bytes] = []
    counter = iter(range(10**9))

    def rewrite(path: str, answer: dict[str, Any]) -> bytes:
        if not path.endswith("/" + target.path):
            return json.dumps(answer).encode()
        changed = _endpoint_answer(target, answer, fault, random.Random(seed + next(counter)))
        first.append(first[0] if first else changed)
        return changed

    out = Path("out-endpoint")
    shutil.rmtree(out, ignore_errors=True)
    openai.rewrite = rewrite
    try:
        with _quiet() as captured:
            code = _watched(target.argv)
    finally:
        openai.rewrite = None
    printed = captured.getvalue()
    silent = (fault in FAILING_FAULTS and code == 0) or _silently_scored(out)
    shown = any(form in printed for form in _key_forms()) or _key_in_files(out)
    tally.silently_scored += silent
    tally.key_shown += shown
    if silent or shown:
        why = "silently scored" if silent else "key in output"
        print(f"{why} on {target.kind} ({fault}): exit {code}", file=sys.stderr)
    return (first[0] if first else b""), code, printed


def _keep(folder: Path | None, number: int, target: Target, data: bytes) -> str:
    if folder is None:
        return f"#{number} {target.kind}"
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / f"{number:05d}-{target.path.replace('/', '_')}"
    kept.write_bytes(data)
    return str(kept)


def report(tally: Tally, elapsed: float) -> str:
    """The counts per exit code, overall and per file kind."""

    def codes(counter: Counter[int]) -> str:
        return ", ".join(f"exit {code}: {n}" for code, n in sorted(counter.items()))

    lines = [f"{tally.total} mutated inputs in {elapsed:.0f} s: {codes(tally.codes)}"]
    lines += [f"  {kind:<20} {codes(counter)}" for kind, counter in tally.by_kind.items()]
    lines.append(f"tracebacks printed: {tally.tracebacks}")
    lines.append(f"endpoint answers silently scored: {tally.silently_scored}")
    lines.append(f"endpoint runs with the API key in their output or files: {tally.key_shown}")
    lines.append(f"history files with a line lost or miscounted: {tally.lines_lost}")
    lines.append(f"cache-key outputs with a forged line: {tally.forged}")
    lines.append(f"inputs still running after {CASE_SECONDS:g} s (hangs): {tally.hangs}")
    lines += [f"exit 5, traceback or line lost, kept: {crash}" for crash in tally.crashes]
    return "\n".join(lines)


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=7200.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--keep", type=Path, help="Folder for the inputs that ended in exit 5 or lost a line."
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=[t.kind for t in TARGETS],
        help="Fuzz only this kind of input (repeatable), e.g. 'embeddings answer'.",
    )
    args = parser.parse_args()
    started = time.monotonic()
    keep = args.keep and args.keep.resolve()
    tally = fuzz(args.count, args.seconds, args.seed, keep, args.only)
    print(report(tally, time.monotonic() - started))
    failed = (
        tally.codes[5]
        or tally.tracebacks
        or tally.silently_scored
        or tally.key_shown
        or tally.lines_lost
        or tally.forged
        or tally.hangs
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main())
