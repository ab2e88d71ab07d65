"""The real-model tier for reranking: SmolLM2-135M-Instruct, served by llama.cpp's
server on 127.0.0.1, as the `llm` reranker of BM25's top 20 on a few demo queries,
through `retrieve`, `gate` and `experiment`; a second run makes no call (the server's
access log counts them), and the share of readable answers is stated and bounded.

A 135M model's scores are not checked for being good, only for being read, cached and
used: the reranked lists are BM25's candidates in the model's order. Skipped, with the
reason, only when the `real-models` extra is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, script

local = script("local_model")

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(local.missing() is not None, reason=f"real model: {local.missing()}"),
]

QUERIES = 3
CANDIDATES = 20
TOP_K = 10
PAIRS = QUERIES * CANDIDATES
READABLE_AT_LEAST = 0.9
"""The judge's structured answers from this model measured 100% readable
(tests/test_real_model.py); llama.cpp's server holds each answer to the scale's JSON
schema by a grammar, so a reranking answer is read unless max_tokens cuts it off. Measured
here: 24 of 24 answers readable (BM25's top 20 of the first query and 4 of the second,
minimal prompt), each a score of 100."""
SUMMARY = re.compile(
    r"rerank \(llm\): (\d+) pairs, (\d+) scored now and (\d+) from the cache; (\d+) of (\d+) scored"
)


class Server:
    """The running model server and its access log."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def calls(self) -> int:
        """Chat calls the server has answered (from its access log)."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return text.count('"POST /v1/chat/completions HTTP/1.1"')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with local.serve(log) as url:
        yield Server(url, log)


def llm_eval(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "llm_eval.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def summary(stderr: str) -> tuple[int, ...]:
    """(pairs, scored now, from the cache, readable, pairs) of a run's summary line."""
    found = SUMMARY.search(stderr)
    assert found is not None, stderr
    return tuple(int(n) for n in found.groups())


def project(root: Path, url: str, **extra: Any) -> Path:
    """The first QUERIES tier-A demo queries with relevant documents, BM25's top 20
    reranked by the model with the minimal prompt; criteria with an MRR gate."""
    queries = local.subset(QUERIES)
    gold = root / "gold.jsonl"
    gold.write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    reranker = {
        **local.ENDPOINT,
        "type": "llm",
        "base_url": url,
        "concurrency": 1,
        "max_tokens": 64,
        "prompt": str(REPO / "prompts" / "rerank-minimal.txt"),
        "scale": "0-100",
    }
    config = {
        "gold": [{"path": str(gold), "tier": "A"}],
        "corpus": str(REPO / "gold" / "corpus.jsonl"),
        "retriever": {
            "kind": "rerank",
            "first": {"kind": "bm25", "k1": 0.9, "b": 0.4},
            "candidates": CANDIDATES,
            "reranker": reranker,
        },
        "metrics": ["recall@5", "mrr"],
        "top_k": TOP_K,
        "baseline": str(root / "baseline.json"),
        "output": str(root / "out"),
        **extra,
    }
    path = root / "llm-eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (root / "ship-criteria.yaml").write_text(local.CRITERIA, encoding="utf-8")
    return path


def test_smollm2_reranks_bm25s_top_20_through_retrieve_and_gate(
    server: Server, tmp_path: Path
) -> None:
    config = project(tmp_path, server.url)
    before = server.calls()
    done = llm_eval("retrieve", "--config", str(config), "--out", str(tmp_path / "run.jsonl"))
    pairs, now, cached, readable, _ = summary(done.stderr)
    assert (pairs, now, cached) == (PAIRS, PAIRS, 0)
    assert server.calls() - before == PAIRS
    print(f"SmolLM2 readable answers: {readable} of {pairs}", file=sys.stderr)
    assert readable >= READABLE_AT_LEAST * pairs
    run = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert all(len(line["results"]) == min(TOP_K, CANDIDATES) for line in run)
    done = llm_eval(
        "gate", "--config", str(config), "--criteria", str(tmp_path / "ship-criteria.yaml")
    )
    assert summary(done.stderr)[:4] == (PAIRS, 0, PAIRS, readable)
    assert server.calls() - before == PAIRS  # the gate's run made no call
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["gates"][0]["status"] in {"pass", "fail"}


def test_smollm2_in_an_experiment_against_bm25_with_its_consistency(
    server: Server, tmp_path: Path
) -> None:
    variants = [
        {"name": "bm25", "retriever": {"kind": "bm25", "k1": 0.9, "b": 0.4}},
        {"name": "smollm2 top20"},
    ]
    experiment = {
        "reference": "bm25",
        "quality": "mrr",
        "lift": [
            {"name": "reranking", "metric": "mrr", "base": "bm25", "variant": "smollm2 top20"}
        ],
    }
    config = project(tmp_path, server.url, variants=variants, experiment=experiment)
    before = server.calls()
    done = llm_eval("experiment", str(config), "--consistency", "2", "--consistency-queries", "1")
    # The run's 60 pairs, then the second repeat of the first query's 20.
    assert server.calls() - before == PAIRS + CANDIDATES
    assert "reranking: " in done.stdout  # the lift's sentence (or too few queries to pair)
    section = done.stdout[done.stdout.index("Consistency (") :].splitlines()
    assert section[0] == "Consistency (2 repeats of each candidate pair of the first 1 gold query):"
    assert section[1].startswith("  smollm2 top20: ")
    assert section[2] == "  not measured (no llm reranker): bm25"
