"""The fusion kind: reciprocal-rank and weighted-score fusion of real component
retrievers (run files and BM25), checked against hand-worked values."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli, gold_query
from servers import CORPUS, write_project

from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.retrieval import count_errors
from llm_eval.retrievers import RetrieverContext, retriever_kind
from llm_eval.retrievers.fusion import Component, FusionRetriever
from llm_eval.runs import QueryResults, RankedResult, Run


def run_file(path: Path, answers: Mapping[str, Any]) -> str:
    lines = []
    for query_id, answer in answers.items():
        if isinstance(answer, str):
            lines.append({"query_id": query_id, "error": answer, "results": []})
            continue
        results = [
            {"doc_id": d} if s is None else {"doc_id": d, "score": s} for d, s in answer["results"]
        ]
        lines.append({"query_id": query_id, "results": results, "latency_ms": answer["ms"]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def fused(tmp_path: Path, components: Mapping[str, Any], top_k: int = 10, **settings: Any) -> Run:
    entries = {
        name: {"kind": "run", "path": run_file(tmp_path / f"{name}.jsonl", answers)}
        for name, answers in components.items()
    }
    kind = retriever_kind("fusion")
    retriever = kind.create(
        {"retrievers": entries, **settings}, RetrieverContext(None, tmp_path / "cache")
    )
    ids: Sequence[str] = sorted({q for answers in components.values() for q in answers})
    return retriever.retrieve([gold_query(q, (("a", 1),)) for q in ids], top_k)


TWO = {
    "lex": {"q": {"results": [("a", 9.0), ("b", 5.0), ("c", 1.0)], "ms": 2.0}},
    "dense": {"q": {"results": [("c", 0.9), ("a", 0.8), ("d", 0.2)], "ms": 5.0}},
}


def test_reciprocal_rank_fusion_by_hand(tmp_path: Path) -> None:
    answer = fused(tmp_path, TWO, rrf_k=60).queries["q"]
    # a: 1/61 + 1/62; c: 1/63 + 1/61; b: 1/62; d: 1/63
    expected = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62, "d": 1 / 63}
    assert answer.doc_ids == ("a", "c", "b", "d")
    assert [r.score for r in answer.results] == pytest.approx([expected[d] for d in "acbd"])
    assert answer.latency_ms == pytest.approx(7.0)  # asked one after another


def test_weights_move_the_fused_order(tmp_path: Path) -> None:
    answer = fused(tmp_path, TWO, weights={"lex": 0.1, "dense": 1.0}).queries["q"]
    # c: 0.1/63 + 1/61 beats a: 0.1/61 + 1/62
    assert answer.doc_ids[:2] == ("c", "a")
    only_lex = fused(tmp_path, TWO, weights={"lex": 1.0}).queries["q"]
    assert only_lex.doc_ids[:3] == ("a", "b", "c")  # dense weighs 0; d is last with 0
    assert only_lex.results[3].score == 0.0


def test_weighted_minmax_fusion_by_hand(tmp_path: Path) -> None:
    answer = fused(
        tmp_path, TWO, top_k=3, method="weighted", weights={"lex": 0.3, "dense": 0.7}
    ).queries["q"]
    # lex minmax: a 1, b 0.5, c 0; dense: c 1, a 6/7, d 0
    expected = {"a": 0.3 + 0.7 * 6 / 7, "b": 0.3 * 0.5, "c": 0.7, "d": 0.0}
    assert answer.doc_ids == ("a", "c", "b")  # top_k = 3
    assert [r.score for r in answer.results] == pytest.approx([expected[d] for d in "acb"])


def test_weighted_zscore_fusion_by_hand(tmp_path: Path) -> None:
    answer = fused(tmp_path, TWO, method="weighted", normalization="zscore").queries["q"]
    lex = [9.0, 5.0, 1.0]
    dense = [0.9, 0.8, 0.2]

    def z(values: list[float]) -> list[float]:
        mean = sum(values) / len(values)
        sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        return [(v - mean) / sd for v in values]

    zl, zd = z(lex), z(dense)
    expected = {"a": zl[0] + zd[1], "b": zl[1], "c": zl[2] + zd[0], "d": zd[2]}
    ranked = sorted(expected, key=lambda d: -expected[d])
    assert answer.doc_ids == tuple(ranked)
    assert [r.score for r in answer.results] == pytest.approx([expected[d] for d in ranked])


def test_ties_go_to_the_best_rank_then_the_id(tmp_path: Path) -> None:
    same = {
        "one": {"q": {"results": [("b", 1.0), ("a", 1.0)], "ms": 1.0}},
        "two": {"q": {"results": [("a", 1.0), ("b", 1.0)], "ms": 1.0}},
    }
    assert fused(tmp_path, same).queries["q"].doc_ids == ("a", "b")
    repeated = {
        "one": {"q": {"results": [("a", 3.0), ("a", 2.0), ("b", 1.0)], "ms": 1.0}},
        "two": {"q": {"results": [("b", 1.0)], "ms": 1.0}},
    }
    answer = fused(tmp_path, repeated).queries["q"]
    # The repeat of a is dropped, so b is rank 2 in `one`: b = 1/62 + 1/61 > a = 1/61
    assert answer.doc_ids == ("b", "a")


def test_a_component_failure_fails_the_query_naming_it(tmp_path: Path) -> None:
    components = {
        "lex": {"q": {"results": [("a", 1.0)], "ms": 1.0}, "r": "timeout: 5 s"},
        "dense": {"q": {"results": [("a", None)], "ms": 1.0}, "r": {"results": [], "ms": 1.0}},
    }
    run = fused(tmp_path, components)
    assert run.queries["r"].error == "timeout (from lex): 5 s"
    assert run.queries["q"].error is None
    weighted = fused(tmp_path, components, method="weighted")
    assert weighted.queries["q"].error == (
        "no score (from dense): result 1 has none; weighted fusion needs scores"
    )
    # The summary of a failed run counts the failures by kind, component included.
    assert count_errors([weighted.queries["q"].error or "", run.queries["r"].error or ""]) == (
        "1 no score (from dense), 1 timeout (from lex)"
    )


@dataclass(frozen=True)
class Scored:
    """A component answering every query with the given scores (a score that is not a
    finite number can come from a model's vectors; the file readers refuse one)."""

    scores: tuple[float, ...]
    cache_identity: None = None

    def retrieve(self, queries: Sequence[GoldQuery], top_k: int, *_: Any) -> Run:
        results = tuple(RankedResult(f"d{i}", s) for i, s in enumerate(self.scores))
        return Run({q.query_id: QueryResults(q.query_id, results, 1.0) for q in queries})


def test_a_score_that_is_not_finite_fails_weighted_fusion_naming_it() -> None:
    components = (
        Component("lex", Scored((2.0, 1.0)), 1.0),
        Component("dense", Scored((1.0, math.nan)), 1.0),
    )
    fusion = FusionRetriever(components, "weighted", 60.0, "minmax", None)
    answer = fusion.retrieve([gold_query("q", (("d0", 1),))], 5).queries["q"]
    assert answer.error == (
        "non-finite score (from dense): result 2 scores nan; weighted fusion needs finite scores"
    )


@pytest.mark.parametrize(
    ("settings", "key", "reason"),
    [
        ({"retrievers": {"only": {"kind": "bm25"}}}, "retrievers", "two or more"),
        (
            {"retrievers": {"x": {"kind": "bm25", "k1": -1}, "y": {"kind": "bm25"}}},
            "retrievers.x.k1",
            "must be a number >= 0",
        ),
        (
            {"retrievers": {"x": {"kind": "nope"}, "y": {"kind": "bm25"}}},
            "retrievers.x.kind",
            "unknown retriever kind 'nope'",
        ),
        (
            {"retrievers": {"x": {"kind": "bm25"}, "y": {"kind": "fusion"}}},
            "retrievers.y.kind",
            "a fusion cannot contain another fusion",
        ),
        (
            {"retrievers": {"x": {"kind": "bm25"}, "y": {"kind": "bm25"}}, "method": "max"},
            "method",
            "must be one of rrf, weighted",
        ),
        (
            {"retrievers": {"x": {"kind": "bm25"}, "y": {"kind": "bm25"}}, "weights": {"x": -1}},
            "weights",
            "x: must be a number >= 0",
        ),
    ],
)
def test_bad_settings_name_their_key(settings: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        retriever_kind("fusion").checked(settings)
    assert caught.value.key == key
    assert reason in caught.value.reason


def test_a_weight_for_no_component_is_an_error(tmp_path: Path) -> None:
    settings = {
        "retrievers": {"x": {"kind": "bm25"}, "y": {"kind": "bm25"}},
        "weights": {"z": 1.0},
    }
    with pytest.raises(InputError, match="'z' is not a component"):
        retriever_kind("fusion").create(settings, RetrieverContext(CORPUS, tmp_path))


def test_fusion_in_the_config_runs_the_gate_and_points_at_bad_settings(
    tmp_path: Path, cli: Cli
) -> None:
    given = tmp_path / "given.jsonl"
    retriever = {
        "kind": "fusion",
        "retrievers": {"lexical": {"kind": "bm25"}, "given": {"kind": "run", "path": str(given)}},
    }
    project = write_project(tmp_path, retriever, queries=4)
    ids = [q["query_id"] for q in project.queries]
    run_file(given, {q: {"results": [("builtins.sorted#0", 2.0)], "ms": 3.0} for q in ids[:3]})
    args = ["gate", "--config", str(project.config), "--criteria", str(project.criteria)]
    code, _, err = cli(*args)
    assert code == 4  # a query `given` does not answer fails, never scored as empty
    assert "1 no answer (from given)" in err
    run_file(given, {q: {"results": [("builtins.sorted#0", 2.0)], "ms": 3.0} for q in ids})
    code, out, _ = cli(*args, "--format", "json")
    assert code in (0, 1)
    report = json.loads(out)
    assert report["queries"]["failed"] == {}
    assert report["exit_code"] in (0, 1)
    bad = {**retriever, "retrievers": {"lexical": {"kind": "bm25", "b": 3}, "given": {}}}
    project = write_project(tmp_path, bad, queries=4)
    code, _, err = cli(*args)
    assert code == 3
    # The setting's own line, below the component's.
    assert err == (
        f"llm-eval: error: {project.config}:8: retriever.retrievers.lexical.b: "
        "must be a number from 0 to 1, got 3\n"
    )
