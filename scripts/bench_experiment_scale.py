"""Does `llm-eval experiment` scale with the number of variants? Time and peak memory
of BM25 sweeps of growing size over the demo's gold set and corpus.

Each size is a sweep of BM25 variants over a grid of k1 and b (the demo's `lucene`
reference first, recall@5 and MRR), run by the command line in a process of its own
with an empty output folder (so every index is built), in groups of `--group`. Prints
per size the wall time, the CPU time (user + system), the peak resident memory of the
process, and the time per variant: linear time is a flat time per variant, bounded
memory a peak that does not grow with the sweep.

Usage: python scripts/bench_experiment_scale.py [--sizes 100,1000] [--group 16]
       [--tier A] [--metrics 'recall@5, mrr']
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
K1 = [round(0.3 + 0.05 * i, 2) for i in range(50)]
B = [round(0.05 + 0.05 * i, 2) for i in range(20)]


def sweep_config(folder: Path, size: int, metrics: str = "recall@5, mrr") -> Path:
    """A config of `size` BM25 variants: the demo's lucene first, then a k1 x b grid."""
    grid = [(k1, b) for b in B for k1 in K1 if (k1, b) != (0.9, 0.4)][: size - 1]
    if len(grid) < size - 1:
        raise SystemExit(f"the grid holds {len(grid) + 1} variants at most, asked {size}")
    lines = [
        "gold:",
        f"  - {{path: {ROOT / 'gold' / 'python-docs-A.jsonl'}, tier: A}}",
        f"  - {{path: {ROOT / 'gold' / 'python-docs-B.jsonl'}, tier: B}}",
        f"corpus: {ROOT / 'gold' / 'corpus.jsonl'}",
        "retriever: {kind: bm25, k1: 0.9, b: 0.4}",
        f"metrics: [{metrics}]",
        "top_k: 10",
        f"output: {folder / 'output'}",
        "variants:",
        "  - name: lucene",
        *(f"  - {{name: 'k1={k1} b={b}', retriever: {{k1: {k1}, b: {b}}}}}" for k1, b in grid),
        "experiment: {reference: lucene, quality: recall@5}",
    ]
    path = folder / f"sweep-{size}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def measure(args: argparse.Namespace, size: int) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one sweep in a process of its own."""
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        config = sweep_config(folder, size, args.metrics)
        command = [
            sys.executable,
            "-m",
            "llm_eval.cli",
            "experiment",
            str(config),
            "--group",
            str(args.group),
            "--out",
            str(folder / "experiment"),
            *(["--tier", args.tier] if args.tier else []),
        ]
        started = time.perf_counter()
        with (folder / "log").open("wb") as log:
            process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit((folder / "log").read_text()[-2000:])
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000", help="sweep sizes, comma-separated")
    parser.add_argument("--group", type=int, default=16, help="the experiment's --group")
    parser.add_argument("--tier", help="the experiment's --tier (default: all tiers, 342 queries)")
    parser.add_argument("--metrics", default="recall@5, mrr", help="the sweep's metrics")
    args = parser.parse_args()
    scope = f"tier {args.tier}" if args.tier else "all tiers"
    print(f"BM25 sweeps over the demo ({scope}), [{args.metrics}], --group {args.group}")
    print(f"{'variants':>8} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'CPU s/variant':>14}")
    for size in (int(s) for s in args.sizes.split(",")):
        wall, cpu, peak = measure(args, size)
        print(f"{size:>8} {wall:>8.1f} {cpu:>8.1f} {peak:>9.0f} {cpu / size:>14.3f}", flush=True)


if __name__ == "__main__":
    main()
