"""An experiment over the second stage: BM25 against rerankers of BM25's candidates with
two prompts and two candidate depths, on demo queries, each llm reranker asked by a
local chat endpoint; quality, p95 latency, the lift sentence and the consistency of
each reranker printed together, and a second run making no call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from conftest import Cli
from rerank_servers import OverlapChat, root_of, write_prompt
from servers import CORPUS, GOLD_A, serve

QUERIES = 6


def experiment_config(root: Path, url: str) -> Path:
    minimal = write_prompt(root, name="minimal.txt")
    stepwise = write_prompt(
        root,
        "Decide what the query asks, then whether the document states it.\n"
        "Query: {query}\nDocument: {document}\n{scale}\n",
        "stepwise.txt",
    )
    lines = GOLD_A.read_text(encoding="utf-8").splitlines()[:QUERIES]
    (root / "gold.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    llm = {"type": "llm", "base_url": root_of(url) + "/v1", "model": "overlap"}
    config = {
        "gold": [{"path": str(root / "gold.jsonl"), "tier": "A"}],
        "corpus": str(CORPUS),
        "retriever": {
            "kind": "rerank",
            "first": {"kind": "bm25"},
            "candidates": 20,
            "reranker": {**llm, "prompt": str(minimal)},
        },
        "metrics": ["recall@5", "mrr"],
        "output": str(root / "out"),
        "variants": [
            {"name": "bm25", "retriever": {"kind": "bm25"}},
            {"name": "minimal top10", "retriever": {"candidates": 10}},
            {"name": "minimal top20"},
            {
                "name": "stepwise top10",
                "retriever": {"candidates": 10, "reranker": {**llm, "prompt": str(stepwise)}},
            },
            {"name": "stepwise top20", "retriever": {"reranker": {**llm, "prompt": str(stepwise)}}},
        ],
        "experiment": {
            "reference": "bm25",
            "quality": "mrr",
            "latency": "wall",
            "lift": [
                {"name": "reranking", "metric": "mrr", "base": "bm25", "variant": "minimal top20"}
            ],
        },
    }
    path = root / "llm-eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def test_two_prompts_and_two_depths_side_by_side_with_their_consistency(
    tmp_path: Path, cli: Cli
) -> None:
    with serve(OverlapChat()) as server:
        config = experiment_config(tmp_path, server.url)
        args = ["experiment", config, "--consistency", "3", "--consistency-queries", "2"]
        code, out, err = cli(*args)
        assert code == 0, out + err
        # Each prompt's 20 candidates of 6 queries; the top 10 are among them (cached).
        # Then repeats 2 and 3 of the first 2 queries' 20 pairs, for each prompt.
        assert len(server.requests) == 2 * QUERIES * 20 + 2 * 2 * 2 * 20
        code, again, err = cli(*args)
        assert code == 0, err
        assert len(server.requests) == 2 * QUERIES * 20 + 2 * 2 * 2 * 20
    assert "0 scored now and 120 from the cache" in err
    consistency = out[out.index("Consistency (") :].splitlines()
    assert again[again.index("Consistency (") :].splitlines() == consistency
    assert consistency[0] == (
        "Consistency (3 repeats of each candidate pair of the first 2 gold queries):"
    )
    same = (
        "consistent: 0.0% of candidate pairs flip between 3 repeats (limit 5%); score "
        "variance mean 0.0000, max 0.0000; 60 of 60 answers readable"
    )
    assert consistency[1:] == [
        f"  minimal top10: {same}",
        f"  minimal top20: {same.replace('60 of 60', '120 of 120')}",
        f"  stepwise top10: {same}",
        f"  stepwise top20: {same.replace('60 of 60', '120 of 120')}",
        "  not measured (no llm reranker): bm25",
    ]
    # Which way the latency ratio falls is the clock's (a busy machine can tie them):
    # the sentence names the reranked variant and its ratio to bm25, whatever it is.
    # The terminal wraps it where the figures' widths fall, so read it unwrapped.
    sentence = " ".join(out.split())
    assert "reranking: `minimal top20` " in sentence
    assert re.search(r"(× slower than|× faster than|as fast as) `bm25` at p95", sentence), out
    table = json.loads((tmp_path / "out" / "experiment" / "experiment.json").read_text())
    rows = {row["name"]: row for row in table["variants"]}
    assert set(rows) == {
        "bm25",
        "minimal top10",
        "minimal top20",
        "stepwise top10",
        "stepwise top20",
    }
    for row in rows.values():
        assert row["values"]["mrr"] is not None and row["values"]["latency_p95"] > 0
