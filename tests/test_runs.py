from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_eval.errors import ExitCode, InputError
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.runs_io import detect_format, dump_jsonl, load_run, load_trec_scores


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_run(tmp_path: Path) -> None:
    path = write(
        tmp_path / "run.jsonl",
        '{"query_id": "q1", "results": [{"doc_id": "d3", "score": 0.1, "text": "third"},'
        ' {"doc_id": "d1", "score": 9}, {"doc_id": "d2"}], "latency_ms": 18.5}\n'
        "\n"
        '{"query_id": "q2", "results": [], "latency_ms": 7, "model": "ignored"}\n',
    )
    run = load_run(path)
    assert run == Run(
        {
            "q1": QueryResults(
                "q1",
                (
                    RankedResult("d3", 0.1, "third"),
                    RankedResult("d1", 9.0),
                    RankedResult("d2"),
                ),
                18.5,
            ),
            "q2": QueryResults("q2", (), 7.0),
        }
    )
    assert run.ranked() == {"q1": ("d3", "d1", "d2"), "q2": ()}
    assert isinstance(run.queries["q2"].latency_ms, float)


def test_jsonl_run_keeps_a_repeated_document(tmp_path: Path) -> None:
    path = write(
        tmp_path / "run.jsonl",
        '{"query_id": "q1", "results": ["d1", {"doc_id": "d2"}, "d1"]}\n',
    )
    run = load_run(path, "jsonl")
    assert run.ranked() == {"q1": ("d1", "d2", "d1")}
    assert run.queries["q1"].latency_ms is None


def test_jsonl_run_accepts_plain_doc_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", '{"query_id": "q1", "results": ["b", "a", "c"]}\n')
    assert load_run(path).queries["q1"].results == (
        RankedResult("b"),
        RankedResult("a"),
        RankedResult("c"),
    )


@pytest.mark.parametrize(
    "ids", [["b", "a", "c"], ["only"], [], ["a\u0000b", "c"], ["\u0000", "x\u0000"], ["é", "日本"]]
)
def test_jsonl_run_of_ids_reads_back_every_id_as_written(tmp_path: Path, ids: list[str]) -> None:
    # The ids are held joined by NUL; an id holding NUL is kept apart, never split.
    line = json.dumps({"query_id": "q1", "results": ids}) + "\n"
    run = load_run(write(tmp_path / "run.jsonl", line))
    results = run.queries["q1"].results
    assert run.queries["q1"].doc_ids == tuple(ids)
    assert len(results) == len(ids) and list(results) == [RankedResult(i) for i in ids]
    assert results[-1:] == tuple(RankedResult(i) for i in ids[-1:])
    assert run.ranked() == {"q1": tuple(ids)} and "q1" in run.ranked()


