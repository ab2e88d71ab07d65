"""Wall time of a gate run in N shards against one process, and what the merge costs.

A project in a temporary folder: `--queries` gold queries (100,000), each with one
relevant document, and a `python` retriever that sleeps `--latency-ms` (5 ms) per query
before answering, `--concurrency` (8) threads at once: a stand-in for a retriever
whose time is spent elsewhere (a service, a model), so that a shard's wall time is the
retriever's, as in CI. The ship criteria gate recall@5 on every query and MRR per tag.

1. **One process.** `llm-eval gate`: retrieve every query, evaluate, compare with the
   baseline (refreshed beforehand from an unmeasured `retrieve` of the same retriever).
2. **N shards**, for each of `--shards` (1, 2, 4): `llm-eval retrieve --shard I/N`
   for I = 1..N, one after another (in CI they run side by side on N machines, so the
   CI wall time is the slowest shard's plus the merge's), then the merge: `llm-eval gate
   --run 'parts/*.jsonl'`, which checks the parts and gates their joined run.

Between them, `llm-eval gate --run whole.jsonl`: the gate of the same run read from one
file, so that what joining N parts adds is told from what reading a run file costs.

Each command's wall time and CPU (user + system of the process and its children, as
`os.wait4` reports a finished child) is printed, with the merge's CPU against the
single process's, and whether the merged report's gates (value, baseline, status)
equal the single process's.

Usage:
    python scripts/bench_shards.py [--queries 100000] [--shards 1,2,4]
        [--latency-ms 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TAGS = tuple(f"tag-{i:02}" for i in range(8))
RETRIEVER = '''\
"""A retriever of fixed latency: sleeps, then ranks the query's document at i % 12."""

import time


class Retriever:
    def __init__(self, latency_ms):
        self.delay = latency_ms / 1000

    def retrieve(self, query, top_k):
        time.sleep(self.delay)
        i = int(query.rsplit(" ", 1)[1])
        hits = [{"doc_id": f"other-{i}-{r}", "score": float(top_k - r)} for r in range(top_k)]
        if i % 12 < top_k:
            hits[i % 12] = {"doc_id": f"d{i}", "score": float(top_k - i % 12)}
        return hits
'''
CONFIG = """\
gold:
  - path: gold/gold.jsonl
retriever:
  kind: python
  target: fixed_latency:Retriever
  init: {{latency_ms: {latency}}}
  python_path: ["."]
  concurrency: {concurrency}
metrics: [recall@5, mrr]
top_k: 10
baseline: gold/baseline.json
output: .llm-eval
"""
CRITERIA = """\
gates:
  - name: retrieval_recall_at_5
    threshold: 0.30
    regression_max: 0.03
    severity: error
  - name: retrieval_mrr
    threshold: 0.20
    regression_max: 0.05
    severity: warning
    per_tag: true
"""


@dataclass(frozen=True, slots=True)
class Cost:
    """What one command took."""

    wall: float
    cpu: float
    """User + system seconds of the process and its children."""


def write_project(folder: Path, queries: int, latency: float, concurrency: int) -> None:
    """Gold set, retriever, config and criteria."""
    (folder / "gold").mkdir()
    (folder / "config").mkdir()
    with (folder / "gold" / "gold.jsonl").open("w") as gold:
        for i in range(queries):
            record = {
                "query_id": f"q{i:06}",
                "query": f"question {i}",
                "tier": "A",
                "tags": [TAGS[i % len(TAGS)]],
                "relevant": {f"d{i}": 1},
            }
            gold.write(json.dumps(record) + "\n")
    (folder / "fixed_latency.py").write_text(RETRIEVER)
    config = CONFIG.format(latency=latency, concurrency=concurrency)
    (folder / "config" / "llm-eval.yaml").write_text(config)
    (folder / "config" / "ship-criteria.yaml").write_text(CRITERIA)


def llm_eval(folder: Path, *arguments: str) -> Cost:
    """Run `llm-eval ARGUMENTS` in `folder` (exit 0 or 1), and what it took."""
    command = [sys.executable, "-m", "llm_eval.cli", *arguments]
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    errors = child.stderr.read().decode() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"llm-eval {' '.join(arguments)} failed: {errors}")
    return Cost(wall, usage.ru_utime + usage.ru_stime)


def gates(report: Path) -> list[tuple[object, ...]]:
    """Each gate's name, value, baseline and status in a report.json."""
    document = json.loads(report.read_text())
    return [(g["name"], g["value"], g["baseline"], g["status"]) for g in document["gates"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--shards", default="1,2,4", help="shard counts, comma-separated")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    counts = [int(n) for n in args.shards.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as temp:
        folder = Path(temp)
        write_project(folder, args.queries, args.latency_ms, args.concurrency)
        llm_eval(folder, "retrieve", "--out", "whole.jsonl")
        llm_eval(folder, "baseline", "refresh", "--run", "whole.jsonl", "--force")
        ideal = args.queries * args.latency_ms / 1000 / args.concurrency
        print(
            f"{args.queries:,} queries, {args.latency_ms:g} ms each, {args.concurrency} "
            f"threads: {ideal:.1f} s of retriever latency in one process"
        )
        print(f"{'run':<22}{'wall s':>9}{'CPU s':>9}{'CPU vs one':>12}  gates equal")
        single = llm_eval(folder, "gate", "--out", "out-single")
        print(f"{'one process (gate)':<22}{single.wall:>9.1f}{single.cpu:>9.1f}")
        expected = gates(folder / "out-single" / "report.json")
        whole = llm_eval(folder, "gate", "--run", "whole.jsonl", "--out", "out-whole")
        print(
            f"{'gate of one run file':<22}{whole.wall:>9.1f}{whole.cpu:>9.1f}"
            f"{whole.cpu / single.cpu:>11.2f}x"
        )
        for count in counts:
            parts = folder / f"parts-{count}"
            for index in range(1, count + 1):
                shard = f"{index}/{count}"
                out = str(parts / f"run.part-{index}.jsonl")
                cost = llm_eval(folder, "retrieve", "--shard", shard, "--out", out)
                print(f"{'  retrieve ' + shard:<22}{cost.wall:>9.1f}{cost.cpu:>9.1f}")
            out_dir = f"out-{count}"
            merge = llm_eval(folder, "gate", "--run", str(parts / "*.jsonl"), "--out", out_dir)
            same = gates(folder / out_dir / "report.json") == expected
            print(
                f"{'  merge of ' + str(count) + ' (gate)':<22}{merge.wall:>9.1f}"
                f"{merge.cpu:>9.1f}{merge.cpu / single.cpu:>11.2f}x  {'yes' if same else 'NO'}"
            )


if __name__ == "__main__":
    main()
