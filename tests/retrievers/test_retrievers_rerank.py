"""The rerank kind: a first stage's candidates reordered by an llm, http or cross-encoder
reranker, each talking to a real local service or a model built on disk; the score
cache, failures that keep the first stage's order, prompt files and the fingerprint."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, gold_query
from rerank_servers import (
    OverlapChat,
    OverlapRerank,
    overlap_score,
    root_of,
    write_prompt,
)
from servers import CORPUS, LocalServer, Reply, serve, write_project

from llm_eval.config_io import load_config
from llm_eval.errors import InputError
from llm_eval.fingerprint_io import fingerprints
from llm_eval.pipeline import load_inputs
from llm_eval.rerankers.order import reranked
from llm_eval.rerankers.prompt_file import read_prompt
from llm_eval.rerankers.scale import Unreadable, scale
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.runs import RankedResult, Run

QUERY = "sort a list by key"
TEXTS = {
    "a": "nothing in common",
    "b": "sort things",
    "c": "sort the list",
    "d": "one list",
    "e": "sort a list by its key",
}
"""Overlap with QUERY (ten points a shared word): a 0, b 10, c 20, d 10, e 30."""


@pytest.fixture
def chat() -> Iterator[LocalServer]:
    with serve(OverlapChat()) as server:
        yield server


def first_stage(folder: Path, texts: Mapping[str, str] = TEXTS) -> dict[str, Any]:
    """A run file answering QUERY with `texts` in their order, as the first stage."""
    results = [
        {"doc_id": d, "score": 10.0 - n, "text": t} for n, (d, t) in enumerate(texts.items())
    ]
    path = folder / "first.jsonl"
    line = {"query_id": "q", "results": results, "latency_ms": 5.0}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return {"kind": "run", "path": str(path)}


def llm(server: LocalServer, prompt: Path, **settings: Any) -> dict[str, Any]:
    return {
        "type": "llm",
        "base_url": root_of(server.url) + "/v1",
        "model": "overlap",
        "prompt": str(prompt),
        "concurrency": 2,
        **settings,
    }


def reranked_run(
    folder: Path, reranker: Mapping[str, Any], top_k: int = 10, **settings: Any
) -> Run:
    kind = retriever_kind("rerank")
    settings = {"first": first_stage(folder), "reranker": dict(reranker), **settings}
    retriever = kind.create(settings, RetrieverContext(None, folder / "cache"))
    return retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], top_k)


def order(run: Run) -> list[str]:
    return list(run.queries["q"].doc_ids)


# --- the order (pure) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.1, 0.3, 0.2], ["b", "c", "a"]),
        ([0.5, 0.5, 0.9], ["c", "a", "b"]),  # a tie keeps the first stage's order
        ([0.0, 0.0, 0.0], ["a", "b", "c"]),
        ([0.9, None, 0.1], ["a", "b", "c"]),  # a failed pair: the first stage's order
    ],
)
def test_reranked_order(scores: list[float | None], expected: list[str]) -> None:
    candidates = [RankedResult(d, 1.0, d) for d in "abc"]
    assert [r.doc_id for r in reranked(candidates, scores)] == expected


def test_reranked_results_carry_the_reranker_scores_or_else_the_first_stages() -> None:
    candidates = [RankedResult("a", 7.0, "x"), RankedResult("b", 6.0, "y")]
    assert [r.score for r in reranked(candidates, [0.2, 0.8])] == [0.8, 0.2]
    assert [r.score for r in reranked(candidates, [0.2, None])] == [7.0, 6.0]


@pytest.mark.parametrize(
    ("name", "answer", "expected"),
    [
        ("0-100", '{"score": 70}', 0.7),
        ("0-100", '```json\n{"score": 100}\n```', 1.0),
        ("0-100", '{"score": 5.0}', 0.05),
        ("1-5", '{"score": 1}', 0.0),
        ("1-5", '{"score": 4}', 0.75),
        ("binary", '{"relevant": true, "confidence": 0.6}', 0.8),
        ("binary", '{"relevant": false, "confidence": 1}', 0.0),
        ("binary", '{"relevant": false, "confidence": 0.2}', 0.4),
    ],
)
def test_scales_normalise_answers(name: str, answer: str, expected: float) -> None:
    assert scale(name).normalised(answer) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "answer", "reason"),
    [
        ("0-100", "very relevant", "not JSON: 'very relevant'"),
        ("0-100", "[70]", "not a JSON object: list"),
        ("0-100", '{"score": 101}', "score must be a whole number from 0 to 100, got 101"),
        ("0-100", '{"score": "70"}', "score must be a whole number from 0 to 100, got '70'"),
        ("1-5", '{"score": 0}', "score must be a whole number from 1 to 5, got 0"),
        ("1-5", '{"score": true}', "score must be a whole number from 1 to 5, got True"),
        ("binary", '{"relevant": 1, "confidence": 1}', "relevant must be true or false, got 1"),
        (
            "binary",
            '{"relevant": true}',
            "confidence must be a number from 0 to 1, got None",
        ),
    ],
)
def test_unreadable_answers_say_why(name: str, answer: str, reason: str) -> None:
    with pytest.raises(Unreadable) as caught:
        scale(name).normalised(answer)
    assert str(caught.value) == reason


# --- prompt files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("Is {document} relevant?", "", "the prompt has no {query} placeholder"),
        ("Does it answer {query}?", "", "the prompt has no {document} placeholder"),
        (
            "{query}\n{document}\nRate {passage} {x}.\n{passage}",
            ":3",
            "unknown placeholder {passage} in the prompt (valid: {query}, {document}, {scale})",
        ),
    ],
)
def test_a_prompt_without_its_placeholders_is_refused_naming_the_file(
    tmp_path: Path, text: str, where: str, reason: str
) -> None:
    path = write_prompt(tmp_path, text)
    with pytest.raises(InputError) as caught:
        read_prompt(str(path))
    assert str(caught.value) == f"{path}{where}: {reason}"


def test_a_prompt_is_filled_in_one_pass_and_told_the_scale(tmp_path: Path) -> None:
    prompt = read_prompt(str(write_prompt(tmp_path, 'Q: {query}\nD: {document}\n{"x": 1}')))
    filled = prompt.filled("{document}?", "text", "Reply 0-100.")
    assert filled == 'Q: {document}?\nD: text\n{"x": 1}\n\nReply 0-100.'


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("Does it answer {query}?", "", "the prompt has no {document} placeholder"),
        (
            "Query: {query}\nPassage: {passage}\nDocument: {document}\n",
            ":2",
            "unknown placeholder {passage} in the prompt (valid: {query}, {document}, {scale})",
        ),
    ],
)
def test_a_bad_prompt_is_one_line_naming_the_prompt_file_not_the_config(
    tmp_path: Path, chat: LocalServer, cli: Cli, text: str, where: str, reason: str
) -> None:
    """The prompt's text is at fault, not the config line that names the file."""
    prompt = write_prompt(tmp_path, text)
    project = write_project(tmp_path, rerank_section(llm(chat, prompt)))
    code, out, err = cli("retrieve", "--config", project.config, "--out", tmp_path / "run.jsonl")
    assert (code, out) == (3, "")
    assert err == f"llm-eval: error: {prompt}{where}: {reason}\n"
    assert chat.requests == []


