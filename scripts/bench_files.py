"""Benchmark TREC files through `llm-eval evaluate`, and the columnar API, against peers.

Synthetic data as in `bench_metrics.py`: N queries x 100 scored documents (scores of 6
decimals, distinct within a query: with ties, ranx's means differed from trec_eval's
by 3e-7 on mrr in a first run; ties are checked against pytrec_eval by the tests),
1-5 relevant documents a query graded 1-3, 8 metrics. In one run it measures, in CPU
seconds (user + system, children included) and peak memory (max RSS):

1. a TREC qrels and run file (N x 100 lines; default 100,000 queries = 10M lines)
   evaluated end to end, each tool in its own process:
   - `llm-eval evaluate --qrels ... --run ...`
   - the ir_measures command line (`python -m ir_measures qrels run measures`)
   - ranx (`Qrels.from_file`, `Run.from_file`, `evaluate`) in a Python that has it:
     `--ranx-python` (default: this one), left out when ranx is not there. ranx
     compiles its kernels with numba on first use and caches them; a warm-up run on
     a small file comes first, untimed, so the figure is without compilation.
   - trec_eval's C code through pytrec_eval reading the same files with its own
     parser (`parse_qrel`, `parse_run`): trec_eval itself is not installed, and the
     pytrec-eval-terrier source package downloads its C sources at build time.
   Every tool's means must equal llm-eval's (to 1e-9; ir_measures prints 12 places).
   `--file-rounds` (3) interleaved rounds, each tool once a round, and the lowest CPU
   time and peak memory of each: one round's figure moved by a third from one run of
   the script to the next on a busy machine.
2. `llm_eval.evaluate_columns` vs `pytrec_eval.RelevanceEvaluator(...).evaluate` +
   means, in this process, each fed its own native input built before timing:
   `RunColumns` and `QrelsColumns` (`llm_eval.run_columns`, `llm_eval.qrels_columns`)
   for llm-eval, dicts for pytrec_eval. Also timed: `evaluate_columns` given plain
   numpy arrays of str (query id, doc id, score; qrels as dicts), the grouping and
   UTF-8 encoding then inside the timed region, and the dict API `evaluate`.
   Default `--api-queries 50000` (5M rows); `--rounds` (15) interleaved rounds, each
   way's turn within a round in the same order, and their lowest and median CPU time
   (the figure is a fraction of a second, so one round says little on a busy machine).

Usage: python scripts/bench_files.py [--queries 100000] [--api-queries 50000]
           [--rounds 15] [--file-rounds 3] [--ranx-python PATH]; `--queries 0` leaves out the files
Needs the dev extra (pytrec-eval-terrier, ir-measures); ranx: `pip install ranx`
(it pulls in numba and pandas), or a venv with it given as `--ranx-python`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

# Our canonical metric name -> pytrec_eval's, ir_measures' and ranx's name of it.
METRICS = {
    "recall@5": ("recall_5", "R@5", "recall@5"),
    "recall@10": ("recall_10", "R@10", "recall@10"),
    "precision@5": ("P_5", "P@5", "precision@5"),
    "mrr": ("recip_rank", "RR", "mrr"),
    "map": ("map", "AP", "map"),
    "map@10": ("map_cut_10", "AP@10", "map@10"),
    "ndcg@10": ("ndcg_cut_10", "nDCG@10", "ndcg@10"),
    "hit_rate@5": ("success_5", "Success@5", "hit_rate@5"),
}
DOCS_PER_QUERY = 100
QUERIES_PER_PIECE = 2_000

# Runs a command, then prints its CPU seconds (user + system of it and its children)
# and peak RSS (KiB). Commands run through this small process because on Linux a
# child's peak RSS starts from the size of the process that forked it.
MEASURE = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=open(os.environ["BENCH_OUT"], "w"))
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""

PYTREC_FILES = """
import json, statistics, sys
import pytrec_eval
with open(sys.argv[1]) as q, open(sys.argv[2]) as r:
    qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(sys.argv[3:])).evaluate(run)
