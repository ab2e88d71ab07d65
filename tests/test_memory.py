"""What the gate's inputs hold per query, in bytes (tracemalloc: deterministic, no timing).

The budgets are what lets a gate over a million queries fit in memory; each sits above
what the code holds, and below what it held before (in brackets).
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llm_eval.gold_io import load_gold
from llm_eval.matching import match_run
from llm_eval.runs_io import load_run
from llm_eval.score_columns import ScoreColumns
from llm_eval.scoring import service_records

QUERIES = 10_000


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    yield
    tracemalloc.stop()


def held_per_query(make: Callable[[], Any]) -> tuple[Any, float]:
    """What `make` returns and the bytes it holds per query once made."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    made = make()
    gc.collect()
    return made, (tracemalloc.get_traced_memory()[0] - before) / QUERIES


@pytest.mark.usefixtures("traced")
def test_per_query_scores_take_a_fifth_of_their_dicts() -> None:
    metrics = [f"metric-{j}" for j in range(10)]
    rows = {f"q{i:06}": {m: (i * j % 7) / 7 for j, m in enumerate(metrics)} for i in range(QUERIES)}
    table, held = held_per_query(lambda: ScoreColumns.from_rows(rows))
    assert isinstance(table, ScoreColumns)
    assert held < 200  # (dicts of ten floats: about 700)


@pytest.mark.usefixtures("traced")
def test_a_run_of_ids_holds_no_record_per_result(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lines = (
        json.dumps({"query_id": f"q{i:06}", "results": [f"doc-{i}-{r}" for r in range(10)]})
        for i in range(QUERIES)
    )
    path.write_text("\n".join(lines) + "\n")
    run, held = held_per_query(lambda: load_run(path))
    assert len(run.queries) == QUERIES
    assert held < 500  # (a record per result: about 1,700; ten strings and a tuple: 950)


@pytest.mark.usefixtures("traced")
def test_a_gold_query_holds_no_string_of_its_own_per_tag_or_label(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    lines = (
        json.dumps(
            {
                "query_id": f"q{i:06}",
                "query": f"question {i}",
                "tier": "A",
                "tags": [f"tag-{i % 16:02}", f"tag-{i * 7 % 16:02}"],
                "relevant": {f"d{i}-{j}": 1 for j in range(3)},
            }
        )
        for i in range(QUERIES)
    )
    path.write_text("\n".join(lines) + "\n")
    gold, held = held_per_query(lambda: load_gold([path]))
    assert len(gold.queries) == QUERIES
    assert gold.queries[7].relevant == (("d7-0", 1), ("d7-1", 1), ("d7-2", 1))
    # (a string per tag and query: about 880; its labels as a tuple of pairs of
    # strings, as they were read: about 780; held compact: about 440)
    assert held < 500


def id_project(tmp_path: Path) -> tuple[Path, Path]:
    """A gold set and a run of `QUERIES` queries labelled and answered by ids."""
    gold, run = tmp_path / "gold.jsonl", tmp_path / "run.jsonl"
    labels = (
        {"query_id": f"q{i:06}", "query": f"question {i}", "relevant": {f"d{i}-0": 1, f"d{i}-1": 1}}
        for i in range(QUERIES)
    )
    gold.write_text("\n".join(map(json.dumps, labels)) + "\n")
    answers = (
        {"query_id": f"q{i:06}", "results": [f"d{i}-{r}" for r in range(10)], "latency_ms": i / 3}
        for i in range(QUERIES)
    )
    run.write_text("\n".join(map(json.dumps, answers)) + "\n")
    return gold, run


@pytest.mark.usefixtures("traced")
def test_a_run_matched_by_ids_holds_no_row_or_ranking_per_query(tmp_path: Path) -> None:
    gold_path, run_path = id_project(tmp_path)
    gold, run = load_gold([gold_path]), load_run(run_path)
    matched, held = held_per_query(lambda: match_run(gold, run))
    assert matched.qrels["q000007"] == {"d7-0": 1, "d7-1": 1}
    assert matched.ranked["q000007"] == tuple(f"d7-{r}" for r in range(10))
    assert held < 80  # (a qrels row and a ranking per query: about 270)


@pytest.mark.usefixtures("traced")
def test_tables_of_the_same_queries_share_their_places(tmp_path: Path) -> None:
    gold_path, run_path = id_project(tmp_path)
    gold, run = load_gold([gold_path]), load_run(run_path)
    service, held = held_per_query(lambda: service_records(gold, run))
    assert service["q000003"].latency_ms == 1.0 and not service["q000003"].error
    assert held < 90  # (a record per query and its float: about 70, and no places)
    ids = [q.query_id for q in gold.queries]
    values, present = np.zeros((1, QUERIES)), np.ones((1, QUERIES), dtype=bool)
    table, held = held_per_query(lambda: ScoreColumns(list(ids), ["mrr"], values, present))
    assert table["q000003"] == {"mrr": 0.0}
    assert held < 20  # (places of its own: about 65)


@pytest.mark.usefixtures("traced")
def test_tables_of_two_sets_of_queries_made_in_turn_each_share_their_places() -> None:
    """A gate makes the baseline's latency columns (every query), its scores (the
    scored queries), then the run's latency columns (every query again): the third
    finds the first's places though the second came between."""
    every = [f"q{i:06d}" for i in range(QUERIES)]
    scored = every[: QUERIES - 500]

    def table(ids: list[str]) -> ScoreColumns:
        values, present = np.zeros((1, len(ids))), np.ones((1, len(ids)), dtype=bool)
        return ScoreColumns(list(ids), ["mrr"], values, present)

    first, second = table(every), table(scored)
    third, held = held_per_query(lambda: table(every))
    assert third["q000003"] == {"mrr": 0.0} and "q009999" in third and "q009999" not in second
    assert held < 20  # (places of its own: about 65)
    assert first["q009999"] == {"mrr": 0.0}


@pytest.mark.usefixtures("traced")
def test_judging_a_run_matched_by_ids_peaks_low(tmp_path: Path) -> None:
    """Judging is where a large gate's memory peaks: what it holds on the way, above
    the judgments it returns, stays small per query."""
    from llm_eval.judgments import judge_ranked

    gold_path, run_path = id_project(tmp_path)
    matched = match_run(load_gold([gold_path]), load_run(run_path))
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    judgments = judge_ranked(matched.qrels, matched.ranked)
    peak = (tracemalloc.get_traced_memory()[1] - before) / QUERIES
    assert judgments.first_relevant_rank().tolist()[:2] == [1, 1]
    assert peak < 400  # (an int object for each query's end and each hit: about 460)