def test_a_missing_prompt_file_is_the_configs_error(tmp_path: Path, chat: LocalServer) -> None:
    """The config names a file that is not there: the config's line is at fault."""
    project = write_project(tmp_path, rerank_section(llm(chat, tmp_path / "nowhere.txt")))
    with pytest.raises(InputError) as caught:
        load_config(project.config)
    lines = project.config.read_text(encoding="utf-8").splitlines()
    line = lines.index("  reranker:") + 2  # the mapping under it
    assert str(caught.value) == (
        f"{project.config}:{line}: retriever.reranker: prompt: no such prompt file: "
        f"{tmp_path / 'nowhere.txt'}"
    )


def rerank_section(reranker: Mapping[str, Any], candidates: int = 20) -> dict[str, Any]:
    return {
        "kind": "rerank",
        "first": {"kind": "bm25"},
        "candidates": candidates,
        "reranker": dict(reranker),
    }


def test_a_prompt_change_changes_the_baseline_fingerprint(
    tmp_path: Path, chat: LocalServer
) -> None:
    prompt = write_prompt(tmp_path, "Query: {query}\nDocument: {document}\n")
    project = write_project(tmp_path, rerank_section(llm(chat, prompt)))
    before = fingerprints(load_inputs(project.config, project.criteria), None)
    prompt.write_text("Query: {query}\nPassage: {document}\n", encoding="utf-8")
    after = fingerprints(load_inputs(project.config, project.criteria), None)
    assert before["retriever"] != after["retriever"]
    assert {k: v for k, v in before.items() if k != "retriever"} == {
        k: v for k, v in after.items() if k != "retriever"
    }


# --- the llm reranker -------------------------------------------------------------------


