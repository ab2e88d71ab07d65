"""CPU time and peak memory of `llm-eval gate` on one project of a million queries.

The project of `bench_gate_scale.py` (`write_project`: two tiers, 16 tags, 8 metrics,
7% of the queries re-ranked since the baseline) at `--queries`, its baseline refreshed
by this tree, then the gate measured once as `run_cost` measures it (CPU of the process
and its children, peak resident set). This tree only: a million queries take minutes
per command, so no other commit is run beside it (`bench_gate_scale.py --sizes
100000,200000 --against REV` compares two commits at sizes where that is affordable).

Writing the project takes about 5 minutes and 1.2 GiB at a million queries; `--folder`
keeps it, and a folder that already holds one is reused as it is.

Usage:
    python scripts/bench_gate_million.py [--queries 1000000] [--folder DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench_gate_scale import REPO, gate_command, run_cost, write_project


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=1_000_000, help="gold-set size")
    parser.add_argument("--changed", type=float, default=0.07, help="share of queries changed")
    parser.add_argument("--folder", type=Path, help="where the project is written (kept)")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="bench-gate-million-"))
    if not (folder / "run-after.jsonl").exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_project(folder, args.queries, args.changed)
    shutil.copy(folder / "run-before.jsonl", folder / "run.jsonl")
    refresh = [sys.executable, "-m", "llm_eval.cli", "baseline", "refresh", "--force"]
    refreshed = run_cost(refresh, folder, REPO)
    shutil.copy(folder / "run-after.jsonl", folder / "run.jsonl")
    gated = run_cost(gate_command(folder / "out"), folder, REPO)
    print(f"{args.queries:,} queries, this tree ({REPO})")
    print(f"baseline refresh: {refreshed.cpu:.1f} s CPU, {refreshed.peak_mib:.0f} MiB peak")
    print(f"gate:             {gated.cpu:.1f} s CPU, {gated.peak_mib:.0f} MiB peak")
    if args.folder is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