def test_jsonl_run_mixes_plain_doc_ids_and_objects(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", '{"query_id": "q1", "results": ["b", {"doc_id": "a"}]}\n')
    assert load_run(path).queries["q1"].results == (RankedResult("b"), RankedResult("a"))


def test_jsonl_run_with_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"query_id": "q1", "results": ["a"]}\r\n{"query_id": "q2", "results": []}\r\n'
    )
    assert load_run(path).ranked() == {"q1": ("a",), "q2": ()}


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ('{"results": []}', 1, "query_id: missing or not a non-empty string"),
        ('{"query_id": "", "results": []}', 1, "query_id: missing or not a non-empty string"),
        ('{"query_id": 3, "results": []}', 1, "query_id: missing or not a non-empty string"),
        ('{"query_id": "q1"}', 1, "results: missing or not a list"),
        ('{"query_id": "q1", "results": {"d1": 1.0}}', 1, "results: missing or not a list"),
        ('{"query_id": "q1", "results": "d1"}', 1, "results: missing or not a list"),
        (
            '{"query_id": "q1", "results": [{"doc_id": "d1", "score": "high"}]}',
            1,
            'results[0].score: must be a number, got "high"',
        ),
        (
            '{"query_id": "q1", "results": [{"doc_id": "d1"}, {"doc_id": "d2", "score": NaN}]}',
            1,
            "results[1].score: must be a number, got NaN",
        ),
        (
            '{"query_id": "q1", "results": [{"doc_id": "d1", "score": Infinity}]}',
            1,
            "results[0].score: must be a number, got Infinity",
        ),
        (
            '{"query_id": "q1", "results": [{"doc_id": "d1", "score": true}]}',
            1,
            "results[0].score: must be a number, got true",
        ),
        (
            '{"query_id": "q1", "results": ["d1", "d2", ""]}',
            1,
            "results[2]: a doc id must be a non-empty string",
        ),
        (
            '{"query_id": "q1", "results": ["d1", {"doc_id": ""}]}',
            1,
            "results[1].doc_id: missing or not a non-empty string",
        ),
        (
            '{"query_id": "q1", "results": ["d1", 5]}',
            1,
            "results[1]: must be an object with a doc_id, or a doc id string",
        ),
        (
            '{"query_id": "q1", "results": [{"score": 1.0}]}',
            1,
            "results[0].doc_id: missing or not a non-empty string",
        ),
        (
            '{"query_id": "q1", "results": [{"doc_id": 12}]}',
            1,
            "results[0].doc_id: missing or not a non-empty string",
        ),
        (
            '{"query_id": "q1", "results": [{"doc_id": "d1", "text": 3}]}',
            1,
            "results[0].text: must be a string",
        ),
        (
            '{"query_id": "q1", "results": [], "latency_ms": "fast"}',
            1,
            'latency_ms: must be a number, got "fast"',
        ),
        (
            '{"query_id": "q1", "results": []}\n{"query_id": "q1", "results": [}',
            2,
            "invalid JSON: Expecting value (column 32)",
        ),
        ('{"query_id": "q1", "results": []}\n["q2"]', 2, "expected a JSON object, got an array"),
        (
            '{"query_id": "q1", "results": []}\n\n{"query_id": "q2", "results": []}\n'
            '{"query_id": "q1", "results": ["d1"]}',
            4,
            "query_id: duplicate query_id 'q1' (first at line 1)",
        ),
        (
            '{"query_id": "q2", "results": []}\n{"query_id": "q3", "results": []}\n'
            '{"query_id": "q1", "results": []}\n{"query_id": "q3", "results": ["d"]}',
            4,
            "query_id: duplicate query_id 'q3' (first at line 2)",
        ),
    ],
)
def test_jsonl_run_errors(tmp_path: Path, lines: str, line: int, message: str) -> None:
    path = write(tmp_path / "run.jsonl", lines + "\n")
    with pytest.raises(InputError) as info:
        load_run(path)
    assert str(info.value) == f"{path}:{line}: {message}"
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_trec_run_ranks_by_score_and_ignores_the_rank_column(tmp_path: Path) -> None:
    path = write(
        tmp_path / "run.trec",
        "q1 Q0 a 1 1.0 bm25\n"
        "q1 Q0 c 2 2.5 bm25\n"
        "q1 Q0 b 3 2.5 bm25\n"
        "q1 Q0 d 4 -3 bm25\n"
        "q1 Q0 e 5 7e-1 bm25\n"
        "q2 Q0 x 1 0 bm25\n",
    )
    run = load_run(path)
    assert run.ranked() == {"q1": ("c", "b", "a", "e", "d"), "q2": ("x",)}
    assert run.queries["q1"].results[0] == RankedResult("c", 2.5)
    assert run.queries["q1"].latency_ms is None


@pytest.mark.parametrize(
    ("doc_ids", "expected"),
    [
        (["d1", "d2", "d10"], ("d2", "d10", "d1")),
        (["B", "a", "A", "b"], ("b", "a", "B", "A")),
        (["z", "\u00e9", "e"], ("\u00e9", "z", "e")),
        (["\u00e9", "\U0001f600", "\uffff"], ("\U0001f600", "\uffff", "\u00e9")),
        (["doc-1", "doc_1", "doc.1"], ("doc_1", "doc.1", "doc-1")),
    ],
)
def test_trec_run_breaks_ties_by_doc_id_descending(
    tmp_path: Path, doc_ids: list[str], expected: tuple[str, ...]
) -> None:
    path = write(
        tmp_path / "run.trec",
        "".join(f"q1 Q0 {doc} {rank} 1.5 tag\n" for rank, doc in enumerate(doc_ids, 1)),
    )
    assert load_run(path, "trec").ranked() == {"q1": expected}
    assert sorted(doc.encode() for doc in expected) == [doc.encode() for doc in expected[::-1]]