def test_the_llm_reranker_orders_by_score_ties_in_the_first_stages_order(
    tmp_path: Path, chat: LocalServer
) -> None:
    run = reranked_run(tmp_path, llm(chat, write_prompt(tmp_path)))
    assert order(run) == ["e", "c", "b", "d", "a"]
    assert [r.score for r in run.queries["q"].results] == [0.3, 0.2, 0.1, 0.1, 0.0]
    assert len(chat.requests) == 5


@pytest.mark.parametrize("name", ["1-5", "binary"])
def test_the_llm_reranker_asks_for_the_scales_schema(
    tmp_path: Path, chat: LocalServer, name: str
) -> None:
    run = reranked_run(tmp_path, llm(chat, write_prompt(tmp_path), scale=name))
    # 1-5: e, c score 2 and the others 1; binary: e and c relevant (overlap >= 20)
    assert order(run) == ["c", "e", "a", "b", "d"]
    asked = chat.requests[0].body["response_format"]["json_schema"]["schema"]
    assert asked == scale(name).schema


def test_candidates_and_top_k_cut_the_lists(tmp_path: Path, chat: LocalServer) -> None:
    run = reranked_run(tmp_path, llm(chat, write_prompt(tmp_path)), top_k=2, candidates=3)
    assert order(run) == ["c", "b"]  # of a, b, c only
    assert len(chat.requests) == 3


def test_a_second_run_makes_no_call_and_keeps_the_latency(
    tmp_path: Path, chat: LocalServer, capsys: pytest.CaptureFixture[str]
) -> None:
    reranker = llm(chat, write_prompt(tmp_path))
    first = reranked_run(tmp_path, reranker).queries["q"]
    assert capsys.readouterr().err == (
        "rerank (llm): 5 pairs, 5 scored now and 0 from the cache; 5 of 5 scored\n"
    )
    second = reranked_run(tmp_path, reranker).queries["q"]
    assert capsys.readouterr().err == (
        "rerank (llm): 5 pairs, 0 scored now and 5 from the cache; 5 of 5 scored\n"
    )
    assert len(chat.requests) == 5
    assert second.results == first.results
    assert second.latency_ms == first.latency_ms
    assert first.latency_ms is not None and first.latency_ms > 5.0


@pytest.mark.parametrize(
    "change",
    [{"scale": "1-5"}, {"temperature": 0.7}, {"model": "other"}, {"prompt": "edited"}],
)
def test_scores_are_cached_by_reranker_prompt_scale_and_sampling(
    tmp_path: Path, chat: LocalServer, change: dict[str, Any]
) -> None:
    prompt = write_prompt(tmp_path)
    reranked_run(tmp_path, llm(chat, prompt))
    if "prompt" in change:
        prompt.write_text("Please.\nQuery: {query}\nDocument: {document}\n{scale}\n")
        change = {}
    reranked_run(tmp_path, llm(chat, prompt, **change))
    assert len(chat.requests) == 10


def test_an_unreadable_answer_is_a_counted_failure_and_keeps_the_first_stages_order(
    tmp_path: Path, chat: LocalServer, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = {**TEXTS, "b": "sort UNREADABLE", "d": "CHATTY list"}
    kind = retriever_kind("rerank")
    settings = {
        "first": first_stage(tmp_path, texts),
        "reranker": llm(chat, write_prompt(tmp_path)),
    }
    retriever = kind.create(settings, RetrieverContext(None, tmp_path / "cache"))
    run = retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], 10)
    answer = run.queries["q"]
    assert answer.doc_ids == ("a", "b", "c", "d", "e")
    assert [r.score for r in answer.results] == [10.0, 9.0, 8.0, 7.0, 6.0]
    assert answer.error is None
    assert capsys.readouterr().err == (
        "rerank (llm): 5 pairs, 5 scored now and 0 from the cache; 3 of 5 scored; failed: "
        "2 unreadable answer (first: unreadable answer: not JSON: 'I think this passage is "
        "quite relevant.'); 1 of 1 query kept the first stage's order\n"
    )
    retriever = kind.create(settings, RetrieverContext(None, tmp_path / "cache"))
    retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], 10)
    assert len(chat.requests) == 5  # the unreadable answers come from the call cache


def test_a_failed_call_is_counted_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(lambda request: __import__("servers").Reply(400, {"error": "no"})) as server:
        run = reranked_run(tmp_path, llm(server, write_prompt(tmp_path), retries=0))
    assert order(run) == list(TEXTS)
    assert "failed: 5 http 400" in capsys.readouterr().err


