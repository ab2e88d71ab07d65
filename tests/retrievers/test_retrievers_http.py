"""The http retriever against real servers on 127.0.0.1: a search service over the demo
corpus, and misbehaving ones that prove retries, timeouts and error accounting."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from servers import (
    CORPUS,
    Project,
    Reply,
    Scripted,
    SearchService,
    always,
    gold_texts,
    serve,
    write_project,
)

from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.httpcall import Breaker, backoff_seconds, retry_after_seconds
from llm_eval.retrieval import first_causes
from llm_eval.retrievers.http import parse_response, render_body, resolve_headers
from llm_eval.retrievers.pool import QueryFailed
from llm_eval.runs import RankedResult
from llm_eval.runs_io import load_run

FAST = {"retries": 2, "backoff_s": 0.001, "timeout_s": 2}
"""Retry settings that keep the tests quick."""


@pytest.fixture(scope="module")
def service() -> SearchService:
    return SearchService(CORPUS)


def retrieve(cli: Cli, project: Project, *args: str) -> tuple[int, str, str]:
    out = project.root / "run.jsonl"
    return cli("retrieve", "--config", project.config, "--out", out, *args)


def gate(cli: Cli, project: Project, *args: str) -> tuple[int, str, str]:
    return cli("gate", "--config", project.config, "--criteria", project.criteria, *args)


# --- end to end -----------------------------------------------------------------------


def test_the_gate_runs_on_a_search_service_over_the_demo_corpus(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    nested = SearchService(CORPUS)
    nested.nested = True
    with serve(nested) as server:
        settings = {
            "kind": "http",
            "url": server.url,
            "body": {"q": "${query}", "size": "${top_k}", "label": "top ${top_k}: ${query}"},
            "results_path": "data.hits",
            "fields": {"doc_id": "id", "score": "_score", "text": "body"},
        }
        project = write_project(tmp_path, settings, queries=60)
        code, out, _ = gate(cli, project)
        assert code == 0
        assert out.startswith("llm-eval gate: PASS")
        assert len(server.requests) == 60
        first = next(r for r in server.requests if r.query == project.texts[0])
        label = f"top 10: {project.texts[0]}"
        assert first.body == {"q": project.texts[0], "size": 10, "label": label}
        # One pooled client: at most `concurrency` (8) connections, each reused.
        assert len({r.client_port for r in server.requests}) <= 8

        assert retrieve(cli, project, "--no-cache")[0] == 0
    report = project.report()
    assert report["queries"]["failed"] == {}
    assert report["slices"][0]["metrics"]["error_rate"]["value"] == 0.0
    run = load_run(project.root / "run.jsonl")
    query = project.queries[0]
    expected = tuple(RankedResult(d, s, t) for d, s, t in service.search(query["query"], 10))
    assert run.queries[query["query_id"]].results == expected
    assert all(q.latency_ms is not None and q.latency_ms > 0 for q in run.queries.values())


def test_retries_timeouts_and_failures_counted_server_side(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    q = gold_texts(10)
    plans = {
        q[0]: [Reply(drop=True)],  # then answers
        q[1]: [Reply(500), Reply(502)],  # then answers
        q[2]: always(Reply(503)),
        q[3]: always(Reply(delay_s=1.0)),  # slower than timeout_s
        q[4]: always(Reply(raw=b'{"results": [')),
        q[5]: always(Reply(404)),
        q[6]: [Reply(429, headers={"Retry-After": "1"})],  # then answers
        q[7]: always(Reply(drop=True)),
    }
    with serve(Scripted(service, plans)) as server:
        settings = {"kind": "http", "url": server.url, **FAST, "timeout_s": 0.3}
        project = write_project(tmp_path, {**settings, "max_error_rate": 0.5}, queries=10)
        code, out, err = retrieve(cli, project)
    assert (code, err) == (0, "")
    ids = [query["query_id"] for query in project.queries]
    assert out == (
        f"Wrote {project.root / 'run.jsonl'} (10 queries, top 10, 5 failed).\n"
        "The retriever failed on 5 of 10 queries (1 connection dropped, 1 http 404, "
        f"1 http 503, 1 malformed JSON, 1 timeout): {', '.join(ids[2:6])}, {ids[7]}; "
        "they are not scored, and count in error_rate; the cause: 1 of 10 queries: "
        "malformed JSON: Expecting value (column 14).\n"
    )
    attempts = [server.attempts(text) for text in q]
    assert attempts == [2, 3, 3, 3, 1, 1, 2, 3, 1, 1]
    run = load_run(project.root / "run.jsonl")
    errors = [run.queries[i].error for i in ids]
    assert errors == [
        None,
        None,
        "http 503",
        "timeout",
        "malformed JSON: Expecting value (column 14)",
        "http 404",
        None,
        "connection dropped",
        None,
        None,
    ]
    answered = [run.queries[i] for i in ids if run.queries[i].error is None]
    assert all(a.results and a.latency_ms is not None for a in answered)
    assert all(not run.queries[i].results and run.queries[i].latency_ms is None for i in ids[2:6])
    waited = [r.at for r in server.requests if r.query == q[6]]
    assert waited[1] - waited[0] >= 0.95  # Retry-After: 1 was honoured


def test_an_error_rate_over_the_limit_exits_4_with_a_summary(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    q = gold_texts(10)
    plans = {q[1]: always(Reply(503)), q[4]: always(Reply(503)), q[7]: always(Reply(raw=b"<html>"))}
    with serve(Scripted(service, plans)) as server:
        settings = {"kind": "http", "url": server.url, **FAST, "max_error_rate": 0.2}
        project = write_project(tmp_path, settings, queries=10)
        code, out, err = retrieve(cli, project)
        assert (code, out) == (4, "")
        assert err == (
            "llm-eval: error: retriever failed on 3 of 10 queries (30% > max_error_rate 20%): "
            "2 http 503, 1 malformed JSON; the cause: 1 of 10 queries: malformed JSON: "
            "Expecting value (column 1)\n"
        )
        assert not (project.root / "run.jsonl").exists()
        code, out, err = gate(cli, project)
    assert (code, out) == (4, "")
    assert "retriever failed on 3 of 10 queries" in err
    assert project.report()["verdict"] == "retriever_failed"


def test_a_gate_whose_retriever_fails_writes_the_report_saying_why(tmp_path: Path) -> None:
    """A service answering hits without the configured doc id field: `llm-eval gate`, in a
    process of its own, exits 4 with its one error line, and report.json and report.md
    say the retriever failed, with the failures by reason and their first causes."""

    def hits_without_doc_ids(request: Any) -> Reply:
        return Reply(payload={"results": [{"id": "sorting#0", "score": 2.0}, {"id": "x"}]})

    with serve(hits_without_doc_ids) as server:
        project = write_project(tmp_path, {"kind": "http", "url": server.url, **FAST}, queries=4)
        command = ["gate", "--config", str(project.config), "--criteria", str(project.criteria)]
        done = subprocess.run(
            [sys.executable, "-m", "llm_eval.cli", *command],
            env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
            capture_output=True,
            text=True,
            timeout=300,
        )
    cause = (
        "malformed result: hits[].doc_id missing (the service's hits have: id, score); "
        "set fields.doc_id: id"
    )
    message = (
        "retriever failed on 4 of 4 queries (100% > max_error_rate 0%): 4 malformed result; "
        f"the cause: 4 of 4 queries: {cause}"
    )
    assert (done.returncode, done.stdout, done.stderr) == (4, "", f"llm-eval: error: {message}\n")
    report = project.report()
    assert (report["verdict"], report["exit_code"], report["summary"]) == (
        "retriever_failed",
        4,
        [message],
    )
    assert report["retriever_failure"] == {
        "message": message,
        "where": None,
        "failed": 4,
        "queries": 4,
        "share": 1.0,
        "max_error_rate": 0.0,
        "by_reason": {"malformed result": 4},
        "causes": [{"cause": cause, "count": 4}],
        "other_causes": 0,
    }
    error = cause.replace("hits[]", "hits[0]")
    assert report["queries"]["failed"] == {q["query_id"]: error for q in project.queries}
    assert [(g["name"], g["status"], g["reason"], g["value"]) for g in report["gates"]] == [
        ("retrieval_recall_at_5", "inconclusive", "retriever_failed", None),
        ("retrieval_error_rate", "inconclusive", "retriever_failed", None),
    ]
    markdown = (project.out / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith(
        "## 🛑 Retrieval quality: RETRIEVER FAILED: on 4 of 4 queries (100% &gt; "
        "max\\_error\\_rate 0%); no gate was measured\n"
    )
    assert (
        "- 4 of 4 queries: malformed result: hits\\[\\].doc\\_id missing (the service's hits "
        "have: id, score); set fields.doc\\_id: id\n" in markdown
    )


def test_under_the_limit_the_gate_reports_the_failed_queries(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    with serve(Scripted(service, {gold_texts(10)[3]: always(Reply(503))})) as server:
        settings = {"kind": "http", "url": server.url, **FAST, "max_error_rate": 0.1}
        project = write_project(tmp_path, settings, queries=10)
        code, out, _ = gate(cli, project)
    failed_id = project.queries[3]["query_id"]
    assert code == 0
    assert (
        f"The retriever failed on 1 of 10 queries (1 http 503): {failed_id}; they are not "
        "scored, and count in error_rate." in out
    )
    report = project.report()
    assert report["queries"]["failed"] == {failed_id: "http 503"}
    assert (
        "The retriever failed on 1 gold query: not scored"
        in (project.out / "report.md").read_text()
    )
    assert report["slices"][0]["metrics"]["error_rate"]["value"] == pytest.approx(0.1)
    error_gate = next(g for g in report["gates"] if g["metric"] == "error_rate")
    assert error_gate["value"] == pytest.approx(0.1)


def test_a_service_that_is_down_fails_every_query_as_connection_refused(
    tmp_path: Path, cli: Cli
) -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/search"
    project = write_project(tmp_path, {"kind": "http", "url": url, **FAST}, queries=3)
    code, _, err = retrieve(cli, project)
    assert code == 4
    assert err == (
        "llm-eval: error: retriever failed on 3 of 3 queries (100% > max_error_rate 0%): "
        "3 connection refused\n"
    )


def test_an_unreachable_service_stops_being_retried_but_every_query_is_tried(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    """After 3 queries in a row time out even with retries, the rest get one attempt."""
    slow = Reply(delay_s=0.5)
    plans = {text: always(slow) for text in gold_texts(8)}
    with serve(Scripted(service, plans)) as server:
        settings = {
            "kind": "http",
            "url": server.url,
            **FAST,
            "timeout_s": 0.05,
            "concurrency": 1,
            "max_error_rate": 1.0,
        }
        project = write_project(tmp_path, settings, queries=8)
        code, out, _ = retrieve(cli, project)
        attempts = len(server.requests)
    assert code == 0
    assert "(8 queries, top 10, 8 failed)" in out
    assert attempts == 3 * 3 + 5 * 1  # retries: 2 per query until the breaker opens


def test_a_reachable_answer_closes_the_breaker() -> None:
    breaker = Breaker(3)
    for _ in range(3):
        breaker.record(True)
    assert breaker.open
    breaker.record(False)
    assert not breaker.open


# --- secrets --------------------------------------------------------------------------

SECRET = "tok-9f8e7d6c5b4a"


def test_header_secrets_come_from_the_environment_and_are_never_shown(
    tmp_path: Path,
    service: SearchService,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEARCH_TOKEN", SECRET)
    headers = {"Authorization": "Bearer ${SEARCH_TOKEN}", "X-Team": "rag-${SEARCH_TOKEN}"}
    with serve(Scripted(service, {gold_texts(10)[0]: always(Reply(401))})) as server:
        settings = {"kind": "http", "url": server.url, "headers": headers, "max_error_rate": 0.5}
        project = write_project(tmp_path, settings, queries=10)
        shown = [gate(cli, project, "--cache"), retrieve(cli, project, "--no-cache")]
    assert [code for code, _, _ in shown] == [0, 0]
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {SECRET}"}
    assert {r.headers["x-team"] for r in server.requests} == {f"rag-{SECRET}"}
    assert "http 401" in shown[0][1]
    for _, out, err in shown:
        assert SECRET not in out + err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert project.cache_entries() and (project.out / "report.json") in written
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path


def test_a_missing_environment_variable_is_a_config_error_naming_it(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEARCH_TOKEN", raising=False)
    with serve(lambda request: Reply(payload=[])) as server:
        headers = {"Authorization": "Bearer ${SEARCH_TOKEN}"}
        project = write_project(tmp_path, {"kind": "http", "url": server.url, "headers": headers})
        code, _, err = gate(cli, project)
    assert code == 3
    assert err == (
        f"llm-eval: error: {project.config}:7: retriever.headers: environment variable "
        "SEARCH_TOKEN is not set (used by the Authorization header)\n"
    )
    assert server.requests == []


# --- repeats --------------------------------------------------------------------------


def test_repeat_finds_a_service_that_shuffles_ties(tmp_path: Path, cli: Cli) -> None:
    with serve(SearchService(CORPUS, shuffle_ties=True)) as server:
        project = write_project(tmp_path, {"kind": "http", "url": server.url}, queries=12)
        assert retrieve(cli, project)[0] == 0  # fills the cache, which --repeat bypasses
        code, out, _ = retrieve(cli, project, "--repeat", "3")
        assert len(server.requests) == 12 * 4
        gate_code, gate_out, _ = gate(cli, project, "--repeat", "2")
    assert (code, gate_code) == (0, 0)
    summary = out.splitlines()[1]
    assert summary.startswith("Rankings differed between 3 runs on ")
    assert "of 12 queries: a-0" in summary
    assert "Rankings differed between 2 runs on " in gate_out


def test_repeat_on_a_deterministic_service_finds_nothing(
    tmp_path: Path, service: SearchService, cli: Cli
) -> None:
    with serve(service) as server:
        project = write_project(tmp_path, {"kind": "http", "url": server.url}, queries=5)
        code, out, _ = retrieve(cli, project, "--repeat", "3")
    assert code == 0
    assert out.splitlines()[1] == "Rankings were the same in all 3 runs of every query."
    assert len(server.requests) == 15


def test_repeat_needs_the_retriever(tmp_path: Path, cli: Cli) -> None:
    project = write_project(tmp_path, {"kind": "http", "url": "http://127.0.0.1:9/"})
    code, _, err = gate(cli, project, "--run", tmp_path / "run.jsonl", "--repeat", "2")
    assert code == 2
    assert "--repeat runs the configured retriever; it cannot repeat --run" in err


# --- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "FILE:4: retriever: missing required key 'url'"),
        (
            {"url": "ftp://x"},
            "FILE:5: retriever.url: must be an http:// or https:// URL, got 'ftp://x'",
        ),
        (
            {"url": "http://h", "body": {"q": "${qeury}"}},
            "FILE:7: retriever.body: unknown placeholder ${qeury} (valid: ${query}, ${top_k})",
        ),
        (
            {"url": "http://h", "headers": {"X-Id": 7}},
            "FILE:7: retriever.headers: the value of X-Id must be a string",
        ),
        (
            {"url": "http://h", "headers": {"X-Id": "${A-B}"}},
            "FILE:7: retriever.headers: the value of X-Id may only use ${ENV_VAR} names "
            "(letters, digits, _)",
        ),
        (
            {"url": "http://h", "fields": {"doc": "id"}},
            "FILE:7: retriever.fields: unknown field 'doc' (valid: doc_id, score, text, "
            "document, page)",
        ),
        (
            {"url": "http://h", "results_path": "data..hits"},
            "FILE:6: retriever.results_path: must be null or keys joined by dots (e.g. "
            "data.hits), got 'data..hits'",
        ),
        (
            {"url": "http://h", "concurrency": 0},
            "FILE:6: retriever.concurrency: must be a whole number from 1 to 256, got 0",
        ),
        (
            {"url": "http://h", "timeout_s": 0},
            "FILE:6: retriever.timeout_s: must be a number of seconds > 0, got 0",
        ),
        (
            {"url": "http://h", "max_error_rate": 1.5},
            "FILE:6: retriever.max_error_rate: must be a number between 0 and 1, got 1.5",
        ),
        (
            {"url": "http://h", "retry": 3},
            "FILE:6: retriever.retry: unknown key (valid keys: answer_path, backoff_s, body, "
            "builds, cache_key, concurrency, fields, headers, kind, max_backoff_s, max_error_rate, "
            "results_path, retries, timeout_s, url)",
        ),
    ],
)
def test_settings_are_checked_with_file_line_and_key(
    tmp_path: Path, settings: dict[str, Any], message: str
) -> None:
    project = write_project(tmp_path, {"kind": "http", **settings}, queries=1)
    with pytest.raises(InputError) as caught:
        load_config(project.config)
    assert str(caught.value) == message.replace("FILE", str(project.config))


# --- pure parts -----------------------------------------------------------------------


def test_the_body_template_fills_placeholders_and_keeps_top_k_a_number() -> None:
    template = {
        "query": "${query}",
        "k": "${top_k}",
        "text": "${query} (top ${top_k})",
        "nested": [{"size": "${top_k}"}, 3, None, True],
    }
    assert render_body(template, 'say "${top_k}"', 5) == {
        "query": 'say "${top_k}"',  # the query's own text is not expanded again
        "k": 5,
        "text": 'say "${top_k}" (top 5)',
        "nested": [{"size": 5}, 3, None, True],
    }


def test_header_variables_are_read_from_the_environment() -> None:
    environ = {"TOKEN": "abc", "TEAM": "rag"}
    templates = {"Authorization": "Bearer ${TOKEN}", "X-Team": "${TEAM}-${TEAM}", "X-A": "b"}
    assert resolve_headers(templates, environ) == {
        "Authorization": "Bearer abc",
        "X-Team": "rag-rag",
        "X-A": "b",
    }
    with pytest.raises(InputError) as caught:
        resolve_headers({"X-Key": "${KEY}"}, environ)
    assert str(caught.value) == (
        "headers: environment variable KEY is not set (used by the X-Key header)"
    )


NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("3", 3.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("-2", 0.0),
        ("Sat, 01 Mar 2025 12:00:30 GMT", 30.0),
        ("Sat, 01 Mar 2025 11:00:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
        ("nan", None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize(
    ("attempt", "retry_after", "draw", "wait"),
    [
        (0, None, 1.0, 0.5),  # full jitter: up to base * 2**attempt
        (0, None, 0.5, 0.25),
        (0, None, 0.0, 0.0),
        (2, None, 1.0, 2.0),
        (6, None, 1.0, 10.0),  # capped
        (0, 4.0, 0.0, 4.0),  # Retry-After wins over the jitter
        (0, 60.0, 0.0, 10.0),  # and is capped too
    ],
)
def test_backoff_is_full_jitter_capped_or_retry_after(
    attempt: int, retry_after: float | None, draw: float, wait: float
) -> None:
    assert backoff_seconds(attempt, 0.5, 10.0, retry_after, lambda: draw) == wait


FIELDS = {"doc_id": "id", "score": "_score", "text": "_source.body"}


@pytest.mark.parametrize(
    ("content", "path", "error"),
    [
        (
            b"{",
            None,
            "malformed JSON: Expecting property name enclosed in double quotes (column 2)",
        ),
        (b"\xff", None, "malformed JSON: not UTF-8"),
        (b"[" * 200_000, None, "malformed JSON: JSON nested too deeply to read"),
        (
            b'[{"id": "\\ud800"}]',
            None,
            "malformed JSON: a string holds a lone UTF-16 surrogate "
            "(\\ud800-\\udfff escape), not text",
        ),
        (b'{"hits": []}', None, "malformed response: expected a list or an object with `results`"),
        (
            b'{"data": {"hits": {}}}',
            "data.hits",
            "malformed response: expected a list at `data.hits`",
        ),
        (b"[1]", None, "malformed result: hits[0] is not an object"),
        (
            b'[{"_score": 1}]',
            None,
            "malformed result: hits[0].doc_id missing (the service's hits have: _score)",
        ),
        (
            b'[{"uid": "d", "_score": 1}]',
            None,
            "malformed result: hits[0].doc_id missing (the service's hits have: uid, _score); "
            "set fields.doc_id: uid",
        ),
        (
            b'[{"id": ""}]',
            None,
            "malformed result: hits[0].doc_id missing or not a non-empty string, got ''",
        ),
        (
            b'[{"id": "d", "_score": "1"}]',
            None,
            "malformed result: hits[0].score must be a finite number, got '1'",
        ),
        (
            b'[{"id": "d", "page": 1.5}]',
            None,
            "malformed result: hits[0].page must be a whole number, got 1.5",
        ),
    ],
)
def test_malformed_answers_fail_the_query_saying_why(
    content: bytes, path: str | None, error: str
) -> None:
    with pytest.raises(QueryFailed) as caught:
        parse_response(content, path, FIELDS)
    assert str(caught.value) == error


def test_hits_are_read_through_the_configured_fields() -> None:
    content = json.dumps(
        {"results": [{"id": 7, "_score": 2, "_source": {"body": "t"}, "page": 3}, {"id": "b"}]}
    ).encode()
    assert parse_response(content, None, FIELDS).results == (
        RankedResult("7", 2.0, "t", None, 3),
        RankedResult("b"),
    )


@pytest.mark.parametrize(
    ("payload", "answer_path", "expected"),
    [
        ({"results": [], "answer": "Use sorted()."}, None, "Use sorted()."),
        ({"data": {"hits": [], "text": "Use sorted()."}}, "data.text", "Use sorted()."),
        ({"results": []}, None, None),  # no answer: none, not an error
        ([], None, None),  # a bare list of hits carries no answer
    ],
)
def test_the_generated_answer_is_read_from_the_response(
    payload: Any, answer_path: str | None, expected: str | None
) -> None:
    results_path = "data.hits" if answer_path else None
    hits = parse_response(json.dumps(payload).encode(), results_path, FIELDS, answer_path)
    assert hits.answer == expected


def test_an_answer_that_is_not_text_fails_the_query() -> None:
    with pytest.raises(QueryFailed) as caught:
        parse_response(b'{"results": [], "answer": {"text": "x"}}', None, FIELDS)
    assert str(caught.value) == "malformed response: `answer` must be the answer as text"


def test_the_answer_reaches_the_run_file_and_the_retrieval_cache(tmp_path: Path, cli: Cli) -> None:
    def search(request: Any) -> Reply:
        query = request.body["query"]
        return Reply(payload={"results": [{"doc_id": "d1"}], "answer": f"about {query}"})

    with serve(search) as server:
        project = write_project(tmp_path, {"kind": "http", "url": server.url}, queries=3)
        code, _, err = retrieve(cli, project, "--cache")
        assert code == 0, err
        first = load_run(project.root / "run.jsonl")
        asked = len(server.requests)
        code, _, err = retrieve(cli, project, "--cache")  # every answer from the cache
        assert code == 0, err
        assert len(server.requests) == asked
    again = load_run(project.root / "run.jsonl")
    texts = {q["query_id"]: q["query"] for q in project.queries}
    for run in (first, again):
        assert {q: r.answer for q, r in run.queries.items()} == {
            q: f"about {text}" for q, text in texts.items()
        }


MISSING_ID = (
    "malformed result: hits[0].doc_id missing (the service's hits have: id, score); "
    "set fields.doc_id: id"
)


@pytest.mark.parametrize(
    ("errors", "causes"),
    [
        (
            [MISSING_ID] * 29,
            "; the cause: 29 of 29 queries: malformed result: hits[].doc_id missing (the "
            "service's hits have: id, score); set fields.doc_id: id",
        ),
        (["timeout", "http 503"] * 3, ""),  # nothing more than their kinds
        (
            ["tool error: a", "tool error: b", "tool error: b", "timeout", "mcp error: c", "x: d"],
            "; the causes: 2 of 29 queries: tool error: b; 1 of 29 queries: tool error: a; "
            "1 of 29 queries: mcp error: c; 1 other cause",
        ),
        (
            ["malformed result: hits[3].score bad", "malformed result: hits[0].score bad"],
            "; the cause: 2 of 29 queries: malformed result: hits[].score bad",
        ),
    ],
    ids=["one cause", "kinds only", "most first, three shown", "any rank"],
)
def test_a_failure_summary_shows_its_first_distinct_causes(errors: list[str], causes: str) -> None:
    assert first_causes(errors, 29) == causes