def test_trec_run_tolerates_extra_columns_bom_crlf_and_tabs(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_bytes(b"\xef\xbb\xbfq1 Q0 a 1 1.0 tag extra more\r\n\r\nq1\tQ0\tb\t2\t2.0\ttag\r\n")
    assert load_run(path).ranked() == {"q1": ("b", "a")}


def test_trec_scores(tmp_path: Path) -> None:
    path = write(tmp_path / "run.trec", "q1 Q0 a 1 1.5 t\nq2 Q0 a 1 -2 t\nq1 Q0 b 2 3 t\n")
    assert load_trec_scores(path) == {"q1": {"a": 1.5, "b": 3.0}, "q2": {"a": -2.0}}


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ("q1 Q0 a 1 1.0\n", 1, "expected 6 columns `query_id Q0 doc_id rank score tag`, got 5"),
        (
            "q1 Q0 a 1 1.0 t\nq1 a 1.0\n",
            2,
            "expected 6 columns `query_id Q0 doc_id rank score tag`, got 3",
        ),
        ("q1 Q0 a 1 high t\n", 1, "score must be a number, got 'high'"),
        ("q1 Q0 a 1 1,5 t\n", 1, "score must be a number, got '1,5'"),
        ("q1 Q0 a 1 nan t\n", 1, "score must be a finite number, got 'nan'"),
        ("q1 Q0 a 1 inf t\n", 1, "score must be a finite number, got 'inf'"),
        ("q1 Q0 a 1 NaN t\n", 1, "score must be a finite number, got 'NaN'"),
        (
            "q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\n\nq1 Q0 a 2 0.5 t\n",
            4,
            "document 'a' is listed twice for query 'q1'",
        ),
    ],
)
def test_trec_run_errors(tmp_path: Path, lines: str, line: int, message: str) -> None:
    path = write(tmp_path / "run.trec", lines)
    with pytest.raises(InputError) as info:
        load_run(path)
    assert str(info.value) == f"{path}:{line}: {message}"
    assert info.value.exit_code == ExitCode.BAD_INPUT


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "jsonl"),
        (b"\n\n", "jsonl"),
        (b'{"query_id": "q1", "results": []}\n', "jsonl"),
        (b'\n  {"query_id": "q1", "results": []}\n', "jsonl"),
        (b'\xef\xbb\xbf{"query_id": "q1", "results": []}\r\n', "jsonl"),
        (b"q1 Q0 a 1 1.0 t\n", "trec"),
        (b"\n\nq1 Q0 a 1 1.0 t\n", "trec"),
        (b"\xef\xbb\xbfq1 Q0 a 1 1.0 t\r\n", "trec"),
    ],
)
def test_detect_format(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "run"
    path.write_bytes(content)
    assert detect_format(path) == expected


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", '{"query_id": "q1", "results": []}\n')
    with pytest.raises(InputError) as info:
        load_run(path, "trec")
    assert str(info.value) == (
        f"{path}:1: expected 6 columns `query_id Q0 doc_id rank score tag`, got 4"
    )


@pytest.mark.parametrize("content", ["", "\n \n", "\ufeff"])
@pytest.mark.parametrize("run_format", ["auto", "jsonl", "trec"])
def test_a_run_without_queries_is_an_error(tmp_path: Path, content: str, run_format: str) -> None:
    """Every gold query would score 0 as missing: that is a broken run, not a result."""
    path = write(tmp_path / "run.jsonl", content)
    with pytest.raises(InputError) as info:
        load_run(path, run_format)  # type: ignore[arg-type]
    assert str(info.value) == f"{path}: the run file has no queries"


def test_missing_run_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_run(tmp_path / "run.jsonl")
    assert str(info.value) == f"{tmp_path / 'run.jsonl'}: no such file"


def test_an_empty_doc_id_string_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"query_id": "q1", "results": ["a", ""]}\n')
    with pytest.raises(InputError) as info:
        load_run(path)
    assert str(info.value) == f"{path}:1: results[1]: a doc id must be a non-empty string"


def test_a_json_array_line_is_read_as_jsonl_and_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('["q1"]\n')
    with pytest.raises(InputError) as info:
        load_run(path)
    assert str(info.value) == f"{path}:1: expected a JSON object, got an array"