def test_a_first_stage_failure_fails_the_query_naming_the_stage(tmp_path: Path) -> None:
    path = tmp_path / "first.jsonl"
    path.write_text(json.dumps({"query_id": "q", "results": [], "error": "timeout: 30 s"}) + "\n")
    kind = retriever_kind("rerank")
    settings = {
        "first": {"kind": "run", "path": str(path)},
        "reranker": {"type": "http", "url": "http://127.0.0.1:9/"},
    }
    retriever = kind.create(settings, RetrieverContext(None, tmp_path / "cache"))
    answer = retriever.retrieve([gold_query("q", (("e", 1),), text=QUERY)], 10).queries["q"]
    assert answer.error == "timeout (from first): 30 s"


# --- the http reranker ------------------------------------------------------------------


def test_the_http_reranker_speaks_llama_cpps_rerank(tmp_path: Path) -> None:
    with serve(OverlapRerank()) as server:
        run = reranked_run(tmp_path, {"type": "http", "url": server.url, "model": "m"})
    assert order(run) == ["e", "c", "b", "d", "a"]
    (request,) = server.requests
    assert request.body == {
        "query": QUERY,
        "documents": list(TEXTS.values()),
        "top_n": 5,
        "model": "m",
    }


def test_the_http_reranker_reads_teis_shape_through_fields(tmp_path: Path) -> None:
    fields = {"documents": "texts", "top_n": None, "relevance_score": "score"}
    with serve(OverlapRerank(tei=True)) as server:
        run = reranked_run(tmp_path, {"type": "http", "url": server.url, "fields": fields})
    assert order(run) == ["e", "c", "b", "d", "a"]
    assert server.requests[0].body == {"query": QUERY, "texts": list(TEXTS.values())}


def test_an_http_answer_missing_a_document_keeps_the_first_stages_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from servers import Reply

    def partial(request: Any) -> Reply:
        return Reply(payload={"results": [{"index": 0, "relevance_score": 0.5}]})

    with serve(partial) as server:
        run = reranked_run(tmp_path, {"type": "http", "url": server.url})
    assert order(run) == list(TEXTS)
    assert "failed: 5 malformed response (first: malformed response: no score for document 1)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("reranker", "reason"),
    [
        (
            {"type": "colbert"},
            "unknown reranker type 'colbert'; valid types: cross-encoder, llm, http",
        ),
        (
            {"url": "http://x"},
            "must be a mapping with a `type` key (cross-encoder, llm, http), got {'url': 'http://x'}",
        ),
        (
            {"type": "http", "url": "http://x", "fields": {"hits": "x"}},
            "fields: unknown field 'hits' (valid: query, documents, top_n, results, index, "
            "relevance_score)",
        ),
        (
            {"type": "llm", "base_url": "http://x/v1", "model": "m", "prompt": "nowhere.txt"},
            "prompt: no such prompt file: nowhere.txt",
        ),
        (
            {
                "type": "llm",
                "base_url": "http://x/v1",
                "model": "m",
                "prompt": "p",
                "scale": "1-10",
            },
            "scale: must be one of 0-100, 1-5, binary, got '1-10'",
        ),
    ],
)
def test_reranker_settings_are_checked_naming_the_key(
    tmp_path: Path, reranker: dict[str, Any], reason: str
) -> None:
    settings = {"first": first_stage(tmp_path), "reranker": reranker}
    with pytest.raises(InputError) as caught:
        retriever_kind("rerank").checked(settings)
    assert (caught.value.key, caught.value.reason) == ("reranker", reason)


def test_a_rerank_cannot_be_its_own_first_stage(tmp_path: Path) -> None:
    inner = {
        "kind": "rerank",
        "first": first_stage(tmp_path),
        "reranker": {"type": "http", "url": "http://x"},
    }
    with pytest.raises(InputError) as caught:
        retriever_kind("rerank").checked(
            {"first": inner, "reranker": {"type": "http", "url": "http://x"}}
        )
    assert (caught.value.key, caught.value.reason) == (
        "first",
        "a rerank cannot rerank another rerank",
    )


# --- on the demo, through the command line ----------------------------------------------


def expected_order(queries: Sequence[str], tmp_path: Path) -> list[list[str]]:
    """BM25's top 20 of each query, sorted by word overlap (ties in BM25's order), top 10."""
    bm25 = retriever_kind("bm25").create({}, RetrieverContext(CORPUS, tmp_path / "bm25"))
    gold = [gold_query(f"q{n}", text=text) for n, text in enumerate(queries)]
    run = bm25.retrieve(gold, 20)
    return [
        [
            r.doc_id
            for r in sorted(
                run.queries[g.query_id].results, key=lambda r: -overlap_score(g.query, r.text or "")
            )
        ][:10]
        for g in gold
    ]


