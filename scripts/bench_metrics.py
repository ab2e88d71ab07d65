"""Benchmark the metric engine against pytrec_eval and the ir_measures command line.

Synthetic data: N queries x 100 retrieved documents, about 3 relevant each (graded
1-3), 8 metrics. In one run it times

1. `llm_eval.evaluate(...)` + means  vs  `pytrec_eval.RelevanceEvaluator(...).evaluate`
   + means, on the same dicts, in this process;
2. `llm-eval evaluate` end to end  vs  the `ir_measures` command line, on the same
   data written as TREC qrels and run files, each in its own process, with its peak
   memory (max RSS);
3. `llm-eval --help`, which must stay fast (no numpy at start-up).

Usage: python scripts/bench_metrics.py [--queries 100000] [--repeat 3]
Needs the dev extra (pytrec-eval-terrier, ir-measures).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Our canonical metric name -> the same measure in pytrec_eval.
PYTREC_NAMES = {
    "recall@5": "recall_5",
    "recall@10": "recall_10",
    "precision@5": "P_5",
    "mrr": "recip_rank",
    "map": "map",
    "map@10": "map_cut_10",
    "ndcg@10": "ndcg_cut_10",
    "hit_rate@5": "success_5",
}
OURS = list(PYTREC_NAMES)
PYTREC = set(PYTREC_NAMES.values())
IR_MEASURES = "R@5 R@10 P@5 RR AP AP@10 nDCG@10 Success@5"
DOCS_PER_QUERY = 100


def synthesize(queries: int, seed: int = 0) -> tuple[dict, dict]:
    """Qrels with ~3 relevant documents a query, runs of 100 scored documents."""
    rng = np.random.default_rng(seed)
    scores = rng.random((queries, DOCS_PER_QUERY)).round(6)
    doc_numbers = rng.choice(1_000_000, size=(queries, DOCS_PER_QUERY + 3), replace=True)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(queries):
        docs = [f"D{q}-{n}" for n in doc_numbers[q]]
        retrieved = dict(zip(docs[:DOCS_PER_QUERY], scores[q].tolist(), strict=True))
        run[f"Q{q}"] = retrieved
        relevant = rng.integers(1, 6)  # 1-5, mean 3
        picks = rng.choice(DOCS_PER_QUERY + 3, size=relevant, replace=False)
        qrels[f"Q{q}"] = {docs[i]: int(rng.integers(1, 4)) for i in picks}
    return qrels, run


def best_of(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def in_process(qrels: dict, run: dict, repeat: int) -> tuple[float, float]:
    import pytrec_eval

    import llm_eval

    def ours() -> dict[str, float]:
        return llm_eval.evaluate(qrels, run, OURS).means()

    def theirs() -> dict[str, float]:
        per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC).evaluate(run)
        return {m: statistics.fmean(v[m] for v in per_query.values()) for m in PYTREC}

    check_agreement(ours(), theirs())
    return best_of(repeat, ours), best_of(repeat, theirs)


def check_agreement(ours: dict[str, float], theirs: dict[str, float]) -> None:
    for metric, value in ours.items():
        reference = theirs[PYTREC_NAMES[metric]]
        if abs(value - reference) > 1e-9:
            sys.exit(f"disagreement on {metric}: {value} vs pytrec_eval {reference}")


def write_trec(qrels: dict, run: dict, folder: Path) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    with qrels_path.open("w") as out:
        for qid, judged in qrels.items():
            out.writelines(f"{qid} 0 {doc} {grade}\n" for doc, grade in judged.items())
    with run_path.open("w") as out:
        for qid, scored in run.items():
            ranked = sorted(scored.items(), key=lambda item: -item[1])
            out.writelines(
                f"{qid} Q0 {doc} {rank} {score} bench\n"
                for rank, (doc, score) in enumerate(ranked, 1)
            )
    return qrels_path, run_path


# Runs a command, then prints its wall time, peak RSS (KiB) and exit code. Commands run
# through this small process because on Linux a child's peak RSS (ru_maxrss) starts
# from the size of the process that forked it: forked from this one, which holds the
# data, every command would seem to need about 2 GB.
MEASURE = """
import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def timed_process(command: list[str]) -> tuple[float, float]:
    """Wall time (s) and peak RSS (MiB) of one child process."""
    launcher = [sys.executable, "-c", MEASURE, *command]
    elapsed, max_rss, code = subprocess.run(
        launcher, capture_output=True, text=True, check=True
    ).stdout.split()
    if int(code) != 0:
        sys.exit(f"command failed: {' '.join(command)}")
    return float(elapsed), int(max_rss) / 1024


def end_to_end(qrels_path: Path, run_path: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    ours = [sys.executable, "-m", "llm_eval.cli", "evaluate", "--qrels", str(qrels_path)]
    ours += ["--run", str(run_path), *(arg for m in OURS for arg in ("-m", m))]
    theirs = [sys.executable, "-m", "ir_measures", str(qrels_path), str(run_path), IR_MEASURES]
    return timed_process(ours), timed_process(theirs)


def startup_time(repeat: int) -> float:
    """Wall time (s) of `llm-eval --help`, best of `repeat`."""
    command = [sys.executable, "-m", "llm_eval.cli", "--help"]
    return min(timed_process(command)[0] for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    qrels, run = synthesize(args.queries)
    lines = args.queries * DOCS_PER_QUERY
    print(
        f"data: {args.queries:,} queries x {DOCS_PER_QUERY} docs = {lines:,} run lines, 8 metrics"
    )

    ours, theirs = in_process(qrels, run, args.repeat)
    print(f"in process (best of {args.repeat}):")
    print(f"  llm_eval.evaluate + means      {ours:8.3f} s")
    print(f"  pytrec_eval evaluate + means   {theirs:8.3f} s")
    print(f"  ratio (pytrec_eval / llm_eval) {theirs / ours:8.2f}x")

    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = write_trec(qrels, run, Path(folder))
        del qrels, run
        (our_time, our_rss), (their_time, their_rss) = end_to_end(qrels_path, run_path)
    print("end to end on TREC files (one process each):")
    print(f"  llm-eval evaluate              {our_time:8.2f} s   peak {our_rss:8.0f} MiB")
    print(f"  ir_measures command line       {their_time:8.2f} s   peak {their_rss:8.0f} MiB")
    print(f"  ratio (ir_measures / llm-eval) {their_time / our_time:8.2f}x")
    print(f"start-up (best of {args.repeat}):")
    print(f"  llm-eval --help                {startup_time(args.repeat):8.3f} s")


if __name__ == "__main__":
    main()