def test_failures_abstentions_and_page_fields_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(
        '{"query_id": "q1", "results": [{"doc_id": "d1", "score": 2.5, "text": "t", '
        '"document": "Manual.pdf", "page": 45}], "latency_ms": 12.5}\n'
        '{"query_id": "q2", "results": [], "error": "timeout after 5.0 s"}\n'
        '{"query_id": "q3", "results": [], "abstain": true}\n'
    )
    run = load_run(path)
    assert run.queries["q1"].results[0] == RankedResult("d1", 2.5, "t", "Manual.pdf", 45)
    assert run.failed() == {"q2": "timeout after 5.0 s"}
    assert run.queries["q3"].abstained
    assert set(run.ranked()) == {"q1", "q3"}  # a failure has no ranking to judge
    copy = tmp_path / "copy.jsonl"
    copy.write_text(dump_jsonl(run))
    assert load_run(copy) == run


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"query_id": "q", "results": ["d"], "error": "boom"}',
            "error: a failed query cannot also have results",
        ),
        (
            '{"query_id": "q", "results": [], "error": ""}',
            "error: must be a non-empty string saying why the query failed",
        ),
        ('{"query_id": "q", "results": [], "abstain": "yes"}', "abstain: must be true or false"),
        (
            '{"query_id": "q", "results": [{"doc_id": "d", "page": "4"}]}',
            'results[0].page: must be a whole number, got "4"',
        ),
    ],
)
def test_failure_and_page_field_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(InputError) as info:
        load_run(path)
    assert str(info.value) == f"{path}:1: {message}"


def test_usual_lines_read_as_every_line_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reading of a line of ids and a float latency is the full reading's, and any
    other line goes to it: an integer latency, a null one, an answer, objects as
    results, no results, a failure, an abstention."""
    from llm_eval import runs_io

    lines = [
        {"query_id": "q1", "results": ["d1", "d2"], "latency_ms": 20.5},
        {"query_id": "q2", "results": ["d3"], "latency_ms": 20},
        {"query_id": "q3", "results": ["d1"], "latency_ms": None},
        {"query_id": "q4", "results": ["d1"], "answer": "an answer"},
        {"query_id": "q5", "results": [{"doc_id": "d1", "score": 1.5}, "d2"]},
        {"query_id": "q6", "results": []},
        {"query_id": "q7", "results": [], "error": "timeout"},
        {"query_id": "q8", "results": ["d9"], "abstain": True},
        {"query_id": "q9", "results": ["dé", "d\u0000x"]},
    ]
    path = write(tmp_path / "run.jsonl", "".join(json.dumps(r) + "\n" for r in lines))
    gold_ids = [f"q{i}" for i in range(1, 10)]
    usual = load_run(path, query_ids=gold_ids)
    monkeypatch.setattr(runs_io, "_usual_line", lambda *_: None)
    assert load_run(path, query_ids=gold_ids) == usual
    assert all(usual.queries[q].query_id is q for q in gold_ids)  # the gold's strings
    assert usual.queries["q2"].latency_ms == 20.0 and usual.queries["q8"].abstained


@pytest.mark.parametrize("latency", ["NaN", "Infinity", '"fast"', "true"])
def test_a_bad_latency_is_refused_on_the_usual_path_too(tmp_path: Path, latency: str) -> None:
    path = write(
        tmp_path / "run.jsonl",
        f'{{"query_id": "q1", "results": ["d1"], "latency_ms": {latency}}}\n',
    )
    with pytest.raises(InputError, match="latency_ms: must be a number"):
        load_run(path)


@pytest.mark.parametrize("results", ['["d1", ""]', '["d1", 3]', '["d1", null]', '[["d1"]]'])
def test_an_odd_result_is_refused_as_the_full_reading_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, results: str
) -> None:
    """An empty id, a number, a null or a list among the ids leaves the usual reading,
    and is named by the full one."""
    from llm_eval import runs_io

    path = write(tmp_path / "run.jsonl", f'{{"query_id": "q1", "results": {results}}}\n')
    with pytest.raises(InputError) as usual:
        load_run(path)
    monkeypatch.setattr(runs_io, "_usual_line", lambda *_: None)
    with pytest.raises(InputError) as full:
        load_run(path)
    assert str(usual.value) == str(full.value)
    assert "results[" in str(usual.value)
