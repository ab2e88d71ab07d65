"""A scripted repository whose recall@10 drifts down in small steps, each refreshed.

500 queries with 10 relevant documents each; change s takes one relevant document out
of the top 10 of every query whose number is s modulo 5 (2 points of recall@10 a
change), and every change is refreshed and committed, so that no single change trips
the 3-point regression limit while the drift since the tagged reference does trip the
11-point `drift_max`. `tests/history/test_drift.py` drives it step by step;
`scripts/render_screenshots.py` draws the drift comment from it.
"""

from __future__ import annotations

import json
from pathlib import Path

QUERIES = 500
RELEVANT = 10

CONFIG = """\
gold:
  - path: gold/gold.jsonl
    tier: A
retriever:
  kind: run
  path: run.jsonl
metrics: [recall@10]
top_k: 10
baseline: gold/baseline.json
output: .llm-eval
"""

CRITERIA = """\
statistics:
  min_n: 30
  resamples: 100         # the power statement's simulations: not what is tested here
gates:
  - name: retrieval_recall_at_10
    regression_max: 0.03
    drift_max: 0.11
    since: {since}
    severity: error
    scope: {{tier: A}}
"""
"""The criteria, with `since` (the reference the drift is measured from) to fill in."""


def write_run(repo: Path, changes: int) -> None:
    """The run after `changes` changes: change s takes one relevant document out of the
    top 10 of every query whose number is s modulo 5."""
    lines = []
    for i in range(QUERIES):
        lost = sum(1 for s in range(changes) if s % 5 == i % 5)
        results = [f"d{i}-{j}" for j in range(RELEVANT - lost)] + ["other"] * lost
        lines.append(json.dumps({"query_id": f"q{i:04}", "results": results}))
    (repo / "run.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_project(repo: Path, since: str = "reference") -> None:
    """The project's config, criteria, gold set and first run in `repo` (made here)."""
    (repo / "config").mkdir(parents=True)
    (repo / "gold").mkdir()
    (repo / "config" / "llm-eval.yaml").write_text(CONFIG, encoding="utf-8")
    criteria = CRITERIA.format(since=since)
    (repo / "config" / "ship-criteria.yaml").write_text(criteria, encoding="utf-8")
    gold = [
        json.dumps(
            {
                "query_id": f"q{i:04}",
                "query": f"question {i}",
                "relevant": [f"d{i}-{j}" for j in range(RELEVANT)],
            }
        )
        for i in range(QUERIES)
    ]
    (repo / "gold" / "gold.jsonl").write_text("\n".join(gold) + "\n", encoding="utf-8")
    write_run(repo, 0)
