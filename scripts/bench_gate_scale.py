"""CPU time of `llm-eval gate` on a large gold set, and of a warm gate on the demo.

1. **At scale.** Builds, in a temporary folder, a project of `--queries` (20,000) gold
   queries in two tiers with 16 tags, read by a `run` retriever from a run file, with
   the demo's metrics and ship criteria (`config/ship-criteria.yaml`: a recall@5 gate
   on tier A and a per-tag MRR gate). The baseline is refreshed from one run; the run
   the gate reads then differs from it on a share `--changed` (7%) of the queries
   (their relevant documents redrawn at new ranks), as a pull request that touches a
   corner of the retriever does. Each query has 0 to 6 relevant documents graded 1-2,
   ranked from a power law over ranks 1..50, so recall, MRR and nDCG take many values.
2. **Start-up.** `llm-eval gate` on the bundled demo from the repository root (BM25
   over `gold/corpus.jsonl`, its index cached by the first run), as a developer runs it.

Every figure is the CPU time (user + system) of the `llm-eval` process and of the
processes it ran (git), as `os.wait4` reports it, the lowest of `--rounds` runs (the
demo's after one unmeasured run that fills its index cache), and the peak resident
memory. The machine may be busy: CPU time, not wall time, is what is compared. numba
changes the demo's figure (bm25s imports it where it is installed): the output says
whether it is.

`--against REV` also measures the git revision REV (checked out into a temporary
`git worktree`, run with the same interpreter and packages) in the same run, and
prints each figure's ratio to it.

Usage:
    python scripts/bench_gate_scale.py [--queries 20000] [--changed 0.07] [--rounds 3]
        [--against REV]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TAGS = tuple(f"tag-{i:02}" for i in range(16))
MAX_RANK = 50
"""Rank that stands for "not retrieved"."""
TOP_K = 10
METRICS = "[recall@1, recall@5, recall@10, mrr, ndcg@10, map@10, precision@5, hit_rate@5]"
CONFIG = f"""\
gold:
  - path: gold/gold-A.jsonl
    tier: A
  - path: gold/gold-B.jsonl
    tier: B
retriever:
  kind: run
  path: run.jsonl
metrics: {METRICS}
relevance_level: 1
top_k: {TOP_K}
baseline: gold/baseline.json
output: .llm-eval
"""


@dataclass(frozen=True, slots=True)
class Cost:
    """What one child process used."""

    cpu: float
    """User + system CPU seconds."""
    peak_mib: float
    """Peak resident memory."""


def write_gold(
    folder: Path, queries: int, rng: np.random.Generator, one_relevant: bool = False
) -> list[dict[str, int]]:
    """Two tier files; returns each query's relevant documents and grades (one each
    when `one_relevant`: recall@k then scores 0 or 1)."""
    relevant: list[dict[str, int]] = []
    tiers = {"A": [], "B": []}  # type: dict[str, list[str]]
    for i in range(queries):
        count = int(rng.choice(7, p=[0.04, 0.11, 0.40, 0.29, 0.12, 0.03, 0.01]))
        count = 1 if one_relevant else count
        docs = {f"d{i}-{j}": int(rng.integers(1, 3)) for j in range(count)}
        tier = "A" if rng.random() < 0.55 else "B"
        tags = sorted({TAGS[t] for t in rng.integers(0, len(TAGS), rng.integers(1, 3))})
        record = {
            "query_id": f"q{i:06}",
            "query": f"question {i}",
            "tier": tier,
            "tags": tags,
            "relevant": docs,
            "is_rejection": not docs,
        }
        tiers[tier].append(json.dumps(record))
        relevant.append(docs)
    (folder / "gold").mkdir()
    for tier, lines in tiers.items():
        (folder / "gold" / f"gold-{tier}.jsonl").write_text("\n".join(lines) + "\n")
    return relevant


def ranking(docs: dict[str, int], index: int, rng: np.random.Generator) -> list[str]:
    """The top k of one query: its relevant documents at power-law ranks, others filler."""
    weights = np.arange(1, MAX_RANK + 1, dtype=np.float64) ** -1.3
    ranks = rng.choice(MAX_RANK, size=len(docs), replace=False, p=weights / weights.sum())
    top = [f"other-{index}-{r}" for r in range(TOP_K)]
    for doc, rank in zip(docs, ranks, strict=True):
        if rank < TOP_K:
            top[rank] = doc
    return top


def write_run(path: Path, rankings: list[list[str]]) -> None:
    lines = (
        json.dumps({"query_id": f"q{i:06}", "results": top, "latency_ms": 20.0})
        for i, top in enumerate(rankings)
    )
    path.write_text("\n".join(lines) + "\n")


def build_project(
    folder: Path, queries: int, changed: float, seed: int = 0, one_relevant: bool = False
) -> None:
    """Gold set, config, criteria, the baseline (refreshed from the first run), and the
    run the gate reads, which differs on a share `changed` of the queries. With
    `one_relevant`, every query has one relevant document, so the recall@5 gate is
    a 0/1 one (the exact test) while the MRR gate stays graded."""
    rng = np.random.default_rng(seed)
    relevant = write_gold(folder, queries, rng, one_relevant)
    (folder / "config").mkdir()
    (folder / "config" / "llm-eval.yaml").write_text(CONFIG)
    shutil.copy(REPO / "config" / "ship-criteria.yaml", folder / "config" / "ship-criteria.yaml")
    before = [ranking(docs, i, rng) for i, docs in enumerate(relevant)]
    write_run(folder / "run.jsonl", before)
    refresh = [sys.executable, "-m", "llm_eval.cli", "baseline", "refresh", "--force"]
    subprocess.run(refresh, cwd=folder, check=True, capture_output=True)
    after = [
        ranking(docs, i, rng) if rng.random() < changed else top
        for i, (docs, top) in enumerate(zip(relevant, before, strict=True))
    ]
    write_run(folder / "run.jsonl", after)


def run_cost(command: list[str], cwd: Path, pythonpath: Path) -> Cost:
    """Run `command` and return its own CPU time and peak memory (exit 0 or 1 only)."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    child = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    errors = child.stderr.read().decode() if child.stderr else ""
    if child.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: {errors}")
    return Cost(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0)


