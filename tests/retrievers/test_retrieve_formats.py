"""`llm-eval retrieve --format trec` and `--no-text`: run files for other tools, and
a JSONL run without the passages' text, each scoring as the full JSONL run does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, Cli

from llm_eval.errors import InputError
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.runs_io import dump_trec, load_run

METRICS = ["recall@5", "recall@10", "mrr", "ndcg@10", "map@10", "precision@5", "hit_rate@5"]
GOLD = ["gold/python-docs-A.jsonl", "gold/python-docs-B.jsonl"]


def evaluate(cli: Cli, run: Path) -> dict[str, object]:
    gold = [arg for path in GOLD for arg in ("--gold", path)]
    metrics = [arg for metric in METRICS for arg in ("-m", metric)]
    code, out, err = cli(
        "evaluate", *gold, "--run", run, *metrics, "--per-query", "--format", "json"
    )
    assert (code, err) == (0, "")
    document: dict[str, object] = json.loads(out)
    return document


def test_a_trec_run_and_a_textless_run_score_as_the_jsonl_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    monkeypatch.chdir(REPO)
    runs = {"jsonl": tmp_path / "run.jsonl", "trec": tmp_path / "run.trec"}
    for name, path in runs.items():
        assert cli("retrieve", "--out", path, "--format", name)[0] == 0
    bare = tmp_path / "bare.jsonl"
    assert cli("retrieve", "--out", bare, "--no-text")[0] == 0
    first = runs["trec"].read_text().splitlines()[0].split()
    assert first[1::2] == ["Q0", "1", "bm25"] and len(first) == 6
    full = evaluate(cli, runs["jsonl"])
    assert evaluate(cli, runs["trec"]) == full
    assert evaluate(cli, bare) == full
    assert len(full["per_query"]) > 300  # type: ignore[arg-type]
    assert '"text"' in runs["jsonl"].read_text() and '"text"' not in bare.read_text()
    assert bare.stat().st_size < runs["jsonl"].stat().st_size / 3
    ranked = {q: r.doc_ids for q, r in load_run(runs["jsonl"]).queries.items() if r.results}
    assert {q: r.doc_ids for q, r in load_run(runs["trec"]).queries.items()} == ranked


def run_of(*queries: tuple[str, list[tuple[str, float | None]]]) -> Run:
    return Run(
        {
            qid: QueryResults(qid, tuple(RankedResult(doc, score) for doc, score in results))
            for qid, results in queries
        }
    )


@pytest.mark.parametrize(
    ("results", "scores", "replaced"),
    [
        # scores that give back the list's order are written as they are
        ([("a", 3.5), ("b", 2.0), ("c", 1.0)], ["3.5", "2.0", "1.0"], 0),
        # a tie is broken by doc id descending: "b" before "a" keeps the scores
        ([("b", 1.0), ("a", 1.0)], ["1.0", "1.0"], 0),
        # ... "a" before "b" would come back reversed: rank-derived scores
        ([("a", 1.0), ("b", 1.0)], ["2.0", "1.0"], 1),
        # a reranker's order that its scores disagree with
        ([("a", 0.1), ("b", 0.9)], ["2.0", "1.0"], 1),
        # no scores at all
        ([("a", None), ("b", None), ("c", None)], ["3.0", "2.0", "1.0"], 1),
        # equal in single precision, which trec_eval compares
        ([("a", 1.0 + 1e-12), ("b", 1.0)], ["2.0", "1.0"], 1),
    ],
)
def test_trec_scores_keep_the_ranking(
    tmp_path: Path, results: list[tuple[str, float | None]], scores: list[str], replaced: int
) -> None:
    text, count = dump_trec(run_of(("q1", results)), "tag")
    assert count == replaced
    assert [line.split()[4] for line in text.splitlines()] == scores
    path = tmp_path / "run.trec"
    path.write_text(text)
    assert load_run(path).queries["q1"].doc_ids == tuple(doc for doc, _ in results)


def test_a_repeated_document_is_written_once_at_its_first_rank() -> None:
    text, _ = dump_trec(run_of(("q1", [("a", 3.0), ("b", 2.0), ("a", 1.0)])), "t")
    assert text == "q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\n"


def test_an_id_with_whitespace_cannot_be_written_as_trec() -> None:
    with pytest.raises(InputError) as caught:
        dump_trec(run_of(("q 1", [("a", 1.0)])), "t")
    assert str(caught.value) == (
        "id 'q 1' holds whitespace or is empty: a TREC run file cannot hold it; write JSONL"
    )
