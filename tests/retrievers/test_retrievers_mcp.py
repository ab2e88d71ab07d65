"""The mcp kind against a real MCP server (the SDK's FastMCP), over stdio and over
streamable HTTP on 127.0.0.1: results equal the server's own search, tool errors and
timeouts fail their query only, and an unreachable server stops the run."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, gold_query
from servers import CORPUS, GOLD_A, SearchService, write_project

from llm_eval.errors import ExternalError, InputError
from llm_eval.gold import GoldQuery
from llm_eval.retrievers import RetrieverContext, retriever_kind

pytest.importorskip("mcp", reason="the mcp extra is part of the test install")

SERVER = Path(__file__).parent.parent / "mcp_search_server.py"
STDIO = [sys.executable, str(SERVER), "stdio"]
SERVICE = SearchService(CORPUS)

PROGRESS = re.compile(r"^\[[#-]+\]\s+\d+/\d+ queries ")
"""A progress line of `llm_eval.progress`: `[####----] 11/12 queries  1.0/s  ETA 1s`."""


def gold(n: int = 12) -> list[GoldQuery]:
    lines = GOLD_A.read_text().splitlines()[:n]
    return [
        gold_query(row["query_id"], text=row["query"], line=i)
        for i, row in enumerate(map(json.loads, lines), 1)
    ]


def retriever(**settings: Any) -> Any:
    base = {"tool": "search", "results_path": "hits", "fields": {"doc_id": "id"}}
    base["arguments"] = {"query": "${query}", "limit": "${top_k}"}
    return retriever_kind("mcp").create({**base, **settings}, RetrieverContext(None, Path()))


def expected(query: str, top_k: int) -> tuple[str, ...]:
    return tuple(d for d, _, _ in SERVICE.search(query, top_k))


def test_stdio_server_answers_every_query_as_its_search_does() -> None:
    queries = gold()
    run = retriever(command=STDIO, concurrency=4).retrieve(queries, 5)
    for q in queries:
        answer = run.queries[q.query_id]
        assert answer.error is None
        assert answer.doc_ids == expected(q.query, 5)
        assert answer.latency_ms is not None and answer.latency_ms > 0
    first = run.queries[queries[0].query_id].results[0]
    assert first.score == SERVICE.search(queries[0].query, 1)[0][1]
    assert first.text  # the text field is read from the hit


def test_a_bare_list_answer_is_read_too() -> None:
    queries = gold(3)
    run = retriever(
        command=STDIO,
        tool="search_list",
        arguments={"query": "${query}", "top_k": "${top_k}"},
        results_path=None,
        fields={},
    ).retrieve(queries, 3)
    assert [run.queries[q.query_id].doc_ids for q in queries] == [
        expected(q.query, 3) for q in queries
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("the MCP HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_streamable_http_server_answers_as_stdio_does(http_server: str) -> None:
    queries = gold()
    over_http = retriever(url=http_server, concurrency=4).retrieve(queries, 5)
    over_stdio = retriever(command=STDIO).retrieve(queries, 5)
    for q in queries:
        assert over_http.queries[q.query_id].doc_ids == over_stdio.queries[q.query_id].doc_ids
        assert over_http.queries[q.query_id].doc_ids == expected(q.query, 5)


def test_tool_errors_and_timeouts_fail_their_query_only(http_server: str) -> None:
    queries = [
        *gold(2),
        gold_query("broken", text="tool-error please"),
        gold_query("late", text="slow sorting"),
    ]
    run = retriever(url=http_server, timeout_s=1.0, concurrency=4).retrieve(queries, 3)
    assert run.queries["broken"].error is not None
    assert run.queries["broken"].error.startswith("tool error: ")
    assert "index unavailable" in run.queries["broken"].error
    assert run.queries["late"].error is not None
    assert run.queries["late"].error.startswith("timeout")
    assert run.queries["broken"].results == ()
    for q in queries[:2]:
        assert run.queries[q.query_id].error is None


def test_answers_without_the_hits_fail_their_query(http_server: str) -> None:
    run = retriever(url=http_server, results_path="nowhere").retrieve(gold(1), 3)
    error = next(iter(run.queries.values())).error
    assert error == "malformed response: expected a list at `nowhere`"


def test_an_unreachable_server_stops_the_run() -> None:
    port = _free_port()
    with pytest.raises(ExternalError, match=f"mcp: cannot open http://127.0.0.1:{port}/mcp"):
        retriever(url=f"http://127.0.0.1:{port}/mcp", timeout_s=2.0).retrieve(gold(1), 3)
    with pytest.raises(ExternalError, match="mcp: cannot open the server"):
        retriever(command=[sys.executable, "-c", "import sys; sys.exit(3)"]).retrieve(gold(1), 3)


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["no-such\nprogram", "srv.py"], "`'no-such\\nprogram' srv.py`"),
        (["no-such", "a b", "x\r\x1b[31m\u202e"], "`no-such 'a b' 'x\\r\\x1b[31m\\u202e'`"),
        (["no-such program"], "`'no-such program'`"),
    ],
)
def test_a_command_that_cannot_start_is_named_on_one_line(
    tmp_path: Path, cli: Cli, command: list[str], shown: str
) -> None:
    """The error quotes the command as a shell would, and a line break or a control
    character in it as an escape: one line through the command line, exit 4."""
    write_project(tmp_path, {"kind": "mcp", "command": command, "tool": "search"})
    config = str(tmp_path / "llm-eval.yaml")
    code, _, err = cli("retrieve", "--config", config, "--out", tmp_path / "run.jsonl")
    assert code == 4 and err.count("\n") == 1, err
    assert err.startswith(f"llm-eval: error: mcp: cannot open the server {shown}: ")


def test_settings_are_checked() -> None:
    kind = retriever_kind("mcp")
    with pytest.raises(InputError, match="either `command`"):
        kind.create({}, RetrieverContext(None, Path()))
    with pytest.raises(InputError, match="either `command`"):
        kind.create({"command": ["x"], "url": "http://h/mcp"}, RetrieverContext(None, Path()))
    with pytest.raises(InputError) as caught:
        kind.checked({"command": "python server.py"})
    assert caught.value.key == "command"


def test_the_gate_runs_through_an_mcp_server(tmp_path: Path, cli: Cli) -> None:
    settings = {
        "kind": "mcp",
        "command": STDIO,
        "arguments": {"query": "${query}", "limit": "${top_k}"},
        "results_path": "hits",
        "fields": {"doc_id": "id"},
    }
    project = write_project(tmp_path, settings, queries=6)
    args = ["gate", "--config", str(project.config), "--criteria", str(project.criteria)]
    code, out, _ = cli(*args, "--format", "json")
    assert code in (0, 1)
    report = json.loads(out)
    assert report["queries"]["failed"] == {}
    assert report["slices"][0]["metrics"]["recall@5"]["n"] == 6


def test_a_server_that_dies_mid_run_is_one_line_with_its_cause(tmp_path: Path) -> None:
    """A stdio server that ends after 5 searches: the run fails (exit 4) with one line
    on stderr, which counts the failures and shows their first causes; the process is
    reaped without asyncio's stray `Unknown child process pid` line. Run as its own
    process, so that stderr is all the command printed; the timeout guards a hang."""
    settings = {
        "kind": "mcp",
        "command": [*STDIO, "dies-after", "5"],
        "arguments": {"query": "${query}", "limit": "${top_k}"},
        "results_path": "hits",
        "fields": {"doc_id": "id"},
        # One call at a time: with calls in flight at once, the server's exit at the
        # 6th search can cut off its answer to the 5th, so that 7 or 8 queries fail.
        "concurrency": 1,
    }
    project = write_project(tmp_path, settings, queries=12)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "llm_eval.cli",
            "retrieve",
            "--config",
            str(project.config),
            "--out",
            str(tmp_path / "run.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 4
    # Off a terminal, a run longer than ten seconds logs its progress line every ten
    # (`llm_eval.progress`): those lines are the run's, not the error's.
    lines = [line for line in done.stderr.splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("llm-eval: error: retriever failed on 7 of 12 queries"), lines
    assert "; the cause: 7 of 12 queries: " in lines[0] or "; the causes: " in lines[0]