def best(command: list[str], cwd: Path, pythonpath: Path, rounds: int, warm: bool) -> Cost:
    """The lowest CPU time of `rounds` runs, after one unmeasured run when `warm` (to
    fill the caches, as a developer's second run finds them)."""
    if warm:
        run_cost(command, cwd, pythonpath)
    costs = [run_cost(command, cwd, pythonpath) for _ in range(rounds)]
    return min(costs, key=lambda cost: cost.cpu)


def gate_command(out: Path) -> list[str]:
    return [sys.executable, "-m", "llm_eval.cli", "gate", "--out", str(out)]


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """The package at `revision`, in a temporary git worktree."""
    folder = Path(tempfile.mkdtemp(prefix="bench-gate-rev-"))
    tree = folder / "tree"
    git = ["git", "-C", str(REPO)]
    add = [*git, "worktree", "add", "--quiet", "--detach", str(tree), revision]
    subprocess.run(add, check=True)
    try:
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=True)
        shutil.rmtree(folder, ignore_errors=True)


def measure(code: Path, project: Path, rounds: int, out: Path) -> dict[str, Cost]:
    """Both figures for the package found at `code`, its bytecode compiled first (as
    `pip install` does), so that no measured run compiles it."""
    compileall.compile_dir(code / "llm_eval", quiet=1)
    return {
        "scale": best(gate_command(out / "scale"), project, code, rounds, warm=False),
        "demo": best(gate_command(out / "demo"), code, code, rounds, warm=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--changed", type=float, default=0.07, help="share of queries changed")
    parser.add_argument("--rounds", type=int, default=3, help="measured runs (lowest kept)")
    parser.add_argument("--against", metavar="REV", help="also measure this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-scale-") as temp:
        folder = Path(temp)
        project = folder / "project"
        project.mkdir()
        build_project(project, args.queries, args.changed)
        results = {"this tree": measure(REPO, project, args.rounds, folder)}
        if args.against:
            with checkout(args.against) as tree:
                results[args.against] = measure(tree, project, args.rounds, folder)
    report(results, args.queries, args.rounds, args.against)


def report(
    results: dict[str, dict[str, Cost]], queries: int, rounds: int, against: str | None
) -> None:
    numba = importlib.util.find_spec("numba") is not None
    print(
        f"llm-eval gate: CPU seconds with its children, lowest of {rounds} run(s); "
        f"numba installed: {'yes' if numba else 'no'}"
    )
    ratio = f"vs {against[:10]}" if against else ""
    print(f"{'':<24}{'code':<12}{'CPU s':>8}{'MiB':>7}{'ms/query':>10}  {ratio}")
    rows = [("scale", f"{queries:,} queries, run"), ("demo", "demo, warm")]
    for key, label in rows:
        for name, costs in results.items():
            cost = costs[key]
            per_query = f"{cost.cpu / queries * 1e3:10.3f}" if key == "scale" else " " * 10
            line = f"{label:<24}{name[:11]:<12}{cost.cpu:8.2f}{cost.peak_mib:7.0f}{per_query}"
            if against and name != against:
                line += f"  {cost.cpu / results[against][key].cpu:.2f}x"
            print(line)
            label = ""


if __name__ == "__main__":
    main()