print(json.dumps({m: statistics.fmean(v[m] for v in per_query.values()) for m in sys.argv[3:]}))
"""

RANX_FILES = """
import json, sys
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
print(json.dumps(evaluate(qrels, run, sys.argv[3:])))
"""


def pieces(queries: int, seed: int = 0) -> Iterator[tuple[int, np.ndarray, np.ndarray, list]]:
    """Per piece of queries: the first query's number, doc numbers (103 distinct per
    query: 100 retrieved, 3 not), scores, and the qrels `(query, doc column, grade)`."""
    rng = np.random.default_rng(seed)
    span = 10_000
    for first in range(0, queries, QUERIES_PER_PIECE):
        n = min(QUERIES_PER_PIECE, queries - first)
        offsets = np.arange(DOCS_PER_QUERY + 3) * span
        docs = rng.permuted(offsets + rng.integers(0, span, (n, DOCS_PER_QUERY + 3)), axis=1)
        # Distinct per query (millionths from disjoint ranges): ranx orders tied
        # documents otherwise than trec_eval does, and its means would then differ.
        steps = np.arange(DOCS_PER_QUERY) * span + rng.integers(0, span, (n, DOCS_PER_QUERY))
        scores = np.sort(steps / 1e6, axis=1)[:, ::-1]
        judged = []
        for q in range(n):
            picks = rng.choice(DOCS_PER_QUERY + 3, size=rng.integers(1, 6), replace=False)
            judged += [(q, int(c), int(rng.integers(1, 4))) for c in picks]
        yield first, docs, scores, judged


def write_files(queries: int, folder: Path) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    with qrels_path.open("w") as qrels_out, run_path.open("w") as run_out:
        for first, docs, scores, judged in pieces(queries):
            qrels_out.writelines(
                f"Q{first + q} 0 D{docs[q, c]} {grade}\n" for q, c, grade in judged
            )
            for q in range(docs.shape[0]):
                qid = f"Q{first + q}"
                run_out.writelines(
                    f"{qid} Q0 D{doc} {rank} {score} bench\n"
                    for rank, (doc, score) in enumerate(
                        zip(docs[q, :DOCS_PER_QUERY].tolist(), scores[q].tolist(), strict=True),
                        1,
                    )
                )
    return qrels_path, run_path


def in_memory(queries: int) -> tuple[dict, dict, dict[str, np.ndarray]]:
    """The same data as qrels and run dicts (pytrec_eval's input) and run columns."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for first, docs, scores, judged in pieces(queries):
        for q, c, grade in judged:
            qrels.setdefault(f"Q{first + q}", {})[f"D{docs[q, c]}"] = grade
        for q in range(docs.shape[0]):
            names = [f"D{d}" for d in docs[q, :DOCS_PER_QUERY].tolist()]
            run[f"Q{first + q}"] = dict(zip(names, scores[q].tolist(), strict=True))
    columns = {
        "query_id": np.repeat(np.array(list(run)), DOCS_PER_QUERY),
        "doc_id": np.array([d for scored in run.values() for d in scored]),
        "score": np.fromiter((s for scored in run.values() for s in scored.values()), float),
    }
    return qrels, run, columns


def timed_process(command: list[str]) -> tuple[float, float, str]:
    """CPU seconds (children included), peak RSS (MiB) and standard output of a command."""
    with tempfile.NamedTemporaryFile("r", suffix=".out") as out:
        launcher = [sys.executable, "-c", MEASURE, *command]
        result = subprocess.run(
            launcher, capture_output=True, text=True, check=True, env=_env(out.name)
        )
        cpu, max_rss, code = result.stdout.split()
        if int(code) != 0:
            sys.exit(f"command failed: {' '.join(command)}\n{result.stderr}")
        return float(cpu), int(max_rss) / 1024, Path(out.name).read_text()


def _env(out: str) -> dict[str, str]:
    import os

    return {**os.environ, "BENCH_OUT": out}


def has_ranx(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import ranx"], capture_output=True)
    return probe.returncode == 0


def end_to_end(
    qrels: Path, run: Path, ranx_python: str | None, rounds: int
) -> list[tuple[str, float, float]]:
    """Per tool: its name, and its lowest CPU seconds and peak RSS over `rounds`
    interleaved rounds (each tool once a round, in the same order, so a busy spell of
    the machine falls on all of them); exits if a tool's means differ from llm-eval's."""
    tools = _file_tools(qrels, run, ranx_python)
    costs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in tools}
    for _ in range(rounds):
        ours: dict[str, float] = {}
        for name, command, means in tools:
            cpu, rss, out = timed_process(command)
            found = means(out)
            if ours:
                agree(name, ours, found)
            else:
                ours = found
            costs[name].append((cpu, rss))
    return [
        (name, min(c for c, _ in each), min(r for _, r in each)) for name, each in costs.items()
    ]


def _file_tools(
    qrels: Path, run: Path, ranx_python: str | None
) -> list[tuple[str, list[str], Callable[[str], dict[str, float]]]]:
    """Each tool's name, command, and how its means are read from what it prints,
    llm-eval's first."""
    ours_command = [sys.executable, "-m", "llm_eval.cli", "evaluate", "--qrels", str(qrels)]
    ours_command += ["--run", str(run), "--format", "json"]
    ours_command += [arg for name in METRICS for arg in ("-m", name)]
    measures = " ".join(names[1] for names in METRICS.values())
    ir_measures = [sys.executable, "-m", "ir_measures", "--places", "12", str(qrels), str(run)]

    def ir_means(out: str) -> dict[str, float]:
        theirs = dict(line.split("\t") for line in out.splitlines())
        return {m: float(theirs[names[1]]) for m, names in METRICS.items()}

    tools: list[tuple[str, list[str], Callable[[str], dict[str, float]]]] = [
        ("llm-eval evaluate", ours_command, lambda out: json.loads(out)["metrics"]),
        ("ir_measures command line", [*ir_measures, measures], ir_means),
    ]
    if ranx_python is not None:
        ranx_names = [names[2] for names in METRICS.values()]
        command = [ranx_python, "-c", RANX_FILES, str(qrels), str(run), *ranx_names]
        tools.append(("ranx", command, lambda out: _renamed(json.loads(out), 2)))
    pytrec_names = [names[0] for names in METRICS.values()]
    command = [sys.executable, "-c", PYTREC_FILES, str(qrels), str(run), *pytrec_names]
    tools.append(("trec_eval via pytrec_eval", command, lambda out: _renamed(json.loads(out), 0)))
    return tools


def _renamed(theirs: dict[str, float], column: int) -> dict[str, float]:
    """A peer's means by our metric names (`column`: the peer's in `METRICS`)."""
    return {m: theirs[names[column]] for m, names in METRICS.items()}


def agree(peer: str, ours: dict[str, float], theirs: dict[str, float]) -> None:
    for metric, value in ours.items():
        if abs(value - theirs[metric]) > 1e-9:
            sys.exit(f"disagreement on {metric}: llm-eval {value} vs {peer} {theirs[metric]}")


def interleaved(rounds: int, ways: dict[str, Callable[[], object]]) -> dict[str, list[float]]:
    """CPU seconds of each way in each round, the ways taking turns within a round, so
    that a busy spell of the machine falls on all of them."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, work in ways.items():
            start = time.process_time()
            work()
            times[name].append(time.process_time() - start)
    return times


def columnar_api(queries: int, rounds: int) -> dict[str, list[float]]:
    """CPU seconds of pytrec_eval and of llm-eval's ways in, on the same data, per round."""
    import pytrec_eval

    import llm_eval

    qrels, run, columns = in_memory(queries)
    pytrec_names = {names[0] for names in METRICS.values()}
    qrels_rows = [(q, d, g) for q, judged in qrels.items() for d, g in judged.items()]
    qrels_columns = llm_eval.qrels_columns(*map(np.array, zip(*qrels_rows, strict=True)))
    run_columns = llm_eval.run_columns(columns["query_id"], columns["doc_id"], columns["score"])

    def theirs() -> dict[str, float]:
        per_query = pytrec_eval.RelevanceEvaluator(qrels, pytrec_names).evaluate(run)
        means = {m: statistics.fmean(v[m] for v in per_query.values()) for m in pytrec_names}
        return {m: means[names[0]] for m, names in METRICS.items()}

    ways: dict[str, Callable[[], dict[str, float]]] = {
        "pytrec_eval": theirs,
        "columns": lambda: llm_eval.evaluate_columns(
            qrels_columns, run_columns, list(METRICS)
        ).means(),
        "arrays": lambda: llm_eval.evaluate_columns(qrels, columns, list(METRICS)).means(),
        "dicts": lambda: llm_eval.evaluate(qrels, run, list(METRICS)).means(),
    }
    reference = theirs()
    for way in ways.values():
        agree("pytrec_eval", way(), reference)
    return interleaved(rounds, ways)


def warm_up_ranx(python: str) -> None:
    """ranx's numba kernels compiled and cached, on a small file, untimed."""
    with tempfile.TemporaryDirectory() as folder:
        qrels, run = write_files(100, Path(folder))
        names = [names[2] for names in METRICS.values()]
        subprocess.run(
            [python, "-c", RANX_FILES, str(qrels), str(run), *names],
            check=True,
            capture_output=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000, help="0: no TREC files")
    parser.add_argument("--api-queries", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved in-process rounds")
    parser.add_argument(
        "--file-rounds", type=int, default=3, help="interleaved rounds of the TREC files"
    )
    parser.add_argument("--ranx-python", default=sys.executable)
    args = parser.parse_args()
    if args.queries:
        trec_files(args.queries, args.ranx_python, args.file_rounds)
    times = columnar_api(args.api_queries, args.rounds)
    rows_api = args.api_queries * DOCS_PER_QUERY
    print(
        f"in process: {args.api_queries:,} queries x {DOCS_PER_QUERY} = {rows_api:,} rows, "
        f"8 metrics; CPU s, min and median of {args.rounds} interleaved rounds (the ratio "
        "to pytrec_eval of each); means equal to 1e-9"
    )
    theirs = times["pytrec_eval"]
    lines = [
        ("pytrec_eval evaluate, dicts", "pytrec_eval"),
        ("llm_eval.evaluate_columns, Run/QrelsColumns", "columns"),
        ("llm_eval.evaluate_columns, numpy str arrays", "arrays"),
        ("llm_eval.evaluate, dicts", "dicts"),
    ]
    for label, name in lines:
        low, middle = min(times[name]), statistics.median(times[name])
        line = f"  {label:44s} {low:7.3f} {middle:7.3f} s"
        if name != "pytrec_eval":
            line += f"  {min(theirs) / low:5.2f}x {statistics.median(theirs) / middle:5.2f}x"
        print(line)


def trec_files(queries: int, ranx: str, rounds: int) -> None:
    """Part 1: the TREC files through each tool's command line."""
    ranx_python = ranx if has_ranx(ranx) else None
    lines = queries * DOCS_PER_QUERY
    print(f"TREC files: {queries:,} queries x {DOCS_PER_QUERY} = {lines:,} run lines, 8 metrics")
    if ranx_python is None:
        print("  (ranx left out: not importable; `pip install ranx` or --ranx-python PATH)")
    else:
        warm_up_ranx(ranx_python)
    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = write_files(queries, Path(folder))
        rows = end_to_end(qrels_path, run_path, ranx_python, rounds)
    print(
        f"  one process each, the lowest of {rounds} interleaved rounds; CPU seconds incl. "
        "children; means equal to 1e-9 across tools"
    )
    ours_cpu = rows[0][1]
    for name, cpu, rss in rows:
        ratio = "" if name.startswith("llm-eval") else f"  {cpu / ours_cpu:5.2f}x llm-eval's CPU"
        print(f"  {name:27s} {cpu:7.2f} s CPU   peak {rss:6.0f} MiB{ratio}")


if __name__ == "__main__":
    main()