def test_retrieve_and_gate_rerank_bm25s_top_20_on_the_demo(
    tmp_path: Path, chat: LocalServer, cli: Cli
) -> None:
    project = write_project(tmp_path, rerank_section(llm(chat, write_prompt(tmp_path))), queries=4)
    code, _, err = cli("retrieve", "--config", project.config, "--out", tmp_path / "run.jsonl")
    assert code == 0, err
    assert "rerank (llm): 80 pairs, 80 scored now and 0 from the cache; 80 of 80 scored" in err
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [[r["doc_id"] for r in line["results"]] for line in lines] == expected_order(
        project.texts, tmp_path
    )
    code, out, err = cli(
        "gate", "--config", project.config, "--criteria", project.criteria, "--out", project.out
    )
    assert code == 0, out + err
    assert "80 scored now" not in err and "0 scored now and 80 from the cache" in err
    assert len(chat.requests) == 80
    assert project.report()["gates"][0]["status"] == "pass"


def test_the_http_reranker_runs_through_retrieve_gate_and_experiment_on_the_demo(
    tmp_path: Path, cli: Cli
) -> None:
    with serve(OverlapRerank()) as server:
        section = rerank_section({"type": "http", "url": server.url})
        project = write_project(tmp_path, section, queries=4)
        code, _, err = cli("retrieve", "--config", project.config, "--out", tmp_path / "run.jsonl")
        assert code == 0, err
        lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
        assert [[r["doc_id"] for r in line["results"]] for line in lines] == expected_order(
            project.texts, tmp_path
        )
        code, out, err = cli(
            "gate", "--config", project.config, "--criteria", project.criteria, "--out", project.out
        )
        assert code == 0, out + err
        text = project.config.read_text(encoding="utf-8")
        variants = "variants:\n  - name: bm25\n    retriever: {kind: bm25}\n  - name: reranked\n"
        project.config.write_text(text + variants, encoding="utf-8")
        code, out, err = cli("experiment", project.config, "--out", tmp_path / "experiment")
        assert code == 0, out + err
    assert len(server.requests) == 4  # one a query, in the first run: then the cache
    assert "rerank (http): 80 pairs, 0 scored now and 80 from the cache; 80 of 80 scored" in err
    table = json.loads((tmp_path / "experiment" / "experiment.json").read_text())
    assert {row["name"] for row in table["variants"]} == {"bm25", "reranked"}


def test_pairs_the_reranker_failed_on_are_counted_in_report_json_and_report_md(
    tmp_path: Path, cli: Cli
) -> None:
    """A chat endpoint that answers no score: every pair fails, every query keeps BM25's
    order, and the report says so with the first reason, as it does a retriever's."""
    answer = {"choices": [{"message": {"content": "I cannot rate this."}}]}
    with serve(lambda request: Reply(payload=answer)) as server:
        reranker = llm(server, write_prompt(tmp_path), retries=0)
        project = write_project(tmp_path, rerank_section(reranker), queries=4)
        code, out, err = cli(
            "gate", "--config", project.config, "--criteria", project.criteria, "--out", project.out
        )
    assert code == 0, out + err
    reason = "unreadable answer: not JSON: 'I cannot rate this.'"
    assert project.report()["queries"]["rerank_failed"] == {
        "pairs": 80,
        "queries": [q["query_id"] for q in project.queries],
        "by_kind": {"unreadable answer": 80},
        "causes": [{"pairs": 80, "cause": reason}],
    }
    markdown = (project.out / "report.md").read_text(encoding="utf-8")
    assert (
        "The reranker could not score 80 pairs (80 unreadable answer) on 4 gold queries, "
        f"which kept the first stage's order; the first reason: {reason}."
    ) in " ".join(markdown.split())


def test_a_run_the_reranker_scored_whole_has_no_rerank_failures(
    tmp_path: Path, chat: LocalServer, cli: Cli
) -> None:
    project = write_project(tmp_path, rerank_section(llm(chat, write_prompt(tmp_path))), queries=2)
    code, out, err = cli(
        "gate", "--config", project.config, "--criteria", project.criteria, "--out", project.out
    )
    assert code == 0, out + err
    assert project.report()["queries"]["rerank_failed"] is None
    assert "reranker could not" not in (project.out / "report.md").read_text(encoding="utf-8")
